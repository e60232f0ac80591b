"""Every bound on untrusted input, in one place.

Schemas, grammars and request bodies come from the network. Each bound below is
checked where the work happens; exceeding one raises ``SchemaError`` (``keyword``
set to the bound's name) or ``GrammarError`` naming it, never a hang.
"""

from __future__ import annotations

#: CPU seconds one request's constraints may take to compile, every schema and grammar of it together
#: (``compile_budget``).
COMPILE_SECONDS = 2.0

#: Automaton states after lowering; nested repetitions that would unroll past this are refused.
MAX_STATES = 500_000

#: Largest ``{m,n}`` repetition bound a grammar may state: llama.cpp's grammars stay far below it.
MAX_REPEAT = 4096

#: Nesting depth of a schema or grammar expression (guards the recursive compilers).
MAX_DEPTH = 128

#: Bytes of GBNF text or serialized JSON Schema accepted for compilation.
MAX_SOURCE_BYTES = 1 << 20

#: Alternatives one schema position may expand to once combinators distribute
#: (``{anyOf: [A, B], allOf: [{anyOf: [C, D]}]}`` is four).
MAX_BRANCHES = 256

#: Simultaneous automaton configurations (an ambiguous grammar multiplies them).
MAX_CONFIGURATIONS = 4096

#: Bytes of cached token masks per (grammar, vocabulary) pair before new positions go uncached.
MASK_CACHE_BYTES = 256 << 20

#: Largest repetition unrolled into states; larger ones use a counter on the stack frame.
UNROLL_STATES = 64

#: Expanded size (states) up to which a non-recursive rule is inlined at each use.
INLINE_STATES = 4096

#: The same for a rule inlined at more than one place: past it, one frame serves every use,
#: so a ``$ref`` target (or a ``format``) used twice does not double the automaton.
SHARE_STATES = 256

#: Bytes of words in one lexicon (a request's list, or a --lexicon file).
MAX_LEXICON_BYTES = 16 << 20

#: Nesting depth of a request body's arrays and objects, checked before it is parsed (the JSON
#: parser recurses once per level). Room for a schema at ``MAX_DEPTH`` (two levels per schema
#: level, as in ``properties`` or ``anyOf``) inside the request's own envelope.
MAX_BODY_DEPTH = 2 * MAX_DEPTH + 64
