"""Feeding grammars and matchers from tests: whole documents, model-like tokens, a scripted decode.

``accepts`` runs a document's bytes through a grammar with no tokenization; ``greedy_tokens``
is a stand-in for a model's own tokenization of a document; ``generate`` is the decoding loop
(fill the mask, pick, accept) driven by the fixture backend's ``ScriptedScorer``; ``compact``
is the serialization instances are fed as.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from llamay._core.bitmask import allocate_bitmask
from llamay._core.matcher import Matcher
from llamay.backends.fixture import ScriptedScorer
from llamay.errors import InternalError


def accepts(grammar, data: bytes | str) -> bool:
    """Whether ``grammar`` accepts ``data`` as a whole document: its bytes, no tokenization."""
    m = Matcher(grammar)
    return m.accept_bytes(data.encode() if isinstance(data, str) else data) and m.is_accepting()


def compact(data) -> bytes:
    """The compact UTF-8 serialization tests feed the automaton (lone surrogates kept as-is)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def greedy_tokens(matcher, vocab, document: bytes) -> list[int]:
    """The longest token that continues ``document`` and that ``matcher`` accepts, at every position:
    a stand-in for a model's own tokenization. The matcher is left where it was."""
    by_bytes: dict[bytes, int] = {}
    for i in range(vocab.size):
        b = vocab.token_bytes(i)
        if b and b not in by_bytes:
            by_bytes[b] = i
    longest = max(map(len, by_bytes))
    out, pos = [], 0
    while pos < len(document):
        for n in range(min(longest, len(document) - pos), 0, -1):
            tok = by_bytes.get(document[pos : pos + n])
            if tok is not None and matcher.accept_token(tok):
                out.append(tok)
                pos += n
                break
        else:
            raise AssertionError(f"no token continues the document at byte {pos}")
    matcher.rollback(len(out))
    return out


@dataclass
class Generation:
    """What ``generate`` produced: the token ids, their bytes, and whether EOS closed it."""

    tokens: list[int] = field(default_factory=list)
    text: bytes = b""
    finished: bool = False


def generate(matcher, scorer: ScriptedScorer, max_tokens: int) -> Generation:
    """Fill the mask, let ``scorer`` pick, accept the token; stop at EOS or after ``max_tokens``."""
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
