"""MLX models through mlx-lm (Apple silicon; MLX's CPU build on Linux: ``pip install "mlx[cpu]" mlx-lm``).

Two ways in:

- ``load(model)`` gives a ``Backend`` for llamay's own loop (``llamay serve --backend mlx``):
  the KV cache is mlx-lm's prompt cache, and ``logits()`` copies the last position's
  logits into a float32 numpy array (196 KB for a 49k vocabulary), where the mask is
  written in place.
- ``LlamayLogitsProcessor(grammar, vocab)`` is the constraint as an mlx-lm logits
  processor, for ``mlx_lm.generate(..., logits_processors=[...])`` without the server.

With no model, the embedded default's GGUF is turned into an HF folder once
(``llamay.modelfiles.hf_folder``, which needs torch and transformers for that one export) and
mlx-lm loads the folder. Importing this module imports mlx.
"""

from __future__ import annotations

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
from .hf_common import extends, take_tokenizer, tokens_budget, tokens_left

try:
    import mlx.core as mx
    import mlx_lm
    from mlx_lm.models.cache import make_prompt_cache
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "the mlx backend needs mlx and mlx-lm: pip install 'llamay[mlx]' "
        "(on Linux: pip install 'mlx[cpu]' mlx-lm; plain mlx installs there but cannot load libmlx)"
    ) from exc

__all__ = ["LlamayLogitsProcessor", "MlxBackend", "load"]

#: Prompt tokens evaluated per forward pass (mlx-lm's own prefill step).
PREFILL_STEP = 2048


class MlxBackend(SteppedBackend):
    """An mlx-lm model and its tokenizer; one sequence at a time, reusing the KV cache for a prompt that extends it."""

    name = "mlx"

    def __init__(self, model: Any, tokenizer: Any, model_name: str) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_name
        hf = getattr(tokenizer, "_tokenizer", tokenizer)  # mlx-lm's TokenizerWrapper holds the HF tokenizer
        args = getattr(model, "args", None)
        width = int(getattr(args, "vocab_size", 0) or 0)
        # mlx-lm also stops on generation_config.json's eos_token_id
        vocab = Vocabulary.from_hf(hf, size=max(width, len(hf)) or None)
        self.vocab = vocab.with_eos(getattr(tokenizer, "eos_token_ids", ()) or ())
        self.n_ctx = int(getattr(args, "max_position_embeddings", 0) or 0)
        take_tokenizer(self, hf)
        self._cache: list[Any] | None = None
        self._ids: list[int] = []
        self._logits: np.ndarray | None = None

    def encode(self, text: str, *, special: bool) -> list[int]:
        return self._encode(text, special=special)

    def begin(self, prompt: list[int]) -> None:
        """Evaluate ``prompt``; a cache holding a prefix of it is extended, any other cache is dropped."""
        if not prompt:
            raise UsageError("the prompt has no tokens")
        keep = len(self._ids)
        if self._cache is None or not extends(self._ids, prompt):
            self._cache, self._ids, keep = make_prompt_cache(self.model), [], 0
        rest = prompt[keep:]
        while len(rest) > PREFILL_STEP:
            try:
                self.model(mx.array([rest[:PREFILL_STEP]]), cache=self._cache)
                mx.eval([c.state for c in self._cache])
            except BaseException:
                self._cache, self._ids, self._logits = None, [], None
                raise
            self._ids.extend(rest[:PREFILL_STEP])
            rest = rest[PREFILL_STEP:]
        self._forward(rest)

    def logits(self) -> np.ndarray:
        if self._logits is None:
            raise UsageError("logits() before begin()")
        return self._logits

    def feed(self, token: int) -> None:
        self._forward([token])

    def feed_tokens(self, tokens: Sequence[int]) -> None:
        self._forward(list(tokens))  # one forward pass for a forced run

    def _forward(self, ids: list[int]) -> None:
        try:
            out = self.model(mx.array([ids]), cache=self._cache)
            logits = np.array(out[0, -1].astype(mx.float32))  # evaluates; a writeable copy
        except BaseException:
            self._cache, self._ids, self._logits = None, [], None  # the cache may hold part of ``ids``
            raise
        self._ids.extend(ids)
        self._logits = logits


