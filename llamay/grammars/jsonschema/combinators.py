"""Combinators as a disjunction of flat schemas: ``allOf`` merged, ``anyOf``/``oneOf`` distributed.

The automaton can take the union of two languages but not their intersection. So every
schema is rewritten, one level at a time, into alternatives that hold no combinator at
the top: a *flat* schema (plain keywords, whose subschemas may still combine: they are
rewritten when their turn comes) or a ``RefTo`` (a reference kept whole, so that a
recursive definition becomes one rule of the pushdown automaton instead of an unrolling).

- ``allOf`` entries and a ``$ref`` beside other keywords are **merged** keyword by keyword:
  types intersect, bounds tighten, ``required`` unites, ``enum`` values intersect, each
  property's schemas combine into an ``allOf`` of their own (merged when that property is
  compiled), and the schemas a key meets in each side (``properties``, else
  ``patternProperties``, else ``additionalProperties``) are all kept, so a closed side stays
  closed. Two different ``pattern``s or ``format``s cannot be intersected: the first is kept
  and the others are reported back as not enforced.
- ``anyOf`` and ``oneOf`` **distribute**: ``{A, anyOf: [B, C]}`` is ``A∧B | A∧C``. ``oneOf`` is
  exact when its branches are provably disjoint (``provably_disjoint``); otherwise the caller
  warns that exclusivity is not enforced.

Merged property order is the order of the merge: a schema's own keywords first, then its
``allOf`` entries in turn, then its ``$ref`` target, then the ``anyOf``/``oneOf`` branch.
"""

from __future__ import annotations

from contextlib import contextmanager
from decimal import Decimal
from fractions import Fraction
from math import gcd, lcm
from urllib.parse import unquote

from ...errors import SchemaError
from .keywords import SHAPES, child

#: Keywords that combine subschemas; a flat schema holds none of them.
COMBINATORS = ("allOf", "anyOf", "oneOf", "$ref")

#: Merged keywords the intersection cannot express: all but the first are reported back.
UNMERGED = "_unmerged"

_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_OBJECT = ("properties", "patternProperties", "additionalProperties")
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


class RefTo:
    """A ``$ref`` kept whole: ``target`` is compiled once, as a named rule. (Not a dataclass: its
    generated ``__init__`` would run in the interpreter, where this compiled module does not.)"""

    __slots__ = ("at", "pointer", "target")

    def __init__(self, target, pointer: str, at: str) -> None:
        self.target = target
        self.pointer = pointer  # where the "$ref" is written (errors name it)
        self.at = at  # where the target is (its subschemas are named from there)

    def __hash__(self) -> int:
        return id(self.target)

    def __eq__(self, other) -> bool:
        return isinstance(other, RefTo) and other.target is self.target


def type_set(node) -> frozenset[str]:
    """The JSON types a flat schema's ``type``, ``const`` and ``enum`` leave; ``number`` means non-integers too."""
    if node is False:
        return frozenset()
    if node is True or not isinstance(node, dict):
        return frozenset(_TYPES)
    declared = node.get("type", _TYPES)
    allowed = {declared} if isinstance(declared, str) else set(declared)
    if "number" in allowed:
        allowed.add("integer")
    if "const" in node:
        allowed &= {json_type(node["const"])} | ({"number"} if json_type(node["const"]) == "integer" else set())
    if isinstance(node.get("enum"), list):
        kinds = {json_type(v) for v in node["enum"]}
        allowed &= kinds | ({"number"} if "integer" in kinds else set())
    return frozenset(allowed)


def json_type(value) -> str:
    """The JSON type of a parsed value; an integral float is an ``integer``."""
    if isinstance(value, str):  # first: enum values are mostly strings
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, (float, Decimal)):
        return "integer" if value == int(value) else "number"
    return "array" if isinstance(value, list) else "object"


