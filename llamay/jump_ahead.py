"""Forced tokens: where the grammar allows one continuation for several bytes, append its tokens unsampled.

A property name once its quote is open, ``":``, a tool's name once chosen: the matcher's
``forced_bytes`` gives the bytes every continuation starts with, and ``jump_ahead`` turns them
into the tokens the model's own tokenizer would write for them, accepts those in the matcher
and returns them. An engine appends them in one evaluation, instead of one decode step and one
sampling each, and reports their log probability as 0 (nothing else was possible).

Token boundaries are where care goes. A model is trained on its tokenizer's spelling of whole
texts, so the tokens appended must be the ones that spelling gives, not any tokens that spell the
bytes:

- the bytes are tokenized with the token before them (the one just sampled, or the prompt's last),
  and the jump is made only where that token stays whole. Were it to merge with the forced bytes
  (a sampled ``"`` before ``name``, where the tokenizer writes ``"name``), the model already left
  its tokenizer's spelling, and another sampled token comes first;
- the last tokens are left to be sampled where more text could merge into them: every token from
  the first whose bytes, to the end, begin a longer token of the vocabulary (``":`` before
  ``":"``). Text that ends at a token edge (a dialect marker) keeps every token, since a
  tokenizer splits text at a special token;
- bytes that are not whole UTF-8 characters at the end are left out (a tokenizer takes text);
- a special token the grammar names (``ir.token``) is appended as itself.

The check of the merge looks one token back, and BPE merges can reach further: a tokenizer may
spell the forced bytes with more context otherwise. The bytes are the grammar's either way; only
the model's view of them can differ from what it was trained on, where it rarely matters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._core.matcher import Matcher
from .ir import EDGE_BYTE, EDGE_ID_BYTES

#: The most bytes one jump looks ahead: a property name, a call's name and its opening.
MAX_FORCED_BYTES = 256

Encode = Callable[[str], Sequence[int]]


def jump_ahead(matcher: Matcher, encode: Encode, previous: int | None, *, limit: int | None = None) -> list[int]:
    """The forced tokens after ``previous`` (the last token written; None at the start), accepted in ``matcher``.

    ``encode`` is the model's tokenizer on text, without BOS and with control-token text kept
    as text (``Backend.encode(text, special=False)``). ``limit``: the most tokens to return
    (what the token budget leaves). An empty list where nothing is forced, or where the
    forced bytes cannot be appended as the tokenizer would write them.
    """
    vocab = matcher.vocab
    data = matcher.forced_bytes(MAX_FORCED_BYTES)
    tokens: list[int] = []
    start = 0
    while start < len(data) and (limit is None or len(tokens) < limit):
        if data[start] == EDGE_BYTE:
            token = int.from_bytes(data[start + 1:start + 1 + EDGE_ID_BYTES], "big")
            if not matcher.accept_token(token):
                break
            tokens.append(token)
            previous = None  # a tokenizer splits text at a special token
            start += 1 + EDGE_ID_BYTES
            continue
        end = data.find(EDGE_BYTE, start)
        final = end < 0
        end = len(data) if final else end
        spelled = _spell(data[start:end], previous, vocab, encode, open_end=final)
        for token in spelled[:None if limit is None else limit - len(tokens)]:
            if not matcher.accept_token(token):  # a token the grammar matches by its edge, not its text
                return tokens
            tokens.append(token)
        if not spelled or sum(len(vocab.token_bytes(t)) for t in spelled) < end - start:
            break
        previous = spelled[-1]
        start = end
    return tokens


def _spell(data: bytes, previous: int | None, vocab, encode: Encode, *, open_end: bool) -> list[int]:
    """The tokens the tokenizer writes for ``data`` after ``previous``; [] where ``previous`` would not stay whole."""
    before = vocab.token_bytes(previous) if previous is not None else b""
    text = _whole_characters(before + data)
    encoded = text.encode() if text is not None else b""
    if len(encoded) <= len(before):
        return []
    ids = list(encode(text))
    if before:
        if not ids or ids[0] != previous:
            return []
        ids = ids[1:]
    spelled = encoded[len(before):]
    if b"".join(vocab.token_bytes(t) for t in ids) != spelled:
        return []  # the tokenizer added or changed bytes (a leading space): not the grammar's bytes
    if open_end or len(spelled) < len(data):
        ids = _without_open_tail(ids, vocab)
    return ids


def _whole_characters(data: bytes) -> str | None:
    """``data`` up to its last whole UTF-8 character, decoded; None where it does not start with one."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start == 0:
            return None
        return data[:exc.start].decode("utf-8")


def _without_open_tail(ids: list[int], vocab) -> list[int]:
    """``ids`` less its tail from the first token whose bytes, to the end, begin a longer token."""
    trie = vocab.trie
    tail = b""
    cut = len(ids)
    for k in range(len(ids) - 1, -1, -1):
        tail = vocab.token_bytes(ids[k]) + tail
        if len(tail) > trie.max_depth:
            break
        if trie.extends(tail):
            cut = k
    return ids[:cut]
