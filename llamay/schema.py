"""JSON Schema to grammar IR to automaton (design section 4, stage 1).

Compilation runs in two passes over the schema:

1. ``_Checker`` visits every subschema once: it refuses keywords llamay cannot enforce,
   reports malformed keyword values, records a warning for each keyword it only ignores,
   and enforces the bounds of ``limits.py``. A schema that passes is well formed.
2. ``_Compiler`` turns the checked schema into ``ir.Grammar`` rules, one method per keyword
   family. A subschema that no value can satisfy raises ``Unsatisfiable``; the parent drops
   that branch where it can (an optional property, a type alternative, further array items)
   and otherwise passes it up, so only a schema that matches nothing is refused.

Stage 2 keywords (``$ref``, ``anyOf`` ...) slot in as a shape check in ``_SHAPES``, a subschema
walk in ``_subschemas`` and a method of ``_Compiler``.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from . import json_grammar as jg
from .errors import GrammarError, InternalError, SchemaError
from .ir import EMPTY, Expr, Grammar, Ref, alt, literal, optional, seq, star
from .limits import COMPILE_SECONDS, MAX_DEPTH, MAX_REPEAT, MAX_SOURCE_BYTES

if TYPE_CHECKING:
    from ._core.automaton import CompiledGrammar

TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")

#: Keywords compiled into the automaton.
ENFORCED = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "additionalItems",
        "minItems", "maxItems", "enum", "const", "minLength", "maxLength",
    }
)  # fmt: skip

#: Keywords accepted but not enforced: each occurrence that can apply adds a warning.
WARNED = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "pattern", "format"})

#: Keywords with no effect on validation.
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly"}
)

# The types each warned keyword constrains: a warning is only worth giving where one is allowed.
_WARNED_TYPES = {
    "minimum": ("integer", "number"),
    "maximum": ("integer", "number"),
    "exclusiveMinimum": ("integer", "number"),
    "exclusiveMaximum": ("integer", "number"),
    "multipleOf": ("integer", "number"),
    "pattern": ("string",),
    "format": ("string",),
}

_OBJECT_KEYWORDS = ("properties", "required", "additionalProperties")
_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems")
_STRING_KEYWORDS = ("minLength", "maxLength")


class Unsatisfiable(SchemaError):
    """No JSON value satisfies the (sub)schema; raised at the root, caught where a branch can go."""


def compile_json_schema(schema, closed_objects: bool = True, whitespace_budget: int | None = 64) -> CompiledGrammar:
    """Compile ``schema`` (a parsed JSON value) to an automaton; ``.warnings`` lists what it ignores.

    ``closed_objects``: an object that declares ``properties`` and says nothing about
    ``additionalProperties`` admits no other key (design section 4); ``False`` restores the
    specification's open default. ``whitespace_budget`` bounds structural whitespace per
    document (``None``: unbounded). The document starts at its first byte and ends at its
    last: a model cannot spend tokens on whitespace around it, and once it is complete only
    EOS is allowed.
    """
    deadline = time.monotonic() + COMPILE_SECONDS
    warnings: list[str] = []
    grammar = Grammar()
    value = schema_expr(grammar, schema, "", warnings, closed_objects=closed_objects, deadline=deadline)
    grammar.define("root", value)
    return _lower(grammar, whitespace_budget, warnings, deadline)


def schema_expr(
    grammar: Grammar,
    schema,
    pointer: str,
    warnings: list[str],
    *,
    closed_objects: bool = True,
    deadline: float | None = None,
) -> Expr:
    """``schema`` as an expression among ``grammar``'s rules, for constraints that embed schemas (tool calls).

    Checks, refuses and warns exactly as ``compile_json_schema`` does, with JSON Pointers under
    ``pointer``; warnings are appended to ``warnings``.
    """
    deadline = time.monotonic() + COMPILE_SECONDS if deadline is None else deadline
    _check_source_size(schema)
    _Checker(warnings, deadline).schema(schema, pointer, "schema", 0)
    try:
        return _Compiler(grammar, closed_objects, deadline).value(schema, pointer)
    except RecursionError:
        raise SchemaError("schema nests too deeply to compile", keyword="MAX_DEPTH", pointer=pointer) from None


def any_json(object_only: bool = False, whitespace_budget: int | None = 64) -> CompiledGrammar:
    """Any valid JSON document (an object only, for ``json_object``), whitespace budgeted.

    Like a schema's document, it may start with whitespace and ends at its last byte.
    """
    grammar = Grammar()
    value = jg.define_any_value(grammar)
    grammar.define("root", Ref("json_object") if object_only else value)
    return grammar.compile("root", whitespace_budget=whitespace_budget, warnings=[])


def _check_source_size(schema) -> None:
    """Bound the serialized schema ("MAX_SOURCE_BYTES") before any work is done on it."""
    try:
        size = len(jg.dumps(schema).encode("utf-8", "surrogatepass"))
    except RecursionError:
        raise SchemaError("schema nests too deeply", keyword="MAX_DEPTH") from None
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"schema is not a JSON value ({exc})", keyword="schema") from None
    if size > MAX_SOURCE_BYTES:
        raise SchemaError(f"schema is {size} bytes, over the bound of {MAX_SOURCE_BYTES}", keyword="MAX_SOURCE_BYTES")


def _lower(grammar: Grammar, whitespace_budget, warnings: list[str], deadline: float) -> CompiledGrammar:
    """Lower the rules; a bound the lowering hits is reported as a schema error naming it."""
    try:
        compiled = grammar.compile("root", whitespace_budget=whitespace_budget, warnings=warnings)
    except GrammarError as exc:
        limit = re.search(r"\(limit (\w+)\)", exc.reason)
        if limit is None:  # any other refusal means this compiler built a bad grammar
            raise InternalError(f"the grammar of a schema was refused: {exc}") from exc
        raise SchemaError(f"schema is over a bound once lowered: {exc.reason}", keyword=limit[1]) from exc
    except RecursionError:
        raise SchemaError("schema nests too deeply to compile", keyword="MAX_DEPTH") from None
    _check_deadline(deadline, "")
    return compiled


def _check_deadline(deadline: float, pointer: str) -> None:
    # "COMPILE_SECONDS": a hostile schema must not hold a worker.
    if time.monotonic() > deadline:
        raise SchemaError(
            f"schema took over {COMPILE_SECONDS} s to compile", keyword="COMPILE_SECONDS", pointer=pointer
        )


def _child(pointer: str, *tokens) -> str:
    """JSON Pointer of a subschema (RFC 6901 escapes ``~`` and ``/``)."""
    return pointer + "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def _allowed_types(node: dict) -> tuple[str, ...]:
    """The types ``type`` allows (all when absent); ``integer`` is implied by ``number``."""
    declared = node.get("type", TYPES)
    declared = (declared,) if isinstance(declared, str) else tuple(declared)
    if "number" in declared and "integer" not in declared:
        declared += ("integer",)
    return declared


# ---------------------------------------------------------------- pass 1: check


def _is_count(value) -> bool:
    """A non-negative integer; ``2.0`` counts (JSON Schema compares numbers by value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value >= 0 and float(value).is_integer()


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_type(value) -> bool:
    if isinstance(value, str):
        return value in TYPES
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(t, str) and t in TYPES for t in value)
        and len(set(value)) == len(value)
    )


