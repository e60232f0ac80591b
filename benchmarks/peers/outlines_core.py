"""outlines-core: ``build_regex_from_schema`` + ``Index`` (the whole token automaton, built at compile) + ``Guide``.

outlines-core has no open objects (with ``properties`` present, ``additionalProperties: true`` is
ignored), so its reference is llamay with closed objects. Whitespace is ``[ \\t\\n\\r]*`` everywhere
the regex allows it, plus before and after the document as llamay allows. The vocabulary is the HF
tokenizer's byte-level pieces decoded to bytes (special tokens left out), EOS the first of llamay's.
"""

from __future__ import annotations

import json

import numpy as np
import outlines_core as oc
from outlines_core.json_schema import build_regex_from_schema

from . import PeerVocab
from ._vocab import hf_byte_tokens, reference

NAME = "outlines_core"
WHITESPACE = r"[ \t\n\r]*"

_current: PeerVocab | None = None


def build_vocab(kind: str) -> PeerVocab:
    global _current
    ref = reference(kind)
    eos = ref["walk_eos"]
    by_bytes: dict[bytes, list[int]] = {}
    for i, b in hf_byte_tokens(kind).items():
        if b and i != eos:
            by_bytes.setdefault(b, []).append(i)
    vocab = oc.Vocabulary(eos, by_bytes)
    _current = PeerVocab(kind, ref["size"], [eos], vocab)
    return _current


def compile(schema, vocab: PeerVocab | None = None):
    vocab = vocab or _current
    regex = build_regex_from_schema(json.dumps(schema), WHITESPACE)
    return oc.Index(f"{WHITESPACE}({regex}){WHITESPACE}", vocab.handle)


def matcher(compiled):
    return oc.Guide(compiled)


def allocate_mask(vocab: PeerVocab | None = None):
    return np.zeros(((vocab or _current).size + 31) // 32, dtype=np.int32)


def fill_mask(m, mask) -> None:
    m.write_mask_into(mask.ctypes.data, mask.size, 4)


def advance(m, token: int) -> bool:
    try:
        m.advance(token, return_tokens=False)
    except ValueError:
        return False
    return True
