"""Tool-call behaviours a small real model shows rarely, on the fixture backend (a scripted model
over SmolLM2's real vocabulary), and a second model family (gemma-3-270m, a base model) for real."""

from __future__ import annotations

import json

import jsonschema
import pytest

from llamay.backends import load_backend
from llamay.chat import ToolCall
from llamay.engine import Done, Model, TextDelta, load

TOOLS = [
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
    {"type": "function", "function": {"name": "echo", "parameters": {
        "type": "object", "properties": {"text": {"type": "string", "maxLength": 20}}, "required": ["text"]}}},
]
TWO_CALLS = (b'Sure.<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n'
             b'<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>')
ASK = [{"role": "user", "content": "Add 1 and 2, then echo hi."}]


def fixture_model(script: bytes) -> Model:
    return Model(load_backend("fixture", script=script))


def test_auto_returns_parallel_calls_with_distinct_ids():
    r = fixture_model(TWO_CALLS).chat(ASK, tools=TOOLS, max_tokens=80)
    assert r.finish_reason == "tool_calls" and r.text == "Sure."
    assert [(c["name"], c["arguments"]) for c in r.tool_calls] == [("add", {"a": 1, "b": 2}), ("echo", {"text": "hi"})]
    assert len({c["id"] for c in r.tool_calls}) == 2


def test_parallel_tool_calls_false_allows_exactly_one():
    r = fixture_model(TWO_CALLS).chat(ASK, tools=TOOLS, parallel_tool_calls=False, max_tokens=80)
    assert r.finish_reason == "tool_calls" and [c["name"] for c in r.tool_calls] == ["add"]


def test_streaming_holds_each_call_back_until_complete():
    events = list(fixture_model(TWO_CALLS).chat(ASK, tools=TOOLS, max_tokens=80, stream=True))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "Sure." and not any("<tool_call" in t or "{" in t for t in texts)
    assert [type(e) for e in events[-3:]] == [ToolCall, ToolCall, Done]


def test_a_call_of_an_unoffered_tool_is_impossible():
    script = b'<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>'
    r = fixture_model(script).chat(ASK, tools=TOOLS, tool_choice="required", max_tokens=60)
    assert r.tool_calls and all(c["name"] in ("add", "echo") for c in r.tool_calls)


def test_tool_choice_none_cannot_open_a_call():
    r = fixture_model(TWO_CALLS).chat(ASK, tools=TOOLS, tool_choice="none", max_tokens=40)
    assert r.tool_calls == [] and "<tool_call>" not in r.text and r.text.startswith("Sure.")


FALLBACK_FORMS = {
    "bare object": b'I will add. {"name": "add", "arguments": {"a": 1, "b": 2}}',
    "fenced block": b'I will add.\n```json\n{\n  "name": "add",\n  "arguments": {"a": 1, "b": 2}\n}\n```',
}


@pytest.mark.parametrize("script", FALLBACK_FORMS.values(), ids=FALLBACK_FORMS.keys())
def test_a_call_written_without_the_marker_under_auto_is_a_call(script):
    events = list(fixture_model(script).chat(ASK, tools=TOOLS, max_tokens=60, stream=True))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "I will add."
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("add", {"a": 1, "b": 2})]
    assert events[-1].finish_reason == "tool_calls"


def test_json_naming_no_offered_tool_under_auto_stays_text():
    script = b'{"name": "John", "arguments": {"a": 1}}'
    r = fixture_model(script).chat(ASK, tools=TOOLS, max_tokens=40)
    assert r.tool_calls == [] and r.finish_reason == "stop" and json.loads(r.text)["name"] == "John"


def test_tools_with_a_schema_answer_with_calls_or_the_document():
    document = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
    r = fixture_model(b'{"sum": 3}').chat(ASK, tools=TOOLS, schema=document, max_tokens=40)
    assert r.tool_calls == [] and json.loads(r.text) == {"sum": 3}
    r = fixture_model(TWO_CALLS[len(b"Sure."):]).chat(ASK, tools=TOOLS, schema=document, max_tokens=80)
    assert [c["name"] for c in r.tool_calls] == ["add", "echo"]


@pytest.fixture(scope="module")
def gemma(gemma_gguf):
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (ci/setup installs it)")
    return load("llamacpp", str(gemma_gguf), n_ctx=1024)


def test_gemma_base_model_gets_the_default_template_and_keeps_the_constraints(gemma):
    assert gemma.template.is_default and gemma.model_id == "gemma-3-270m-q4_k_m"
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "capital": {"type": "boolean"}}, "required": ["city", "capital"]}
    r = gemma.chat([{"role": "user", "content": "Name a city as JSON."}], schema=schema, max_tokens=40)
    jsonschema.validate(json.loads(r.text), schema)
    r = gemma.chat(ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=60)
    assert r.finish_reason == "tool_calls"
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for call in r.tool_calls:
        jsonschema.validate(call["arguments"], by_name[call["name"]])