def _is_schema(value) -> bool:
    return isinstance(value, (dict, bool))


# The shape each keyword's value must have, and the words that say so.
_SHAPES = {
    "type": (_is_type, f"one of {', '.join(TYPES)} or a non-empty list of them without repeats"),
    "properties": (lambda v: isinstance(v, dict), "an object of schemas"),
    "required": (lambda v: isinstance(v, list) and all(isinstance(k, str) for k in v), "a list of strings"),
    "additionalProperties": (_is_schema, "a schema"),
    "items": (lambda v: _is_schema(v) or isinstance(v, list), "a schema or a list of schemas"),
    "additionalItems": (_is_schema, "a schema"),
    "minItems": (_is_count, "a non-negative integer"),
    "maxItems": (_is_count, "a non-negative integer"),
    "minLength": (_is_count, "a non-negative integer"),
    "maxLength": (_is_count, "a non-negative integer"),
    "enum": (lambda v: isinstance(v, list), "a list"),
    "const": (lambda v: True, "a JSON value"),
    "minimum": (_is_number, "a number"),
    "maximum": (_is_number, "a number"),
    "exclusiveMinimum": (lambda v: _is_number(v) or isinstance(v, bool), "a number (a boolean in draft 4)"),
    "exclusiveMaximum": (lambda v: _is_number(v) or isinstance(v, bool), "a number (a boolean in draft 4)"),
    "multipleOf": (lambda v: _is_number(v) and v > 0, "a number above 0"),
    "pattern": (lambda v: isinstance(v, str), "a string"),
    "format": (lambda v: isinstance(v, str), "a string"),
}


