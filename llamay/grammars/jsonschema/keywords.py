"""JSON Schema keywords: what llamay enforces, warns about, ignores or refuses, and their shapes.

``Checker`` is the first compile pass. It visits every subschema reachable from the root
(through ``$ref`` too, each target once), refuses the keywords llamay cannot enforce, reports
malformed keyword values, warns where a keyword is accepted but never enforced, and applies
the bounds of ``Limits``. A schema that passes is well formed, so the compiler can trust
keyword shapes.
"""

from __future__ import annotations

from ...compile_budget import clock
from ...errors import SchemaError
from ...ir import MAX_REPEAT
from ...options import Limits
from .. import json_lexical as jg

TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")

#: Keywords compiled into the automaton (``oneOf``, ``format``, ``multipleOf`` and ``pattern``
#: beside a length bound warn in the cases the compiler cannot make exact; see ``compiler.py``).
ENFORCED = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
        "minProperties", "maxProperties", "items", "additionalItems", "prefixItems", "minItems", "maxItems",
        "enum", "const", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "$ref", "allOf", "anyOf", "oneOf",
    }
)  # fmt: skip

#: Keywords accepted but never enforced: each occurrence that can apply adds a warning.
WARNED = frozenset({"uniqueItems", "contentEncoding", "contentMediaType", "contentSchema"})

#: Keywords with no effect on validation (``$defs``/``definitions`` hold ``$ref`` targets).
ANNOTATIONS = frozenset(
    {
        "title", "description", "default", "examples", "$schema", "$id", "id", "$comment", "deprecated",
        "readOnly", "writeOnly", "$defs", "definitions", "$anchor", "$dynamicAnchor", "$recursiveAnchor",
        "$vocabulary",
    }
)  # fmt: skip

#: JSON Schema keywords refused by name: they need what a byte automaton cannot hold
#: (negation, conditionals, cross-item or cross-key counting) or another document.
REFUSED = frozenset(
    {
        "not", "if", "then", "else", "dependentSchemas", "dependentRequired", "dependencies",
        "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef", "contains",
        "minContains", "maxContains",
    }
)  # fmt: skip

# Keywords outside every vocabulary (``x-*`` vendor extensions, typos) are annotations by the
# specification; llamay accepts them and warns, so a typo like "require" does not go unnoticed.

# The types each warned keyword constrains: a warning is only worth giving where one is allowed.
_WARNED_TYPES = {
    "uniqueItems": ("array",),
    "contentEncoding": ("string",),
    "contentMediaType": ("string",),
    "contentSchema": ("string",),
}

LEGACY_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")


def legacy_ref(root) -> bool:
    """Drafts 4-7 ignore every keyword beside ``$ref``; 2019-09 on (and the default) apply them."""
    declared = root.get("$schema") if isinstance(root, dict) else None
    return isinstance(declared, str) and any(d in declared for d in LEGACY_DRAFTS)


