"""Generated text split into prose and Hermes tool calls, whole or delta by delta.

Theory of operation: outside a call, text flows out as it arrives except for a tail that
could still become ``<tool_call>`` (a prefix of it) or that could turn out to be the
whitespace before one; inside a call, the body is kept until a ``</tool_call>`` that is
not inside a JSON string, then parsed and handed out complete (design section 7:
streaming holds the call back). The batch parser is this stream fed once, so the two
cannot disagree. A block that is not a call raises ``ToolCallError``; it is never prose.

Text rule: whitespace next to a call belongs to the call's formatting and is dropped,
as is whitespace at the very end; prose that resumes after a call is joined to the prose
before it by one newline.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from .errors import ToolCallError

__all__ = ["CALL_CLOSE", "CALL_OPEN", "ToolCall", "ToolCallStream", "parse_tool_calls"]

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"


@dataclass(frozen=True)
class ToolCall:
    """One complete call; ``id`` is ``call_`` and 24 random hex digits, distinct per call."""

    id: str
    name: str
    arguments: dict[str, Any]


class ToolCallStream:
    """Feed text deltas; get back, in order, text deltas (``str``) and complete calls (``ToolCall``).

    ``feed`` never returns text that could still be part of ``<tool_call>``; ``finish``
    returns what was held back and raises ``ToolCallError`` if a call is left open.
    """

    def __init__(self) -> None:
        self._buf = ""  # text held back, or the body of the open call
        self._in_call = False
        self._search = 0  # where the next ``</tool_call>`` may start in the open call's body
        self._calls = 0
        self._text_out = False  # some prose was returned
        self._after_call = False  # prose resumes after a call: leading whitespace dropped, newline owed

    def feed(self, delta: str) -> list[str | ToolCall]:
        self._buf += delta
        out: list[str | ToolCall] = []
        while True:
            if self._in_call:
                end = self._call_end()
                if end < 0:
                    return out
                out.append(self._call(self._buf[:end]))
                self._buf = self._buf[end + len(CALL_CLOSE) :]
                self._in_call, self._after_call = False, True
                continue
            start = self._buf.find(CALL_OPEN)
            if start >= 0:
                if prose := self._prose(self._buf[:start].rstrip()):
                    out.append(prose)
                self._buf = self._buf[start + len(CALL_OPEN) :]
                self._in_call, self._search = True, 0
                continue
            safe = self._buf[: len(self._buf) - _open_prefix_length(self._buf)].rstrip()
            if prose := self._prose(safe):
                out.append(prose)
            self._buf = self._buf[len(safe) :]
            return out

    def finish(self) -> list[str | ToolCall]:
        if self._in_call:
            raise ToolCallError(
                f"a {CALL_OPEN} block is never closed: {_snippet(self._buf)} - at call {self._calls + 1}"
            )
        prose = self._prose(self._buf.rstrip())
        self._buf = ""
        return [prose] if prose else []

    @property
    def in_call(self) -> bool:
        """Whether a ``<tool_call>`` is open: what ``finish`` would refuse."""
        return self._in_call

    def drain(self) -> str:
        """What is held back, as prose (an open call with its tag, unparsed), leaving the stream empty.

        For a generation cut short (max tokens, a stop string): the caller shows the cut call
        as the text it is instead of raising.
        """
        held = (CALL_OPEN if self._in_call else "") + self._buf
        self._buf, self._in_call = "", False
        return self._prose(held.rstrip())

    def _call_end(self) -> int:
        """Where the open call's ``</tool_call>`` starts, or -1 while it has not arrived."""
        while (end := self._buf.find(CALL_CLOSE, self._search)) >= 0:
            self._search = end + 1
            if not _inside_json_string(self._buf[:end]):
                return end
        self._search = max(self._search, len(self._buf) - len(CALL_CLOSE) + 1)
        return -1

    def _prose(self, text: str) -> str:
        """``text`` as it goes out under the module's text rule (``""``: nothing goes out)."""
        if self._after_call:
            text = text.lstrip()
            if not text:
                return ""
            self._after_call = False
            if self._text_out:
                text = "\n" + text
        self._text_out = self._text_out or bool(text)
        return text

    def _call(self, body: str) -> ToolCall:
        self._calls += 1
        where = f"call {self._calls}"
        try:
            value = json.loads(body)
        except ValueError as e:
            raise ToolCallError(f"a {CALL_OPEN} block is not JSON ({e}): {_snippet(body)} - at {where}") from None
        if not isinstance(value, dict):
            raise ToolCallError(f"a {CALL_OPEN} block is not a JSON object: {_snippet(body)} - at {where}")
        name, arguments = value.get("name"), value.get("arguments")
        if not isinstance(name, str) or not name:
            raise ToolCallError(f'a tool call has no "name" string: {_snippet(body)} - at {where}')
        if not isinstance(arguments, dict):
            raise ToolCallError(f'a tool call\'s "arguments" is not a JSON object: {_snippet(body)} - at {where}')
        if extra := sorted(value.keys() - {"name", "arguments"}):
            raise ToolCallError(f"a tool call has keys other than name and arguments: {extra} - at {where}")
        return ToolCall("call_" + secrets.token_hex(12), name, arguments)


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """The prose of a whole generated text and its calls, in order (see the module's text rule)."""
    stream = ToolCallStream()
    events = [*stream.feed(text), *stream.finish()]
    return "".join(e for e in events if isinstance(e, str)), [e for e in events if isinstance(e, ToolCall)]


def _open_prefix_length(text: str) -> int:
    """The length of the longest proper prefix of ``<tool_call>`` that ``text`` ends with."""
    for n in range(min(len(CALL_OPEN) - 1, len(text)), 0, -1):
        if text.endswith(CALL_OPEN[:n]):
            return n
    return 0


def _inside_json_string(text: str) -> bool:
    """Whether JSON text stops inside a string, where ``</tool_call>`` is an argument's content."""
    inside = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = inside
        elif ch == '"':
            inside = not inside
    return inside


def _snippet(text: str, limit: int = 80) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")