def _subschemas(node: dict, pointer: str):
    """(keyword, subschema, pointer) for every subschema of ``node``, in document order."""
    for keyword, value in node.items():
        if keyword == "properties":
            for name, sub in value.items():
                yield keyword, sub, _child(pointer, keyword, name)
        elif keyword == "items" and isinstance(value, list):
            for i, sub in enumerate(value):
                yield keyword, sub, _child(pointer, keyword, i)
        elif keyword in ("items", "additionalItems", "additionalProperties"):
            yield keyword, value, _child(pointer, keyword)


class _Checker:
    """Pass 1: refusals, malformed values, warnings and bounds, for every subschema."""

    def __init__(self, warnings: list[str], deadline: float) -> None:
        self.warnings = warnings
        self.deadline = deadline

    def schema(self, node, pointer: str, via: str, depth: int) -> None:
        # "MAX_DEPTH": the compilers recurse once per level.
        if depth > MAX_DEPTH:
            raise SchemaError(f"schema nests deeper than {MAX_DEPTH} levels", keyword="MAX_DEPTH", pointer=pointer)
        _check_deadline(self.deadline, pointer)
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            text = jg.dumps(node)[:40]
            raise SchemaError(f"a schema must be an object or a boolean, not {text}", keyword=via, pointer=pointer)
        for keyword, value in node.items():
            self.keyword(node, keyword, value, pointer)
        for keyword, sub, sub_pointer in _subschemas(node, pointer):
            self.schema(sub, sub_pointer, keyword, depth + 1)

    def keyword(self, node: dict, keyword: str, value, pointer: str) -> None:
        if keyword in ANNOTATIONS:
            return
        if keyword not in ENFORCED and keyword not in WARNED:
            raise SchemaError(f"keyword {keyword!r} is not supported", keyword=keyword, pointer=pointer)
        test, shape = _SHAPES[keyword]
        if not test(value):
            raise SchemaError(f"{keyword!r} must be {shape}", keyword=keyword, pointer=pointer)
        # "MAX_REPEAT": a minimum count is built from blocks of MAX_REPEAT repetitions.
        if keyword in ("minItems", "minLength") and value > MAX_REPEAT * MAX_REPEAT:
            message = f"{keyword} {value} is above {MAX_REPEAT * MAX_REPEAT}"
            raise SchemaError(message, keyword="MAX_REPEAT", pointer=pointer)
        if keyword in WARNED and self.applies(node, keyword):
            self.warnings.append(f"{keyword} not enforced at {pointer or '(root)'}")

    @staticmethod
    def applies(node: dict, keyword: str) -> bool:
        """Whether a warned keyword constrains a type the node allows (``type`` and ``enum``)."""
        allowed = set(_allowed_types(node)) if _is_type(node.get("type", "null")) else set(TYPES)
        if "const" in node:
            allowed &= {_json_type(node["const"])}
        elif isinstance(node.get("enum"), list):
            allowed &= {_json_type(v) for v in node["enum"]}
        return bool(allowed.intersection(_WARNED_TYPES[keyword]))


# ---------------------------------------------------------------- pass 2: compile