def is_count(value) -> bool:
    """A non-negative integer; ``2.0`` counts (JSON Schema compares numbers by value)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return value >= 0 and float(value).is_integer()


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_type(value) -> bool:
    if isinstance(value, str):
        return value in TYPES
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(t, str) and t in TYPES for t in value)
        and len(set(value)) == len(value)
    )


def _is_schema(value) -> bool:
    return isinstance(value, dict | bool)


def _schemas(value) -> bool:
    return isinstance(value, list) and len(value) > 0


# The shape each keyword's value must have, and the words that say so.
SHAPES = {
    "type": (is_type, f"one of {', '.join(TYPES)} or a non-empty list of them without repeats"),
    "properties": (lambda v: isinstance(v, dict), "an object of schemas"),
    "patternProperties": (lambda v: isinstance(v, dict), "an object of schemas"),
    "required": (lambda v: isinstance(v, list) and all(isinstance(k, str) for k in v), "a list of strings"),
    "additionalProperties": (_is_schema, "a schema"),
    "propertyNames": (_is_schema, "a schema"),
    "minProperties": (is_count, "a non-negative integer"),
    "maxProperties": (is_count, "a non-negative integer"),
    "items": (lambda v: _is_schema(v) or isinstance(v, list), "a schema or a list of schemas"),
    "prefixItems": (lambda v: isinstance(v, list), "a list of schemas"),
    "additionalItems": (_is_schema, "a schema"),
    "minItems": (is_count, "a non-negative integer"),
    "maxItems": (is_count, "a non-negative integer"),
    "minLength": (is_count, "a non-negative integer"),
    "maxLength": (is_count, "a non-negative integer"),
    "uniqueItems": (lambda v: isinstance(v, bool), "a boolean"),
    "contentEncoding": (lambda v: isinstance(v, str), "a string"),
    "contentMediaType": (lambda v: isinstance(v, str), "a string"),
    "contentSchema": (_is_schema, "a schema"),
    "enum": (lambda v: isinstance(v, list), "a list"),
    "const": (lambda v: True, "a JSON value"),
    "minimum": (_is_number, "a number"),
    "maximum": (_is_number, "a number"),
    "exclusiveMinimum": (lambda v: _is_number(v) or isinstance(v, bool), "a number (a boolean in draft 4)"),
    "exclusiveMaximum": (lambda v: _is_number(v) or isinstance(v, bool), "a number (a boolean in draft 4)"),
    "multipleOf": (lambda v: _is_number(v) and v > 0, "a number above 0"),
    "pattern": (lambda v: isinstance(v, str), "a string"),
    "format": (lambda v: isinstance(v, str), "a string"),
    "$ref": (lambda v: isinstance(v, str), "a string"),
    "allOf": (_schemas, "a non-empty list of schemas"),
    "anyOf": (_schemas, "a non-empty list of schemas"),
    "oneOf": (_schemas, "a non-empty list of schemas"),
}

_FURTHER = WARNED | {"minItems", "minLength"}  # keywords with more to check than their shape

# The keywords whose values hold subschemas the compiler reads: by name, in a list, or one
# (``items`` may be either of the last two).
_NAMED, _LISTED, _SINGLE = 0, 1, 2
_SUBSCHEMAS = {"properties": _NAMED, "patternProperties": _NAMED} | dict.fromkeys(
    ("allOf", "anyOf", "oneOf", "prefixItems"), _LISTED
) | dict.fromkeys(("items", "additionalItems", "additionalProperties", "propertyNames"), _SINGLE)


def child(pointer: str, *tokens) -> str:
    """JSON Pointer of a subschema (RFC 6901 escapes ``~`` and ``/``)."""
    for token in tokens:
        token = str(token)
        if "~" in token or "/" in token:
            token = token.replace("~", "~0").replace("/", "~1")
        pointer += "/" + token
    return pointer


def allowed_types(node: dict) -> tuple[str, ...]:
    """The types ``type`` allows (all when absent); ``integer`` is implied by ``number``."""
    declared = node.get("type", TYPES)
    declared = (declared,) if isinstance(declared, str) else tuple(declared)
    if "number" in declared and "integer" not in declared:
        declared += ("integer",)
    return declared


#: Calls to ``check_deadline`` per look at the clock: reading a thread's CPU time is a system call,
#: several times dearer than reading the wall clock, and a schema's compile checks at every subschema.
CLOCK_EVERY = 16
_checks = 0


def check_deadline(deadline: float, limits: Limits, pointer: str, *, now: bool = False) -> None:
    """Refuse the schema once the request's compile budget is spent (every ``CLOCK_EVERY`` calls, or ``now``)."""
    # "COMPILE_SECONDS": a hostile schema must not hold a worker (the request's one budget, in CPU time).
    global _checks
    _checks += 1
    if (now or _checks % CLOCK_EVERY == 0) and clock() > deadline:
        raise SchemaError(
            f"compiling the request's constraints took over {limits.compile_seconds} s of CPU time",
            keyword="COMPILE_SECONDS", pointer=pointer,
        )


