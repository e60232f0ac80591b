"""One interface, many peers (style habit 15): each module here wraps one constrained-decoding engine.

Every engine module exposes the same functions::

    vocab = build_vocab(kind)        # "llama3", "smollm2" or "gemma"; also becomes the module's current vocabulary
    compiled = compile(schema)       # a JSON Schema (parsed); raises on a schema the engine refuses
    m = matcher(compiled)            # a fresh matcher at the start of the document
    mask = allocate_mask()           # int32 words, ceil(V/32), bit i = token i allowed
    fill_mask(m, mask)               # the mask for the next token
    advance(m, token) -> bool        # False: the engine rejects the token (the matcher is then not used again)

``ENGINES`` below says, without importing them, which vocabularies each runs on, what it needs
installed, and its reference: the llamay engine whose masks it must equal given what the engine
can be set to (``"llamay"`` for open objects, ``"llamay-closed"`` where it only has closed ones).
A module may also define ``timed_fill(m, mask) -> seconds``, which times only the engine's own
work where its ``fill_mask`` must also convert to the bitmask layout (llama.cpp).

Settings are aligned, so that every engine compiles the same language: open objects where the engine has them, unbounded
whitespace, declared key order, one thread.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Spec:
    """How to run an engine, known without importing it (its library may be absent)."""

    module: str  # benchmarks.peers.<module>
    vocabs: tuple[str, ...]  # the vocabularies it runs on
    requires: tuple[str, ...]  # what must be importable
    reference: str  # the llamay engine whose masks it must equal
    options: dict = field(default_factory=dict)  # passed to its compile()


_ALL = ("llama3", "smollm2", "gemma")
_HF = ("llama3", "smollm2")
ENGINES: dict[str, Spec] = {
    "llamay": Spec("llamay", _ALL, ("llamay",), "llamay"),
    # llamay with closed objects: the reference of engines that have no open objects.
    "llamay-closed": Spec("llamay", _ALL, ("llamay",), "llamay-closed", {"closed_objects": True}),
    "xgrammar": Spec("xgrammar", _HF, ("xgrammar", "transformers", "torch"), "llamay"),
    "llguidance": Spec("llguidance", _HF, ("llguidance",), "llamay"),
    "outlines_core": Spec("outlines_core", _HF, ("outlines_core",), "llamay-closed"),
    "llamacpp": Spec("llamacpp", ("smollm2", "gemma"), ("llama_cpp",), "llamay-closed"),
}

#: What the runner and the benchmarks measure by default (``llamay-closed`` is only a reference).
PEERS = ("llamay", "xgrammar", "llguidance", "outlines_core", "llamacpp")

SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "RAYON_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TVM_NUM_THREADS": "1",
}


@dataclass
class PeerVocab:
    """An engine's vocabulary: ``size`` is its mask width in tokens, ``handle`` its own object."""

    kind: str
    size: int
    eos_ids: list[int]
    handle: object
    extra: dict = field(default_factory=dict)


def module(engine: str):
    return importlib.import_module(f"{__name__}.{ENGINES[engine].module}")


def unavailable(engine: str) -> str | None:
    """Why ``engine`` cannot run here, or None (checked without importing it)."""
    for dep in ENGINES[engine].requires:
        if importlib.util.find_spec(dep) is None:
            return f"{engine}: {dep} is not installed"
    return None


class Engine:
    """An engine module bound to one vocabulary and to its compile options."""

    def __init__(self, engine: str, kind: str):
        spec = ENGINES[engine]
        if kind not in spec.vocabs:
            raise ValueError(f"{engine} does not run on the {kind} vocabulary")
        self.name = engine
        self.reference = spec.reference
        self.options = spec.options
        self.mod = module(engine)
        self.vocab = self.mod.build_vocab(kind)

    def compile(self, schema):
        return self.mod.compile(schema, self.vocab, **self.options)

    def matcher(self, compiled):
        return self.mod.matcher(compiled)

    def allocate_mask(self):
        return self.mod.allocate_mask(self.vocab)

    def fill_mask(self, m, mask) -> None:
        self.mod.fill_mask(m, mask)

    def advance(self, m, token: int) -> bool:
        return self.mod.advance(m, token)
