"""JSON Schema to grammar IR to automaton (the keywords the README lists as enforced, warned or refused).

Compilation runs in two passes over the schema:

1. ``keywords.Checker`` visits every reachable subschema once: it refuses keywords llamay
   cannot enforce, reports malformed keyword values, warns where a keyword is only accepted,
   and enforces the bounds of ``Limits``. A schema that passes is well formed.
2. ``_Compiler`` turns the checked schema into ``ir.Grammar`` rules. Each subschema is first
   rewritten by ``combinators`` into alternatives without combinators (``allOf`` merged,
   ``anyOf``/``oneOf`` distributed, ``$ref`` kept as one named rule per target, so recursion is
   a pushdown rule, never an unrolling); each flat alternative compiles one method per keyword
   family. A subschema that no value can satisfy raises ``Unsatisfiable``; the parent drops
   that branch where it can (an optional property, a type alternative, further array items)
   and otherwise passes it up, so only a schema that matches nothing is refused.

Where the automaton cannot be exact the compiler says so with a warning (``"<keyword> not
enforced at <pointer>"``): ``oneOf`` whose branches are not provably disjoint (compiled as
``anyOf``), ``pattern`` beside a length bound it cannot combine with, a second ``pattern`` or
``format`` met in a merge, an unknown or approximate ``format``, a ``multipleOf`` too large
for a digit automaton, count bounds on objects too large to count.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from math import ceil, floor
from typing import TYPE_CHECKING

from ...compile_budget import budget
from ...compile_budget import deadline as compile_deadline
from ...errors import GrammarError, InternalError, SchemaError
from ...ir import EMPTY, Expr, Grammar, Ref, alt, alt_distinct, literal, optional, seq, star
from ...options import DEFAULT, NUMBER_DIGITS, UNCAPPED, CompileOptions, Limits, Tuning
from .. import json_lexical as jg
from ..gc_pause import gc_paused
from . import numeric
from .combinators import UNMERGED, Algebra, RefTo, closed, json_equal, json_type
from .formats import APPROXIMATE, FORMATS
from .keywords import (
    ANNOTATIONS,
    ENFORCED,
    REFUSED,
    TYPES,
    WARNED,
    Checker,
    allowed_types,
    check_deadline,
    child,
    legacy_ref,
    not_enforced,
)
from .refs import Resolver, declares_ids, one_base
from .regex import RegexError, pattern_string, python_regex
from .structure import StructureKeys

if TYPE_CHECKING:
    from ..._core.automaton import CompiledGrammar

__all__ = [
    "ANNOTATIONS", "ENFORCED", "REFUSED", "WARNED", "Unsatisfiable", "any_json", "compile_json_schema", "schema_expr",
]  # fmt: skip

_OBJECT_KEYWORDS = ("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                    "minProperties", "maxProperties")  # fmt: skip
_ARRAY_KEYWORDS = ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_TYPED_KEYWORDS = _OBJECT_KEYWORDS + _ARRAY_KEYWORDS + _STRING_KEYWORDS + _NUMBER_KEYWORDS

_UNSEEN = object()

#: The keywords that make a flat schema worth sharing by its text (see ``_Compiler.flat``).
_SHARED_KEYWORDS = frozenset(("properties", "patternProperties", "additionalProperties", "items", "prefixItems",
                              "enum"))  # fmt: skip

#: Declared properties times counted members above which min/maxProperties are warned, not counted.
_MAX_COUNTED_MEMBERS = 2048

# Fixed pieces, built once: a schema compiles thousands of members and values from them.
_BYTES = tuple(literal(bytes([b])) for b in range(256))
_NULL = literal("null")
_BOOLEAN = alt(literal("true"), literal("false"))
_COLON = seq(jg.WS, literal(":"), jg.WS)  # between a key and its value
_SEP = seq(literal(","), jg.WS)  # between two items or members
_OPEN_ARRAY, _CLOSE_ARRAY = seq(literal("["), jg.WS), literal("]")
_OPEN_OBJECT, _CLOSE_OBJECT = seq(literal("{"), jg.WS), literal("}")


#: The method that checks a value of each JSON type against a flat schema's keywords for that type.
_ADMITS = {"string": "admits_string", "array": "admits_array", "object": "admits_object",
           "integer": "admits_number", "number": "admits_number"}  # fmt: skip


class Unsatisfiable(SchemaError):
    """No JSON value satisfies the (sub)schema; raised at the root, caught where a branch can go."""


@gc_paused()
def compile_json_schema(
    schema,
    closed_objects: bool = True,
    whitespace_budget: int | None = 64,
    number_digits: tuple[int | None, int | None, int | None] | None = NUMBER_DIGITS,
    *,
    limits: Limits = DEFAULT.limits,
    tuning: Tuning = DEFAULT.tuning,
) -> CompiledGrammar:
    """Compile ``schema`` (a parsed JSON value) to an automaton; ``.warnings`` lists what it ignores.

    ``closed_objects``: an object that declares ``properties`` and says nothing about
    ``additionalProperties`` admits no other key (else three named properties would constrain
    almost nothing); ``False`` restores the specification's open default. ``whitespace_budget``
    bounds structural whitespace per document (``None``: unbounded). ``number_digits`` caps the
    digits of a number before the point, after it and in its exponent (``options.NumberDigits``;
    ``None``: uncapped); a bound (``minimum``...) spelled with more digits raises its number's caps.
    The document starts at its first byte and ends at its last: a model cannot spend tokens on
    whitespace around it, and once it is complete only EOS is allowed. ``limits`` bound the
    compile (``SchemaError`` names the one exceeded); ``tuning`` shapes the automaton, not its language.
    """
    options = CompileOptions(closed_objects, whitespace_budget, number_digits, limits, tuning)
    with budget(limits.compile_seconds):
        warnings: list[str] = []
        grammar = Grammar()
        grammar.define("root", schema_expr(grammar, schema, "", warnings, options))
        return _lower(grammar, options, warnings)


def schema_expr(
    grammar: Grammar,
    schema,
    pointer: str,
    warnings: list[str],
    options: CompileOptions = DEFAULT,
) -> Expr:
    """``schema`` as an expression among ``grammar``'s rules, for constraints that embed schemas (tool calls).

    Checks, refuses and warns exactly as ``compile_json_schema`` does, with JSON Pointers under
    ``pointer``; warnings are appended to ``warnings`` (each once). It spends the enclosing
    ``compile_budget.budget()``, the one compile budget of the request.
    """
    limits = options.limits
    deadline = compile_deadline(limits.compile_seconds)
    source = _source(schema, limits)
    legacy = legacy_ref(schema)
    ids = declares_ids(source)
    resolver = Resolver(schema, legacy, ids=ids)
    found: list[str] = []
    notes: list[tuple[str, str]] = []  # (keyword, pointer) the compiler does not enforce
    try:
        Checker(found, deadline, limits, resolver, legacy).schema(schema, pointer, "schema", 0)
        algebra = Algebra(resolver, legacy, options.closed_objects, limits.max_branches, _search,
                          lambda k, p: notes.append((k, p)))
        one = not ids or one_base(source, schema)  # no id anywhere: one base, and no second scan
        compiler = _Compiler(grammar, options, deadline, algebra, notes, shared_by_text=one)
        expr = compiler.value(schema, pointer)
    except RecursionError:
        raise SchemaError("schema nests too deeply to compile", keyword="MAX_DEPTH", pointer=pointer) from None
    found.extend(not_enforced(keyword, at) for keyword, at in notes)
    warnings.extend(w for w in dict.fromkeys(found) if w not in warnings)
    return expr


@gc_paused()
def any_json(
    object_only: bool = False,
    whitespace_budget: int | None = 64,
    number_digits: tuple[int | None, int | None, int | None] | None = NUMBER_DIGITS,
    *,
    limits: Limits = DEFAULT.limits,
    tuning: Tuning = DEFAULT.tuning,
) -> CompiledGrammar:
    """Any valid JSON document (an object only, for ``json_object``), whitespace budgeted, numbers capped.

    Like a schema's document, it starts at its first byte and ends at its last.
    """
    options = CompileOptions(
        whitespace_budget=whitespace_budget, number_digits=number_digits, limits=limits, tuning=tuning
    )
    grammar = Grammar()
    value = jg.define_any_value(grammar, options.number_digits)
    grammar.define("root", Ref("json_object") if object_only else value)
    return grammar.compile("root", options=options)


def _search(pattern: str, text: str) -> bool:
    """ECMA-262 ``RegExp.test``, as the automaton reads ``pattern``; an unsupported pattern never matches."""
    try:
        return python_regex(pattern).search(text) is not None
    except RegexError:
        return False


def _source(schema, limits: Limits) -> str:
    """The serialized schema, bounded ("MAX_SOURCE_BYTES") before any work is done on it."""
    try:
        source = jg.dumps(schema)
        size = len(source) if source.isascii() else len(source.encode("utf-8", "surrogatepass"))
    except RecursionError:
        raise SchemaError("schema nests too deeply", keyword="MAX_DEPTH") from None
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"schema is not a JSON value ({exc})", keyword="schema") from None
    if size > limits.max_source_bytes:
        message = f"schema is {size} bytes, over the bound of {limits.max_source_bytes}"
        raise SchemaError(message, keyword="MAX_SOURCE_BYTES")
    return source


def _lower(grammar: Grammar, options: CompileOptions, warnings: list[str]) -> CompiledGrammar:
    """Lower the rules; a bound the lowering hits is reported as a schema error naming it."""
    try:
        compiled = grammar.compile("root", options=options, warnings=warnings)
    except GrammarError as exc:
        limit = re.search(r"\(limit (\w+)\)", exc.reason)
        if limit is None:  # any other refusal means this compiler built a bad grammar
            raise InternalError(f"the grammar of a schema was refused: {exc}") from exc
        raise SchemaError(f"schema is over a bound once lowered: {exc.reason}", keyword=limit[1]) from exc
    except RecursionError:
        raise SchemaError("schema nests too deeply to compile", keyword="MAX_DEPTH") from None
    check_deadline(compile_deadline(options.limits.compile_seconds), options.limits, "", now=True)
    return compiled


def _bound(value) -> Decimal:
    return Decimal(str(value)) if isinstance(value, float) else Decimal(value)


def _numeric_bounds(node: dict):
    """(lower, lower exclusive, upper, upper exclusive) as Decimals: the tighter of each pair (a flat schema)."""
    lo = hi = None
    lo_ex = hi_ex = False
    for keyword, exclusive in (("minimum", False), ("exclusiveMinimum", True)):
        if keyword in node:
            value = _bound(node[keyword])
            if lo is None or value > lo or (value == lo and exclusive):
                lo, lo_ex = value, exclusive
    for keyword, exclusive in (("maximum", False), ("exclusiveMaximum", True)):
        if keyword in node:
            value = _bound(node[keyword])
            if hi is None or value < hi or (value == hi and exclusive):
                hi, hi_ex = value, exclusive
    return lo, lo_ex, hi, hi_ex


class _Compiler:
    """Pass 2: a checked schema to IR expressions; named rules only where sharing or recursion needs them."""

    def __init__(
        self,
        grammar: Grammar,
        options: CompileOptions,
        deadline: float,
        algebra: Algebra,
        notes,
        *,
        shared_by_text: bool,
    ) -> None:
        self.grammar = grammar
        self.closed_objects = options.closed_objects
        self.caps = options.number_digits
        self.limits = options.limits
        self.deadline = deadline
        self.algebra = algebra
        self.notes = notes
        self.flats: dict[int, list] | None = {} if shared_by_text else None  # flat schema's key -> flat_entry
        self.structure = StructureKeys()  # flat schemas' keys: equal texts, equal keys
        self.shapes: dict[tuple, tuple | None] = {}  # the first flat schema of a shape, until a second comes
        self.deepest = 0  # the deepest self.depth reached (but inside $ref targets: each is built once)
        self.rules = 0
        self.refs: dict[int, str | None] = {}  # target -> rule name (None: unsatisfiable)
        self.unguarded: set[int] = set()  # targets entered since the last byte read
        self.depth = 0
        self.strings: dict[tuple, Ref] = {}  # a regex string's arguments -> its rule

    def warn(self, keyword: str, pointer: str) -> None:
        self.notes.append((keyword, pointer))

    def too_deep(self, pointer: str) -> SchemaError:
        message = f"schema nests deeper than {self.limits.max_depth} levels"
        return SchemaError(message, keyword="MAX_DEPTH", pointer=pointer)

    def any_value(self) -> Ref:
        return jg.define_any_value(self.grammar, self.caps)

    def value(self, node, pointer: str) -> Expr:
        """The values ``node`` admits; raises ``Unsatisfiable`` when there are none."""
        check_deadline(self.deadline, self.limits, pointer)
        self.depth += 1
        self.deepest = max(self.deepest, self.depth)
        if self.depth > self.limits.max_depth:  # merged property schemas nest as the instances would
            raise self.too_deep(pointer)
        try:
            alternatives = self.algebra.alternatives(node, pointer)
            branches, reasons = [], []
            for alternative in alternatives:
                try:
                    is_ref = isinstance(alternative, RefTo)
                    branches.append(self.ref(alternative) if is_ref else self.flat(alternative, pointer))
                except Unsatisfiable as exc:
                    reasons.append(exc)
        finally:
            self.depth -= 1
        if branches:
            return alt(*branches)
        if reasons:
            raise reasons[0]
        present = [k for k in ("allOf", "anyOf", "oneOf", "$ref") if isinstance(node, dict) and k in node]
        keyword = present[0] if present else "false"
        raise Unsatisfiable(f"no value satisfies {keyword} here", keyword=keyword, pointer=pointer)

    def ref(self, ref: RefTo) -> Expr:
        """One rule per ``$ref`` target, defined before its body so that recursion refers to it."""
        key = id(ref.target)
        if key in self.unguarded:
            message = "a $ref cycle reaches itself before any value is read"
            raise SchemaError(message, keyword="$ref", pointer=ref.pointer)
        if key in self.refs:
            name = self.refs[key]
            if name is None:
                raise Unsatisfiable("the $ref target admits no value", keyword="$ref", pointer=ref.pointer)
            return Ref(name)
        name = self.fresh("ref")
        self.refs[key] = name
        self.grammar.define(name, EMPTY)
        self.unguarded.add(key)
        learnt = [len(table) for table in self.learnt()]
        outer = self.deepest  # a target is built once: its depth is no part of the heights of the nodes around it
        try:
            body = self.value(ref.target, ref.at)
        except Unsatisfiable:
            # what was built meanwhile may refer to this rule, which holds EMPTY for now: built again
            # later, it will meet the target's refusal instead
            for table, mark in zip(self.learnt(), learnt, strict=True):
                for stale in list(table)[mark:]:
                    del table[stale]
            self.refs[key] = None
            raise
        finally:
            self.unguarded.discard(key)
            self.deepest = outer
        self.grammar.define(name, body)
        return Ref(name)

    def learnt(self) -> list[dict]:
        """The tables whose entries may refer to a ``$ref`` rule still being built (``ref`` drops them
        when its target turns out to admit nothing)."""
        return [self.refs, self.shapes] + ([] if self.flats is None else [self.flats])

    def flat(self, node: dict, pointer: str) -> Expr:
        """A schema without combinators; equal ones compile once, the second use on as one rule.

        Bundled schemas repeat definitions inline, some of them many times over: sharing one
        rule lets lowering build it once. Equal text is the key (``StructureKeys``) only where
        no ``$id`` moves the base of a ``$ref`` (then equal text means equal values), only for
        schemas with subschemas or values to list (``_SHARED_KEYWORDS``: the others cost less
        to compile than to key, and as rules they would stop lowering from copying their
        parents' templates), and only from the second schema of a shape (its keywords and
        property names) on: keying every node would cost about as much as compiling it. The
        depth bound and the warnings hold at each use as if it had been compiled there.
        """
        if self.flats is None or _SHARED_KEYWORDS.isdisjoint(node):
            return self.flat_once(node, pointer)
        shape = (tuple(node), tuple(node.get("properties", ())))
        first = self.shapes.get(shape, _UNSEEN)
        if first is _UNSEEN:
            entry = self.flat_entry(node, pointer)
            self.shapes[shape] = (node, entry)
            return entry[0]
        if first is not None:  # the second of its shape: the first is keyed now
            self.flats[self.structure.key(first[0])] = first[1]
            self.shapes[shape] = None
        key = self.structure.key(node)
        entry = self.flats.get(key)
        if entry is None:
            entry = self.flats[key] = self.flat_entry(node, pointer)
            return entry[0]
        expr, notes, height = entry
        if self.depth + height > self.limits.max_depth:
            raise self.too_deep(pointer)
        self.deepest = max(self.deepest, self.depth + height)
        self.notes.extend((k, pointer + p if below else p) for k, p, below in notes)
        if not isinstance(expr, Ref) and expr != EMPTY:
            expr = entry[0] = self.share(expr)
        return expr

    def flat_entry(self, node: dict, pointer: str) -> list:
        """``[value, notes, height]``: the notes below ``node`` relative to it, the depth it reaches below it."""
        outer, self.deepest = self.deepest, self.depth
        first = len(self.notes)
        try:
            expr = self.flat_once(node, pointer)
        finally:
            height, self.deepest = self.deepest - self.depth, max(outer, self.deepest)
        # a note below this node moves with it; one at a $ref target stays where it is
        notes = [(k, p[len(pointer):], True) if p == pointer or p.startswith(pointer + "/") else (k, p, False)
                 for k, p in self.notes[first:]]  # fmt: skip
        return [expr, notes, height]

    def flat_once(self, node: dict, pointer: str) -> Expr:
        for keyword in node.get(UNMERGED, ()):
            self.warn(keyword, pointer)
        if "enum" in node or "const" in node:
            return self.enum(node, pointer)
        if "type" not in node and not any(k in node for k in _TYPED_KEYWORDS):
            return self.any_value()
        return self.types(node, pointer)

    def types(self, node: dict, pointer: str) -> Expr:
        # "type": one branch per allowed type; a branch its other keywords make empty is dropped.
        allowed = allowed_types(node)
        branches: list[Expr] = []
        reasons: list[Unsatisfiable] = []
        unguarded, self.unguarded = self.unguarded, set()  # every subschema below sits behind "[" or "{"
        try:
            for name in TYPES:
                if name not in allowed or (name == "integer" and "number" in allowed):
                    continue
                try:
                    branches.append(getattr(self, "type_" + name)(node, pointer))
                except Unsatisfiable as exc:
                    reasons.append(exc)
        finally:
            self.unguarded = unguarded
        if not branches:
            raise reasons[0] if reasons else Unsatisfiable("no type is left", keyword="type", pointer=pointer)
        return alt(*branches)

    @staticmethod
    def type_null(node: dict, pointer: str) -> Expr:
        return _NULL

    @staticmethod
    def type_boolean(node: dict, pointer: str) -> Expr:
        return _BOOLEAN

    # ------------------------------------------------------------ numbers

    def type_integer(self, node: dict, pointer: str) -> Expr:
        # "minimum"... on integers: a digit automaton per range, exact; "multipleOf" a mod-k automaton.
        lo, lo_ex, hi, hi_ex = _numeric_bounds(node)
        bounds = {
            "minimum": None if lo is None else (floor(lo) + 1 if lo_ex else ceil(lo)),
            "maximum": None if hi is None else (ceil(hi) - 1 if hi_ex else floor(hi)),
            "multipleOf": 1,
        }
        if "multipleOf" in node:
            # n is a multiple of p/q (lowest terms) exactly when p divides n
            bounds["multipleOf"] = Fraction(_bound(node["multipleOf"])).numerator
            if bounds["multipleOf"] > numeric.MAX_MODULUS:
                self.warn("multipleOf", pointer)
                bounds["multipleOf"] = 1
        if bounds == {"minimum": None, "maximum": None, "multipleOf": 1}:
            return jg.integer(self.caps.integer)

        def build(grammar, low, high, step, caps):
            return numeric.integer_range(grammar, low, high, step, caps.integer)

        return self.digits(build, bounds, {"multipleOf": 1}, pointer)

    def type_number(self, node: dict, pointer: str) -> Expr:
        lo, lo_ex, hi, hi_ex = _numeric_bounds(node)
        bounds = {"minimum": (lo, lo_ex), "maximum": (hi, hi_ex), "multipleOf": None}
        if "multipleOf" in node:
            bounds["multipleOf"] = _bound(node["multipleOf"])
            if not numeric.supported_multiple(bounds["multipleOf"]):
                self.warn("multipleOf", pointer)
                bounds["multipleOf"] = None
        if lo is None and hi is None and bounds["multipleOf"] is None:
            return jg.number(self.caps)

        def build(grammar, low, high, step, caps):
            return numeric.number_range(grammar, *low, *high, step, caps.integer, caps.fraction)

        return self.digits(build, bounds, {"minimum": (None, False), "maximum": (None, False)}, pointer)

    def digits(self, build, bounds: dict, unbounded: dict, pointer: str) -> Expr:
        """A digit automaton for ``bounds``; a bound it cannot hold exactly is dropped and warned.

        The digit caps give way first: they guard against a runaway, a keyword is the schema's
        own (``multipleOf: 13``: 13 residues times 16 capped digits pass ``numeric``'s rule limit).
        """
        unbounded = {"minimum": None, "maximum": None, "multipleOf": None, **unbounded}
        caps = self.caps
        while True:
            try:
                expr = build(self.grammar, bounds["minimum"], bounds["maximum"], bounds["multipleOf"], caps)
                break
            except numeric.NotExact as exc:
                if caps != UNCAPPED:
                    caps = UNCAPPED
                    continue
                self.warn(exc.keyword, pointer)
                bounds[exc.keyword] = unbounded[exc.keyword]
                caps = self.caps
        if expr is None:
            raise Unsatisfiable("no number satisfies the numeric bounds", keyword="minimum", pointer=pointer)
        return expr

    # ------------------------------------------------------------ strings

    def type_string(self, node: dict, pointer: str) -> Expr:
        # "minLength" / "maxLength": counted in code points (a surrogate-pair escape is one).
        lo, hi = int(node.get("minLength", 0)), node.get("maxLength")
        hi = None if hi is None else int(hi)
        if hi is not None and lo > hi:
            raise Unsatisfiable(f"minLength {lo} is above maxLength {hi}", keyword="minLength", pointer=pointer)
        fmt = node.get("format")
        if fmt is not None and (fmt not in FORMATS or fmt in APPROXIMATE or "pattern" in node):
            self.warn("format", pointer)
        if "pattern" in node:
            return self.regex_string(node["pattern"], lo, hi, True, "pattern", node, pointer)
        if fmt in FORMATS:
            return self.regex_string(FORMATS[fmt], lo, hi, False, "format", node, pointer)
        return jg.string(lo, hi)

    def regex_string(self, source: str, lo: int, hi, search: bool, keyword: str, node: dict, pointer: str) -> Expr:
        try:
            expr, lengths = pattern_string(source, lo, hi, search=search)
        except RegexError as exc:
            raise SchemaError(f"pattern {source!r}: {exc}", keyword=keyword, pointer=pointer) from None
        if expr is None:
            raise Unsatisfiable(f"no string of the allowed length matches {source!r}", keyword=keyword, pointer=pointer)
        if not lengths:
            for bound in ("minLength", "maxLength"):
                if bound in node:
                    self.warn(bound, pointer)
        # one rule per regex: where it is used more than once, lowering may build it once
        key = (source, lo, hi, search)
        ref = self.strings.get(key)
        if ref is None:
            ref = self.strings[key] = self.share(expr)
        return ref

    # ------------------------------------------------------------ arrays

    def type_array(self, node: dict, pointer: str) -> Expr:
        # "prefixItems" (the draft-4/7 list form of "items" is read as it): one schema per
        # position; then "items" for the items after them.
        prefix, rest = self.item_schemas(node, pointer)
        lo = int(node.get("minItems", 0))
        hi = None if node.get("maxItems") is None else int(node["maxItems"])
        if rest is None:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and lo > hi:
            keyword = "minItems" if "maxItems" in node and lo > node["maxItems"] else "items"
            raise Unsatisfiable(f"no array has between {lo} and {hi} items here", keyword=keyword, pointer=pointer)
        body = self.elements(prefix[:hi] if hi is not None else prefix, rest, lo, hi)
        return seq(_OPEN_ARRAY, body, _CLOSE_ARRAY)

    def item_schemas(self, node: dict, pointer: str) -> tuple[list[Expr], Expr | None]:
        """Per-position item values, then the value of every further item (``None``: no more)."""
        prefix: list[Expr] = []
        for i, sub in enumerate(node.get("prefixItems", ())):
            value = self.optional_value(sub, child(pointer, "prefixItems", i))
            if value is None:
                return prefix, None
            prefix.append(value)
        return prefix, self.optional_value(node.get("items", True), child(pointer, "items"))

    def optional_value(self, node, pointer: str) -> Expr | None:
        """``value``, or ``None`` where nothing satisfies ``node`` and the caller can do without."""
        try:
            return self.value(node, pointer)
        except Unsatisfiable:
            return None

    def elements(self, prefix: list[Expr], rest: Expr | None, lo: int, hi: int | None) -> Expr:
        """``lo`` to ``hi`` comma-separated items: ``prefix`` by position, then ``rest``.

        "minItems" / "maxItems": positions below ``lo`` are mandatory, later ones optional,
        nested so that a comma comes only before an item; the tail past the prefix is one
        bounded repetition (a counter in the automaton when the bound is large).
        """
        if hi == 0:
            return EMPTY
        sep = _SEP
        first = len(prefix) or 1
        if not prefix and hi != 1:
            rest = self.shared(rest, 2)  # the first item and the repeated ones
        if rest is None or hi == first:
            after = EMPTY
        else:
            after = jg.counted(seq(sep, rest, jg.WS), max(lo - first, 0), None if hi is None else hi - first)
        for i in range(len(prefix) - 1, 0, -1):
            after = seq(sep, prefix[i], jg.WS, after)
            if i >= lo:
                after = optional(after)
        body = seq(prefix[0] if prefix else rest, jg.WS, after)
        return body if lo > 0 else optional(body)

    # ------------------------------------------------------------ objects

    def type_object(self, node: dict, pointer: str) -> Expr:
        # "properties" in declared order, "required" ones mandatory; then the undeclared keys:
        # "patternProperties" (a key that matches a pattern) and "additionalProperties".
        names_ok = self.property_names(node, pointer)
        extra = self.additional(node, pointer)
        if extra is not None:
            extra = self.shared(extra, 2)  # the additional member and undeclared required names
        declared, names = self.declared(node, pointer, extra, names_ok)
        undeclared = self.undeclared(node, pointer, extra, names, names_ok)
        lo, hi = int(node.get("minProperties", 0)), node.get("maxProperties")
        hi = None if hi is None else int(hi)
        if self.counts_matter(declared, undeclared, lo, hi):
            if (len(declared) + 1) * ((hi if hi is not None else lo) + 1) <= _MAX_COUNTED_MEMBERS:
                body = self.counted_members(declared, undeclared, lo, hi)
                if body is None:
                    keyword = "minProperties" if "minProperties" in node else "maxProperties"
                    message = "no object has a property count in bounds here"
                    raise Unsatisfiable(message, keyword=keyword, pointer=pointer)
                return seq(_OPEN_OBJECT, body, _CLOSE_OBJECT)
            for bound in ("minProperties", "maxProperties"):
                if bound in node:
                    self.warn(bound, pointer)
        return seq(_OPEN_OBJECT, self.members(declared, undeclared), _CLOSE_OBJECT)

    def additional(self, node: dict, pointer: str) -> Expr | None:
        """The value of an undeclared key that matches no pattern, ``None`` when there is none.

        "additionalProperties": ``false`` closes the object, a schema types the extra values.
        Absent, an object that declares ``properties`` is closed unless ``closed_objects`` is off.
        """
        if "additionalProperties" not in node:
            return None if closed(node, self.closed_objects) else self.any_value()
        return self.optional_value(node["additionalProperties"], child(pointer, "additionalProperties"))

    def property_names(self, node: dict, pointer: str):
        """A test for names ("propertyNames"), or ``None`` when every name is allowed."""
        if "propertyNames" not in node:
            return None
        schema = node["propertyNames"]
        return lambda name: self.admits(schema, name)

    def declared(self, node: dict, pointer: str, extra: Expr | None, names_ok):
        """(member, mandatory) per key that may appear by name, and every name kept from extras."""
        required = dict.fromkeys(node.get("required", ()))
        properties = node.get("properties", {})
        patterns = node.get("patternProperties", {})
        members: list[tuple[Expr, bool]] = []
        parent = child(pointer, "properties")
        for name in [*properties, *(n for n in required if n not in properties)]:
            where = child(parent, name)
            schemas = [properties[name]] if name in properties else []
            schemas += [s for p, s in patterns.items() if _search(p, name)]
            if names_ok is not None and not names_ok(name):
                value = None
            elif schemas:
                value = self.optional_value(schemas[0] if len(schemas) == 1 else {"allOf": schemas}, where)
            else:
                value = extra
            if value is None and name in required:
                message = f"required property {name!r} admits no value"
                if not schemas and names_ok is None:
                    message = f"required property {name!r} is not allowed: the object is closed"
                raise Unsatisfiable(message, keyword="required", pointer=pointer)
            if value is not None:
                members.append((self.member(name, value, pointer), name in required))
        return members, list(properties) + [n for n in required if n not in properties]

    def undeclared(self, node: dict, pointer: str, extra: Expr | None, names: list[str], names_ok) -> Expr | None:
        """One member whose key is not a declared name: by a pattern, or an additional one.

        A key that matches a pattern must satisfy that pattern's schema, and an additional key
        must match none: an automaton cannot take the complement of a pattern, so the two routes
        are only combined where that cannot matter (the additional values are refused, or every
        pattern admits any value). A declared name a pattern matches would be written twice;
        keys are excluded from the declared names by construction only on the additional route.
        """
        patterns = node.get("patternProperties", {})
        routes = []
        trivial = all(s is True or s == {} for s in patterns.values())
        if patterns and not (trivial and extra == self.any_value()):
            if extra is not None and not trivial:
                message = "patternProperties beside additional properties that may match the patterns"
                raise SchemaError(message + " is not supported", keyword="patternProperties", pointer=pointer)
            if len({jg.dumps(s) for s in patterns.values()}) > 1:
                message = "several patternProperties with different schemas (a key may match two)"
                raise SchemaError(message + " is not supported", keyword="patternProperties", pointer=pointer)
            clash = [n for n in names if any(_search(p, n) for p in patterns)]
            if clash:
                message = f"declared property {clash[0]!r} also matches a patternProperties pattern"
                raise SchemaError(message + " (its key could repeat)", keyword="patternProperties", pointer=pointer)
            if names_ok is not None:
                message = "propertyNames beside patternProperties is not supported"
                raise SchemaError(message, keyword="propertyNames", pointer=pointer)
            for p, schema in patterns.items():
                value = self.optional_value(schema, child(pointer, "patternProperties", p))
                if value is not None:
                    key = self.regex_string(p, 0, None, True, "patternProperties", {}, pointer)
                    routes.append(seq(key, _COLON, value, jg.WS))
        if extra is not None:
            key = self.additional_key(node, pointer, names, names_ok)
            if key is not None:
                routes.append(seq(key, _COLON, extra, jg.WS))
        return alt(*routes) if routes else None

    def additional_key(self, node: dict, pointer: str, names: list[str], names_ok) -> Expr | None:
        """An undeclared key: any name but the declared ones, within "propertyNames"."""
        if names_ok is None:
            return jg.key_excluding(names) if names else jg.string()
        schema = node["propertyNames"]
        if schema is False:
            return None
        alternatives = [a for alt_ in self.algebra.alternatives(schema, pointer) for a in self.algebra.resolved(alt_)]
        if all("enum" in a or "const" in a for a in alternatives):
            allowed = [v for a in alternatives for v in ([a["const"]] if "const" in a else a["enum"])]
            strings = dict.fromkeys(x for x in allowed if isinstance(x, str))
            keys = [v for v in strings if v not in names and names_ok(v)]
            return alt(*(_key_literal(k, "propertyNames", pointer) for k in keys)) if keys else None
        if len(alternatives) == 1 and set(alternatives[0]) <= {"type", "pattern", "minLength", "maxLength", "format"}:
            flat = alternatives[0]
            if "string" not in allowed_types(flat):
                return None
            if not [n for n in names if names_ok(n)]:
                return self.type_string(flat, child(pointer, "propertyNames"))
        message = "propertyNames beyond an enum, or a pattern/length that no declared name meets, is not supported"
        raise SchemaError(message, keyword="propertyNames", pointer=pointer)

    @staticmethod
    def member(name: str, value: Expr, pointer: str) -> Expr:
        return seq(_key_literal(name, "properties", pointer), _COLON, value, jg.WS)

    @staticmethod
    def counts_matter(declared: list[tuple[Expr, bool]], additional: Expr | None, lo: int, hi: int | None) -> bool:
        """Whether "minProperties"/"maxProperties" cut anything the members would allow."""
        mandatory = sum(must for _, must in declared)
        too_few = lo > mandatory
        too_many = hi is not None and (additional is not None or len(declared) > hi)
        return too_few or too_many

    def members(self, declared: list[tuple[Expr, bool]], additional: Expr | None) -> Expr:
        """Declared members in order (optional ones skippable), then additional ones.

        A comma goes between members, so what may follow member ``i`` depends only on ``i``.
        ``C[i]`` is member ``i`` then ``T[i + 1]``; ``T[j]`` is what may follow member ``j - 1``: a
        comma and ``C[j]``, or (``j`` optional) ``T[j + 1]``. The body is ``C[i]`` for each ``i`` up
        to the first mandatory member. Each member appears once, and ``C``/``T`` become rules
        where two places use them, so the grammar stays linear in the number of properties.
        Additional members are a list, ``A (, A)*``, which lowering builds with one copy of ``A``.
        """
        n = len(declared)
        sep = _SEP
        mandatory = [i for i, (_, must) in enumerate(declared) if must]
        starts = mandatory[0] + 1 if mandatory else n
        extra_only = additional is not None and not mandatory
        if extra_only:  # additional members may come first: one list of them, a rule where it also ends T[n]
            extras = self.shared(seq(additional, star(seq(sep, additional))), 1 + (n > 0))
            more = optional(seq(sep, extras))
        else:
            more = star(seq(sep, additional)) if additional is not None else EMPTY

        def tail_uses(j: int) -> int:
            return 1 + (j >= 2 and not declared[j - 1][1])

        follow = self.shared(more, tail_uses(n)) if n else more
        firsts: list[Expr] = [EMPTY] * starts
        for i in range(n - 1, -1, -1):
            member, must = declared[i]
            c = self.shared(seq(member, follow), (i >= 1) + (i < starts))
            if i < starts:
                firsts[i] = c
            if i >= 1:
                follow = self.shared(seq(sep, c) if must else alt_distinct(seq(sep, c), follow), tail_uses(i))
        body = firsts + ([extras] if extra_only else []) + ([] if mandatory else [EMPTY])
        # members differ: each starts with its own key (JSON strings are prefix-free), or is a rule
        return alt_distinct(*body)

    def counted_members(self, declared, additional: Expr | None, lo: int, hi: int | None) -> Expr | None:
        """``members`` that also count them: "minProperties" / "maxProperties", exactly.

        ``F(i, c, first)`` is what may follow once ``c`` members are written and member ``i`` is
        next (``first``: nothing written yet, so no comma). Counts past ``lo`` behave alike when
        there is no upper bound, so at most ``(n + 1) * (bound + 1) * 2`` rules exist.
        """
        n, sep = len(declared), _SEP
        cap = hi if hi is not None else lo
        if additional is not None:
            additional = self.share(additional)
        memo: dict[tuple[int, int, bool], Expr | None] = {}

        def rest(c: int, first: bool) -> Expr | None:
            need, room = max(lo - c, 0), None if hi is None else hi - c
            if additional is None or room == 0:
                return EMPTY if need == 0 else None
            if not first:
                return jg.counted(seq(sep, additional), need, room)
            more = jg.counted(seq(sep, additional), max(need - 1, 0), None if room is None else room - 1)
            body = seq(additional, more)
            return body if need else optional(body)

        def follow(i: int, c: int, first: bool) -> Expr | None:
            key = (i, min(c, cap), first)
            if key not in memo:
                memo[key] = rest(c, first) if i == n else self.shared_or_none(choose(i, c, first))
            return memo[key]

        def choose(i: int, c: int, first: bool) -> Expr | None:
            member, must = declared[i]
            options = []
            if hi is None or c < hi:
                after = follow(i + 1, c + 1, False)
                if after is not None:
                    options.append(seq(member if first else seq(sep, member), after))
            if not must:
                after = follow(i + 1, c, first)
                if after is not None:
                    options.append(after)
            return alt(*options) if options else None

        return follow(0, 0, True)

    def shared_or_none(self, expr: Expr | None) -> Expr | None:
        return None if expr is None else self.shared(expr, 2)

    def shared(self, expr: Expr, uses: int) -> Expr:
        """``expr`` as a rule where more than one place uses it (a DAG of rules, never of expressions)."""
        if uses < 2 or expr == EMPTY or isinstance(expr, Ref):
            return expr
        return self.share(expr)

    def share(self, expr: Expr) -> Ref:
        """A named rule for ``expr``: expressions stay trees, and lowering may build it once."""
        return self.grammar.define(self.fresh("shared"), expr)

    def fresh(self, prefix: str) -> str:
        # several schemas may share one grammar (the tools of a request): names must not collide
        while f"{prefix}{self.rules}" in self.grammar.rules:
            self.rules += 1
        self.rules += 1
        return f"{prefix}{self.rules - 1}"

    # ------------------------------------------------------------ enum and const

    def enum(self, node: dict, pointer: str) -> Expr:
        # "enum" / "const": the literals that also satisfy the node's other keywords,
        # merged into one byte trie so that a long enum keeps a handful of live paths.
        candidates = [node["const"]] if "const" in node else node["enum"]
        if "const" in node and "enum" in node:
            candidates = [c for c in candidates if any(json_equal(c, e) for e in node["enum"])]
        rest = {k: v for k, v in node.items() if k not in ("enum", "const", UNMERGED)}
        literals = [_packed(self.tokens(v, rest, pointer)) for v in candidates if self.admits_flat(rest, v)]
        if not literals:
            keyword = "const" if "const" in node else "enum"
            message = "enum is empty" if not candidates else f"no {keyword} value satisfies the other keywords"
            raise Unsatisfiable(message, keyword=keyword, pointer=pointer)
        return _alternation(literals)

    def tokens(self, value, schema, pointer: str) -> bytes | list:
        """The literal of ``value`` as bytes and ``Expr`` pieces, keys in ``schema``'s declared order."""
        kind = json_type(value)
        if kind in ("integer", "number"):
            return jg.number_literal(value, integer_only=self.integer_only(schema), fraction_digits=self.caps.fraction)
        if kind == "array":
            parts = [self.tokens(v, _item_schema(schema, i), pointer) for i, v in enumerate(value)]
            return _join(b"[", parts, b"]")
        if kind == "object":
            parts = [
                [*_encode(jg.dumps(k) + ":", pointer), *self.tokens(value[k], _property_schema(schema, k), pointer)]
                for k in _declared_order(value, schema)
            ]
            return _join(b"{", parts, b"}")
        return _encode(jg.dumps(value), pointer)

    @staticmethod
    def integer_only(schema) -> bool:
        """An integer value is spelled without a fraction where the schema allows no non-integer."""
        return isinstance(schema, dict) and "number" not in allowed_types(schema)

    # ------------------------------------------------------------ values against schemas

    def admits(self, schema, value) -> bool:
        """Whether ``value`` satisfies ``schema`` exactly as compiled (enum filtering, names, patterns)."""
        for alternative in self.algebra.alternatives(schema, ""):
            if any(self.admits_flat(flat, value) for flat in self.algebra.resolved(alternative)):
                return True
        return False

    def admits_flat(self, schema: dict, value) -> bool:
        kind = json_type(value)
        if kind not in allowed_types(schema):
            return False
        if "const" in schema and not json_equal(value, schema["const"]):
            return False
        if "enum" in schema and not any(json_equal(value, e) for e in schema["enum"]):
            return False
        check = _ADMITS.get(kind)
        return check is None or getattr(self, check)(schema, value)

    @staticmethod
    def admits_string(schema: dict, value: str) -> bool:
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
            return False
        if "pattern" in schema and not _search(schema["pattern"], value):
            return False
        fmt = schema.get("format")
        return fmt not in FORMATS or _search("^(?:" + FORMATS[fmt] + ")$", value)

    @staticmethod
    def admits_number(schema: dict, value) -> bool:
        number = _bound(value)
        lo, lo_ex, hi, hi_ex = _numeric_bounds(schema)
        if lo is not None and (number < lo or (lo_ex and number == lo)):
            return False
        if hi is not None and (number > hi or (hi_ex and number == hi)):
            return False
        return "multipleOf" not in schema or Fraction(number) % Fraction(_bound(schema["multipleOf"])) == 0

    def admits_array(self, schema: dict, value: list) -> bool:
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            return False
        if schema.get("uniqueItems") and any(json_equal(a, b) for i, a in enumerate(value) for b in value[i + 1 :]):
            return False
        return all(self.admits(_item_schema(schema, i), v) for i, v in enumerate(value))

    def admits_object(self, schema: dict, value: dict) -> bool:
        if any(name not in value for name in schema.get("required", ())):
            return False
        if not schema.get("minProperties", 0) <= len(value) <= schema.get("maxProperties", len(value)):
            return False
        if "propertyNames" in schema and not all(self.admits(schema["propertyNames"], k) for k in value):
            return False
        for key, v in value.items():
            sub = self.algebra.key_schema(schema, key)
            if sub is not None and not self.admits(sub, v):
                return False
        return True


def _item_schema(schema, i: int):
    """The subschema that item ``i`` of an array must satisfy (a flat schema: ``prefixItems`` then ``items``)."""
    if not isinstance(schema, dict):
        return schema
    prefix = schema.get("prefixItems", [])
    return prefix[i] if i < len(prefix) else schema.get("items", True)


def _property_schema(schema, key: str, closed: bool = False):
    """The subschema the value of ``key`` must satisfy (``False`` when the key is not allowed)."""
    if not isinstance(schema, dict):
        return schema
    properties = schema.get("properties", {})
    if key in properties:
        return properties[key]
    return schema.get("additionalProperties", not closed)


def _declared_order(value: dict, schema) -> list[str]:
    """``value``'s keys in generation order: ``properties``, then undeclared ``required`` names, then the rest."""
    if not isinstance(schema, dict):
        return list(value)
    declared = list(schema.get("properties", {}))
    declared += [k for k in schema.get("required", ()) if k not in declared]
    return [k for k in declared if k in value] + [k for k in value if k not in declared]


def _encode(text: str, pointer: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise SchemaError("a string holds a lone surrogate", keyword="enum", pointer=pointer) from None


def _key_literal(name: str, keyword: str, pointer: str) -> Expr:
    """``name`` as a JSON string literal (quotes included)."""
    try:
        return _quoted(name)
    except UnicodeEncodeError:
        raise SchemaError("a name holds a lone surrogate", keyword=keyword, pointer=pointer) from None


@lru_cache(maxsize=4096)
def _quoted(name: str) -> Expr:
    # cached: the same property names recur across the objects of a schema and across schemas
    return literal(jg.dumps(name).encode("utf-8"))


def _join(open_: bytes, parts: list[list], close: bytes) -> list:
    """``open_ part ("," part)* close`` as one token list."""
    out = list(open_)
    for i, part in enumerate(parts):
        out.extend([0x2C, *part] if i else part)
    return out + list(close)


def _packed(tokens: bytes | list) -> bytes | tuple:
    """A literal's tokens as ``bytes`` where they are all bytes (``_trie_expr`` compares those in C),
    else as a tuple of bytes (ints) and ``Expr`` pieces, without the empty ones."""
    try:
        return bytes(tokens)
    except TypeError:
        return tuple(t for t in tokens if isinstance(t, int) or t != EMPTY)


_END = object()


def _alternation(literals: list) -> Expr:
    """``literals`` as one expression: a trie of what comes before the tokens they all end with,
    then those tokens once (the values of a string enum share one closing quote, not one each)."""
    first, n = literals[0], 0
    shortest = min(map(len, literals)) if len(literals) > 1 else 0  # one literal: nothing to share
    while n < shortest and all(t[len(t) - 1 - n] == first[len(first) - 1 - n] for t in literals):
        n += 1
    packed = all(type(t) is bytes for t in literals)
    if not n:
        return _trie_expr(literals, 0, packed)
    return seq(_trie_expr([t[: len(t) - n] for t in literals], 0, packed), *_pieces(first[len(first) - n :]))


def _trie_expr(literals: list, depth: int, packed: bool) -> Expr:
    """The alternation of ``literals`` (token sequences sharing their first ``depth`` tokens) as a trie.

    Branches come in the order of their first literal; the tokens every literal of a branch
    shares become one run, so a trie node exists only where literals part. Each call handles one
    node and touches each literal once: no per-byte dictionaries for a long enum. ``packed``:
    every literal is ``bytes``.
    """
    branches: dict = {}
    for tokens in literals:
        branches.setdefault(tokens[depth] if depth < len(tokens) else _END, []).append(tokens)
    parts = []
    for token, branch in branches.items():
        if token is _END:
            parts.append(EMPTY)
            continue
        end = _shared_end(branch, depth + 1, packed)
        rest = EMPTY if len(branch) == 1 else _trie_expr(branch, end, packed)
        parts.append(seq(*_pieces(branch[0][depth:end]), rest))
    return jg.choice(parts)  # the parts start with distinct tokens


def _pieces(tokens: bytes | tuple):
    """The expressions for a run of tokens: one per byte, ``Expr`` pieces as they are."""
    if type(tokens) is bytes:
        return map(_BYTES.__getitem__, tokens)
    return (_BYTES[t] if isinstance(t, int) else t for t in tokens)


def _shared_end(literals: list, start: int, packed: bool) -> int:
    """Where the tokens all ``literals`` share from ``start`` on end (at the end of the shortest)."""
    if len(literals) == 1:
        return len(literals[0])
    i = start
    if packed:
        # the least and the greatest share exactly the prefix all of them share
        least, greatest = min(literals), max(literals)
        end = min(len(least), len(greatest))
        while i < end and least[i] == greatest[i]:
            i += 1
        return i
    first, end = literals[0], min(map(len, literals))
    while i < end and all(t[i] == first[i] for t in literals):
        i += 1
    return i
