"""llamay itself, as one peer among the others (open objects, unbounded whitespace, uncapped numbers by default)."""

from __future__ import annotations

import llamay as _llamay
from llamay._core.maskcache import cache_for
from llamay.grammars.jsonschema.compiler import compile_json_schema
from tests import feed

from ..workloads import OPEN
from . import PeerVocab
from ._vocab import llamay_vocab

NAME = "llamay"

_current: PeerVocab | None = None


def build_vocab(kind: str) -> PeerVocab:
    global _current
    vocab = llamay_vocab(kind)
    _current = PeerVocab(kind, vocab.size, list(vocab.eos_ids), vocab)
    return _current


def compile(schema, vocab: PeerVocab | None = None, closed_objects: bool = False):
    vocab = vocab or _current
    grammar = compile_json_schema(schema, **(OPEN | {"closed_objects": closed_objects}))
    return grammar, vocab.handle


def matcher(compiled):
    grammar, vocab = compiled
    return _llamay.Matcher(grammar, vocab)


def allocate_mask(vocab: PeerVocab | None = None):
    return _llamay.allocate_bitmask((vocab or _current).size)


def visits(compiled) -> int:
    """Positions the grammar's mask cache holds for this vocabulary: a fill that adds one saw it first."""
    grammar, vocab = compiled
    return len(cache_for(grammar, vocab).entries)


def fill_mask(m, mask) -> None:
    m.fill_next_token_bitmask(mask)


def advance(m, token: int) -> bool:
    return m.accept_token(token)


def accepts(compiled, data: bytes) -> bool:
    """Whether the grammar accepts ``data`` whole: the bytes themselves, no tokenization."""
    return feed.accepts(compiled[0], data)


def warnings(compiled) -> list[str]:
    """What the compile could not enforce ("<keyword> not enforced at <pointer>")."""
    return list(compiled[0].warnings)
