"""Token pieces as raw bytes, from GGUF files, Hugging Face tokenizers and llama.cpp.

The core never sees a tokenizer library: it sees one byte string per token id
(``b""`` for special and control tokens, which never match text) and the EOS ids.
"""

from __future__ import annotations

import json
import mmap
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from os import PathLike
from pathlib import Path
from typing import Any

from .errors import UsageError, VocabularyError


class Vocabulary:
    """Every token's raw bytes, the EOS ids, and the mask width ``size``.

    ``size`` is the width of the model's logits; ids at or past ``len(tokens)`` are
    never allowed. Build once per model: the byte trie is built on first use (cost:
    about a second for 262k tokens) and shared by every matcher.
    """

    def __init__(self, tokens: Sequence[bytes], eos_ids: Iterable[int], size: int | None = None) -> None:
        tokens = [bytes(t) for t in tokens]
        size = len(tokens) if size is None else int(size)
        if size < len(tokens):
            raise UsageError(f"vocabulary size {size} is smaller than its {len(tokens)} tokens")
        eos = tuple(sorted({int(i) for i in eos_ids}))
        for i in eos:
            if not 0 <= i < size:
                raise UsageError(f"EOS id {i} is outside the vocabulary of {size} tokens")
            if i < len(tokens):
                tokens[i] = b""
        self._tokens = tokens
        self._size = size
        self._eos_ids = eos

    @property
    def size(self) -> int:
        return self._size

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self._eos_ids

    def token_bytes(self, i: int) -> bytes:
        if not 0 <= i < self._size:
            raise UsageError(f"token id {i} is outside the vocabulary of {self._size} tokens")
        return self._tokens[i] if i < len(self._tokens) else b""

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"Vocabulary(size={self._size}, eos_ids={list(self._eos_ids)})"

    @classmethod
    def from_gguf(cls, path: str | PathLike[str]) -> Vocabulary:
        """Read the tokenizer from a GGUF file's metadata (tensors are never touched).

        Pieces render as llama.cpp's ``token_to_piece(special=False)`` renders them:
        control, unknown and unused tokens are ``b""``; user-defined tokens are their text.
        """
        path = Path(path)
        meta = _read_gguf_metadata(path)
        kind = _gguf_field(meta, "tokenizer.ggml.model", str, path)
        if kind not in _GGUF_DECODERS:
            raise VocabularyError(f"unsupported tokenizer model {kind!r} (gpt2, llama, t5 are read) - at {path}")
        decode = _GGUF_DECODERS[kind]
        texts = _gguf_field(meta, "tokenizer.ggml.tokens", list, path)
        types = meta.get("tokenizer.ggml.token_type", [_NORMAL] * len(texts))
        if not isinstance(types, list) or len(types) != len(texts):
            raise VocabularyError(f"tokenizer.ggml.token_type does not give one type per token - at {path}")
        tokens = [decode(t) if k in (_NORMAL, _BYTE) else t.encode() if k == _USER_DEFINED else b"" for t, k in zip(texts, types)]
        eos = [_gguf_field(meta, key, int, path) for key in _GGUF_EOS_KEYS if key in meta]
        eos += _end_of_generation_ids(zip(texts, range(len(texts))))
        return _build(tokens, eos, None, path)

    @classmethod
    def from_tokenizer_json(cls, path: str | PathLike[str], size: int | None = None) -> Vocabulary:
        """Read a Hugging Face ``tokenizer.json``; EOS comes from the configs beside it.

        ``tokenizer_config.json`` (``eos_token``) and ``generation_config.json``
        (``eos_token_id``) are read where present. ``size`` is the model's logits width
        where it exceeds the tokenizer's ids.
        """
        path = Path(path)
        tokens, ids = _tokens_from_spec(_load_json(path), path)
        eos = _config_eos_ids(path.parent, ids) + _end_of_generation_ids(ids.items())
        return _build(tokens, eos, size, path)

    @classmethod
    def from_hf(cls, tokenizer: Any, size: int | None = None) -> Vocabulary:
        """Read a transformers fast tokenizer through its ``tokenizer.json`` form.

        ``size`` defaults to ``len(tokenizer)``; pass the model's logits width where it is wider.
        """
        where = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise VocabularyError(f"not a fast tokenizer (it has no backend_tokenizer) - at {where}")
        try:
            spec = json.loads(backend.to_str())
        except ValueError as e:
            raise VocabularyError(f"backend tokenizer does not serialize to JSON: {e} - at {where}") from None
        tokens, ids = _tokens_from_spec(spec, where)
        eos = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
        eos += _end_of_generation_ids(ids.items())
        return _build(tokens, eos, max(len(tokenizer), len(tokens)) if size is None else size, where)

    @classmethod
    def from_llama(cls, llama: Any) -> Vocabulary:
        """Read a llama-cpp-python ``Llama``'s vocabulary through llama.cpp itself.

        Calls ``llama_token_to_piece`` directly: the wrappers' 32-byte buffers cut long pieces.
        """
        import ctypes

        import llama_cpp

        model = llama._model
        vocab = getattr(model, "vocab", None)  # llama.cpp split the vocabulary from the model in 2025
        if vocab is not None:
            handle, is_eog = vocab, llama_cpp.llama_vocab_is_eog
        else:
            handle, is_eog = model.model, llama_cpp.llama_token_is_eog
        buf = ctypes.create_string_buffer(256)

        def piece(i: int) -> bytes:
            nonlocal buf
            n = llama_cpp.llama_token_to_piece(handle, i, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(handle, i, buf, len(buf), 0, False)
            return ctypes.string_at(buf, n)

        n_vocab = llama.n_vocab()
        return cls([piece(i) for i in range(n_vocab)], [i for i in range(n_vocab) if is_eog(handle, i)])

    @cached_property
    def trie(self):
        """The flat pre-order byte trie of every text token (``llamay._core.trie.TokenTrie``)."""
        from ._core.trie import TokenTrie

        return TokenTrie(self._tokens, self._size, self._eos_ids)