def json_equal(a, b) -> bool:
    """JSON value equality: numbers by value, ``true`` is not ``1``, key order does not matter."""
    ta, tb = json_type(a), json_type(b)
    if {ta, tb} <= {"integer", "number"}:
        return a == b
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if ta == "object":
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def conj(a, b):
    """Both schemas (``None``: no constraint); a new ``allOf`` only where neither decides alone."""
    if a is None:
        return b
    if b is None or b is True or b == {} or b is a:
        return a
    if a is True or a == {}:
        return b
    if a is False or b is False:
        return False
    return {"allOf": [a, b]}


def closed(node: dict, closed_objects: bool) -> bool:
    """Whether undeclared keys are refused by default (declared ``properties`` close an object: compile_json_schema)."""
    return "additionalProperties" not in node and closed_objects and "properties" in node


class Algebra:
    """Rewrites schemas of one document into alternatives of flat schemas (see the module docstring)."""

    def __init__(self, resolver, legacy_ref: bool, closed_objects: bool, max_branches: int, regex_search, warn) -> None:
        self.max_branches = max_branches
        self.resolver = resolver
        self.legacy_ref = legacy_ref  # drafts 4-7: keywords beside "$ref" are ignored
        self.closed_objects = closed_objects
        self.search = regex_search  # (pattern, text) -> bool, with ECMA-262 semantics
        self.warn = warn  # (keyword, pointer): what the rewrite cannot make exact
        self._inlining: list[int] = []

    # ------------------------------------------------------------ rewriting

    def alternatives(self, node, pointer: str) -> list:
        """``node`` as flat schemas and ``RefTo``s whose union is exactly ``node``'s values (in order)."""
        if node is True:
            return [{}]
        if node is False:
            return []
        if "$ref" in node and self.legacy_ref:
            node = {"$ref": node["$ref"]}
        result = [normalize(node)]
        for i, entry in enumerate(node.get("allOf", ())):
            result = self.cross(result, self.alternatives(entry, child(pointer, "allOf", i)), pointer)
        if "$ref" in node:
            ref = node["$ref"]
            target = self.resolver.resolve(ref, self.resolver.base_of(node), pointer)
            at = unquote(ref[1:]) if ref.startswith("#/") else child(pointer, "$ref")
            result = self.cross(result, [RefTo(target, child(pointer, "$ref"), at)], pointer)
        for keyword in ("anyOf", "oneOf"):
            if keyword in node:
                entries = [self.alternatives(e, child(pointer, keyword, i)) for i, e in enumerate(node[keyword])]
                if keyword == "oneOf" and not self.exclusive(entries):
                    self.warn("oneOf", pointer)  # compiled as anyOf: exclusivity is not enforced
                result = self.cross(result, [alt for entry in entries for alt in entry], pointer)
        return result

    def cross(self, left: list, right: list, pointer: str) -> list:
        out = []
        for a in left:
            for b in right:
                merged = self.merge(a, b, pointer)
                out.extend(merged)
                if len(out) > self.max_branches:
                    message = f"combinators expand to over {self.max_branches} alternatives"
                    raise SchemaError(message, keyword="MAX_BRANCHES", pointer=pointer)
        return out

    def merge(self, a, b, pointer: str) -> list:
        """The alternatives of ``a`` and ``b`` both holding."""
        if not isinstance(a, RefTo) and not a:
            return [b]
        if not isinstance(b, RefTo) and not b:
            return [a]
        # a reference is inlined where it stands: the left operand's properties come first
        if isinstance(a, RefTo):
            with self.inlining(a):
                return self.cross(self.alternatives(a.target, a.at), [b], pointer)
        if isinstance(b, RefTo):
            with self.inlining(b):
                return self.cross([a], self.alternatives(b.target, b.at), pointer)
        merged = self.merge_flat(a, b, pointer)
        return [] if merged is None else [merged]

    @contextmanager
    def inlining(self, ref: RefTo):
        """Inline a reference's keywords (for a merge); a cycle of merges never ends and is refused."""
        if id(ref.target) in self._inlining:
            message = "a $ref cycle merges a schema with itself before any value is read"
            raise SchemaError(message, keyword="$ref", pointer=ref.pointer)
        self._inlining.append(id(ref.target))
        try:
            yield
        finally:
            self._inlining.pop()

    def resolved(self, alt) -> list:
        """Flat alternatives only: references inlined (for checks on values, never for compiling)."""
        if not isinstance(alt, RefTo):
            return [alt]
        with self.inlining(alt):
            return [flat for inner in self.alternatives(alt.target, alt.at) for flat in self.resolved(inner)]

    # ------------------------------------------------------------ merging flat schemas

    def merge_flat(self, a: dict, b: dict, pointer: str) -> dict | None:
        """Both flat schemas as one; ``None`` when provably nothing satisfies both."""
        out = {k: v for k, v in a.items() if k not in _OBJECT}
        for keyword, value in b.items():
            if keyword in _OBJECT:
                continue
            if keyword not in out:
                out[keyword] = value
                continue
            combined = self.combine(keyword, out[keyword], value, out)
            if combined is _NOTHING:
                return None
            out[keyword] = combined
        if any(k in a or k in b for k in _OBJECT):
            out.update(self.merge_members(a, b, pointer))
        if "prefixItems" in a or "prefixItems" in b:
            out["prefixItems"] = self.merge_prefix(a, b)
        return out

    def combine(self, keyword: str, x, y, out: dict):
        if keyword == "type":
            common = type_set({"type": x}) & type_set({"type": y})
            named = [t for t in _TYPES if t in common and not (t == "integer" and "number" in common)]
            return named or _NOTHING
        if keyword in _LOWER:
            return max(x, y)
        if keyword in _UPPER:
            return min(x, y)
        if keyword == "required":
            return list(dict.fromkeys([*x, *y]))
        if keyword == "enum":
            common = [v for v in x if any(json_equal(v, w) for w in y)]
            return common or _NOTHING
        if keyword == "const":
            return x if json_equal(x, y) else _NOTHING
        if keyword == "multipleOf":
            p, q = Fraction(Decimal(str(x))), Fraction(Decimal(str(y)))
            m = Fraction(lcm(p.numerator, q.numerator), gcd(p.denominator, q.denominator))
            return int(m) if m.denominator == 1 else Decimal(m.numerator) / Decimal(m.denominator)
        if keyword in ("items", "propertyNames"):
            return conj(x, y)
        if keyword == "uniqueItems":
            return x or y
        if keyword in ("pattern", "format") and x != y:
            out.setdefault(UNMERGED, []).append(keyword)
        return x

    def merge_members(self, a: dict, b: dict, pointer: str) -> dict:
        """``properties``/``additionalProperties``/``patternProperties`` of both sides, key by key."""
        if ("patternProperties" in a and any(k in b for k in ("patternProperties", "additionalProperties"))) or (
            "patternProperties" in b and "additionalProperties" in a
        ):
            message = "patternProperties beside another schema's additionalProperties or patternProperties"
            raise SchemaError(message + " cannot be merged", keyword="allOf", pointer=pointer)
        names = list(dict.fromkeys([*a.get("properties", {}), *b.get("properties", {})]))
        out: dict = {}
        if names:
            out["properties"] = {n: conj(self.key_schema(a, n, True), self.key_schema(b, n, True)) for n in names}
        patterns = {**a.get("patternProperties", {}), **b.get("patternProperties", {})}
        if patterns:
            out["patternProperties"] = patterns
        extra = conj(self.extra_schema(a, True), self.extra_schema(b, True))
        if extra is not None:
            out["additionalProperties"] = extra
        return out

    def key_schema(self, node: dict, name: str, merging: bool = False):
        """The schema ``node`` gives the value of key ``name`` (``None``: no constraint).

        ``merging``: the node is one side of a merge, so llamay's closed default is not applied
        yet (it applies to the merged object, which is what gets compiled).
        """
        if name in node.get("properties", {}):
            return node["properties"][name]
        matching = [s for p, s in node.get("patternProperties", {}).items() if self.search(p, name)]
        if matching:
            schema = None
            for s in matching:
                schema = conj(schema, s)
            return schema
        return self.extra_schema(node, merging)

    def extra_schema(self, node: dict, merging: bool = False):
        if "additionalProperties" in node:
            return node["additionalProperties"]
        return False if not merging and closed(node, self.closed_objects) else None

    @staticmethod
    def merge_prefix(a: dict, b: dict) -> list:
        """Position-wise ``prefixItems``; the shorter list is padded with its side's ``items``."""
        pa, pb = a.get("prefixItems", []), b.get("prefixItems", [])
        ra, rb = a.get("items", True), b.get("items", True)
        out = []
        for i in range(max(len(pa), len(pb))):
            out.append(conj(pa[i] if i < len(pa) else ra, pb[i] if i < len(pb) else rb))
        return out

    # ------------------------------------------------------------ disjointness (oneOf)

    def exclusive(self, entries: list[list]) -> bool:
        """Whether no value can satisfy two ``oneOf`` entries (given as their alternatives)."""
        for i, left in enumerate(entries):
            for right in entries[i + 1 :]:
                if not all(self.provably_disjoint(a, b) for a in left for b in right):
                    return False
        return True

    def provably_disjoint(self, x, y, depth: int = 0) -> bool:
        """No value satisfies both alternatives (``False`` where it cannot be shown cheaply)."""
        if depth > 4:
            return False
        try:
            xs, ys = self.resolved(x), self.resolved(y)
        except SchemaError:
            return False
        return all(self.flat_disjoint(a, b, depth) for a in xs for b in ys)

    def schemas_disjoint(self, x, y, depth: int) -> bool:
        try:
            xs, ys = self.alternatives(x, ""), self.alternatives(y, "")
        except SchemaError:
            return False
        return all(self.provably_disjoint(a, b, depth) for a in xs for b in ys)

    def flat_disjoint(self, a: dict, b: dict, depth: int) -> bool:
        common = type_set(a) & type_set(b)
        if not common:
            return True
        values_a, values_b = _values(a), _values(b)
        if values_a is not None and values_b is not None:
            return not any(json_equal(v, w) for v in values_a for w in values_b)
        if common <= {"object"}:
            return self.objects_disjoint(a, b, depth) or self.objects_disjoint(b, a, depth)
        return False

    def objects_disjoint(self, a: dict, b: dict, depth: int) -> bool:
        """A key ``a`` requires that ``b`` forbids or types disjointly (a discriminator)."""
        for name in a.get("required", ()):
            theirs = self.key_schema(b, name)
            if theirs is False:
                return True
            ours = self.key_schema(a, name)
            if theirs is not None and ours is not None and self.schemas_disjoint(ours, theirs, depth + 1):
                return True
        return False


