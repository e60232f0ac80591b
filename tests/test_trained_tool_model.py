"""A model trained for tools (Qwen2.5-Coder-0.5B-Instruct, Hermes dialect) on real weights, seeded and greedy.

What a user of ``auto`` meets: calls come out as calls, in whatever form the model writes
them (its ``<tool_call>`` token, a fenced block, bare JSON), never as prose; a greeting is
answered in text; every call fits its tool's schema.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp backend needs llama-cpp-python (ci/setup installs it)")

from llamay.engine import Done, TextDelta, ToolCall, load

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                            "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"]}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 30}}, "required": ["zone"]}
ADD = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME, "add": ADD}
DESCRIPTIONS = {"get_weather": "Current weather in a city", "get_time": "Current time in a time zone",
                "add": "Add two integers"}
TOOLS = [{"type": "function", "function": {"name": n, "description": DESCRIPTIONS[n], "parameters": s}}
         for n, s in SCHEMAS.items()]
TWO_CITIES = [{"role": "user", "content": "What's the weather in Pune and in Paris, in celsius?"}]
GREEDY = {"temperature": 0.0, "seed": 7, "max_tokens": 160}
# Greedy, the model answers the two-city question with one fenced call; sampled, it writes both
# (as in the report) for some seeds: one is pinned. Seeds 1 to 8 gave both calls for 1 and 8
# sampling every token, for 8 alone with forced tokens appended unsampled (which draw no random number,
# so the draws that follow differ): seed 8 writes both either way.
SAMPLED = {"temperature": 0.7, "seed": 8, "max_tokens": 160}


@pytest.fixture(scope="module")
def qwen(qwen_gguf):
    return load("llamacpp", str(qwen_gguf), n_threads=2)


def assert_valid(calls):
    for call in calls:
        jsonschema.validate(call["arguments"], SCHEMAS[call["name"]])


def test_the_dialect_is_detected_as_hermes_with_its_markers_as_tokens(qwen):
    assert qwen.dialect.name == "hermes"
    assert set(qwen.markers.ids) == {"<tool_call>", "</tool_call>"}


def test_auto_returns_both_cities_as_parallel_calls(qwen):
    r = qwen.chat(TWO_CITIES, tools=TOOLS, **SAMPLED)
    assert r.finish_reason == "tool_calls"
    assert [(c["name"], c["arguments"]["city"]) for c in r.tool_calls] == [("get_weather", "Pune"),
                                                                          ("get_weather", "Paris")]
    assert "name" not in r.text and "{" not in r.text
    assert_valid(r.tool_calls)


def test_streaming_sends_text_then_each_call_whole(qwen):
    events = list(qwen.chat(TWO_CITIES, tools=TOOLS, stream=True, **SAMPLED))
    texts = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert len(calls) == 2 and isinstance(events[-1], Done) and events[-1].finish_reason == "tool_calls"
    assert not any(marker in texts for marker in ("<tool_call>", "```", '"name"', "{"))


def test_required_picks_the_tool_that_fits_the_question(qwen):
    r = qwen.chat([{"role": "user", "content": "What is 2 plus 40?"}], tools=TOOLS, tool_choice="required", **GREEDY)
    assert [c["name"] for c in r.tool_calls] == ["add"] and r.tool_calls[0]["arguments"] == {"a": 2, "b": 40}


def test_a_tool_result_is_rendered_back_and_the_next_turn_is_well_formed(qwen):
    """The result reaches the model in its own format. What it does next is the model's: this 0.5B model
    calls tools again rather than answer (unconstrained too), but whatever it writes is valid."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"a": 2, "b": 40})}}
    messages = [{"role": "user", "content": "What is 2 plus 40?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "42"}]
    assert "<tool_response>\n42\n</tool_response>" in qwen.template.render(messages, TOOLS)
    r = qwen.chat(messages, tools=TOOLS, **GREEDY)
    assert_valid(r.tool_calls)
    assert not any(marker in r.text for marker in ("<tool_call>", '{"name"'))


def test_auto_answers_a_greeting_in_text(qwen):
    r = qwen.chat([{"role": "user", "content": "Hello! How are you today?"}], tools=TOOLS, **GREEDY)
    assert r.tool_calls == [] and r.finish_reason == "stop" and r.text.strip()
