"""Berkeley function-calling data (../shared/testdata/bfcl) as llamay tools and reference calls.

BFCL's ``parameters`` are almost JSON Schema: ``dict``, ``float``, ``tuple`` and ``any`` are
its own type names. Its Java and JavaScript entries expect every argument as source text (the
reference answers are strings of code), so there every parameter becomes a string, as BFCL
itself does when it prompts a model.
"""

from __future__ import annotations

import json
from pathlib import Path

TYPES = {"dict": "object", "float": "number", "tuple": "array", "double": "number", "long": "integer",
         "int": "integer", "String": "string", "Boolean": "boolean", "HashMap": "object", "ArrayList": "array",
         "Array": "array", "char": "string"}
SOURCE_LANGUAGES = ("java", "javascript")


def to_json_schema(node, *, as_source: bool = False):
    """A BFCL parameter schema as JSON Schema."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key == "type":
            if value not in ("any", ""):
                out[key] = TYPES.get(value, value)
        elif key == "optional":  # BFCL's own flag; "required" already says it
            continue
        else:
            out[key] = value
    if out.get("type") == "array" and "enum" in out and not all(isinstance(v, list) for v in out["enum"]):
        # BFCL writes the items' enum on the array itself: as written, no array would satisfy it
        out["items"] = {**out.get("items", {}), "enum": out.pop("enum")}
    if as_source:
        out = {k: v for k, v in out.items() if k in ("description",)} | {"type": "string"}
    return out


def tool(function: dict, language: str) -> dict:
    params = to_json_schema(function["parameters"])
    if language in SOURCE_LANGUAGES:
        params["properties"] = {k: to_json_schema(v, as_source=True) for k, v in params.get("properties", {}).items()}
    return {"name": function["name"], "parameters": params}


def entries(folder: Path):
    """(file stem, entry id, tools, reference calls or None) for every entry of every file."""
    for path in sorted(folder.glob("BFCL_v4_*.json")):
        language = next((lang for lang in SOURCE_LANGUAGES if path.stem.endswith("_" + lang)), "python")
        answers = {}
        answer_path = folder / "possible_answer" / path.name
        if answer_path.exists():
            for line in answer_path.open(encoding="utf-8"):
                rec = json.loads(line)
                answers[rec["id"]] = rec["ground_truth"]
        for line in path.open(encoding="utf-8"):
            rec = json.loads(line)
            tools = [tool(f, language) for f in rec["function"]]
            truth = answers.get(rec["id"])
            yield path.stem, rec["id"], tools, None if truth is None else [reference_call(c, tools) for c in truth]


def reference_call(truth: dict, tools: list[dict]) -> dict:
    """The first acceptable value of each parameter ("" alone means: leave it out), in declared order."""
    (name, params), = truth.items()
    declared = next(t for t in tools if t["name"] == name)["parameters"].get("properties", {})
    args = {}
    for key in [*declared, *(k for k in params if k not in declared)]:
        if key not in params:
            continue
        values = [v for v in params[key] if v != ""]
        if values:
            args[key] = _first(values[0], declared.get(key, {}))
    return {"name": name, "arguments": args}


def _first(value, schema):
    """BFCL nests "acceptable values" lists inside dict answers at every level: take the first of each."""
    if isinstance(value, dict):
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        out = {}
        for key in [*props, *(k for k in value if k not in props)]:
            options = value.get(key)
            if isinstance(options, list):
                options = [v for v in options if v != ""]
                if not options:
                    continue
                options = options[0]
            if key in value:
                out[key] = _first(options, props.get(key, {}))
        return out
    if isinstance(value, list) and isinstance(schema, dict):
        return [_first(v, schema.get("items", {})) for v in value]
    return value


def hermes(calls: list[dict]) -> bytes:
    return b"".join(
        b"<tool_call>" + json.dumps(c, separators=(",", ":"), ensure_ascii=False).encode() + b"</tool_call>"
        for c in calls)