def _json_type(value) -> str:
    """The JSON type of a parsed value; an integral float is an ``integer``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _json_equal(a, b) -> bool:
    """JSON value equality: numbers by value, ``true`` is not ``1``, key order does not matter."""
    ta, tb = _json_type(a), _json_type(b)
    if {ta, tb} <= {"integer", "number"}:
        return a == b
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if ta == "object":
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return a == b


class _Compiler:
    """Pass 2: a checked schema to IR expressions; named rules only where sharing needs them."""

    def __init__(self, grammar: Grammar, closed_objects: bool, deadline: float) -> None:
        self.grammar = grammar
        self.closed_objects = closed_objects
        self.deadline = deadline
        self.rules = 0

    def any_value(self) -> Ref:
        return jg.define_any_value(self.grammar)

    def value(self, node, pointer: str) -> Expr:
        """The values ``node`` admits; raises ``Unsatisfiable`` when there are none."""
        _check_deadline(self.deadline, pointer)
        if node is True:
            return self.any_value()
        if node is False:
            raise Unsatisfiable("schema false admits no value", keyword="false", pointer=pointer)
        if "enum" in node or "const" in node:
            return self.enum(node, pointer)
        if "type" not in node and not any(k in node for k in _OBJECT_KEYWORDS + _ARRAY_KEYWORDS + _STRING_KEYWORDS):
            return self.any_value()
        return self.types(node, pointer)

    def types(self, node: dict, pointer: str) -> Expr:
        # "type": one branch per allowed type; a branch its other keywords make empty is dropped.
        allowed = _allowed_types(node)
        branches: list[Expr] = []
        reasons: list[Unsatisfiable] = []
        for name in TYPES:
            if name not in allowed or (name == "integer" and "number" in allowed):
                continue
            try:
                branches.append(getattr(self, "type_" + name)(node, pointer))
            except Unsatisfiable as exc:
                reasons.append(exc)
        if not branches:
            raise reasons[0]
        return alt(*branches)

    @staticmethod
    def type_null(node: dict, pointer: str) -> Expr:
        return literal("null")

    @staticmethod
    def type_boolean(node: dict, pointer: str) -> Expr:
        return alt(literal("true"), literal("false"))

    @staticmethod
    def type_integer(node: dict, pointer: str) -> Expr:
        return jg.INTEGER

    @staticmethod
    def type_number(node: dict, pointer: str) -> Expr:
        return jg.NUMBER

    @staticmethod
    def type_string(node: dict, pointer: str) -> Expr:
        # "minLength" / "maxLength": counted in code points (a surrogate-pair escape is one).
        lo, hi = int(node.get("minLength", 0)), node.get("maxLength")
        hi = None if hi is None else int(hi)
        if hi is not None and lo > hi:
            raise Unsatisfiable(f"minLength {lo} is above maxLength {hi}", keyword="minLength", pointer=pointer)
        return jg.string(lo, hi)

    # ------------------------------------------------------------ arrays

    def type_array(self, node: dict, pointer: str) -> Expr:
        # "items" (a schema, or the draft-4/7 list form: one schema per position) and
        # "additionalItems" (the items after that list).
        prefix, rest = self.item_schemas(node, pointer)
        lo = int(node.get("minItems", 0))
        hi = None if node.get("maxItems") is None else int(node["maxItems"])
        if rest is None:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and lo > hi:
            keyword = "minItems" if "maxItems" in node and lo > node["maxItems"] else "items"
            raise Unsatisfiable(f"no array has between {lo} and {hi} items here", keyword=keyword, pointer=pointer)
        body = self.elements(prefix[:hi] if hi is not None else prefix, rest, lo, hi)
        return seq(literal("["), jg.WS, body, literal("]"))

    def item_schemas(self, node: dict, pointer: str) -> tuple[list[Expr], Expr | None]:
        """Per-position item values, then the value of every further item (``None``: no more)."""
        items = node.get("items", True)
        if not isinstance(items, list):
            return [], self.optional_value(items, _child(pointer, "items"))
        prefix: list[Expr] = []
        for i, sub in enumerate(items):
            value = self.optional_value(sub, _child(pointer, "items", i))
            if value is None:
                return prefix, None
            prefix.append(value)
        return prefix, self.optional_value(node.get("additionalItems", True), _child(pointer, "additionalItems"))

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
        sep = seq(literal(","), jg.WS)
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
        # "properties" in declared order, "required" ones mandatory; then "additionalProperties".
        extra = self.additional(node, pointer)
        if extra is not None:
            extra = self.shared(extra, 2)  # the additional member and undeclared required names
        declared, names = self.declared(node, pointer, extra)
        if extra is None:
            additional = None
        else:
            key = jg.key_excluding(names, self.grammar) if names else jg.string()
            additional = seq(key, jg.WS, literal(":"), jg.WS, extra, jg.WS)
        return seq(literal("{"), jg.WS, self.members(declared, additional), literal("}"))

    def additional(self, node: dict, pointer: str) -> Expr | None:
        """The value of an undeclared key, ``None`` when the object is closed.

        "additionalProperties": ``false`` closes the object, a schema types the extra values.
        Absent, an object that declares ``properties`` is closed unless ``closed_objects`` is off.
        """
        if "additionalProperties" not in node:
            closed = self.closed_objects and "properties" in node
            return None if closed else self.any_value()
        return self.optional_value(node["additionalProperties"], _child(pointer, "additionalProperties"))

    def declared(self, node: dict, pointer: str, extra: Expr | None):
        """(member, mandatory) per key that may appear by name, and every name kept from extras."""
        required = dict.fromkeys(node.get("required", ()))
        properties = node.get("properties", {})
        members: list[tuple[Expr, bool]] = []
        for name, sub in properties.items():
            value = self.optional_value(sub, _child(pointer, "properties", name))
            if value is None and name in required:
                raise Unsatisfiable(f"required property {name!r} admits no value", keyword="required", pointer=pointer)
            if value is not None:
                members.append((self.member(name, value, pointer), name in required))
        # "required" names that "properties" does not declare are extra keys that must appear.
        for name in required:
            if name not in properties:
                if extra is None:
                    message = f"required property {name!r} is not allowed: the object is closed"
                    raise Unsatisfiable(message, keyword="required", pointer=pointer)
                members.append((self.member(name, extra, pointer), True))
        return members, list(properties) + [n for n in required if n not in properties]

    @staticmethod
    def member(name: str, value: Expr, pointer: str) -> Expr:
        return seq(_text_literal(jg.dumps(name), "properties", pointer), jg.WS, literal(":"), jg.WS, value, jg.WS)

    def members(self, declared: list[tuple[Expr, bool]], additional: Expr | None) -> Expr:
        """Declared members in order (optional ones skippable), then additional ones.

        A comma goes between members, so what may follow member ``i`` depends only on ``i``.
        ``C[i]`` is member ``i`` then ``T[i + 1]``; ``T[j]`` is what may follow member ``j - 1``: a
        comma and ``C[j]``, or (``j`` optional) ``T[j + 1]``. The body is ``C[i]`` for each ``i`` up
        to the first mandatory member. Each member appears once, and ``C``/``T`` become rules
        where two places use them, so the grammar stays linear in the number of properties.
        """
        n = len(declared)
        sep = seq(literal(","), jg.WS)
        mandatory = [i for i, (_, must) in enumerate(declared) if must]
        starts = mandatory[0] + 1 if mandatory else n
        extra_only = additional is not None and not mandatory
        if extra_only:
            additional = self.share(additional)  # the first additional member and the repeated ones
        more = star(seq(sep, additional)) if additional is not None else EMPTY

        def tail_uses(j: int) -> int:
            return 1 + (j >= 2 and not declared[j - 1][1]) + (j == n and extra_only)

        last = follow = self.shared(more, tail_uses(n)) if n else more
        firsts: list[Expr] = [EMPTY] * starts
        for i in range(n - 1, -1, -1):
            member, must = declared[i]
            c = self.shared(seq(member, follow), (i >= 1) + (i < starts))
            if i < starts:
                firsts[i] = c
            if i >= 1:
                follow = self.shared(seq(sep, c) if must else alt(seq(sep, c), follow), tail_uses(i))
        body = firsts + ([seq(additional, last)] if extra_only else []) + ([] if mandatory else [EMPTY])
        return alt(*body)

    def shared(self, expr: Expr, uses: int) -> Expr:
        """``expr`` as a rule where more than one place uses it (a DAG of rules, never of expressions)."""
        if uses < 2 or expr == EMPTY or isinstance(expr, Ref):
            return expr
        return self.share(expr)

    def share(self, expr: Expr) -> Ref:
        """A named rule for ``expr``: expressions stay trees, and lowering may build it once."""
        # several schemas may share one grammar (the tools of a request): names must not collide
        while f"shared{self.rules}" in self.grammar.rules:
            self.rules += 1
        return self.grammar.define(f"shared{self.rules}", expr)

    # ------------------------------------------------------------ enum and const

    def enum(self, node: dict, pointer: str) -> Expr:
        # "enum" / "const": the literals that also satisfy the node's other keywords,
        # merged into one byte trie so that a long enum keeps a handful of live paths.
        candidates = [node["const"]] if "const" in node else node["enum"]
        if "const" in node and "enum" in node:
            candidates = [c for c in candidates if any(_json_equal(c, e) for e in node["enum"])]
        rest = {k: v for k, v in node.items() if k not in ("enum", "const")}
        trie: dict = {}
        for value in candidates:
            if self.admits(rest, value):
                _trie_insert(trie, self.tokens(value, rest, pointer))
        if not trie:
            keyword = "const" if "const" in node else "enum"
            message = "enum is empty" if not candidates else f"no {keyword} value satisfies the other keywords"
            raise Unsatisfiable(message, keyword=keyword, pointer=pointer)
        return _trie_expr(trie)

    def tokens(self, value, schema, pointer: str) -> list:
        """The literal of ``value`` as bytes and ``Expr`` pieces, keys in ``schema``'s declared order."""
        kind = _json_type(value)
        if kind in ("integer", "number"):
            return jg.number_literal(value, integer_only=self.integer_only(schema))
        if kind == "array":
            parts = [self.tokens(v, _item_schema(schema, i), pointer) for i, v in enumerate(value)]
            return _join(b"[", parts, b"]")
        if kind == "object":
            parts = [
                [*_encode(jg.dumps(k) + ":", pointer), *self.tokens(value[k], _property_schema(schema, k), pointer)]
                for k in _declared_order(value, schema)
            ]
            return _join(b"{", parts, b"}")
        return list(_encode(jg.dumps(value), pointer))

    @staticmethod
    def integer_only(schema) -> bool:
        """An integer value is spelled without a fraction where the schema allows no non-integer."""
        return isinstance(schema, dict) and "number" not in _allowed_types(schema)

    def admits(self, schema, value) -> bool:
        """Whether ``value`` satisfies the enforced keywords of ``schema`` (exactly as compiled)."""
        if isinstance(schema, bool):
            return schema
        kind = _json_type(value)
        if kind not in _allowed_types(schema):
            return False
        if "const" in schema and not _json_equal(value, schema["const"]):
            return False
        if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"]):
            return False
        check = {"string": self.admits_string, "array": self.admits_array, "object": self.admits_object}.get(kind)
        return check is None or check(schema, value)

    @staticmethod
    def admits_string(schema: dict, value: str) -> bool:
        return schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))

    def admits_array(self, schema: dict, value: list) -> bool:
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            return False
        return all(self.admits(_item_schema(schema, i), v) for i, v in enumerate(value))

    def admits_object(self, schema: dict, value: dict) -> bool:
        if any(name not in value for name in schema.get("required", ())):
            return False
        closed = self.closed_objects and "properties" in schema
        for key, v in value.items():
            sub = _property_schema(schema, key, closed)
            if not self.admits(sub, v):
                return False
        return True


