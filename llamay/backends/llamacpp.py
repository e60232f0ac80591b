"""GGUF models through llama-cpp-python's low-level API (CPU, CUDA, Metal).

The model runs as a ``BatchBackend``: one llama.cpp context holds ``slots`` sequences, each
with its own ``n_ctx`` positions of KV cache, and ``decode`` evaluates a batch that mixes
them (llama.cpp's multi-sequence batches), driven by ``llamay.serving.Scheduler``. Logits are
read as numpy views of llama.cpp's own buffer, so the mask is written into them in place.
llama-cpp-python's ``Llama`` class is not used: it holds one sequence, and its
``LogitsProcessorList`` bridge costs more a token than computing the mask.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import LlamayError
from ..modelfiles.shipped import ModelError, default_model_path, model_id
from ..vocab import Vocabulary
from .base import BatchBackend
from .devices import gpu_layers, physical_cores

try:
    import llama_cpp
    from llama_cpp import _internals
    from llama_cpp._logger import set_verbose
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "the llamacpp backend needs llama-cpp-python: pip install 'llamay[llamacpp]' "
        "(built from source; see ci/setup for the CMAKE_ARGS that avoid the AMX kernels)"
    ) from exc


class DecodeError(LlamayError):
    """llama.cpp could not evaluate a batch."""


class LlamaCppBackend(BatchBackend):
    """``slots``: sequences evaluated together (``llamay serve --parallel``), each of ``n_ctx`` positions.

    ``n_threads``: CPU threads for every evaluation, one token or a whole prompt (default: the
    physical cores this process may use, as llama.cpp's own tools). ``n_gpu_layers``: layers
    offloaded to the GPU (default: all of them where llama.cpp was built with CUDA, Metal or
    another GPU backend, none otherwise; -1 means all).

    ``cache_prompt``: a sequence keeps its KV cache between requests, and a request evaluates
    only what follows the longest prefix it shares with what its slot holds (the prompt and
    reply before). An agent resending its conversation then pays for the new turn, not the
    whole of it. The price is reproducibility in the last bits: kept positions were computed
    in other batches than a fresh evaluation would use, so a greedy reply can differ where two
    tokens nearly tie; so can batching itself, where several sequences share a step. With one
    slot and no cache, greedy output is bit-for-bit reproducible. A sliding-window model
    (gemma-3) keeps its full-size window cache with the cache on, since a window cache that
    dropped old positions cannot be cut back to a prefix; a recurrent model is never cached.
    """

    name = "llamacpp"

    def __init__(
        self, path: Path, model_name: str, *, n_ctx: int = 4096, n_threads: int | None = None,
        cache_prompt: bool = False, slots: int = 1, batch_size: int = 512, n_gpu_layers: int | None = None,
    ) -> None:
        if not path.is_file():
            raise ModelError(f"no model file at {path}")
        if slots < 1:
            raise ModelError(f"slots must be at least 1, got {slots}")
        if n_ctx < 1:
            raise ModelError(f"n_ctx must be at least 1, got {n_ctx}")
        set_verbose(False)
        llama_cpp.llama_backend_init()
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = gpu_layers(n_gpu_layers, offload=bool(llama_cpp.llama_supports_gpu_offload()))
        try:
            self._model = _internals.LlamaModel(path_model=str(path), params=model_params, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp could not load {path}: {exc}") from None
        model = self._model.model
        recurrent = llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model)
        threads = n_threads or physical_cores()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx * slots
        params.n_seq_max = slots
        params.n_batch = params.n_ubatch = batch_size
        params.n_threads = threads
        params.n_threads_batch = threads
        params.swa_full = cache_prompt
        params.kv_unified = False  # each slot its own n_ctx positions, as llama-server's slots
        try:
            self._ctx = _internals.LlamaContext(model=self._model, params=params, verbose=False)
        except ValueError as exc:
            raise ModelError(f"llama.cpp could not make a context for {path}: {exc}") from None
        self._memory = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._batch = llama_cpp.llama_batch_init(batch_size, 0, 1)
        self._rows = np.zeros(0, dtype=np.int32)  # batch row of each entry of the last decode
        self._width = self._model.n_vocab()
        self.model_id = model_name
        self.path = path
        self.slots = slots
        self.batch_size = batch_size
        self.n_ctx = llama_cpp.llama_n_ctx_seq(self._ctx.ctx)
        self.n_threads = threads
        self.n_gpu_layers = model_params.n_gpu_layers
        self.n_ctx_train = self._model.n_ctx_train()
        self.cache_prompt = cache_prompt and not recurrent
        self.vocab = Vocabulary.from_gguf(path)
        if self._width != self.vocab.size:
            self.vocab = Vocabulary([self.vocab.token_bytes(i) for i in range(self.vocab.size)],
                                    self.vocab.eos_ids, size=max(self._width, self.vocab.size),
                                    special_texts=self.vocab.special_texts)
        meta = self._model.metadata()
        self.chat_template = meta.get("tokenizer.chat_template")
        self.bos_id = self._model.token_bos()
        self.bos_token = _token_text(self._model, self.bos_id)
        self.eos_token = _token_text(self._model, self._model.token_eos())
        self.add_bos = str(meta.get("tokenizer.ggml.add_bos_token", "false")).lower() == "true"
        self.control_texts = _control_texts(self._model)

    def __del__(self) -> None:
        batch = getattr(self, "_batch", None)
        if batch is not None:
            llama_cpp.llama_batch_free(batch)
            self._batch = None

    def encode(self, text: str, *, special: bool) -> list[int]:
        return self._model.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def decode(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[int],
               outputs: Sequence[bool]) -> None:
        """Evaluate the batch with its entries grouped by sequence id, in increasing order.

        Each slot has its own KV stream, and llama.cpp then cuts a batch into micro-batches that
        each hold consecutive sequence ids, taken in the order the batch lists them: sequences
        listed 1, 0, 2, 3 cost two passes over the weights, and 3, 2, 1, 0 four. The scheduler
        lists slots in the order requests came, so the batch is sorted here and ``logits_at``
        maps the caller's entry to its row.
        """
        n = len(tokens)
        order = np.argsort(np.asarray(seqs, dtype=np.int32), kind="stable")
        self._rows = np.empty(n, dtype=np.int32)
        self._rows[order] = np.arange(n, dtype=np.int32)
        batch = self._batch
        np.ctypeslib.as_array(batch.token, shape=(n,))[:] = np.asarray(tokens, dtype=np.int32)[order]
        np.ctypeslib.as_array(batch.pos, shape=(n,))[:] = np.asarray(positions, dtype=np.int32)[order]
        np.ctypeslib.as_array(batch.n_seq_id, shape=(n,))[:] = 1
        np.ctypeslib.as_array(batch.logits, shape=(n,))[:] = np.asarray(outputs, dtype=np.int8)[order]
        seq_id = batch.seq_id
        for row, i in enumerate(order.tolist()):
            seq_id[row][0] = seqs[i]
        batch.n_tokens = n
        status = llama_cpp.llama_decode(self._ctx.ctx, batch)
        if status != 0:
            raise DecodeError(f"llama.cpp could not evaluate a batch of {n} tokens (llama_decode returned {status})")

    def logits_at(self, index: int) -> np.ndarray:
        row = llama_cpp.llama_get_logits_ith(self._ctx.ctx, int(self._rows[index]))
        return np.ctypeslib.as_array(ctypes.cast(row, ctypes.POINTER(ctypes.c_float)), shape=(self._width,))

    def forget(self, seq: int, start: int) -> None:
        llama_cpp.llama_memory_seq_rm(self._memory, seq, start, -1)

    def copy(self, src: int, dst: int) -> None:
        """Each slot has a KV stream of its own: llama.cpp copies the whole stream's buffer at the next decode."""
        llama_cpp.llama_memory_seq_rm(self._memory, dst, -1, -1)
        llama_cpp.llama_memory_seq_cp(self._memory, src, dst, -1, -1)


def _token_text(model, token: int) -> str:
    if token < 0:
        return ""
    return model.token_get_text(token)


def _control_texts(model) -> frozenset[str]:
    """The texts llama.cpp reads as tokens only when told to parse specials: control and unknown tokens.

    User-defined tokens are read as tokens either way (as Hugging Face's non-special added tokens),
    so they are not the template's to guard. Attributes as llama.cpp set them at load, which
    makes some tokens control that the GGUF's token types call otherwise.
    """
    wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
    return frozenset(model.token_get_text(i) for i in range(model.n_vocab()) if model.token_get_attr(i) & wanted)


def load(model=None, **options) -> LlamaCppBackend:
    path = default_model_path() if model is None else Path(model)
    return LlamaCppBackend(path, model_id(model), **options)