def normalize(node: dict) -> dict:
    """``node``'s plain keywords, one spelling per meaning, so merges compare like with like.

    The draft-4/7 array form of ``items`` becomes ``prefixItems`` (``additionalItems`` its
    ``items``; without the array form ``additionalItems`` has no effect), and the draft-4
    boolean ``exclusiveMinimum``/``exclusiveMaximum`` become the numeric form.
    """
    out = {k: v for k, v in node.items() if k in _PLAIN}
    if _RESPELLED.isdisjoint(out):
        return out
    if isinstance(out.get("items"), list):
        out["prefixItems"] = out.pop("items")
        if "additionalItems" in out:
            out["items"] = out["additionalItems"]
    out.pop("additionalItems", None)
    for exclusive, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(exclusive), bool) and out.pop(exclusive) and inclusive in out:
            out[exclusive] = out.pop(inclusive)
    return out


def _values(node: dict):
    if "const" in node:
        return [node["const"]]
    return node.get("enum")


_NOTHING = object()

#: What ``normalize`` keeps: combinators are rewritten apart, annotations and unknown keywords mean nothing here.
_PLAIN = frozenset(SHAPES).difference(COMBINATORS)

#: The keywords ``normalize`` may spell anew.
_RESPELLED = frozenset({"items", "additionalItems", "exclusiveMinimum", "exclusiveMaximum"})
