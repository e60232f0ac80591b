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
    name = "llamacpp"

    def __init__(
        self, path: Path, model_name: str, *, n_ctx: int = 4096, n_threads: int | None = None, seed: int = 0
    ) -> None:
        if not path.is_file():
            raise ModelError(f"no model file at {path}")
        try:
            self.llama = llama_cpp.Llama(
                model_path=str(path), n_ctx=n_ctx, n_threads=n_threads or max(1, (os.cpu_count() or 2) // 2),
                seed=seed, verbose=False, logits_all=False,
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

    def encode(self, text: str, *, special: bool) -> list[int]:
        return self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def begin(self, prompt: list[int]) -> None:
        """Evaluate the whole prompt afresh: reusing a cached prefix changes llama.cpp's arithmetic
        (batched vs one by one), and then the same greedy request would not always give the same text."""
        self.llama.reset()
        self.llama.eval(prompt)

    def logits(self) -> np.ndarray:
        return np.ctypeslib.as_array(self.llama._ctx.get_logits(), shape=(self.llama.n_vocab(),))

    def feed(self, token: int) -> None:
        self.llama.eval([token])


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