class LlamayLogitsProcessor:
    """The constraint as an mlx-lm logits processor: ``(tokens, logits) -> logits``, refused tokens at ``-inf``.

    ``grammar`` is a ``CompiledGrammar``; ``vocab`` a ``Vocabulary`` or the tokenizer that
    ``mlx_lm.load`` returned (read once with ``Vocabulary.from_hf``: build the
    ``Vocabulary`` yourself to reuse it across requests).

    mlx-lm passes every token so far: the first call takes them as the prompt, each later
    call accepts the tokens appended since. So an instance serves one generation; make a
    new one (cheap) for the next. Reading the last token synchronizes with mlx's lazy
    graph once a step, which any token-dependent constraint must. Once the constraint has
    ended (EOS accepted), logits pass through unchanged. Raises ``InternalError`` if a
    token the mask refused was appended anyway.

    ``max_tokens``, the same as ``mlx_lm.generate``'s, makes the mask close the document within
    it (``Matcher.fill_next_token_bitmask``'s ``tokens_left``); without it a document that runs
    into the limit is cut.
    """

    def __init__(self, grammar: CompiledGrammar, vocab: Vocabulary | Any, max_tokens: int | None = None) -> None:
        if not isinstance(grammar, CompiledGrammar):
            raise UsageError(f"grammar must be a llamay CompiledGrammar, got {type(grammar).__name__}")
        if not isinstance(vocab, Vocabulary):
            vocab = Vocabulary.from_hf(getattr(vocab, "_tokenizer", vocab))
        self.vocab = vocab
        self.matcher = Matcher(grammar, vocab)
        self.budget = tokens_budget(max_tokens)
        self._mask = allocate_bitmask(vocab.size)
        self._shifts = mx.arange(32, dtype=mx.int32)
        self._seen: int | None = None
        self._prompt = 0

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        if self._seen is None:
            self._seen = self._prompt = int(tokens.shape[-1])
        else:
            new = tokens.reshape(-1)[self._seen :].tolist()
            self._seen = int(tokens.shape[-1])
            for token in new:
                if self.matcher.is_terminated():
                    break
                if not self.matcher.accept_token(int(token)):
                    raise InternalError(f"token {token} was generated although the constraint refused it")
        if self.matcher.is_terminated():
            return logits
        left = tokens_left(self.budget, self._seen - self._prompt)
        self.matcher.fill_next_token_bitmask(self._mask, tokens_left=left)
        return apply_bitmask_mx(logits, self._mask, self.vocab.size, self._shifts)


def apply_bitmask_mx(logits: mx.array, bitmask: np.ndarray, size: int, shifts: mx.array | None = None) -> mx.array:
    """``logits`` (``(V,)`` or ``(rows, V)``) with ``-inf`` wherever the bitmask's bit is clear, and from ``size`` on.

    The int32 words are unpacked with mlx ops (shift, and, compare), so the work stays on
    mlx's device: no loop over the vocabulary.
    """
    if shifts is None:
        shifts = mx.arange(32, dtype=mx.int32)
    width = logits.shape[-1]
    allowed = ((mx.array(bitmask).reshape(-1, 1) >> shifts) & 1).reshape(-1)[: min(size, width)] != 0
    if width > allowed.shape[0]:
        allowed = mx.concatenate([allowed, mx.zeros((width - allowed.shape[0],), dtype=mx.bool_)])
    return mx.where(allowed, logits, mx.array(-float("inf"), dtype=logits.dtype))


def load(model: str | os.PathLike[str] | None = None, *, n_threads: int | None = None, slots: int = 1,
         cache_prompt: bool = True, **options: Any) -> MlxBackend:
    """Load an MLX or HF model folder with mlx-lm, or (None) the embedded default exported as an HF folder.

    Options go to ``mlx_lm.load`` (``tokenizer_config``, ``model_config`` ...). A path that
    does not exist is refused here: mlx-lm would take it for a hub id and try to download it.
    ``n_threads`` (``llamay serve --threads``) is accepted and ignored: MLX has no setting for it.
    ``slots`` > 1 runs that many generations at once through mlx-lm's batch generator
    (``llamay.serving.MlxRunner``), keeping finished ones' KV caches where ``cache_prompt``.
    """
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        raise UsageError(f"slots must be a positive integer, got {slots!r}")
    if model is None:
        try:
            from ..modelfiles.hf_folder import default_hf_folder

            folder, name = default_hf_folder(), DEFAULT_MODEL_ID
        except ImportError as exc:
            raise ModelError(
                f"the mlx backend's default model is derived from the embedded GGUF once, which needs torch and "
                f"transformers ({exc}); or pass an MLX or HF model folder"
            ) from None
    else:
        folder, name = Path(model), Path(model).stem.lower()
        if folder.suffix.lower() == ".gguf":
            raise ModelError(
                f"mlx-lm reads model folders, not GGUF files: {folder} (llamay.modelfiles.hf_folder derives one)")
        if not (folder / "config.json").is_file():
            raise ModelError(f"no model folder (with a config.json) at {folder}")
    try:
        lm, tokenizer = mlx_lm.load(str(folder), **options)
    except (OSError, ValueError) as exc:
        raise ModelError(f"mlx-lm could not load {folder}: {exc}") from None
    backend = MlxBackend(lm, tokenizer, name)
    backend.slots, backend.cache_prompt = slots, cache_prompt
    return backend
