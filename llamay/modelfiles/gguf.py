"""A GGUF file's key-value metadata, read straight from the file map; tensors are never touched.

The vocabulary reads the tokenizer keys from it and the chat layer reads the chat template
and the BOS/EOS tokens: one reader, one set of refusals. A file that is not GGUF, is
truncated or malformed is a ``VocabularyError`` naming the file.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Collection, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from ..errors import VocabularyError

__all__ = ["read_metadata", "required_field"]

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_KIND_NAMES = {int: "an integer", str: "a string", list: "an array"}


class _Truncated(Exception):
    pass


class _Cursor:
    """A bounds-checked reader of GGUF values, decoding only the values it is asked to keep.

    ``gguf.GGUFReader`` builds numpy views of every array element, seconds for a large
    vocabulary; reading the few keys needed straight from the map is an order of magnitude faster.
    """

    def __init__(self, buf: mmap.mmap, order: str) -> None:
        self.buf = buf
        self.pos = 0
        self.order = order
        self._u64 = struct.Struct(order + "Q")

    def unpack(self, fmt: str) -> tuple:
        s = struct.Struct(self.order + fmt)
        values = s.unpack_from(self.buf, self.pos)  # struct.error past the end
        self.pos += s.size
        return values

    def string(self, keep: bool = True) -> str | None:
        (n,) = self._u64.unpack_from(self.buf, self.pos)
        start, self.pos = self.pos + 8, self.pos + 8 + n
        if self.pos > len(self.buf):
            raise _Truncated
        return str(self.buf[start : self.pos], "utf-8") if keep else None

    def value(self, kind: int, keep: bool = True) -> Any:
        if kind == _STRING:
            return self.string(keep)
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])[0]
        if kind != _ARRAY:
            raise ValueError(f"unknown GGUF value type {kind}")
        item, count = self.unpack("IQ")
        if item in _SCALARS:
            fmt = _SCALARS[item]
            start, self.pos = self.pos, self.pos + count * struct.calcsize(fmt)
            if self.pos > len(self.buf):
                raise _Truncated
            return list(struct.unpack_from(f"{self.order}{count}{fmt}", self.buf, start)) if keep else None
        if self.pos + 8 * count > len(self.buf):  # every string or array takes at least 8 bytes
            raise _Truncated
        return [self.value(item, keep) for _ in range(count)]


def read_metadata(path: str | PathLike[str], keys: Collection[str]) -> dict[str, Any]:
    """The values of ``keys`` present in a GGUF file's key-value section; other values are skipped unread."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8 or head[:4] != b"GGUF":
                raise VocabularyError(f"not a GGUF file (it starts with {head[:4]!r}) - at {path}")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(buf, frozenset(keys), path)
    except OSError as e:
        raise VocabularyError(f"cannot read the file: {e.strerror or e} - at {path}") from None


def _parse(buf: mmap.mmap, keys: frozenset[str], path: Path) -> dict[str, Any]:
    # A big-endian file's version reads as a multiple of 65536 in little-endian order.
    order = "<" if struct.unpack_from("<I", buf, 4)[0] & 0xFFFF else ">"
    cur = _Cursor(buf, order)
    cur.pos = 4
    try:
        (version,) = cur.unpack("I")
        if version not in (2, 3):
            raise VocabularyError(f"GGUF version {version} is not supported (2 and 3 are) - at {path}")
        _tensors, n_keys = cur.unpack("QQ")
        meta = {}
        for _ in range(n_keys):
            key = cur.string()
            keep = key in keys
            (kind,) = cur.unpack("I")
            value = cur.value(kind, keep)
            if keep:
                meta[key] = value
    except (_Truncated, struct.error):
        raise VocabularyError(f"truncated GGUF file: its metadata runs past the end - at {path}") from None
    except (ValueError, OverflowError, MemoryError) as e:  # bad UTF-8, an unknown type, absurd counts
        raise VocabularyError(f"malformed GGUF metadata: {e} - at {path}") from None
    return meta


def required_field(meta: Mapping[str, Any], key: str, kind: type, path: Path) -> Any:
    """``meta[key]``, refused unless present and of ``kind`` (int, str or list; a bool is no int)."""
    if key not in meta:
        raise VocabularyError(f"GGUF metadata has no {key} - at {path}")
    value = meta[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise VocabularyError(f"{key} is not {_KIND_NAMES[kind]} - at {path}")
    return value
