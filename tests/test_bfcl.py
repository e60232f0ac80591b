"""Every BFCL function compiles as a tool; reference calls are accepted, malformed ones refused (no model)."""

from __future__ import annotations

import collections
import copy

import jsonschema
import pytest
from feed import accepts

from llamay.chat.tool_grammar import compile_tool_calls
from tests.bfcl import entries, hermes
from tests.conftest import corpus

FILES = ["BFCL_v4_simple_python", "BFCL_v4_simple_java", "BFCL_v4_simple_javascript", "BFCL_v4_multiple",
         "BFCL_v4_parallel", "BFCL_v4_live_simple", "BFCL_v4_live_multiple", "BFCL_v4_live_parallel",
         "BFCL_v4_irrelevance"]


def _validates(call: dict, tools: list[dict]) -> bool:
    """The oracle, with llamay's closed objects made explicit for ``jsonschema``.

    ``compile_json_schema`` closes, by default, an object that declares ``properties`` and says
    nothing of ``additionalProperties``: it admits no other key.
    """
    schema = _closed(next(t for t in tools if t["name"] == call["name"])["parameters"])
    return jsonschema.Draft202012Validator(schema).is_valid(call["arguments"])


def _closed(node):
    if not isinstance(node, dict):
        return node
    out = {k: ({p: _closed(v) for p, v in val.items()} if k == "properties" else _closed(val) if k == "items" else val)
           for k, val in node.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _wrong_type(value):
    return "text" if not isinstance(value, str) else 12345


@pytest.mark.parametrize("stem", FILES)
def test_every_function_compiles_and_reference_calls_pass(stem):
    folder = corpus("bfcl")
    stats = collections.Counter()
    for file_stem, entry_id, tools, calls in entries(folder):
        if file_stem != stem:
            continue
        for t in tools:  # alone
            compile_tool_calls([t], "required")
        parallel = calls is not None and len(calls) > 1
        required = compile_tool_calls(tools, "required", parallel=parallel)
        auto = compile_tool_calls(tools, "auto", parallel=parallel)
        assert accepts(auto, b"I cannot help with that."), entry_id  # irrelevance: text is fine under auto
        assert not accepts(required, b"I cannot help with that."), entry_id
        stats["entries"] += 1
        if not calls:
            continue
        text = hermes(calls)
        valid = all(_validates(c, tools) for c in calls)  # BFCL's answers do not always fit its own schemas
        assert accepts(required, text) == valid, (entry_id, text)
        stats["accepted" if valid else "reference invalid, refused"] += 1
        if not valid:
            continue
        assert accepts(auto, b"Let me check. " + text), entry_id
        unknown = copy.deepcopy(calls)
        unknown[0]["name"] += "_unoffered"
        assert not accepts(required, hermes(unknown)), entry_id
        args = calls[0]["arguments"]
        if args:
            key = next(iter(args))
            wrong = copy.deepcopy(calls)
            wrong[0]["arguments"][key] = _wrong_type(args[key])
            schema = next(t for t in tools if t["name"] == calls[0]["name"])["parameters"]["properties"].get(key, {})
            if "type" in schema:  # an untyped ("any") parameter takes every value
                assert not accepts(required, hermes(wrong)), (entry_id, key)
                stats["wrong-type refused"] += 1
        needed = next(t for t in tools if t["name"] == calls[0]["name"])["parameters"].get("required", [])
        if needed:
            missing = copy.deepcopy(calls)
            missing[0]["arguments"].pop(needed[0], None)
            assert not accepts(required, hermes(missing)), entry_id
    assert stats["entries"] > 0
    print(stem, dict(stats))
