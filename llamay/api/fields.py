"""What the three APIs share: typed field reads, llamay's own constraint fields, warnings, framing.

A request body is read through ``Body``, which remembers every field it was asked about,
so whatever is left over is an unknown field: ignored, with a warning that names it.
A wrong type is a 400 naming the field. ``GenerateRequest`` is what every generation
route turns its body into: ``Model.chat`` keyword arguments plus what the response needs.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import numpy as np

from ..options import DEFAULT
from .errors import ApiError, bad_field

#: Nesting depth of a request body's arrays and objects, checked before it is parsed (the JSON
#: parser recurses once per level). Room for a schema at ``Limits.max_depth`` (two levels per
#: schema level, as in ``properties`` or ``anyOf``) inside the request's own envelope.
MAX_BODY_DEPTH = 2 * DEFAULT.limits.max_depth + 64

#: ``max_tokens`` when a request gives none; the backend stops earlier when the context is full.
DEFAULT_MAX_TOKENS = 4096

#: ``Llamay-Warning`` headers per response at most (headers stay small); the body carries them all.
MAX_WARNING_HEADERS = 20

_HEADER_SAFE = "".join(c for c in string.printable if c not in "%\r\n\t\x0b\x0c")

#: +1 for the bytes that open an array or object, -1 for those that close one.
_NESTING = np.zeros(256, np.int8)
_NESTING[[ord("["), ord("{")]] = 1
_NESTING[[ord("]"), ord("}")]] = -1

#: An escaped UTF-16 surrogate, or text that only looks like one: only a body with one can decode to a
#: string holding a lone surrogate, which UTF-8 (the tokenizer, a header) cannot encode.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "an array",
               dict: "an object"}


class Body:
    """A JSON object from the network; typed reads that 400 on a wrong type, and the leftovers."""

    def __init__(self, data: Any, where: str = "") -> None:
        if not isinstance(data, dict):
            raise ApiError(400, f"{where or 'the request body'} must be a JSON object")
        self.data = data
        self.where = where
        self.seen: set[str] = set()

    @classmethod
    def parse(cls, raw: bytes) -> Body:
        """The body as a JSON object: UTF-8 (RFC 8259), without ``NaN`` or ``Infinity`` (which Python's
        parser takes), nested at most ``MAX_BODY_DEPTH`` deep, every string Unicode text.

        The depth is counted before parsing: the parser recurses once per level, and a body
        nested 100,000 deep would otherwise end in a ``RecursionError``.
        """
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ApiError(400, f"the request body is not valid UTF-8: {e}") from None
        depth = nesting_depth(raw)
        if depth > MAX_BODY_DEPTH:
            raise ApiError(400, f"the request body nests arrays and objects {depth} deep; llamay takes at most "
                                f"{MAX_BODY_DEPTH} (limit MAX_BODY_DEPTH)")
        try:
            data = json.loads(text, parse_constant=_not_json) if text.strip() else None
        except ValueError as e:
            raise ApiError(400, f"the request body is not valid JSON: {e}") from None
        if data is None:
            raise ApiError(400, "the request body is empty; a JSON object is expected")
        if _SURROGATE_ESCAPE.search(raw) and (where := _lone_surrogate(data)) is not None:
            raise bad_field(where, "holds an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff), which is not text")
        return cls(data)

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None, *, required: bool = False) -> Any:
        """``data[key]`` checked against ``kind``; JSON null counts as absent."""
        self.seen.add(key)
        value = self.data.get(key)
        if value is None:
            if required:
                raise bad_field(self.path(key), "this field is required")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not _is_instance(value, kinds):
            names = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            raise bad_field(self.path(key), f"must be {names}, got {_json_type(value)}")
        return value

    def number(self, key: str, default: float | None, *, low: float, high: float) -> float | None:
        value = self.get(key, (int, float), default)
        if value is not None and not low <= value <= high:
            raise bad_field(self.path(key), f"must be between {low:g} and {high:g}, got {value!r}")
        return value

    def positive_int(self, key: str, default: int | None = None, *, required: bool = False) -> int | None:
        value = self.get(key, int, default, required=required)
        if value is not None and value < 1:
            raise bad_field(self.path(key), f"must be a positive integer, got {value!r}")
        return value

    def seed(self) -> int | None:
        """``seed``; a negative one asks for a random seed, as llama.cpp's and Ollama's -1 does."""
        value = self.get("seed", int)
        return value if value is not None and value >= 0 else None

    def stop(self, key: str) -> list[str] | None:
        value = self.get(key, (str, list))
        if isinstance(value, str):
            value = [value]
        if value is None:
            return None
        if any(not isinstance(s, str) for s in value):
            raise bad_field(self.path(key), "must be a string or an array of strings")
        return [s for s in value if s] or None

    def child(self, key: str) -> Body | None:
        value = self.get(key, dict)
        return None if value is None else Body(value, self.path(key))

    def ignore(self, *keys: str) -> None:
        """Fields accepted and without effect (metadata, user ids, cache hints)."""
        self.seen.update(keys)

    def unknown_warnings(self) -> list[str]:
        return [f"unknown field {self.path(k)!r} was ignored" for k in self.data if k not in self.seen]


@dataclass
class GenerateRequest:
    """One generation: ``Model.chat`` keyword arguments and what the response needs to know."""

    model: str
    stream: bool
    chat: dict[str, Any]  # Model.chat keyword arguments, ``messages`` included
    warnings: list[str] = field(default_factory=list)  # request-level: unknown and ignored fields
    constraint_field: str | None = None  # the request field carrying the constraint, for error messages
    options: dict[str, Any] = field(default_factory=dict)  # API-specific response options

    def __post_init__(self) -> None:
        """Tools are a constraint too (their schemas make the tool-call grammar): a refused one names ``tools``."""
        if self.constraint_field is None and self.chat.get("tools"):
            self.constraint_field = "tools"

    @property
    def constraint_kind(self) -> str:
        """What constrains the output, for the log line."""
        chat = self.chat
        for kind in ("schema", "grammar", "lexicon"):
            if chat.get(kind) is not None:
                return kind
        if chat.get("json"):
            return "json"
        if chat.get("tools") and chat.get("tool_choice", "auto") != "none":
            return "tools"
        return "none"


class Constraints:
    """The constraint fields of one request; two of them at once is a 400 naming both."""

    def __init__(self) -> None:
        self.kwargs: dict[str, Any] = {}
        self.field: str | None = None

    def set(self, field_name: str, kind: str, value: Any) -> None:
        if self.field is not None:
            raise ApiError(400, f"{field_name}: one constraint at a time, and {self.field} already gives one",
                           param=field_name)
        self.kwargs[kind] = value
        self.field = field_name

    def read_llamay_fields(self, body: Body) -> None:
        """``llamay_schema``, ``llamay_format``, ``llamay_grammar`` (or llama.cpp's ``grammar``), ``llamay_lexicon``."""
        schema = body.get("llamay_schema", (dict, bool))
        if schema is not None:
            self.set(body.path("llamay_schema"), "schema", schema)
        fmt = body.get("llamay_format", str)
        if fmt is not None:
            if fmt != "json":
                raise bad_field(body.path("llamay_format"), f'must be "json", got {fmt!r}')
            self.set(body.path("llamay_format"), "json", True)
        for key in ("llamay_grammar", "grammar"):
            grammar = body.get(key, str)
            if grammar:
                self.set(body.path(key), "grammar", grammar)
        lexicon = body.get("llamay_lexicon", (bool, list))
        if lexicon is False:
            return
        if isinstance(lexicon, list) and (not lexicon or any(not isinstance(w, str) or not w for w in lexicon)):
            raise bad_field(body.path("llamay_lexicon"), "must be true or a non-empty array of non-empty strings")
        if lexicon is not None:
            self.set(body.path("llamay_lexicon"), "lexicon", lexicon)


def nesting_depth(raw: bytes) -> int:
    """How deep the arrays and objects of UTF-8 JSON text nest, brackets inside strings not counted.

    Counted with numpy, no Python loop over the bytes (a body may be 16 MiB): escaped
    backslashes, then escaped quotes, are dropped (left to right, as a run of backslashes
    pairs up), so every quote left opens or closes a string, and a byte is inside one where
    the quotes up to it are odd. In UTF-8 no byte of a multi-byte character is a quote,
    backslash or bracket.
    """
    codes = np.frombuffer(raw.replace(b"\\\\", b"").replace(b'\\"', b""), np.uint8)
    steps = np.where(np.bitwise_xor.accumulate(codes == ord('"')), 0, _NESTING[codes])
    return int(np.cumsum(steps[steps != 0], dtype=np.int32).max(initial=0))


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def _lone_surrogate(value: Any, where: str = "") -> str | None:
    """The path of the first string or key in ``value`` that UTF-8 cannot encode, escaped to be printable."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return where.encode("utf-8", "backslashreplace").decode() or "the request body"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        here = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key
        found = _lone_surrogate(key, here) or _lone_surrogate(item, here)
        if found is not None:
            return found
    return None


def merge_warnings(*lists: list[str]) -> list[str]:
    """Warnings in order, each once."""
    return list(dict.fromkeys(w for ws in lists for w in ws))


def warning_headers(warnings: list[str]) -> list[tuple[str, str]]:
    """One ``Llamay-Warning`` header per warning, at most 20; non-ASCII (and ``%``) percent-encoded."""
    return [("Llamay-Warning", quote(w, safe=_HEADER_SAFE)) for w in warnings[:MAX_WARNING_HEADERS]]


# -- framing: what the server writes for one stream frame -----------------------------------
SSE = "text/event-stream"
NDJSON = "application/x-ndjson"


@dataclass(frozen=True)
class Frame:
    """One stream message: JSON (or a literal string such as ``[DONE]``), with an SSE event name."""

    data: Any
    event: str | None = None


def encode_frame(media_type: str, frame: Frame) -> bytes:
    data = frame.data if isinstance(frame.data, str) else dumps(frame.data)
    if media_type == NDJSON:
        return data.encode() + b"\n"
    head = f"event: {frame.event}\n" if frame.event else ""
    return f"{head}data: {data}\n\n".encode()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_arguments_json(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def _is_instance(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, int) and float in kinds:
        return True
    return isinstance(value, kinds)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for kind, name in _TYPE_NAMES.items():
        if isinstance(value, kind):
            return name
    return type(value).__name__

