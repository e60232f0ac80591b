"""The official ``openai``, ``anthropic`` and ``ollama`` clients against ``llamay serve`` on loopback.

The server runs in-process on an ephemeral port over the real embedded model
(SmolLM2-135M-Instruct through llama.cpp), seeded, greedy, with small ``max_tokens``.
Every structured answer is validated against its schema with ``jsonschema``; every error
is checked as the client raises it (class, status, the field it names).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp backend needs llama-cpp-python (ci/setup installs it)")
openai = pytest.importorskip("openai", reason="pip install openai")
anthropic = pytest.importorskip("anthropic", reason="pip install anthropic")
ollama = pytest.importorskip("ollama", reason="pip install ollama")
pydantic = pytest.importorskip("pydantic")

from llamay.api import App, running  # noqa: E402
from llamay.engine import BUDGET_CLOSED_WARNING, load  # noqa: E402

SEED = {"temperature": 0, "seed": 7}
USER = [{"role": "user", "content": "Say hello in five words."}]
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
                   "hobbies": {"type": "array", "items": {"enum": ["chess", "golf", "music"]}, "maxItems": 2}},
    "required": ["name", "age", "hobbies"],
}
PERSON_PROMPT = [{"role": "user", "content": "Invent a person. Answer in JSON with name, age and hobbies."}]
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}}, "required": ["zone"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone",
                                      "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]
# room for a whole call: a truncated call would be dropped with a warning (tested elsewhere)
TOOL_TOKENS = 120


# The README's curl, byte for byte: no model field, and curl's default form content type.
README_CURL_BODY = (
    '{"messages": [{"role": "user", "content": "What is the weather in Paris?"}],\n'
    '  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",\n'
    '    "properties": {"city": {"type": "string", "maxLength": 40}}, "required": ["city"]}}}],\n'
    '  "tool_choice": "required", "max_tokens": 200}'
)


@pytest.fixture(scope="module")
def server():
    # one thread: on a shared two-core machine llama.cpp's spinning threads otherwise starve each other
    model = load("llamacpp", n_threads=1)
    with running(App(model, aliases=("smol",), api_key="test-key")) as srv:
        yield srv


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="test-key", max_retries=0)


@pytest.fixture(scope="module")
def claude(server):
    return anthropic.Anthropic(base_url=f"http://127.0.0.1:{server.port}", api_key="test-key", max_retries=0)


@pytest.fixture(scope="module")
def olm(server):
    return ollama.Client(host=f"http://127.0.0.1:{server.port}", headers={"Authorization": "Bearer test-key"})


def check_call(name, arguments):
    assert name in SCHEMAS
    jsonschema.validate(arguments, SCHEMAS[name])


# -- OpenAI ------------------------------------------------------------------------------------
def test_openai_chat(oai):
    r = oai.chat.completions.create(model="smollm2-135m-instruct", messages=USER, max_tokens=12, **SEED)
    choice = r.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length") and r.object == "chat.completion"
    assert r.usage.completion_tokens <= 12 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.model == "smollm2-135m-instruct" and r.llamay_warnings == []


def test_openai_stream_matches_whole(oai):
    whole = oai.chat.completions.create(model="default", messages=USER, max_tokens=12, **SEED)
    chunks = list(oai.chat.completions.create(model="default", messages=USER, max_tokens=12, stream=True,
                                              stream_options={"include_usage": True}, **SEED))
    assert chunks[0].llamay_warnings == [] and chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_openai_json_schema(oai):
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    r = oai.chat.completions.create(model="default", messages=PERSON_PROMPT, response_format=fmt, max_tokens=150,
                                    **SEED)
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_openai_parse_with_pydantic(oai):
    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        age: int

    r = oai.chat.completions.parse(model="default", messages=PERSON_PROMPT, response_format=Person,
                                   max_tokens=150, **SEED)
    person = r.choices[0].message.parsed
    assert isinstance(person, Person)
    jsonschema.validate(json.loads(r.choices[0].message.content), Person.model_json_schema())


def test_openai_json_mode_and_grammar(oai):
    r = oai.chat.completions.create(model="default", messages=PERSON_PROMPT, response_format={"type": "json_object"},
                                    max_tokens=150, **SEED)
    json.loads(r.choices[0].message.content)  # any JSON is unbounded, yet the budget closes it
    if r.choices[0].finish_reason == "length":
        assert BUDGET_CLOSED_WARNING in r.llamay_warnings
    r = oai.chat.completions.create(model="default", messages=[{"role": "user", "content": "Is water wet?"}],
                                    extra_body={"llamay_grammar": 'root ::= ("yes" | "no") "."'}, max_tokens=5,
                                    **SEED)
    assert r.choices[0].message.content in ("yes.", "no.")


def test_openai_stream_with_schema(oai):
    chunks = list(oai.chat.completions.create(model="default", messages=PERSON_PROMPT, max_tokens=150, stream=True,
                                              extra_body={"llamay_schema": PERSON}, **SEED))
    jsonschema.validate(json.loads("".join(c.choices[0].delta.content or "" for c in chunks)), PERSON)


def test_openai_completions(oai):
    r = oai.completions.create(model="smol", prompt="The capital of France is", max_tokens=8, **SEED)
    assert r.object == "text_completion" and r.choices[0].text
    assert r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens <= 8
    chunks = list(oai.completions.create(model="smol", prompt="The capital of France is", max_tokens=8, stream=True,
                                         **SEED))
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_openai_tool_calls(oai, choice):
    r = oai.chat.completions.create(model="default", messages=ASK, tools=TOOLS, tool_choice=choice,
                                    parallel_tool_calls=False, max_tokens=TOOL_TOKENS, **SEED)
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    if isinstance(choice, dict):
        assert call.function.name == "get_weather"
    check_call(call.function.name, json.loads(call.function.arguments))


def test_openai_tool_call_stream_and_round_trip(oai):
    with oai.chat.completions.stream(model="default", messages=ASK, tools=TOOLS, tool_choice="required",
                                     parallel_tool_calls=False, max_tokens=TOOL_TOKENS, **SEED) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    check_call(call.function.name, json.loads(call.function.arguments))
    assert final.choices[0].finish_reason == "tool_calls"
    follow = [*ASK, final.choices[0].message.model_dump(exclude_none=True),
              {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 18}'}]
    r = oai.chat.completions.create(model="default", messages=follow, tools=TOOLS, tool_choice="none",
                                    max_tokens=20, **SEED)
    assert r.choices[0].message.content and not r.choices[0].message.tool_calls


def test_openai_errors(oai):
    with pytest.raises(openai.NotFoundError) as info:
        oai.chat.completions.create(model="gpt-4o", messages=USER, max_tokens=5)
    assert info.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(model="default", messages=USER, n=99)
    assert info.value.body["param"] == "n"
    schema = {"type": "object", "properties": {"a": {"not": {}}}}
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(model="default", messages=USER, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    assert "'not'" in info.value.body["message"] and "/properties/a" in info.value.body["message"]
    bad_key = openai.OpenAI(base_url=oai.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_key.models.list()
    assert [m.id for m in oai.models.list()] == ["smollm2-135m-instruct", "smol", "default"]
    assert oai.models.retrieve("smol").id == "smol"


# -- Anthropic ---------------------------------------------------------------------------------
def test_anthropic_message(claude):
    m = claude.messages.create(model="default", max_tokens=12, messages=USER, system="Be cheerful.",
                               extra_body=SEED)
    assert m.type == "message" and m.role == "assistant" and m.content[0].type == "text" and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens") and 0 < m.usage.output_tokens <= 12
    assert m.id.startswith("msg_") and m.llamay_warnings == []


def test_anthropic_stream_matches_whole(claude):
    whole = claude.messages.create(model="default", max_tokens=12, messages=USER, extra_body=SEED)
    with claude.messages.stream(model="default", max_tokens=12, messages=USER, extra_body=SEED) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == whole.stop_reason and final.usage.input_tokens == whole.usage.input_tokens
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_anthropic_structured_output(claude):
    m = claude.messages.create(model="default", max_tokens=150, messages=PERSON_PROMPT, extra_body=SEED,
                               output_config={"format": {"type": "json_schema", "schema": PERSON}})
    jsonschema.validate(json.loads(m.content[0].text), PERSON)


ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]


@pytest.mark.parametrize("choice", [{"type": "any", "disable_parallel_tool_use": True},
                                    {"type": "tool", "name": "get_time"}])
def test_anthropic_tool_use(claude, choice):
    m = claude.messages.create(model="default", max_tokens=TOOL_TOKENS, messages=ASK, tools=ANTHROPIC_TOOLS,
                               tool_choice=choice, extra_body=SEED)
    blocks = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and blocks and all(b.id.startswith("toolu_") for b in blocks)
    if choice.get("disable_parallel_tool_use"):
        assert len(blocks) == 1
    for block in blocks:
        assert choice["type"] != "tool" or block.name == "get_time"
        check_call(block.name, block.input)


def test_anthropic_tool_use_stream_and_result(claude):
    with claude.messages.stream(model="default", max_tokens=TOOL_TOKENS, messages=ASK, tools=ANTHROPIC_TOOLS,
                                tool_choice={"type": "any", "disable_parallel_tool_use": True},
                                extra_body=SEED) as stream:
        final = stream.get_final_message()
    (block,) = [b for b in final.content if b.type == "tool_use"]
    check_call(block.name, block.input)
    follow = [*ASK, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "18 C"}]}]
    m = claude.messages.create(model="default", max_tokens=20, messages=follow, tools=ANTHROPIC_TOOLS,
                               tool_choice={"type": "none"}, extra_body=SEED)
    assert m.content[0].type == "text" and m.stop_reason in ("end_turn", "max_tokens")


def test_anthropic_errors(claude):
    with pytest.raises(anthropic.NotFoundError) as info:
        claude.messages.create(model="claude-sonnet-4", max_tokens=5, messages=USER)
    assert info.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(model="default", max_tokens=5, messages=USER, thinking={"type": "enabled",
                                                                                        "budget_tokens": 1024})
    assert "thinking" in info.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(model="default", max_tokens=5, messages=USER,
                               extra_body={"llamay_grammar": 'root ::= "a" missing'})
    assert "missing" in info.value.body["error"]["message"] and "line 1" in info.value.body["error"]["message"]
    assert [m.id for m in claude.models.list()] == ["smollm2-135m-instruct", "smol", "default"]
    assert claude.models.retrieve("smol").display_name == "smol"
    bad_key = anthropic.Anthropic(base_url=str(claude.base_url), api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad_key.messages.create(model="default", max_tokens=5, messages=USER)


# -- Ollama ------------------------------------------------------------------------------------
OPTIONS = {"temperature": 0, "seed": 7, "num_predict": 12}


def test_ollama_chat_and_stream(olm):
    whole = olm.chat(model="default", messages=USER, options=OPTIONS, stream=False)
    assert whole.done and whole.done_reason in ("stop", "length") and whole.message.content
    assert whole.eval_count <= 12 and whole.prompt_eval_count > 0 and whole.total_duration > 0
    parts = list(olm.chat(model="default", messages=USER, options=OPTIONS, stream=True))
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert parts[-1].done and not any(p.done for p in parts[:-1]) and parts[-1].eval_count == whole.eval_count


def test_ollama_format(olm):
    r = olm.chat(model="default", messages=PERSON_PROMPT, format=PERSON, options={**OPTIONS, "num_predict": 150})
    jsonschema.validate(json.loads(r.message.content), PERSON)
    r = olm.generate(model="default", prompt="Describe a person as JSON.", format="json",
                     options={**OPTIONS, "num_predict": 150})
    json.loads(r.response)


def test_ollama_generate(olm):
    r = olm.generate(model="smol", prompt="The capital of France is", options=OPTIONS)
    assert r.done and r.response and r.eval_count <= 12
    parts = list(olm.generate(model="smol", prompt="The capital of France is", options=OPTIONS, stream=True))
    assert "".join(p.response for p in parts) == r.response


def test_ollama_tools(olm):
    r = olm.chat(model="default", messages=ASK, tools=TOOLS, options={**OPTIONS, "num_predict": TOOL_TOKENS})
    for call in r.message.tool_calls or []:  # Ollama has no tool_choice: the model may answer in prose
        check_call(call.function.name, call.function.arguments)
    messages = [*ASK, {"role": "assistant", "content": "",
                       "tool_calls": [{"function": {"name": "get_weather",
                                                    "arguments": {"city": "Paris", "unit": "celsius"}}}]},
                {"role": "tool", "content": "18 degrees", "tool_name": "get_weather"}]
    r = olm.chat(model="default", messages=messages, options=OPTIONS)
    assert r.done


def test_ollama_models_and_errors(olm):
    names = [m.model for m in olm.list().models]
    assert names == ["smollm2-135m-instruct", "smol", "default"]
    shown = olm.show("default")
    assert shown.details.format == "gguf" and shown.template
    with pytest.raises(ollama.ResponseError) as info:
        olm.chat(model="llama3", messages=USER)
    assert info.value.status_code == 404 and "llama3" in info.value.error
    with pytest.raises(ollama.ResponseError) as info:
        olm.chat(model="default", messages=USER, format={"type": "object", "anyOf": [{}], "allOf": [{"not": {}}]})
    assert info.value.status_code == 400


def test_lexicon(oai):
    r = oai.chat.completions.create(model="default", messages=USER, max_tokens=12,
                                    extra_body={"llamay_lexicon": ["hello", "world", "friend"]}, **SEED)
    words = re.findall(r"[a-z]+", r.choices[0].message.content.lower())
    assert words and set(words) <= {"hello", "world", "friend"}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_readmes_curl_returns_a_tool_call(server):
    """The README's example exactly: no model, curl's form content type, and a get_weather call back."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert README_CURL_BODY in readme
    out = subprocess.run(
        ["curl", "-s", "-H", "Authorization: Bearer test-key", f"127.0.0.1:{server.port}/v1/chat/completions",
         "-d", README_CURL_BODY], capture_output=True, check=True, timeout=120).stdout
    message = json.loads(out)["choices"][0]["message"]
    assert message["tool_calls"]  # one or more (parallel calls are allowed): sampled at temperature 1
    for call in message["tool_calls"]:
        assert call["function"]["name"] == "get_weather"
        assert isinstance(json.loads(call["function"]["arguments"])["city"], str)
