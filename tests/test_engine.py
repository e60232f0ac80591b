"""``llamay.load().chat()`` on the real embedded model (SmolLM2-135M-Instruct via llama.cpp), seeded and small."""

from __future__ import annotations

import json
import threading

import jsonschema
import pytest
from conftest import read_testdata

pytest.importorskip("llama_cpp", reason="the llamacpp backend needs llama-cpp-python (ci/setup installs it)")

from llamay import UsageError
from llamay.engine import CUT_CALL_WARNING, TRUNCATED_WARNING, Done, TextDelta, load

# Strings are bounded: a 135M model at temperature 0 loves to repeat itself inside an open string,
# and a bound is what guarantees the document closes within max_tokens.
SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"},
                       "email": {"type": "string", "maxLength": 40}},
        "required": ["name", "age"],
    },
    "nested": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 30},
            "location": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                         "required": ["lat", "lon"]},
        },
        "required": ["city", "location"],
    },
    "bounded-array": {
        "type": "object",
        "properties": {"colors": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
                                  "minItems": 1, "maxItems": 3}},
        "required": ["colors"],
    },
    "enum-and-bool": {
        "type": "object",
        "properties": {"mood": {"enum": ["happy", "sad", "neutral"]}, "tired": {"type": "boolean"},
                       "score": {"type": "number"}},
        "required": ["mood", "tired", "score"],
    },
}
PROMPT = [{"role": "user", "content": "Answer with a JSON object that fits the request: describe someone."}]


@pytest.fixture(scope="module")
def model():
    return load("llamacpp")


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_output_validates(model, name, temperature):
    r = model.chat(PROMPT, schema=SCHEMAS[name], max_tokens=120, temperature=temperature, seed=7)
    assert r.finish_reason == "stop", r
    jsonschema.validate(json.loads(r.text), SCHEMAS[name])


TOOLS = read_testdata("tools", "weather_and_add.json")


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "add"}}],
                         ids=["required", "named"])
def test_forced_tool_calls_validate(model, choice):
    r = model.chat([{"role": "user", "content": "What is 2 plus 3?"}], tools=TOOLS, tool_choice=choice,
                   max_tokens=120, seed=3)
    assert r.finish_reason == "tool_calls" and r.tool_calls, r
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for call in r.tool_calls:
        if isinstance(choice, dict):
            assert call["name"] == "add"
        jsonschema.validate(call["arguments"], by_name[call["name"]])
    assert "<tool_call>" not in r.text


def test_unconstrained_chat_answers_in_text(model):
    r = model.chat([{"role": "user", "content": "What is the capital of France?"}], max_tokens=40)
    assert r.text.strip() and r.finish_reason in ("stop", "length")
    assert r.usage["prompt_tokens"] > 0 and 0 < r.usage["completion_tokens"] <= 40


def test_stop_string_cuts_the_text(model):
    free = model.chat([{"role": "user", "content": "Count from 1 to 10, separated by commas."}], max_tokens=40)
    assert "," in free.text
    cut = model.chat([{"role": "user", "content": "Count from 1 to 10, separated by commas."}], max_tokens=40,
                     stop=[","])
    assert cut.finish_reason == "stop" and "," not in cut.text
    assert free.text.startswith(cut.text)


def test_max_tokens_truncates_a_document_with_finish_length_and_a_warning(model):
    r = model.chat(PROMPT, schema=SCHEMAS["nested"], max_tokens=5)
    assert r.finish_reason == "length" and r.usage["completion_tokens"] == 5
    assert TRUNCATED_WARNING in r.warnings
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.text)


def test_a_truncated_tool_call_is_dropped_with_a_warning_never_content(model):
    r = model.chat([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS, tool_choice="required",
                   max_tokens=6)
    assert r.finish_reason == "length" and r.tool_calls == [] and r.text == ""
    assert CUT_CALL_WARNING in r.warnings


def test_streaming_matches_the_collected_result(model):
    events = list(model.chat(PROMPT, schema=SCHEMAS["person"], max_tokens=80, stream=True))
    assert isinstance(events[-1], Done)
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == model.chat(PROMPT, schema=SCHEMAS["person"], max_tokens=80).text


def test_cancel_stops_within_one_token(model):
    cancel = threading.Event()
    deltas = 0
    for event in model.chat([{"role": "user", "content": "Tell me a long story."}], max_tokens=200,
                            stream=True, cancel=cancel):
        if isinstance(event, TextDelta):
            deltas += 1
            if deltas == 3:
                cancel.set()
        if isinstance(event, Done):
            assert event.usage["completion_tokens"] <= 4
    assert deltas <= 4


def test_two_constraints_at_once_are_refused(model):
    with pytest.raises(UsageError, match="one constraint at a time"):
        model.chat(PROMPT, schema=SCHEMAS["person"], json=True)
    with pytest.raises(UsageError, match="not among the offered tools"):
        model.chat(PROMPT, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}})
