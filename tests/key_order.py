"""The key order a schema-constrained generation writes objects in, for feeding instances.

Generation fixes key order, so a test (or a benchmark) must feed a valid instance with its
keys in the compiler's order before the automaton can accept it. ``declared_order`` rewrites
an instance that way; ``jsonschema`` picks the ``anyOf``/``oneOf`` branch a value matches.
"""

from __future__ import annotations

import jsonschema

from llamay.grammars.jsonschema.keywords import legacy_ref
from llamay.grammars.jsonschema.refs import pointer_target
from llamay.grammars.jsonschema.regex import RegexError, python_regex


def declared_order(data, schema):
    """``data`` with object keys in the order a schema-constrained generation writes them.

    Generation fixes key order, so a test must feed instances in the compiler's order. The rule,
    where schemas combine (``llamay.grammars.jsonschema.combinators`` merges in this order): local ``$ref`` (JSON
    Pointers into ``schema``) is resolved; the schemas on an object's path are its own, then each
    ``allOf`` entry in turn (recursively), then the ``$ref`` target, then the ``anyOf``/``oneOf``
    branch the value matches (the first that ``jsonschema`` validates it against, ``schema`` as
    the resolution context). The order is the ``properties`` keys of the path's schemas in path
    order, then the ``required`` names not yet listed, then the value's remaining keys as they came.
    A property's value follows, combined, every
    subschema that applies to its key along that path: the ``properties`` entries naming it, in
    path order, then, from each schema on the path that does not name it, its matching
    ``patternProperties`` (``llamay.grammars.jsonschema.regex``) or else its ``additionalProperties``. An array item
    follows ``prefixItems`` (or array-form ``items``) by position, then ``items`` (or
    ``additionalItems``), from every schema on the array's path.
    """
    return _KeyOrder(schema).value(data, [schema])


class _KeyOrder:
    """``declared_order`` over one root schema (its ``$ref`` targets and branch validator)."""

    def __init__(self, root) -> None:
        self.root = root
        self.legacy = legacy_ref(root)  # drafts 4-7: the keywords beside "$ref" are ignored
        self._validator = None

    def value(self, data, schemas: list):
        if isinstance(data, dict):
            path = self.path(schemas, data)
            return {k: self.value(data[k], _applying(path, k)) for k in _key_order(path, data)}
        if isinstance(data, list):
            path = self.path(schemas, data)
            return [self.value(v, [sub for s in path for sub in _item_schemas(s, i)]) for i, v in enumerate(data)]
        return data

    def path(self, schemas: list, data, seen: set | None = None) -> list[dict]:
        """The object schemas that apply to ``data``, in contribution order (each before its parts)."""
        seen = set() if seen is None else seen
        out = []
        for s in schemas:
            if not isinstance(s, dict) or id(s) in seen:
                continue
            seen.add(id(s))
            if self.legacy and isinstance(s.get("$ref"), str):
                s = {"$ref": s["$ref"]}
            parts = list(_get(s, "allOf", list))
            if isinstance(s.get("$ref"), str):
                parts.append(self.resolve(s["$ref"]))
            for keyword in ("anyOf", "oneOf"):
                parts.append(next((b for b in _get(s, keyword, list) if self.matches(data, b)), None))
            out += [s, *self.path(parts, data, seen)]
        return out

    def resolve(self, ref: str):
        """The target of a local JSON Pointer ``$ref`` (``None`` for any other)."""
        return pointer_target(self.root, ref[1:]) if ref.startswith("#") else None

    def matches(self, data, branch) -> bool:
        if self._validator is None:
            self._validator = jsonschema.validators.validator_for(self.root)(self.root)
        try:
            return self._validator.evolve(schema=branch).is_valid(data)
        except Exception:  # a branch jsonschema cannot evaluate matches nothing
            return False


def _key_order(path: list[dict], data: dict) -> list[str]:
    order: dict[str, None] = {}
    for s in path:
        order.update(dict.fromkeys(_get(s, "properties", dict)))
    for s in path:
        order.update(dict.fromkeys(k for k in _get(s, "required", list) if isinstance(k, str)))
    return [k for k in order if k in data] + [k for k in data if k not in order]


def _applying(path: list[dict], key: str) -> list:
    """The subschemas the value of ``key`` must satisfy: those naming it, then the others' catch-alls."""
    named = [_get(s, "properties", dict)[key] for s in path if key in _get(s, "properties", dict)]
    rest = []
    for s in path:
        if key not in _get(s, "properties", dict):
            patterns = [sub for p, sub in _get(s, "patternProperties", dict).items() if _search(p, key)]
            rest += patterns or [s.get("additionalProperties", True)]
    return named + rest


def _item_schemas(schema: dict, i: int) -> list:
    items = schema.get("items", True)
    if "prefixItems" in schema:
        prefix, rest = _get(schema, "prefixItems", list), items
    elif isinstance(items, list):
        prefix, rest = items, schema.get("additionalItems", True)
    else:
        prefix, rest = [], items
    return [prefix[i] if i < len(prefix) else rest]


def _get(schema: dict, keyword: str, kind: type):
    """``schema[keyword]`` when it has the expected JSON type, else empty (corpora hold odd schemas)."""
    value = schema.get(keyword)
    return value if isinstance(value, kind) else kind()


def _search(pattern: str, key: str) -> bool:
    try:
        return python_regex(pattern).search(key) is not None
    except RegexError:  # a pattern llamay refuses: treated as matching nothing
        return False
