"""Hugging Face transformers models (an HF folder, or a GGUF file through ``gguf_file=``).

Two ways in:

- ``load(model)`` gives a ``Backend`` for llamay's own loop (``llamay serve --backend
  transformers``): the KV cache is transformers' ``DynamicCache``, each step computes the
  last position's logits only, and ``logits()`` is a float32 numpy view of the logits
  tensor, so the mask is written into it in place.
- ``LlamayLogitsProcessor(grammar, vocab)`` is the constraint as a transformers
  ``LogitsProcessor``, for ``model.generate`` without the server.

With no model, the embedded default's GGUF is turned into an HF folder once
(``llamay.modelfiles.hf_folder``) and that folder is loaded. Importing this module imports torch.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._core.automaton import CompiledGrammar
from .._core.bitmask import allocate_bitmask
from .._core.matcher import Matcher
from ..errors import InternalError, UsageError
from ..modelfiles.shipped import DEFAULT_MODEL_ID, ModelError
from ..vocab import Vocabulary
from .base import SteppedBackend
from .devices import torch_device
from .hf_common import extends, take_tokenizer, tokens_budget, tokens_left
from .torch_mask import mask_scores

try:
    import torch
    import transformers
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "the transformers backend needs torch and transformers: pip install torch==2.13.0 (the CPU wheel), "
        "then pip install 'llamay[transformers]'"
    ) from exc

__all__ = ["LlamayLogitsProcessor", "TransformersBackend", "load"]


class TransformersBackend(SteppedBackend):
    """A causal LM and its fast tokenizer; one sequence at a time, reusing the KV cache for a prompt that extends it."""

    name = "transformers"

    def __init__(self, model: Any, tokenizer: Any, model_name: str) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_name
        self.device = next(model.parameters()).device
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        width = int(getattr(config, "vocab_size", 0) or 0)
        self.vocab = Vocabulary.from_hf(tokenizer, size=max(width, len(tokenizer)) or None)
        self.n_ctx = int(getattr(config, "max_position_embeddings", 0) or 0)
        take_tokenizer(self, tokenizer)
        # transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns, and goes in 5.40)
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        # only the last position's logits are needed (the lm head is a large share of a small model's cost)
        keep = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        self._extra: dict[str, Any] = {keep: 1} if keep else {}
        self._cache: Any = None
        self._ids: list[int] = []  # tokens the cache holds
        self._logits: torch.Tensor | None = None

    def encode(self, text: str, *, special: bool) -> list[int]:
        return self._encode(text, special=special)

    def begin(self, prompt: list[int]) -> None:
        """Evaluate ``prompt``; a cache holding a prefix of it is extended, any other cache is dropped."""
        if not prompt:
            raise UsageError("the prompt has no tokens")
        keep = len(self._ids)
        if self._cache is None or not extends(self._ids, prompt):
            self._cache, self._ids, keep = _new_cache(self.model), [], 0
        self._forward(prompt[keep:])

    def logits(self) -> np.ndarray:
        if self._logits is None:
            raise UsageError("logits() before begin()")
        return self._logits.numpy()

    def feed(self, token: int) -> None:
        self._forward([token])

    def feed_tokens(self, tokens: Sequence[int]) -> None:
        self._forward(list(tokens))  # one forward pass for a forced run

    def _forward(self, ids: list[int]) -> None:
        try:
            with torch.inference_mode():
                out = self.model(
                    input_ids=torch.tensor([ids], dtype=torch.long, device=self.device),
                    use_cache=True,
                    **{self._cache_arg: self._cache},
                    **self._extra,
                )
        except BaseException:
            self._cache, self._ids, self._logits = None, [], None  # the cache may hold part of ``ids``
            raise
        for key in ("cache", "past_key_values"):  # the cache is updated in place; an old one may be returned anew
            returned = getattr(out, key, None)
            if returned is not None:
                self._cache = returned
                break
        self._ids.extend(ids)
        # float32 on the CPU: a no-op (a view) for a float32 CPU model, one copy otherwise
        self._logits = out.logits[0, -1].to("cpu", torch.float32).contiguous()


def _new_cache(model: Any) -> Any:
    try:
        return transformers.DynamicCache(config=model.config)
    except TypeError:  # transformers 4 takes no config
        return transformers.DynamicCache()


class LlamayLogitsProcessor(transformers.LogitsProcessor):
    """The constraint as a transformers ``LogitsProcessor``: disallowed tokens get ``-inf``.

    ``grammar`` is a ``CompiledGrammar`` (``llamay.grammars.jsonschema.compiler.compile_json_schema``,
    ``llamay.grammars.gbnf.compile_gbnf`` ...); ``vocab`` a ``Vocabulary`` or the model's fast
    tokenizer (read once with ``Vocabulary.from_hf``: build the ``Vocabulary`` yourself to
    reuse it, its token trie costs about a second to build). One matcher per batch row.

    The first call takes ``input_ids`` as the prompt; each later call accepts the tokens
    appended since. So an instance serves one ``generate`` call: make a new one (cheap:
    the grammar and vocabulary are shared) for the next. Rows that have ended (EOS) are
    left unmasked, since ``generate`` pads them. On the CPU the mask is applied through a
    numpy view of the scores (llamay's kernel, no copy); elsewhere the int32 bitmask is
    unpacked with torch ops on the scores' device. Raises ``InternalError`` if a token
    the mask refused was appended anyway (another processor changed the scores after this one).

    ``max_new_tokens``, the same as ``generate``'s, makes the mask close the document within it
    (``Matcher.fill_next_token_bitmask``'s ``tokens_left``); without it a document that runs
    into ``generate``'s limit is cut.
    """

    def __init__(self, grammar: CompiledGrammar, vocab: Vocabulary | Any, max_new_tokens: int | None = None) -> None:
        if not isinstance(grammar, CompiledGrammar):
            raise UsageError(f"grammar must be a llamay CompiledGrammar, got {type(grammar).__name__}")
        self.grammar = grammar
        self.vocab = vocab if isinstance(vocab, Vocabulary) else Vocabulary.from_hf(vocab)
        self.budget = tokens_budget(max_new_tokens)
        self.matchers: list[Matcher] = []
        self._seen = self._prompt = 0
        self._mask: np.ndarray | None = None
        self._bits: dict[torch.device, torch.Tensor] = {}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch = scores.shape[0]
        if not self.matchers:
            self.matchers = [Matcher(self.grammar, self.vocab) for _ in range(batch)]
            self._mask = allocate_bitmask(self.vocab.size, batch)
            self._seen = self._prompt = input_ids.shape[1]
        elif batch != len(self.matchers):
            raise UsageError(f"the batch changed from {len(self.matchers)} to {batch} rows; use a new processor")
        else:
            self._advance(input_ids)
        mask = self._mask
        assert mask is not None
        live = []
        left = tokens_left(self.budget, self._seen - self._prompt)
        for row, matcher in enumerate(self.matchers):
            if matcher.is_terminated():
                mask[row] = -1
            else:
                matcher.fill_next_token_bitmask(mask, row, tokens_left=left)
                live.append(row)
        if live:
            mask_scores(scores, mask, self.vocab.size, self._bits)
        return scores

    def _advance(self, input_ids: torch.Tensor) -> None:
        new = input_ids[:, self._seen :].tolist()
        self._seen = input_ids.shape[1]
        for row, (matcher, tokens) in enumerate(zip(self.matchers, new, strict=True)):
            for token in tokens:
                if matcher.is_terminated():
                    break
                if not matcher.accept_token(token):
                    raise InternalError(f"row {row}: token {token} was generated although the constraint refused it")


def load(
    model: str | os.PathLike[str] | None = None,
    *,
    gguf_file: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    n_threads: int | None = None,
    **from_pretrained: Any,
) -> TransformersBackend:
    """Load an HF folder or hub-style id, a ``.gguf`` file, or (None) the embedded default as an HF folder.

    ``device``: a torch device; by default CUDA, then Apple's MPS, then the CPU.
    ``dtype``: ``"float32"`` (default on the CPU), ``"bfloat16"``, ``"float16"`` or ``"auto"``
    (the checkpoint's own; default on a GPU).
    ``n_threads`` sets torch's intra-op threads for the whole process (``torch.set_num_threads``):
    on a small shared machine 1 or 2 keeps other work from collapsing its throughput.
    Other keyword arguments go to ``from_pretrained``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if n_threads is not None:
        torch.set_num_threads(int(n_threads))
    name = DEFAULT_MODEL_ID
    if model is None:
        from ..modelfiles.hf_folder import default_hf_folder

        folder, file = default_hf_folder(), None
    else:
        path = Path(model)
        name = path.stem.lower()
        if gguf_file is not None:
            folder, file = path, gguf_file
        elif path.suffix.lower() == ".gguf":
            if not path.is_file():
                raise ModelError(f"no model file at {path}")
            folder, file = path.parent, path.name
        else:
            folder, file = path, None
    kwargs = dict(from_pretrained)
    if file is not None:
        kwargs["gguf_file"] = file
    device = torch_device(device, cuda=torch.cuda.is_available(), mps=torch.backends.mps.is_available())
    torch_dtype = _dtype(dtype if dtype is not None or device == "cpu" else "auto")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), **kwargs)
        lm = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch_dtype, **kwargs)
    except (OSError, ValueError) as exc:
        raise ModelError(f"transformers could not load {folder / file if file else folder}: {exc}") from None
    if device != "cpu":
        lm = lm.to(device)
    return TransformersBackend(lm, tokenizer, name)


def _dtype(name: str | None) -> Any:
    if name is None:
        return torch.float32
    if name == "auto":
        return "auto"
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise UsageError(f"unknown dtype {name!r}; use float32, bfloat16, float16 or auto")
    return value

