"""Constrained output finishes on real models: documents and calls close within ``max_tokens``.

The cases the budget-aware mask was built for, at CI size: a small model that never heads for
the end on its own (gemma-3-270m writing points, SmolLM2 filling an array argument) is given
too few tokens for what it wants to write, yet the document comes back complete and valid,
with finish ``length`` and a warning when the budget had to close it.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp backend needs llama-cpp-python (ci/setup installs it)")

from llamay.engine import (
    BUDGET_CLOSED_WARNING,
    CUT_CALL_WARNING,
    STOP_NOT_APPLIED_WARNING,
    TRUNCATED_WARNING,
    TextDelta,
    ToolCall,
    load,
)

POINTS = {"type": "array", "minItems": 2, "maxItems": 3,
          "items": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                    "required": ["x", "y"]}}
POINTS_PROMPT = [{"role": "user", "content": 'Give 2 to 3 points as JSON: [{"x": number, "y": number}, ...]'}]
FITNESS = [{"type": "function", "function": {
    "name": "calculate_fitness", "description": "Fitness of an organism from its traits",
    "parameters": {"type": "object", "required": ["organism", "trait_contributions"], "properties": {
        "organism": {"type": "string"},
        "trait_contributions": {"type": "array", "items": {"type": "number"},
                                "description": "each trait's share of the fitness"}}}}}]
FITNESS_PROMPT = [{"role": "user", "content": "Compute the fitness of a wolf whose traits contribute 0.3, 0.4, 0.3."}]
MARKUP = ("<tool_call>", "</tool_call>", '{"name"')


@pytest.fixture(scope="module")
def smollm2():
    return load("llamacpp")


@pytest.fixture(scope="module")
def gemma(gemma_gguf):
    return load("llamacpp", str(gemma_gguf), n_ctx=1024)


def closed_by_the_budget_iff_length(r) -> bool:
    return (r.finish_reason == "length") == (BUDGET_CLOSED_WARNING in r.warnings)


@pytest.mark.parametrize("max_tokens", [24, 40])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_base_model_closes_the_points_document_within_the_budget(gemma, max_tokens, temperature):
    r = gemma.chat(POINTS_PROMPT, schema=POINTS, max_tokens=max_tokens, temperature=temperature, seed=3)
    jsonschema.validate(json.loads(r.text), POINTS)
    assert r.usage["completion_tokens"] <= max_tokens
    assert closed_by_the_budget_iff_length(r), r
    assert TRUNCATED_WARNING not in r.warnings


@pytest.mark.parametrize("max_tokens", [8, 16])
def test_any_json_closes_within_the_budget(smollm2, max_tokens):
    r = smollm2.chat([{"role": "user", "content": "Describe a cat as a JSON object with many fields."}],
                     json="object", max_tokens=max_tokens, temperature=1.0, seed=5)
    assert isinstance(json.loads(r.text), dict)
    assert closed_by_the_budget_iff_length(r), r


def test_a_grammar_closes_within_the_budget(smollm2):
    grammar = 'root ::= "[" num ("," num)* "]"\nnum ::= [0-9]+'
    r = smollm2.chat([{"role": "user", "content": "List the first hundred primes."}], grammar=grammar,
                     max_tokens=10, temperature=1.0, seed=2)
    assert r.text.startswith("[") and r.text.endswith("]") and all(n.isdigit() for n in r.text[1:-1].split(","))
    assert closed_by_the_budget_iff_length(r), r


@pytest.mark.parametrize("stream", [False, True], ids=["collected", "streamed"])
@pytest.mark.parametrize("max_tokens", [30, 45])
def test_a_forced_call_closed_by_the_budget_is_a_call(smollm2, max_tokens, stream):
    r = smollm2.chat(FITNESS_PROMPT, tools=FITNESS, tool_choice="required", max_tokens=max_tokens,
                     temperature=1.0, seed=11, stream=stream)
    if stream:
        events = list(r)
        calls = [{"name": e.name, "arguments": e.arguments} for e in events if isinstance(e, ToolCall)]
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        done = events[-1]
        finish, warnings = done.finish_reason, done.warnings
    else:
        calls, text, finish, warnings = r.tool_calls, r.text, r.finish_reason, r.warnings
    assert calls and finish == "tool_calls", (finish, warnings, text)
    for call in calls:
        jsonschema.validate(call["arguments"], FITNESS[0]["function"]["parameters"])
    assert not any(m in text for m in MARKUP)


def test_a_call_that_cannot_fit_is_dropped_and_never_content(smollm2):
    events = list(smollm2.chat(FITNESS_PROMPT, tools=FITNESS, tool_choice="required", max_tokens=4, stream=True))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert not [e for e in events if isinstance(e, ToolCall)] and text == ""
    assert events[-1].finish_reason == "length" and CUT_CALL_WARNING in events[-1].warnings


def test_stop_strings_never_cut_a_document(smollm2):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    r = smollm2.chat([{"role": "user", "content": "Describe a person as JSON."}], schema=schema, stop=['"', ","],
                     max_tokens=60, seed=1)
    jsonschema.validate(json.loads(r.text), schema)
    assert STOP_NOT_APPLIED_WARNING in r.warnings


def test_stop_strings_cut_free_text_beside_tools(smollm2):
    prompt = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
    free = smollm2.chat(prompt, tools=FITNESS, tool_choice="none", max_tokens=40)
    assert "," in free.text
    cut = smollm2.chat(prompt, tools=FITNESS, tool_choice="none", max_tokens=40, stop=[","])
    assert cut.finish_reason == "stop" and free.text.startswith(cut.text) and "," not in cut.text
    assert STOP_NOT_APPLIED_WARNING not in cut.warnings


def test_prose_under_auto_is_truncated_not_closed(smollm2):
    r = smollm2.chat([{"role": "user", "content": "Tell me a long story about a wolf."}], tools=FITNESS,
                     tool_choice="auto", max_tokens=12)
    assert not r.tool_calls and r.finish_reason == "length" and r.usage["completion_tokens"] == 12
    assert BUDGET_CLOSED_WARNING not in r.warnings
