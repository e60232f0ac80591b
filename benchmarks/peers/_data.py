"""MaskBench schemas and their valid instances, as the peer harness feeds them.

Each valid instance is written compactly (``separators=(",", ":")``, raw UTF-8) with its keys
reordered to the order the schema declares them, since every engine here emits declared
properties in declared order (design section 10: "declared key order").
"""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path
from urllib.parse import unquote

REPO = Path(__file__).resolve().parents[2]
MASKBENCH = REPO.parent / "shared" / "testdata" / "jsonschemabench"
DEFAULT_SUBSETS = ("Github_easy", "Glaiveai2K")


def load_subset(name: str, root: Path = MASKBENCH) -> list[dict]:
    path = root / f"{name}.jsonl.gz"
    if not path.exists():
        raise FileNotFoundError(f"{path} is absent (../shared/testdata is not beside this checkout)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def select_schemas(subsets, limit: int | None, seed: int = 0, root: Path = MASKBENCH, with_instances: bool = False):
    """``limit`` schemas in all, spread evenly over ``subsets``, drawn with ``random.Random(seed)``."""
    chosen = []
    per = None if limit is None else -(-limit // len(subsets))
    for name in subsets:
        records = load_subset(name, root)
        if with_instances:
            records = [r for r in records if any(t["valid"] for t in r["tests"])]
        if per is not None and per < len(records):
            records = random.Random(f"{seed}:{name}").sample(records, per)
        chosen.extend(records)
    return chosen if limit is None else chosen[:limit]


def valid_texts(record: dict) -> list[str]:
    schema = record["schema"]
    return [compact(reorder_keys(t["data"], schema)) for t in record["tests"] if t["valid"]]


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- key order -------------------------------------------------------------------------


def reorder_keys(value, schema):
    """``value`` with every object's keys in the order its schema(s) declare them.

    Declared keys come first, in declaration order (``properties`` of the schema, of ``$ref``
    targets, of ``allOf`` parts and of the ``anyOf``/``oneOf`` branches the value matches);
    keys the schema does not declare follow in their original order.
    """
    return _Reorder(schema).value(value, [schema])


class _Reorder:
    def __init__(self, root):
        self.root = root
        self.validator = None
        try:
            import jsonschema

            cls = jsonschema.validators.validator_for(root) if isinstance(root, dict) else None
            if cls is not None:
                self.validator = cls(root)
        except Exception:  # no jsonschema, or a schema it cannot take: match every branch
            self.validator = None

    def matches(self, value, schema) -> bool:
        if self.validator is None:
            return True
        try:
            return self.validator.evolve(schema=schema).is_valid(value)
        except Exception:
            return True

    def resolve(self, ref: str):
        if not ref.startswith("#"):
            return None
        node = self.root
        for part in unquote(ref[1:]).split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return None
        return node

    def expand(self, schemas, value, seen=None) -> list[dict]:
        """The schemas that apply at this point, ``$ref`` and combinators opened."""
        out: list[dict] = []
        seen = set() if seen is None else seen
        for s in schemas:
            if not isinstance(s, dict) or id(s) in seen:
                continue
            seen.add(id(s))
            out.append(s)
            ref = s.get("$ref")
            if isinstance(ref, str):
                target = self.resolve(ref)
                if target is not None:
                    out.extend(self.expand([target], value, seen))
            if isinstance(s.get("allOf"), list):
                out.extend(self.expand(s["allOf"], value, seen))
            for key in ("anyOf", "oneOf"):
                branches = s.get(key)
                if isinstance(branches, list):
                    fitting = [b for b in branches if self.matches(value, b)] or branches
                    out.extend(self.expand(fitting, value, seen))
            if isinstance(s.get("if"), dict):
                branch = s.get("then") if self.matches(value, s["if"]) else s.get("else")
                if isinstance(branch, dict):
                    out.extend(self.expand([branch], value, seen))
        return out

    def value(self, value, schemas):
        if isinstance(value, dict):
            return self.obj(value, self.expand(schemas, value))
        if isinstance(value, list):
            return self.arr(value, self.expand(schemas, value))
        return value

    def obj(self, value: dict, schemas: list[dict]) -> dict:
        order: list[str] = []
        for s in schemas:
            props = s.get("properties")
            if isinstance(props, dict):
                order.extend(k for k in props if k in value and k not in order)
        keys = order + [k for k in value if k not in order]
        out = {}
        for k in keys:
            subs = []
            for s in schemas:
                props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
                if k in props:
                    subs.append(props[k])
                matched = False
                for pattern, sub in (s.get("patternProperties") or {}).items():
                    try:
                        if re.search(pattern, k):
                            subs.append(sub)
                            matched = True
                    except re.error:
                        pass
                if k not in props and not matched and isinstance(s.get("additionalProperties"), dict):
                    subs.append(s["additionalProperties"])
            out[k] = self.value(value[k], subs)
        return out

    def arr(self, value: list, schemas: list[dict]) -> list:
        out = []
        for i, item in enumerate(value):
            subs = []
            for s in schemas:
                prefix = s.get("prefixItems")
                items = s.get("items")
                if isinstance(prefix, list):
                    if i < len(prefix):
                        subs.append(prefix[i])
                    elif isinstance(items, dict):
                        subs.append(items)
                elif isinstance(items, list):
                    if i < len(items):
                        subs.append(items[i])
                    elif isinstance(s.get("additionalItems"), dict):
                        subs.append(s["additionalItems"])
                elif isinstance(items, dict):
                    subs.append(items)
            out.append(self.value(item, subs))
        return out
