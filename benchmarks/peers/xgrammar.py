"""xgrammar: ``GrammarCompiler.compile_json_schema`` + ``GrammarMatcher``.

Aligned settings: ``strict_mode=False`` (JSON Schema's open defaults for ``additionalProperties``
and ``items``), ``any_whitespace=True`` with no ``max_whitespace_cnt`` (unbounded), one compiler
thread, and the compiler cache off so that every compile is a real one.
"""

from __future__ import annotations

import json

import numpy as np
import xgrammar as xgr

from . import PeerVocab
from ._vocab import hf_tokenizer_dir, reference

NAME = "xgrammar"

_current: PeerVocab | None = None


def build_vocab(kind: str) -> PeerVocab:
    global _current
    from transformers import AutoTokenizer

    ref = reference(kind)
    tok = AutoTokenizer.from_pretrained(str(hf_tokenizer_dir(kind)))
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=ref["size"], stop_token_ids=ref["eos_ids"])
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    _current = PeerVocab(kind, info.vocab_size, ref["eos_ids"], compiler, {"info": info})
    return _current


def compile(schema, vocab: PeerVocab | None = None):
    vocab = vocab or _current
    return vocab.handle.compile_json_schema(
        json.dumps(schema), any_whitespace=True, max_whitespace_cnt=None, strict_mode=False
    )


def matcher(compiled):
    return xgr.GrammarMatcher(compiled)


def allocate_mask(vocab: PeerVocab | None = None):
    return np.zeros((1, ((vocab or _current).size + 31) // 32), dtype=np.int32)


def fill_mask(m, mask) -> None:
    m.fill_next_token_bitmask(mask)


def advance(m, token: int) -> bool:
    return m.accept_token(token)


def accepts(compiled, data: bytes) -> bool:
    """Whether the grammar accepts ``data`` whole: the bytes themselves (``accept_string``), no tokenization."""
    m = xgr.GrammarMatcher(compiled)
    return m.accept_string(data) and m.is_completed()