def _item_schema(schema, i: int):
    """The subschema that item ``i`` of an array must satisfy."""
    if not isinstance(schema, dict):
        return schema
    items = schema.get("items", True)
    if not isinstance(items, list):
        return items
    return items[i] if i < len(items) else schema.get("additionalItems", True)


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


def _text_literal(text: str, keyword: str, pointer: str) -> Expr:
    try:
        return literal(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise SchemaError("a name holds a lone surrogate", keyword=keyword, pointer=pointer) from None


def _join(open_: bytes, parts: list[list], close: bytes) -> list:
    """``open_ part ("," part)* close`` as one token list."""
    out = list(open_)
    for i, part in enumerate(parts):
        out.extend([0x2C, *part] if i else part)
    return out + list(close)


_END = object()


def _trie_insert(trie: dict, tokens: list) -> None:
    node = trie
    for token in tokens:
        if token != EMPTY:
            node = node.setdefault(token, {})
    node[_END] = True


def _trie_expr(node: dict) -> Expr:
    """The alternation a trie stands for; single-child chains become one literal run."""
    parts = []
    for token, child in node.items():
        if token is _END:
            parts.append(EMPTY)
            continue
        run = [token]
        while len(child) == 1 and _END not in child:
            ((token, child),) = child.items()
            run.append(token)
        parts.append(seq(*(literal(bytes([t])) if isinstance(t, int) else t for t in run), _trie_expr(child)))
    return jg.choice(parts)  # the parts start with distinct tokens
