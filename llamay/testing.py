"""Deterministic stand-ins for a model, and instance helpers, for tests.

A real model shows some behaviours only rarely: a greedy sampler whose best legal token
is a space, for one. ``ScriptedScorer`` shows them every time, over a real vocabulary,
so that tests can prove what the constraint guarantees (the whitespace budget closes the
document) without a model. ``generate`` is the decoding loop every backend runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from .errors import InternalError
from .vocab import Vocabulary


class ScriptedScorer:
    """Picks, from a token mask, the allowed token made only of ``prefer`` bytes, longest first.

    Ties and the case where no such token is allowed go to the lowest allowed id, so every
    choice is deterministic. ``prefer=b" "`` is the space-loving model of design section 4.
    """

    def __init__(self, vocab: Vocabulary, prefer: bytes = b" ") -> None:
        self.size = vocab.size
        liked = [i for i in range(vocab.size) if _made_of(vocab.token_bytes(i), prefer)]
        # Favourites first: the longest run of preferred bytes, then the lowest id.
        self.favourites = np.array(sorted(liked, key=lambda i: (-len(vocab.token_bytes(i)), i)), np.int64)

    def pick(self, mask: np.ndarray) -> int | None:
        """The chosen token id, or ``None`` when the mask allows nothing."""
        allowed = np.unpackbits(mask.view(np.uint8), bitorder="little")[: self.size].astype(bool)
        if self.favourites.size:
            liked = self.favourites[allowed[self.favourites]]
            if liked.size:
                return int(liked[0])
        ids = np.flatnonzero(allowed)
        return int(ids[0]) if ids.size else None


def _made_of(piece: bytes, alphabet: bytes) -> bool:
    return bool(piece) and bool(alphabet) and all(b in alphabet for b in piece)


@dataclass
class Generation:
    """What ``generate`` produced: the token ids, their bytes, and whether EOS closed it."""

    tokens: list[int] = field(default_factory=list)
    text: bytes = b""
    finished: bool = False


def generate(matcher, scorer: ScriptedScorer, max_tokens: int) -> Generation:
    """Fill the mask, let ``scorer`` pick, accept the token; stop at EOS or after ``max_tokens``."""
    from ._core.bitmask import allocate_bitmask

    vocab = matcher.vocab
    mask = allocate_bitmask(vocab.size)
    out = Generation()
    chunks = []
    for _ in range(max_tokens):
        matcher.fill_next_token_bitmask(mask)
        token = scorer.pick(mask)
        if token is None or not matcher.accept_token(token):
            raise InternalError(f"dead end: the mask offered {token!r} and the matcher took nothing")
        out.tokens.append(token)
        if token in vocab.eos_ids:
            out.finished = True
            break
        chunks.append(vocab.token_bytes(token))
    out.text = b"".join(chunks)
    return out


def declared_order(data, schema):
    """``data`` with object keys in the order a schema-constrained generation writes them.

    Declared ``properties`` first in declared order, then ``required`` names that ``properties``
    does not declare, then the other keys as they came; recursively, following
    ``properties``, ``additionalProperties``, ``items`` and ``additionalItems``.
    """
    if not isinstance(schema, dict):
        return data
    if isinstance(data, dict):
        declared = list(schema.get("properties", {}))
        declared += [k for k in schema.get("required", ()) if k not in declared]
        keys = [k for k in declared if k in data] + [k for k in data if k not in declared]
        return {k: declared_order(data[k], _property_schema(schema, k)) for k in keys}
    if isinstance(data, list):
        return [declared_order(v, _item_schema(schema, i)) for i, v in enumerate(data)]
    return data


def _property_schema(schema: dict, key: str):
    properties = schema.get("properties", {})
    return properties[key] if key in properties else schema.get("additionalProperties", True)


def _item_schema(schema: dict, i: int):
    items = schema.get("items", True)
    if not isinstance(items, list):
        return items
    return items[i] if i < len(items) else schema.get("additionalItems", True)


def compact(data) -> bytes:
    """The compact UTF-8 serialization tests feed the automaton (lone surrogates kept as-is)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")
