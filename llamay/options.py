"""What a compile may spend and how it builds, in one value passed down from the entry points.

Schemas, grammars and word lists come from the network. ``Limits`` holds every bound on them:
each is checked where the work happens, and exceeding one raises ``SchemaError`` (``keyword`` set
to the bound's name in capitals, as ``MAX_DEPTH``) or ``GrammarError`` naming it, never a hang.
``Tuning`` holds the knobs that trade automaton size for compile time: they change no language.
``CompileOptions`` carries both, with what a caller chooses about the document itself. A compiled
grammar keeps its options, so the matchers that step it are bounded by the same limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import UsageError


@dataclass(frozen=True)
class Limits:
    """Bounds on untrusted input: raise one only for input you trust."""

    #: CPU seconds one request's constraints may take to compile, every schema and grammar of it
    #: together (``compile_budget``).
    compile_seconds: float = 2.0
    #: Automaton states after lowering; nested repetitions that would unroll past this are refused.
    max_states: int = 500_000
    #: Nesting depth of a schema or grammar expression (guards the recursive compilers).
    max_depth: int = 128
    #: Bytes of GBNF text or serialized JSON Schema accepted for compilation.
    max_source_bytes: int = 1 << 20
    #: Alternatives one schema position may expand to once combinators distribute
    #: (``{anyOf: [A, B], allOf: [{anyOf: [C, D]}]}`` is four).
    max_branches: int = 256
    #: Simultaneous automaton configurations (an ambiguous grammar multiplies them).
    max_configurations: int = 4096
    #: Bytes of words in one lexicon (a request's list, or a --lexicon file).
    max_lexicon_bytes: int = 16 << 20
    #: Bytes of cached token masks per (grammar, vocabulary) pair before new positions go uncached.
    mask_cache_bytes: int = 256 << 20


@dataclass(frozen=True)
class Tuning:
    """How lowering lays rules out: a trade of automaton size against compile time, never of language."""

    #: Largest repetition unrolled into states; larger ones use a counter on the stack frame.
    unroll_states: int = 64
    #: Expanded size (states) up to which a non-recursive rule is inlined at each use.
    inline_states: int = 1024
    #: The same for a rule inlined at more than one place: past it, one frame serves every use,
    #: so a ``$ref`` target (or a ``format``) used twice does not double the automaton.
    share_states: int = 64


class NumberDigits(NamedTuple):
    """Caps on a number's digits: before the point, after it, in the exponent (``None``: no cap).

    A model that likes digits writes ``1000000000000…`` until its tokens run out, and JSON sets
    no length: so the caps end a number the way the whitespace budget ends a document.
    """

    integer: int | None = 16
    fraction: int | None = 16
    exponent: int | None = 3


#: The default caps: I-JSON's interoperable range (RFC 7493: IEEE doubles, whose exact integers
#: reach 2**53, 16 digits, and whose exponents have 3 digits); llama.cpp caps integers alike.
NUMBER_DIGITS = NumberDigits()
UNCAPPED = NumberDigits(None, None, None)


def number_digits(value) -> NumberDigits:
    """The caps an API caller passes (three ints or ``None`` each, or ``None`` for no caps), checked."""
    if value is None:
        return UNCAPPED
    try:
        caps = NumberDigits(*value)
    except TypeError:
        raise UsageError(f"number_digits {value!r} is not (integer, fraction, exponent) digits") from None
    if any(cap is not None and (type(cap) is not int or cap < 1) for cap in caps):
        raise UsageError(f"number_digits {value!r}: each cap is a positive int or None")
    return caps


@dataclass(frozen=True)
class CompileOptions:
    """Everything a compile reads besides its source.

    ``closed_objects``: an object that declares ``properties`` and says nothing about
    ``additionalProperties`` admits no other key; ``False`` restores the specification's open
    default. ``whitespace_budget`` bounds structural whitespace per document (``None``: unbounded).
    ``number_digits`` caps a number's digits (``NumberDigits``; ``None``: uncapped).
    """

    closed_objects: bool = True
    whitespace_budget: int | None = 64
    number_digits: NumberDigits = NUMBER_DIGITS
    limits: Limits = field(default_factory=Limits)
    tuning: Tuning = field(default_factory=Tuning)

    def __post_init__(self) -> None:
        object.__setattr__(self, "number_digits", number_digits(self.number_digits))


#: What every entry point compiles with unless told otherwise.
DEFAULT = CompileOptions()
