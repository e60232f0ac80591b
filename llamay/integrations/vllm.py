"""llamay's constraints in vLLM's V1 engine, as a logits processor: no patch to vLLM, one flag.

    vllm serve MODEL --logits-processors llamay.integrations.vllm:LlamayLogitsProcessor

A request opts in through ``vllm_xargs`` (``llamay.integrations.xargs`` lists the names: a
schema, GBNF, any JSON, a lexicon, or tools with a tool choice); a request without them is left
alone. vLLM calls the class in two processes:

- in the API server, ``validate_params`` compiles the request's constraint (kept by content), so
  a refused schema or grammar is a 400 whose message names the keyword and its JSON Pointer
  (or the rule, line and column) before the request reaches the engine;
- in the engine's worker, one instance follows the batch. It reads the model's tokenizer once
  into a ``Vocabulary`` as wide as the logits. ``update_state`` follows the rows as requests
  are added, removed and moved; ``apply`` accepts each constrained row's new output tokens
  (vLLM hands over a live list of them), fills the row's mask, closing the document within the
  request's ``max_tokens`` (``Matcher.fill_next_token_bitmask``'s ``tokens_left``), and once
  the document may end allows the request's own stop tokens as well. Rows without a constraint
  keep every token.

Limits: vLLM refuses custom logits processors under speculative decoding. vLLM applies
``logit_bias`` before this processor and its penalties after it; neither can un-mask a refused
token (it is ``-inf``). ``min_tokens`` (which masks the stop tokens until it is reached) and
``ignore_eos`` are refused with a constraint: a document that completes sooner would leave no
token, or only end tokens that do not end. Turning a constrained tool call into
``tool_calls`` is vLLM's tool parser (``--enable-auto-tool-choice --tool-call-parser hermes``
for the Hermes dialect); the processor only makes the call's text valid.

``LlamayLogitsProcessorV2`` is the same for vLLM's newer GPU model runner
(``VLLM_USE_V2_MODEL_RUNNER=1``), written against vLLM 0.32's interface; that runner needs a GPU
build of Triton, so it has not run where llamay is tested.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsContext, LogitsProcRequestState
from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor as LogitsProcessorV2

from .._core.automaton import CompiledGrammar
from .._core.bitmask import allocate_bitmask
from .._core.matcher import Matcher
from ..backends.torch_mask import mask_scores
from ..chat.dialects import Markers, detect, named
from ..constraints import Constraints
from ..errors import LlamayError
from ..vocab import Vocabulary
from .row import Row
from .xargs import ConstraintArgs, constraint_args

log = logging.getLogger("llamay")

#: Constraints compiled in the API server's process, only to refuse a request before it runs.
_checked: dict[str, Constraints] = {}


def validate(params: Any) -> None:
    """Refuse a request whose llamay arguments are malformed or whose constraint llamay refuses (``ValueError``)."""
    try:
        args = constraint_args(params.extra_args)
        if args is not None and (params.min_tokens or params.ignore_eos):
            raise ValueError("min_tokens and ignore_eos cannot be combined with a llamay constraint: a document that "
                             "completes sooner would leave the model no token to write")
        if args is not None:
            dialect = named(args.dialect or "hermes")
            checker = _checked.get(dialect.name) or _checked.setdefault(dialect.name, Constraints(None, dialect))
            checker.pick(**args.fields)
    except LlamayError as e:
        raise ValueError(str(e)) from None


class _Model:
    """What a worker's processor knows of its model: the vocabulary, dialects' markers, compiled constraints."""

    def __init__(self, vllm_config: Any) -> None:
        from transformers import AutoTokenizer

        config = vllm_config.model_config
        tokenizer = AutoTokenizer.from_pretrained(config.tokenizer, revision=config.tokenizer_revision,
                                                  trust_remote_code=config.trust_remote_code)
        self.vocab = Vocabulary.from_hf(tokenizer, size=config.get_vocab_size())
        self.dialect = detect(getattr(tokenizer, "chat_template", None))
        self._markers: dict[str, Markers] = {}
        self._constraints: dict[str, Constraints] = {}
        self.bits: dict = {}

    def row(self, params: Any) -> Row | None:
        """A request's row, or None where it asks for no constraint.

        The API server validated the request, but against the default dialect and without the
        vocabulary; a constraint that fails here after all (a tool grammar under the model's own
        dialect, the compile budget) gives a broken row, which lets the request stop at once:
        an exception here would end vLLM's engine, and every request in it.
        """
        stops = tuple(sorted(params.all_stop_token_ids))
        try:
            args = constraint_args(params.extra_args)
            if args is None:
                return None
            grammar, vocab = self._compiled(args)
        except LlamayError as e:
            log.error("llamay's constraint could not be built in vLLM's worker (%s); the request may only stop", e)
            return Row(None, stops, params.max_tokens, broken=True)
        return Row(Matcher(grammar, vocab), stops, params.max_tokens)

    def _compiled(self, args: ConstraintArgs) -> tuple[CompiledGrammar, Vocabulary]:
        dialect = named(args.dialect) if args.dialect else self.dialect
        constraints = self._constraints.get(dialect.name)
        if constraints is None:
            constraints = self._constraints[dialect.name] = Constraints(self.vocab, dialect)
        grammar = constraints.pick(**args.fields)
        assert grammar is not None  # constraint_args returns None for a request with no constraint
        if not args.tools:
            return grammar, self.vocab
        markers = self._markers.get(dialect.name)
        if markers is None:
            markers = self._markers[dialect.name] = Markers(dialect, self.vocab)
        return grammar, markers.vocab

    def mask(self, rows: int) -> np.ndarray:
        mask = allocate_bitmask(self.vocab.size, rows)
        mask[:] = -1
        return mask


class LlamayLogitsProcessor(LogitsProcessor):
    """llamay's constraint for the requests that carry one, on vLLM's V1 model runner."""

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        validate(sampling_params)

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.model = _Model(vllm_config)
        self.rows: dict[int, Row] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # a mask changes which token is the best one

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            row = self.model.row(params)
            if row is None:
                self.rows.pop(index, None)
            else:
                row.output = output  # vLLM's own list, which grows as the request does
                self.rows[index] = row
        for a, b, direction in batch_update.moved:
            moving, there = self.rows.pop(a, None), self.rows.pop(b, None)
            if moving is not None:
                self.rows[b] = moving
            if there is not None and direction == MoveDirectionality.SWAP:
                self.rows[a] = there

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        mask = self.model.mask(logits.shape[0])
        for index, row in self.rows.items():
            row.accept(row.output[row.seen:])
            row.fill(mask, index)
        mask_scores(logits, mask, self.model.vocab.size, self.model.bits)
        return logits


class LlamayLogitsProcessorV2(LogitsProcessorV2):
    """The same on vLLM's newer GPU model runner, where rows are reordered every step.

    A row's request slot comes from ``ctx.idx_mapping_np``; the token fed at the row is the
    request's latest output token once its position passes the prompt, and tokens it missed
    (a request resumed after preemption) are read from the runner's token table.
    """

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        validate(sampling_params)

    def __init__(self, vllm_config: Any, req_states: LogitsProcRequestState) -> None:
        self.model = _Model(vllm_config)
        self.states = req_states
        self.slots: dict[int, Row] = {}

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        row = self.model.row(sampling_params)
        if row is None:
            self.slots.pop(req_idx, None)
            return False
        self.slots[req_idx] = row
        return True

    def apply(self, logits: torch.Tensor, ctx: LogitsContext) -> torch.Tensor:
        slots = ctx.idx_mapping_np
        if not self.slots or not any(int(s) in self.slots for s in slots):
            return logits
        if logits.shape[0] != len(slots):
            raise RuntimeError("llamay's processor does not constrain speculative decoding's draft rows")
        fed, positions = ctx.input_ids.cpu().numpy(), ctx.pos.cpu().numpy()
        mask = self.model.mask(logits.shape[0])
        for index, slot in enumerate(int(s) for s in slots):
            row = self.slots.get(slot)
            if row is None:
                continue
            prompt = int(self.states.prompt_len.np[slot])
            produced = int(positions[index]) + 1 - prompt  # output tokens committed, the one fed included
            if produced == row.seen + 1:
                row.accept([int(fed[index])])
            elif produced > row.seen:
                start = prompt + row.seen
                row.accept(self.states.all_token_ids.gpu[slot, start:prompt + produced].tolist())
            row.fill(mask, index)
        mask_scores(logits, mask, self.model.vocab.size, self.model.bits)
        return logits