def not_enforced(keyword: str, pointer: str) -> str:
    """The warning for a keyword the automaton does not enforce (the checker's and the compiler's)."""
    return f"{keyword} not enforced at {pointer or '(root)'}"


class Checker:
    """Pass 1: refusals, malformed values, warnings and bounds, for every reachable subschema."""

    def __init__(self, warnings: list[str], deadline: float, limits: Limits, resolver, legacy: bool) -> None:
        self.warnings = warnings
        self.deadline = deadline
        self.limits = limits
        self.resolver = resolver
        self.legacy = legacy
        self.seen: set[int] = set()

    def schema(self, node, pointer: str, via: str, depth: int) -> None:
        # "MAX_DEPTH": the compilers recurse once per level.
        if depth > self.limits.max_depth:
            message = f"schema nests deeper than {self.limits.max_depth} levels"
            raise SchemaError(message, keyword="MAX_DEPTH", pointer=pointer)
        check_deadline(self.deadline, self.limits, pointer)
        if node is True or node is False:
            return
        if not isinstance(node, dict):
            text = jg.dumps(node)[:40]
            raise SchemaError(f"a schema must be an object or a boolean, not {text}", keyword=via, pointer=pointer)
        if id(node) in self.seen:
            return
        self.seen.add(id(node))
        if "$ref" in node and self.legacy:  # drafts 4-7: the siblings of "$ref" have no effect
            node = {"$ref": node["$ref"]}
        for keyword, value in node.items():
            if keyword in ANNOTATIONS:
                continue
            shape = SHAPES.get(keyword)  # most keywords need only their shape checked
            if shape is None or keyword in _FURTHER or not shape[0](value):
                self.keyword(node, keyword, value, pointer)
        if "$ref" in node:
            target = self.resolver.resolve(node["$ref"], self.resolver.base_of(node), pointer)
            self.schema(target, pointer + "/$ref", "$ref", depth + 1)
        # every subschema the compiler reads, in document order (keyword names need no escapes)
        for keyword, value in node.items():
            kind = _SUBSCHEMAS.get(keyword)
            if kind is None:
                continue
            if kind == _NAMED:
                parent = pointer + "/" + keyword
                for name, sub in value.items():
                    self.schema(sub, child(parent, name), keyword, depth + 1)
            elif kind == _LISTED or isinstance(value, list):
                for i, sub in enumerate(value):
                    self.schema(sub, f"{pointer}/{keyword}/{i}", keyword, depth + 1)
            else:
                self.schema(value, pointer + "/" + keyword, keyword, depth + 1)

    def keyword(self, node: dict, keyword: str, value, pointer: str) -> None:
        shape = SHAPES.get(keyword)
        if shape is None:
            if keyword in REFUSED:
                raise SchemaError(f"keyword {keyword!r} is not supported", keyword=keyword, pointer=pointer)
            self.warnings.append(not_enforced(keyword, pointer))
            return
        if not shape[0](value):
            raise SchemaError(f"{keyword!r} must be {shape[1]}", keyword=keyword, pointer=pointer)
        # "MAX_REPEAT": a minimum count is built from blocks of MAX_REPEAT repetitions.
        if (keyword == "minItems" or keyword == "minLength") and value > MAX_REPEAT * MAX_REPEAT:
            message = f"{keyword} {value} is above {MAX_REPEAT * MAX_REPEAT}"
            raise SchemaError(message, keyword="MAX_REPEAT", pointer=pointer)
        if keyword in WARNED and value and self.applies(node, keyword):
            self.warnings.append(not_enforced(keyword, pointer))

    @staticmethod
    def applies(node: dict, keyword: str) -> bool:
        """Whether a warned keyword constrains a type the node allows (``type`` and ``enum``)."""
        allowed = set(allowed_types(node)) if is_type(node.get("type", "null")) else set(TYPES)
        if "const" in node or isinstance(node.get("enum"), list):
            return False  # the listed values are checked whole
        return bool(allowed.intersection(_WARNED_TYPES[keyword]))
