"""Token pieces as raw bytes, from GGUF files, Hugging Face tokenizers and llama.cpp.

The core never sees a tokenizer library: it sees one byte string per token id
(``b""`` for special and control tokens, which never match text) and the EOS ids. The
grammar matches a token by ``grammar_bytes``: its text, or for a special token its *edge*
(``ir.edge_bytes``), reserved bytes that no text spells and only ``ir.token`` matches.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import UsageError, VocabularyError
from .ir import EDGE_BYTE, EDGE_ID_BYTES, edge_bytes
from .modelfiles.gguf import read_metadata, required_field

#: Ids from here on have no edge (past the fixed width of ``ir.edge_bytes``).
_EDGE_LIMIT = 1 << (8 * EDGE_ID_BYTES)
_RESERVED = bytes((EDGE_BYTE,))


class Vocabulary:
    """Every token's raw bytes, the EOS ids, the mask width ``size`` and the special tokens' texts.

    ``size`` is the width of the model's logits; ids at or past ``len(tokens)`` are
    never allowed. ``special_texts`` gives the text of each special or user-defined token by
    id (what ``special_token_id`` looks up; the loaders fill it). Build once per model: the
    byte trie is built on first use (cost: about a second for 262k tokens) and shared by
    every matcher.
    """

    def __init__(
        self,
        tokens: Sequence[bytes],
        eos_ids: Iterable[int],
        size: int | None = None,
        *,
        special_texts: Mapping[int, str] | None = None,
    ) -> None:
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
        texts = dict(special_texts or {})
        by_text: dict[str, int | None] = {}
        for i, text in texts.items():
            if type(i) is not int or not 0 <= i < len(tokens) or not isinstance(text, str):
                raise UsageError(f"special token {i!r}: {text!r} is not a text of one of the {len(tokens)} tokens")
            by_text[text] = i if text not in by_text else None  # several tokens: no single one
        self._tokens = tokens
        self._size = size
        self._eos_ids = eos
        self._special_texts = texts
        self._special_ids = by_text
        self._extra_edges: frozenset[int] = frozenset()
        self._base = self
        self._edge_views: dict[frozenset[int], Vocabulary] = {}

    @property
    def size(self) -> int:
        return self._size

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self._eos_ids

    @property
    def special_texts(self) -> Mapping[int, str]:
        """The special and user-defined tokens' texts by id (read-only), as the loader found them."""
        return MappingProxyType(self._special_texts)

    def token_bytes(self, i: int) -> bytes:
        """Token ``i``'s text: ``b""`` for special, control and EOS tokens, which have none."""
        if not 0 <= i < self._size:
            raise UsageError(f"token id {i} is outside the vocabulary of {self._size} tokens")
        return self._tokens[i] if i < len(self._tokens) else b""

    def grammar_bytes(self, i: int) -> bytes:
        """Token ``i`` as the grammar matches it, which is what the trie spells and ``accept_token`` feeds.

        A special token (no text, not EOS) and an id of ``with_token_edges`` is its edge
        (``ir.edge_bytes``), so that only ``ir.token`` matches it. A token whose text holds
        byte 0xFF (no UTF-8 text does: a lone byte-fallback or byte-level piece) is ``b""``,
        never allowed: were it kept, pieces could spell an edge. EOS is ``b""``: it is allowed
        by the automaton's accepting state, not by bytes. Any other token is its text.
        """
        text = self.token_bytes(i)
        if self._is_edge(i, text):
            return edge_bytes(i)
        return b"" if _RESERVED in text else text

    def edge_bytes(self, i: int) -> bytes:
        """Token ``i``'s edge (``ir.edge_bytes``), refused where this vocabulary gives it none.

        A marker's grammar built from an id that is no edge here (an EOS id, a token with text
        that ``with_token_edges`` did not name) could never match: the refusal says so at once.
        """
        if not self._is_edge(i, self.token_bytes(i)):
            raise UsageError(f"token {i} is no token edge of this vocabulary (with_token_edges names tokens with text)")
        return edge_bytes(i)

    def _is_edge(self, i: int, text: bytes) -> bool:
        if i in self._extra_edges:
            return True
        return not text and i < len(self._tokens) and i < _EDGE_LIMIT and i not in self._eos_ids

    def special_token_id(self, text: str) -> int | None:
        """The id of the one special or user-defined token whose text is ``text``; None if none or several.

        Dialects name their markers by text (``<|python_tag|>``, ``[TOOL_CALLS]``, ``<tool_call>``)
        and match them with ``ir.token(id)``. Several tokens with one text name no single marker.
        """
        return self._special_ids.get(text)

    def with_eos(self, ids: Iterable[int]) -> Vocabulary:
        """This vocabulary with ``ids`` ending a generation too; itself where they add none.

        A runtime may stop on end tokens the tokenizer does not name (mlx-lm and SGLang take
        ``generation_config.json``'s): a matcher must take them as EOS, not refuse them.
        """
        extra = {int(i) for i in ids} - set(self.eos_ids)
        if not extra:
            return self
        tokens = [self.token_bytes(i) for i in range(self.size)]
        return Vocabulary(tokens, {*self.eos_ids, *extra}, size=self.size, special_texts=self.special_texts)

    def with_token_edges(self, ids: Iterable[int]) -> Vocabulary:
        """This vocabulary with the tokens ``ids`` matched as edges (``ir.token``) rather than as text.

        A dialect whose marker is a token with text (Qwen2.5's ``<tool_call>``) must allow that one
        token at the marker and refuse the text spelled in pieces, which a model forced to open a
        call would otherwise write and derail on; in ordinary generation the same token is text.
        So the marker's grammar runs on a derived vocabulary: same tokens, size, EOS and
        ``token_bytes`` (the text, for decoding), only its trie differs. One per set of ids, kept:
        its trie and the mask caches of the grammars run on it are built once. EOS ids are
        refused: EOS is matched by the accepting state, never by bytes.
        """
        extra = set()
        for given in ids:
            try:
                i = operator.index(given)
            except TypeError:
                raise UsageError(f"token id {given!r} is not an integer") from None
            if not 0 <= i < min(len(self._tokens), _EDGE_LIMIT):
                raise UsageError(f"token id {i} is not a token of this vocabulary of {len(self._tokens)} tokens")
            if i in self._eos_ids:
                raise UsageError(f"token {i} is an end-of-sequence token: it cannot be an edge")
            extra.add(i)
        key = self._extra_edges | extra
        if key == self._extra_edges:
            return self
        base = self._base
        view = base._edge_views.get(key)
        if view is None:
            view = type(base).__new__(type(base))
            view._tokens, view._size, view._eos_ids = base._tokens, base._size, base._eos_ids
            view._special_texts, view._special_ids = base._special_texts, base._special_ids
            view._extra_edges, view._base = key, base
            view = base._edge_views.setdefault(key, view)  # a racing thread's view, if it won
        return view

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        edges = f", token_edges={sorted(self._extra_edges)}" if self._extra_edges else ""
        return f"Vocabulary(size={self._size}, eos_ids={list(self._eos_ids)}{edges})"

    @classmethod
    def from_gguf(cls, path: str | PathLike[str]) -> Vocabulary:
        """Read the tokenizer from a GGUF file's metadata (tensors are never touched).

        Pieces render as llama.cpp's ``token_to_piece(special=False)`` renders them:
        control, unknown and unused tokens are ``b""``; user-defined tokens are their text.
        Control and user-defined tokens keep their texts for ``special_token_id``.
        """
        path = Path(path)
        meta = _read_gguf_metadata(path)
        kind = required_field(meta, "tokenizer.ggml.model", str, path)
        if kind not in _GGUF_DECODERS:
            raise VocabularyError(f"unsupported tokenizer model {kind!r} (gpt2 and llama are read) - at {path}")
        decode = _GGUF_DECODERS[kind]
        texts = required_field(meta, "tokenizer.ggml.tokens", list, path)
        if not all(isinstance(t, str) for t in texts[:1]):  # GGUF arrays hold one type
            raise VocabularyError(f"tokenizer.ggml.tokens is not an array of strings - at {path}")
        types = meta.get("tokenizer.ggml.token_type", [_NORMAL] * len(texts))
        if not isinstance(types, list) or len(types) != len(texts) or not all(isinstance(k, int) for k in types[:1]):
            raise VocabularyError(f"tokenizer.ggml.token_type does not give one type per token - at {path}")
        tokens = [_gguf_piece(text, kind, decode) for text, kind in zip(texts, types, strict=True)]
        eos = [required_field(meta, key, int, path) for key in _GGUF_EOS_KEYS if key in meta]
        eos += _end_of_generation_ids((text, i) for i, text in enumerate(texts))
        special = {i: texts[i] for i, kind in enumerate(types) if kind in (_CONTROL, _USER_DEFINED)}
        return _build(cls, tokens, eos, None, path, special)  # llama.cpp's logits are one per token

    @classmethod
    def from_tokenizer_json(cls, path: str | PathLike[str], size: int | None = None) -> Vocabulary:
        """Read a Hugging Face ``tokenizer.json``; EOS comes from the configs beside it.

        ``tokenizer_config.json`` (``eos_token``) and ``generation_config.json``
        (``eos_token_id``) are read where present. ``size`` is the model's logits width
        where it exceeds the tokenizer's ids.
        """
        path = Path(path)
        tokens, ids, added = _tokens_from_spec(_load_json(path), path)
        eos = _config_eos_ids(path.parent, ids) + _end_of_generation_ids(ids.items())
        return _build(cls, tokens, eos, size, path, added)

    @classmethod
    def from_hf(cls, tokenizer: Any, size: int | None = None) -> Vocabulary:
        """Read a transformers fast tokenizer through its ``tokenizer.json`` form.

        ``size`` defaults to ``len(tokenizer)`` (or one past the largest id, if more); pass the
        model's logits width where it is wider.
        """
        where = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise VocabularyError(f"not a fast tokenizer (it has no backend_tokenizer) - at {where}")
        try:
            spec = json.loads(backend.to_str())
        except ValueError as e:
            raise VocabularyError(f"backend tokenizer does not serialize to JSON: {e} - at {where}") from None
        tokens, ids, added = _tokens_from_spec(spec, where)
        eos = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
        eos += _end_of_generation_ids(ids.items())
        return _build(cls, tokens, eos, max(len(tokenizer), len(tokens)) if size is None else size, where, added)

    @classmethod
    def from_llama(cls, llama: Any) -> Vocabulary:
        """Read a llama-cpp-python ``Llama``'s vocabulary through llama.cpp itself.

        Calls ``llama_token_to_piece`` directly: the wrappers' 32-byte buffers cut long pieces.
        Tokens whose attributes say control or user-defined keep their texts (``special_token_id``).
        """
        import ctypes

        import llama_cpp

        model = llama._model
        vocab = getattr(model, "vocab", None)  # llama.cpp split the vocabulary from the model in 2025
        if vocab is not None:
            handle, is_eog = vocab, llama_cpp.llama_vocab_is_eog
            get_attr, get_text = llama_cpp.llama_vocab_get_attr, llama_cpp.llama_vocab_get_text
        else:
            handle, is_eog = model.model, llama_cpp.llama_token_is_eog
            get_attr, get_text = llama_cpp.llama_token_get_attr, llama_cpp.llama_token_get_text
        buf = ctypes.create_string_buffer(256)

        def piece(i: int) -> bytes:
            nonlocal buf
            n = llama_cpp.llama_token_to_piece(handle, i, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(handle, i, buf, len(buf), 0, False)
            return ctypes.string_at(buf, n)

        n_vocab = llama.n_vocab()
        eos = [i for i in range(n_vocab) if is_eog(handle, i)]
        wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        special = {i: get_text(handle, i).decode("utf-8", "replace")
                   for i in range(n_vocab) if get_attr(handle, i) & wanted}
        where = getattr(llama, "model_path", "llama")
        return _build(cls, [piece(i) for i in range(n_vocab)], eos, None, where, special)

    @cached_property
    def trie(self):
        """The flat pre-order byte trie of every token's ``grammar_bytes`` (``llamay._core.trie.TokenTrie``)."""
        from ._core.trie import TokenTrie

        extra = self._extra_edges  # plain text is most tokens: its bytes are its grammar bytes, no call needed
        pieces = [t if t and _RESERVED not in t and i not in extra else self.grammar_bytes(i)
                  for i, t in enumerate(self._tokens)]
        return TokenTrie(pieces, self._size, self._eos_ids)


# --- piece decoding: one helper per family, shared by every loader -----------------------------------


def _gpt2_byte_table() -> dict[int, int]:
    """GPT-2's ``bytes_to_unicode`` inverted, as a ``str.translate`` table onto Latin-1 code points.

    Code points below 256 that are not in the alphabet map past Latin-1, so that a piece
    holding one fails to encode and is taken as plain text instead.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    shifted = [b for b in range(256) if b not in printable]
    table = {b: b for b in printable}
    table.update({0x100 + n: b for n, b in enumerate(shifted)})
    table.update({b: 0xFFFF for b in shifted})
    return table


_BYTE_LEVEL_TABLE = _gpt2_byte_table()


def _byte_level_bytes(piece: str) -> bytes:
    """A byte-level BPE piece's raw bytes.

    A piece with a character outside the alphabet is plain text, as ``tokenizers``'
    ByteLevel decoder takes it.
    """
    try:
        return piece.translate(_BYTE_LEVEL_TABLE).encode("latin-1")
    except UnicodeEncodeError:
        return piece.encode()


def _sentencepiece_bytes(piece: str) -> bytes:
    """A SentencePiece piece's raw bytes: ``<0xNN>`` is that byte (byte fallback), ``▁`` a space."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes([int(piece[3:5], 16)])
        except ValueError:
            pass
    return piece.replace("\u2581", " ").encode()


#: Token texts that end generation whatever the metadata says: llama.cpp's list, so that
#: every loader stops a chat turn where llama.cpp does (``<end_of_turn>``, ``<|eot_id|>`` ...).
#: llama.cpp also ends on fill-in-the-middle padding, repository and file separators, and
#: on gemma's user-defined ``</s>`` (the cross-check in tests/test_llamacpp_vocab.py pins it).
_END_OF_GENERATION_TEXTS = frozenset(
    {
        "</s>",
        "<|fim_pad|>",
        "<fim-pad>",
        "<PAD>",
        "<|fim_repo|>",
        "<|repo_name|>",
        "<fim-repo>",
        "<REPO>",
        "<reponame>",
        "<|file_sep|>",
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "<|end_of_text|>",
        "<end_of_utterance>",
    }
)


def _end_of_generation_ids(texts_and_ids: Iterable[tuple[str, int]]) -> list[int]:
    return [i for text, i in texts_and_ids if text in _END_OF_GENERATION_TEXTS]


def _build(cls: type[Vocabulary], tokens: list[bytes], eos_ids: Iterable[Any], size: int | None, where: object,
           special_texts: Mapping[int, str]):
    """The vocabulary, once its EOS ids are known to name tokens: a file naming none is refused."""
    eos = set()
    for i in eos_ids:
        if type(i) is not int or not 0 <= i < len(tokens):
            raise VocabularyError(f"end-of-sequence id {i!r} is not one of the {len(tokens)} token ids - at {where}")
        eos.add(i)
    if not eos:
        raise VocabularyError(f"no end-of-sequence token is named - at {where}")
    return cls(tokens, eos, size, special_texts=special_texts)


# --- GGUF: the metadata section only ---------------------------------------------------------------

# llama.cpp's token types (llama_token_type)
_NORMAL, _CONTROL, _USER_DEFINED, _BYTE = 1, 3, 4, 6

_GGUF_DECODERS = {"gpt2": _byte_level_bytes, "llama": _sentencepiece_bytes}
_GGUF_EOS_KEYS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")
_GGUF_KEYS = frozenset({"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", *_GGUF_EOS_KEYS})


def _gguf_piece(text: str, kind: int, decode: Callable[[str], bytes]) -> bytes:
    """A token as llama.cpp renders it without specials: user-defined tokens are literal text."""
    if kind in (_NORMAL, _BYTE):
        return decode(text)
    return text.encode() if kind == _USER_DEFINED else b""


def _read_gguf_metadata(path: Path) -> dict[str, Any]:
    """The tokenizer keys of a GGUF file's key-value section; a file that is not GGUF is refused."""
    return read_metadata(path, _GGUF_KEYS)


# --- tokenizer.json (Hugging Face tokenizers) ------------------------------------------------------


def _load_json(path: Path, missing_ok: bool = False) -> Any:
    try:
        with path.open("rb") as f:
            return json.load(f)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise VocabularyError(f"no such file - at {path}") from None
    except OSError as e:
        raise VocabularyError(f"cannot read the file: {e.strerror or e} - at {path}") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise VocabularyError(f"not JSON: {e} - at {path}") from None


def _decoder_steps(node: Any) -> Iterator[dict]:
    """Every step of a (possibly nested ``Sequence``) decoder."""
    if isinstance(node, dict):
        yield node
        for child in node.get("decoders") or ():
            yield from _decoder_steps(child)


def _spec_is_byte_level(spec: dict, where: object) -> bool:
    """Byte-level BPE or SentencePiece, told by the decoder that turns pieces back into text."""
    steps = list(_decoder_steps(spec.get("decoder")))
    kinds = {step.get("type") for step in steps}
    if "ByteLevel" in kinds:
        return True
    if kinds & {"Metaspace", "ByteFallback"} or any(
        step.get("type") == "Replace" and step.get("pattern") == {"String": "\u2581"} for step in steps
    ):
        return False
    raise VocabularyError(
        f"unsupported decoder {sorted(map(str, kinds - {None, 'Sequence'})) or None}"
        f" (ByteLevel, Metaspace or ByteFallback are read) - at {where}"
    )


def _spec_pieces(model: Any, where: object) -> Iterator[tuple[str, int]]:
    """(piece, id) pairs of a BPE (``{piece: id}``) or Unigram (``[[piece, score], ...]``) model."""
    vocab = model.get("vocab") if isinstance(model, dict) else None
    kind = model.get("type") if isinstance(model, dict) else None
    if kind == "BPE" and isinstance(vocab, dict):
        return iter(vocab.items())
    if kind == "Unigram" and isinstance(vocab, list) and all(isinstance(e, list) and e for e in vocab):
        return ((entry[0], i) for i, entry in enumerate(vocab))
    raise VocabularyError(f"model {kind!r} has no BPE or Unigram vocabulary - at {where}")


def _tokens_from_spec(spec: Any, where: object) -> tuple[list[bytes], dict[str, int], dict[int, str]]:
    """Every token's bytes, each token's text as the configs name it (for EOS lookup), and the added tokens' texts."""
    if not isinstance(spec, dict) or "model" not in spec:
        raise VocabularyError(f"not a tokenizer.json: it has no model - at {where}")
    byte_level = _spec_is_byte_level(spec, where)
    decode = _byte_level_bytes if byte_level else _sentencepiece_bytes
    pieces: dict[int, bytes] = {}
    ids: dict[str, int] = {}
    added_texts: dict[int, str] = {}
    for piece, i in _spec_pieces(spec["model"], where):
        _check_id(piece, i, where)
        pieces[i] = decode(piece)
        ids[piece] = i
    added = spec.get("added_tokens") or []
    if not isinstance(added, list):
        raise VocabularyError(f"added_tokens is not a list - at {where}")
    for entry in added:
        content, i = (entry.get("content"), entry.get("id")) if isinstance(entry, dict) else (None, None)
        _check_id(content, i, where)
        # Added tokens are matched against the input text, so their content is text, not a piece.
        pieces[i] = b"" if entry.get("special") else content.encode() if byte_level else decode(content)
        ids[content] = i
        added_texts[i] = content
    if not pieces:
        raise VocabularyError(f"the tokenizer has no tokens - at {where}")
    tokens = [b""] * (max(pieces) + 1)
    for i, b in pieces.items():
        tokens[i] = b
    return tokens, ids, added_texts


#: Largest token id read from a tokenizer file (a bad id must not allocate gigabytes).
_MAX_TOKEN_ID = 1 << 24


def _check_id(piece: Any, i: Any, where: object) -> None:
    if not isinstance(piece, str) or type(i) is not int or not 0 <= i < _MAX_TOKEN_ID:
        raise VocabularyError(f"token {piece!r} has no valid id ({i!r}) - at {where}")


def _config_eos_ids(folder: Path, ids: Mapping[str, int]) -> list[int]:
    """EOS ids named beside a tokenizer.json: ``eos_token`` and generation's ``eos_token_id``."""
    eos: list[Any] = []
    config_path = folder / "tokenizer_config.json"
    config = _load_json(config_path, missing_ok=True) or {}
    name = config.get("eos_token") if isinstance(config, dict) else None
    if isinstance(name, dict):
        name = name.get("content")
    if name is not None:
        if not isinstance(name, str) or name not in ids:
            raise VocabularyError(f"eos_token {name!r} is not a token of tokenizer.json - at {config_path}")
        eos.append(ids[name])
    generation = _load_json(folder / "generation_config.json", missing_ok=True) or {}
    named = generation.get("eos_token_id") if isinstance(generation, dict) else None
    eos += named if isinstance(named, list) else [] if named is None else [named]
    return eos
