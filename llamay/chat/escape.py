"""The client's text that spells a control token stays text: no forged ``<|im_start|>system``.

A prompt is tokenized with control-token parsing on, since the template writes its markers
(``<|im_start|>``, ``<start_of_turn>``) as text. A message, tool result, tool call or tool
schema that spells one would become the real token: a turn the client forged. So before
rendering, each occurrence of a control token's text in the client's strings is replaced by
a placeholder, one private-use character chosen absent from those strings, the template and
the token texts; after rendering, the prompt is cut at the placeholders into parts, each
spelled text a part the backend tokenizes as text (``Backend.tokenize``).

A placeholder is a single character, so a template that transforms content (``trim``,
``split``, slicing, ``tojson``) keeps it whole, drops it, or at worst writes it as a JSON
escape (``ensure_ascii``): the client's text is never read as a control token, whatever the
template does with it, and where the template writes it as given the parts join to the plain
render. A prompt whose strings spell none renders and tokenizes as one part, as it would unescaped.
Not covered: a control token split across two client strings that a template writes side by
side with nothing between (no template known here does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .errors import MessageError

__all__ = ["ControlTexts", "split_parts"]

#: Placeholders come from the supplementary private use planes (U+F0000-U+10FFFD), which no tokenizer's
#: control tokens and hardly any text use.
_PRIVATE_USE = (range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE))


class ControlTexts:
    """The texts a tokenizer reads as control tokens, found in a string by first character and length.

    A regular expression alternating them would try each at every ``<``: Gemma has 6,250
    (``<unused0>``...), all starting with ``<`` but in only nine lengths.
    """

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts = frozenset(t for t in texts if t)
        lengths: dict[str, set[int]] = {}
        for text in self.texts:
            lengths.setdefault(text[0], set()).add(len(text))
        self._lengths = {first: sorted(ns, reverse=True) for first, ns in lengths.items()}
        self._starts = re.compile("[" + "".join(map(re.escape, lengths)) + "]") if lengths else None
        self._chars = frozenset("".join(self.texts))

    def escape(self, value: Any, keep_out: str) -> tuple[Any, dict[str, str]]:
        """``value`` (nested lists and mappings) with control texts in its strings, keys too, replaced by placeholders.

        Returns the new value and each placeholder's text; ``value`` itself and ``{}`` where no
        string spells a control token. Placeholders are absent from ``keep_out`` (the template).
        """
        strings = list(_strings(value))
        found = sorted({s[i:j] for s in strings for i, j in self._spans(s)})
        if not found:
            return value, {}
        used = self._chars.union(keep_out, *strings)
        free = (chr(c) for plane in _PRIVATE_USE for c in plane if chr(c) not in used)
        placeholders = dict(zip(free, found, strict=False))  # too few: refused below
        if len(placeholders) < len(found):
            raise MessageError(f"the messages spell {len(found)} control tokens and leave too few private-use "
                               "characters to keep them text - at messages")
        by_text = {text: p for p, text in placeholders.items()}
        return _map_strings(value, lambda s: self._replace(s, by_text)), placeholders

    def _spans(self, s: str) -> Iterator[tuple[int, int]]:
        """Leftmost-longest occurrences, not overlapping: once they are replaced, the string spells none."""
        if self._starts is None:
            return
        end = 0
        for start in self._starts.finditer(s):
            i = start.start()
            if i < end:
                continue
            n = next((n for n in self._lengths[s[i]] if s[i : i + n] in self.texts), 0)
            if n:
                end = i + n
                yield i, end

    def _replace(self, s: str, by_text: Mapping[str, str]) -> str:
        out, last = [], 0
        for i, j in self._spans(s):
            out += [s[last:i], by_text[s[i:j]]]
            last = j
        return "".join(out) + s[last:] if out else s


def split_parts(prompt: str, placeholders: Mapping[str, str]) -> list[tuple[str, bool]]:
    """The rendered ``prompt`` as ``(text, special)`` parts: the template's text, and each placeholder's text alone."""
    if not placeholders:
        return [(prompt, True)]
    pieces = re.split("([" + "".join(placeholders) + "])", prompt)
    return [(placeholders.get(piece, piece), piece not in placeholders) for piece in pieces if piece]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _map_strings(value: Any, f) -> Any:
    if isinstance(value, str):
        return f(value)
    if isinstance(value, Mapping):
        return {_map_strings(key, f): _map_strings(item, f) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_map_strings(item, f) for item in value]
    return value
