"""llama.cpp's own grammar sampler (through llama-cpp-python) on the GGUF vocabularies.

``compile`` converts the schema with llama-cpp-python's ``json_schema_to_gbnf`` (what
``LlamaGrammar.from_json_schema`` does) and parses it with ``llama_sampler_init_grammar``;
``matcher`` clones that sampler. ``fill_mask`` applies the sampler to a ``llama_token_data_array``
holding every token of the vocabulary (the full-vocabulary path; llama.cpp's common sampler can
skip it when the sampled token passes the grammar), and ``advance`` is ``llama_sampler_accept``.
Only ``llama_sampler_apply`` is timed (``timed_fill``): resetting the logits and packing the
result into the shared bitmask layout are harness work.

Alignment: the converter's ``space ::= " "?`` is replaced by ``[ \\t\\n\\r]*`` and the root may
start with whitespace, as llamay's does. The converter only opens an object whose
``additionalProperties`` says so (and its open-object rule is broken: a declared optional key must
then be followed by an extra one), so the reference is llamay with closed objects.
"""

from __future__ import annotations

import ctypes
import json
import re
import time

import llama_cpp
import numpy as np
from llama_cpp.llama_grammar import json_schema_to_gbnf

from . import PeerVocab
from ._vocab import llamacpp_model, reference

NAME = "llamacpp"
SPACE = r"space ::= [ \t\n\r]*"
ROOT = "bench-root"

_current: PeerVocab | None = None
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


def build_vocab(kind: str) -> PeerVocab:
    global _current
    llm = llamacpp_model(kind)
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    n = llama_cpp.llama_vocab_n_tokens(vocab)
    eog = [i for i in range(n) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    _current = PeerVocab(kind, n, eog, vocab, {"llm": llm, "reference": reference(kind)})
    return _current


class _Sampler:
    def __init__(self, ptr):
        self.ptr = ptr

    def __del__(self):
        if self.ptr:
            llama_cpp.llama_sampler_free(self.ptr)
            self.ptr = None


class _Compiled:
    def __init__(self, gbnf: str, sampler: _Sampler, vocab: PeerVocab):
        self.gbnf, self.sampler, self.vocab = gbnf, sampler, vocab


class _Matcher:
    def __init__(self, compiled: _Compiled):
        n = compiled.vocab.size
        self.sampler = _Sampler(llama_cpp.llama_sampler_clone(compiled.sampler.ptr))
        self.data = np.zeros(n, dtype=_TOKEN_DATA)
        self.data["id"] = np.arange(n, dtype=np.int32)
        self.cur = llama_cpp.llama_token_data_array(
            data=self.data.ctypes.data_as(llama_cpp.llama_token_data_p), size=n, selected=-1, sorted=False
        )
        self.allowed: np.ndarray | None = None


def gbnf_for(schema) -> str:
    gbnf = json_schema_to_gbnf(json.dumps(schema))
    gbnf = re.sub(r"^space ::= .*$", lambda _: SPACE, gbnf, flags=re.M)
    return f"{gbnf}\n{ROOT} ::= space root\n"


def compile(schema, vocab: PeerVocab | None = None):
    vocab = vocab or _current
    gbnf = gbnf_for(schema)
    ptr = llama_cpp.llama_sampler_init_grammar(vocab.handle, gbnf.encode("utf-8"), ROOT.encode())
    if not ptr:
        raise ValueError("llama.cpp refused the grammar (see its log)")
    return _Compiled(gbnf, _Sampler(ptr), vocab)


def matcher(compiled: _Compiled) -> _Matcher:
    return _Matcher(compiled)


def allocate_mask(vocab: PeerVocab | None = None):
    return np.zeros(((vocab or _current).size + 31) // 32, dtype=np.int32)


def timed_fill(m: _Matcher, mask) -> float:
    """Apply the grammar to every token's logit; returns the seconds ``llama_sampler_apply`` took."""
    m.data["logit"] = 0.0
    m.cur.size = len(m.data)
    m.cur.selected = -1
    m.cur.sorted = False
    t0 = time.perf_counter()
    llama_cpp.llama_sampler_apply(m.sampler.ptr, ctypes.byref(m.cur))
    elapsed = time.perf_counter() - t0
    allowed = m.data["logit"] != -np.inf
    m.allowed = allowed
    bits = np.zeros(mask.size * 32, dtype=bool)
    bits[: len(allowed)] = allowed
    mask.reshape(-1)[:] = np.packbits(bits, bitorder="little").view(np.int32)
    return elapsed


def fill_mask(m: _Matcher, mask) -> None:
    timed_fill(m, mask)


def advance(m: _Matcher, token: int) -> bool:
    # Accepting a token the grammar rejects throws inside llama.cpp: check the last mask first.
    if m.allowed is None or not m.allowed[token]:
        return False
    llama_cpp.llama_sampler_accept(m.sampler.ptr, token)
    return True
