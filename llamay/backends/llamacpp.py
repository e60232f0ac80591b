"""GGUF models through llama-cpp-python (CPU, CUDA, Metal).

The loop is llamay's own (``Backend.generate``): llama.cpp evaluates, and the next-token
logits are read as a numpy view of llama.cpp's own buffer, so the mask is written into
them in place. llama-cpp-python's ``LogitsProcessorList`` bridge is not used: it costs more
a token than computing the mask.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..modelfiles.shipped import ModelError, default_model_path, model_id
from ..vocab import Vocabulary
from .base import Backend

try:
    import llama_cpp
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "the llamacpp backend needs llama-cpp-python: pip install 'llamay[llamacpp]' "
        "(built from source; see ci/setup for the CMAKE_ARGS that avoid the AMX kernels)"
    ) from exc


class LlamaCppBackend(Backend):
    """``cache_prompt``: keep the KV cache between generations and evaluate only what follows the
    longest prefix a new prompt shares with what it holds (the prompt and reply before).

    An agent resending its conversation then pays for the new turn, not the whole of it. The
    price is reproducibility in the last bits: the kept positions were computed in other batches
    than a fresh evaluation would use, so a greedy reply can differ where two tokens nearly tie.
    Off, every prompt is evaluated afresh and greedy output is bit-for-bit reproducible. A
    sliding-window model (gemma-3) keeps its full-size window cache then, since a window cache
    that dropped old positions cannot be cut back to a prefix.
    """

    name = "llamacpp"

    def __init__(
        self, path: Path, model_name: str, *, n_ctx: int = 4096, n_threads: int | None = None, seed: int = 0,
        cache_prompt: bool = False,
    ) -> None:
        if not path.is_file():
            raise ModelError(f"no model file at {path}")
        try:
            self.llama = llama_cpp.Llama(
                model_path=str(path), n_ctx=n_ctx, n_threads=n_threads or max(1, (os.cpu_count() or 2) // 2),
                seed=seed, verbose=False, logits_all=False, swa_full=cache_prompt,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp could not load {path}: {exc}") from None
        self.model_id = model_name
        self.path = path
        self.n_ctx = self.llama.n_ctx()
        self.vocab = Vocabulary.from_gguf(path)
        width = self.llama.n_vocab()
        if width != self.vocab.size:
            self.vocab = Vocabulary([self.vocab.token_bytes(i) for i in range(self.vocab.size)],
                                    self.vocab.eos_ids, size=max(width, self.vocab.size),
                                    special_texts=self.vocab.special_texts)
        meta = self.llama.metadata
        self.chat_template = meta.get("tokenizer.chat_template")
        self.bos_id = self.llama.token_bos()
        self.bos_token = _token_text(self.llama, self.bos_id)
        self.eos_token = _token_text(self.llama, self.llama.token_eos())
        self.add_bos = str(meta.get("tokenizer.ggml.add_bos_token", "false")).lower() == "true"
        self.control_texts = _control_texts(self.llama)
        # a recurrent model's state cannot be cut back to a prefix: it is evaluated afresh
        self.cache_prompt = cache_prompt and not (self.llama._is_recurrent or self.llama._is_hybrid)
        self.reused = 0  # prompt tokens the last ``begin`` took from the cache

    def encode(self, text: str, *, special: bool) -> list[int]:
        return self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def begin(self, prompt: list[int]) -> None:
        """Evaluate ``prompt``: afresh, or after the prefix the cache holds (``cache_prompt``).

        At least the last token is evaluated, since its logits are the first the loop reads.
        """
        keep = _shared_prefix(self.llama.input_ids[: self.llama.n_tokens], prompt) if self.cache_prompt else 0
        keep = min(keep, len(prompt) - 1)
        if keep <= 0:
            self.llama.reset()
            keep = 0
        self.llama.n_tokens = keep  # eval drops the cache's positions from here on
        self.reused = keep
        self.llama.eval(prompt[keep:])

    def logits(self) -> np.ndarray:
        return np.ctypeslib.as_array(self.llama._ctx.get_logits(), shape=(self.llama.n_vocab(),))

    def feed(self, token: int) -> None:
        self.llama.eval([token])


def _shared_prefix(held: np.ndarray, prompt: list[int]) -> int:
    """How many leading tokens ``prompt`` shares with ``held``."""
    n = min(len(held), len(prompt))
    if n == 0:
        return 0
    differ = np.flatnonzero(held[:n] != np.asarray(prompt[:n], dtype=held.dtype))
    return int(differ[0]) if differ.size else n


def _token_text(llama, token: int) -> str:
    if token < 0:
        return ""
    return llama._model.token_get_text(token)


def _control_texts(llama) -> frozenset[str]:
    """The texts llama.cpp reads as tokens only when told to parse specials: control and unknown tokens.

    User-defined tokens are read as tokens either way (as Hugging Face's non-special added tokens),
    so they are not the template's to guard. Attributes as llama.cpp set them at load, which
    makes some tokens control that the GGUF's token types call otherwise.
    """
    model = llama._model
    wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
    return frozenset(model.token_get_text(i) for i in range(llama.n_vocab()) if model.token_get_attr(i) & wanted)


def load(model=None, **options) -> LlamaCppBackend:
    path = default_model_path() if model is None else Path(model)
    return LlamaCppBackend(path, model_id(model), **options)
