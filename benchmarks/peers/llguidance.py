"""llguidance: ``LLMatcher.grammar_from_json_schema`` + ``LLMatcher``.

The grammar is built when the ``LLMatcher`` is created, so ``compile`` creates one (and raises on
its error state) and ``matcher`` deep-copies it. Aligned settings: ``whitespace_flexible`` (any
JSON whitespace, unbounded), general ``\\u`` escapes; objects are open by default; the default
token slices. ``coerce_one_of`` and ``lenient`` keep their defaults (off): a ``oneOf`` not provably
exclusive, an unknown ``format`` or an unimplemented keyword is refused rather than loosened.
"""

from __future__ import annotations

import llguidance as llg
import numpy as np

from . import PeerVocab
from ._vocab import hf_tokenizer_dir, reference

NAME = "llguidance"

#: Unbounded JSON whitespace; every printable ``\uXXXX`` escape (off by default: only escapes
#: of control characters are allowed then). ``\/`` and a raw DEL stay refused: no option allows them.
OPTIONS = {"whitespace_flexible": True, "json_allow_general_unicode_escapes": True}

_current: PeerVocab | None = None


def build_vocab(kind: str) -> PeerVocab:
    global _current
    ref = reference(kind)
    tok = llg.LLTokenizer(str(hf_tokenizer_dir(kind) / "tokenizer.json"), n_vocab=ref["size"], eos_token=ref["eos_ids"])
    _current = PeerVocab(kind, tok.vocab_size, ref["eos_ids"], tok)
    return _current


def compile(schema, vocab: PeerVocab | None = None):
    vocab = vocab or _current
    grammar = llg.LLMatcher.grammar_from_json_schema(schema, defaults=OPTIONS)
    m = llg.LLMatcher(vocab.handle, grammar, log_level=0)
    if m.is_error():
        raise ValueError(m.get_error())
    return m


def matcher(compiled):
    return compiled.deep_copy()


def allocate_mask(vocab: PeerVocab | None = None):
    return np.zeros(((vocab or _current).size + 31) // 32, dtype=np.int32)


def fill_mask(m, mask) -> None:
    m.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)


def advance(m, token: int) -> bool:
    return m.consume_token(token) and not m.is_error()


def accepts(compiled, data: bytes, vocab: PeerVocab | None = None) -> bool:
    """Whether the grammar accepts ``data`` whole.

    llguidance takes tokens only: its tokenizer splits the bytes (``tokenize_bytes``: the HF
    tokenizer, then greedy for a tail that is not UTF-8), and it accepts any split of the bytes.
    """
    m = compiled.deep_copy()
    return m.consume_tokens((vocab or _current).handle.tokenize_bytes(data)) and m.is_accepting()


def warnings(compiled) -> list[str]:
    return list(compiled.get_grammar_warnings())
