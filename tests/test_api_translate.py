"""The pure half of the HTTP layer: request bodies to engine arguments, engine events to API shapes.

Every response shape is checked against the official SDK's own pydantic types, so a field
name or type that the client would reject fails here, without a server.
"""

from __future__ import annotations

import json

import pytest

from llamay.api import anthropic, ollama, openai
from llamay.api.errors import ApiError, api_error
from llamay.api.fields import MAX_BODY_DEPTH, NDJSON, SSE, Body, Frame, encode_frame, nesting_depth, warning_headers
from llamay.api.render import Timing
from llamay.chat import ToolCall
from llamay.engine import Done, TextDelta
from llamay.errors import GrammarError, SchemaError, UsageError

oa_types = pytest.importorskip("openai.types", reason="pip install openai")
an_types = pytest.importorskip("anthropic.types", reason="pip install anthropic")
ol_types = pytest.importorskip("ollama._types", reason="pip install ollama")
pydantic = pytest.importorskip("pydantic")

USER = [{"role": "user", "content": "hi"}]
CALL = ToolCall("call_0123456789abcdef01234567", "get_weather", {"city": "Paris", "days": 2})
TIMING = Timing(0, 1_000, 5_000, 105_000)
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def body(**fields):
    return Body(fields)


# -- request bodies ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, depth", [
    (b"", 0), (b"{}", 1), (b'[[1], {"a": [2]}]', 3), (b'{"a": "[[{"}', 1), (b'["\\\\", [[]]]', 3),
    (b'["\\"[[", []]', 2), (b'["\\\\\\"[", {}]', 2), (b'"unterminated [[', 0), ("[\"é[\", [ぁ]]".encode(), 2),
])
def test_nesting_depth_counts_brackets_outside_strings(text, depth):
    """Escaped backslashes before an escaped quote, a string never closed, multi-byte characters."""
    assert nesting_depth(text) == depth


def test_body_depth_is_refused_before_parsing():
    Body.parse(json.dumps({"a": "[" * 100_000, "b": [[[1]]]}).encode())
    at_bound = b'{"a": ' + b"[" * (MAX_BODY_DEPTH - 1) + b"]" * (MAX_BODY_DEPTH - 1) + b"}"
    assert Body.parse(at_bound).data["a"]
    for deep in (b"[" * 100_000, b'{"a":' * 100_000, b"{" + b"[" * MAX_BODY_DEPTH + b"]" * MAX_BODY_DEPTH + b"}"):
        with pytest.raises(ApiError, match="MAX_BODY_DEPTH") as info:
            Body.parse(deep)
        assert info.value.status == 400


@pytest.mark.parametrize("raw, problem", [
    (b'{"a": NaN}', "NaN is not a JSON number"), (b'{"a": [-Infinity]}', "-Infinity is not a JSON number"),
    (b'{"a": "\xff"}', "not valid UTF-8"), (b'{"a": "\\ud800"}', "a: holds an unpaired UTF-16 surrogate"),
    (b'{"m": [{"c": ["x", "\\udfffy"]}]}', "m[0].c[1]: holds"), (b'{"k\\udc00": 1}', "k\\udc00: holds"),
])
def test_body_parse_refuses_what_is_not_json_text(raw, problem):
    with pytest.raises(ApiError) as info:
        Body.parse(raw)
    assert info.value.status == 400 and problem in info.value.message


def test_body_parse_takes_paired_surrogates_and_a_bom():
    assert Body.parse(b'{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}').data == {"a": "😀", "b": "\\ud800"}
    assert Body.parse(b'\xef\xbb\xbf{"a": 1}').data == {"a": 1}


@pytest.mark.parametrize("request_fn, fields", [
    (openai.chat_request, {"messages": USER}), (anthropic.messages_request, {"messages": USER, "max_tokens": 5}),
    (ollama.chat_request, {"messages": USER, "options": {"seed": -1}}),
])
def test_negative_seed_means_random(request_fn, fields):
    assert request_fn(Body({"model": "m", "seed": -1, **fields})).chat["seed"] is None
    assert request_fn(Body({"model": "m", "seed": 7, **fields, "options": {"seed": 7}})).chat["seed"] == 7


# -- OpenAI requests --------------------------------------------------------------------------
def test_openai_chat_request_maps_fields():
    r = openai.chat_request(body(model="m", messages=USER, max_completion_tokens=9, temperature=0, seed=3,
                                 top_p=0.5, stop="END", stream=True, stream_options={"include_usage": True},
                                 user="u", metadata={"a": "b"}, store=False))
    assert r.model == "m" and r.stream and r.options["include_usage"]
    assert r.chat == {"messages": USER, "temperature": 0, "top_p": 0.5, "top_k": 0, "seed": 3, "max_tokens": 9,
                      "stop": ["END"], "frequency_penalty": 0.0, "presence_penalty": 0.0, "min_p": 0.0,
                      "logit_bias": {}, "logprobs": None, "n": 1}
    assert r.warnings == [] and r.constraint_kind == "none"


@pytest.mark.parametrize("fmt, expect, field", [
    ({"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER, "strict": True}}, {"schema": WEATHER},
     "response_format.json_schema.schema"),
    ({"type": "json_object"}, {"json": "object"}, "response_format"),
    ({"type": "text"}, {}, None),
])
def test_openai_response_format(fmt, expect, field):
    r = openai.chat_request(body(model="m", messages=USER, response_format=fmt))
    assert {k: r.chat[k] for k in ("schema", "json") if k in r.chat} == expect
    assert r.constraint_field == field


@pytest.mark.parametrize("fields, kind", [
    ({"llamay_schema": WEATHER}, "schema"),
    ({"llamay_format": "json"}, "json"),
    ({"llamay_grammar": 'root ::= "a"'}, "grammar"),
    ({"grammar": 'root ::= "a"'}, "grammar"),
    ({"llamay_lexicon": True}, "lexicon"),
    ({"llamay_lexicon": ["cat", "dog"]}, "lexicon"),
])
def test_llamay_constraint_fields_in_every_api(fields, kind):
    requests = [
        openai.chat_request(body(model="m", messages=USER, **fields)),
        openai.completion_request(body(model="m", prompt="x", **fields)),
        anthropic.messages_request(body(model="m", max_tokens=5, messages=USER, **fields)),
        ollama.chat_request(body(model="m", messages=USER, **fields)),
        ollama.generate_request(body(model="m", prompt="x", **fields)),
    ]
    for r in requests:
        assert r.constraint_kind == kind and r.warnings == []


@pytest.mark.parametrize("fields, param", [
    ({"n": 17}, "n"),
    ({"top_logprobs": 3}, "top_logprobs"),  # alternatives need logprobs: true
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ({"modalities": ["text", "audio"]}, "modalities"),
    ({"logit_bias": {"12": 500}}, "logit_bias.12"),
    ({"logit_bias": {"a token": 5}}, "logit_bias.a token"),
    ({"frequency_penalty": 3}, "frequency_penalty"),
    ({"min_p": 1.5}, "min_p"),
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"max_tokens": "ten"}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"stream": "yes"}, "stream"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"llamay_format": "xml"}, "llamay_format"),
    ({"llamay_schema": WEATHER, "llamay_grammar": 'root ::= "a"'}, "llamay_grammar"),
    ({"response_format": {"type": "json_object"}, "llamay_schema": WEATHER}, "llamay_schema"),
])
def test_openai_refusals_name_the_field(fields, param):
    with pytest.raises(ApiError) as info:
        openai.chat_request(body(model="m", messages=USER, **fields))
    assert info.value.status == 400 and info.value.param == param and param in info.value.message


def test_openai_messages_are_required():
    with pytest.raises(ApiError, match="messages"):
        openai.chat_request(Body({"model": "m"}))


def test_an_omitted_model_is_left_to_the_app_to_name():
    assert openai.chat_request(Body({"messages": USER})).model == ""


def test_openai_defaults_the_sdk_sends_never_fail():
    r = openai.chat_request(body(model="m", messages=USER, n=1, logprobs=False, frequency_penalty=0,
                                 presence_penalty=0, parallel_tool_calls=True, tool_choice="auto", stream=False,
                                 modalities=["text"], temperature=None, top_p=None, response_format=None))
    assert r.warnings == []


def test_unknown_fields_warn():
    r = openai.chat_request(body(model="m", messages=USER, frobnicate=1))
    assert r.warnings == ["unknown field 'frobnicate' was ignored"]


def test_openai_sampling_controls_reach_the_engine():
    r = openai.chat_request(body(model="m", messages=USER, frequency_penalty=0.5, presence_penalty=-1, min_p=0.1,
                                 logit_bias={"12": -100, "7": 2.5}))
    assert r.warnings == []
    assert (r.chat["frequency_penalty"], r.chat["presence_penalty"], r.chat["min_p"]) == (0.5, -1, 0.1)
    assert r.chat["logit_bias"] == {12: -100.0, 7: 2.5}


def test_openai_tools_pass_through():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    r = openai.chat_request(body(model="m", messages=USER, tools=tools, tool_choice="required",
                                 parallel_tool_calls=False))
    assert r.chat["tools"] == tools and r.chat["tool_choice"] == "required"
    assert r.chat["parallel_tool_calls"] is False and r.constraint_kind == "tools"


@pytest.mark.parametrize("fields, parallel", [({}, None), ({"parallel_tool_calls": None}, None),
                                              ({"parallel_tool_calls": True}, True),
                                              ({"parallel_tool_calls": False}, False)])
def test_openai_parallel_tool_calls_left_out_is_left_to_the_models_dialect(fields, parallel):
    """Absent is not asked for: Llama 3's dialect then makes its one call without a warning."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    r = openai.chat_request(body(model="m", messages=USER, tools=tools, **fields))
    assert r.chat["parallel_tool_calls"] is parallel


def test_ollama_raw_generate_continues_the_prompt_as_it_is():
    r = ollama.generate_request(body(model="m", prompt="Once upon", raw=True))
    assert r.chat["prompt"] == "Once upon" and "messages" not in r.chat and r.warnings == []


def test_openai_completion_request():
    r = openai.completion_request(body(model="m", prompt=["Once"], echo=True, max_tokens=4))
    assert r.chat["prompt"] == "Once" and "messages" not in r.chat and r.options["echo"] == "Once"
    with pytest.raises(ApiError, match="prompt"):
        openai.completion_request(body(model="m", prompt=[1, 2, 3]))
    with pytest.raises(ApiError, match="suffix"):
        openai.completion_request(body(model="m", prompt="a", suffix="b"))


# -- Anthropic requests -----------------------------------------------------------------------
def test_anthropic_blocks_become_openai_messages():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]},
            {"type": "text", "text": "And tomorrow?"}]},
    ]
    r = anthropic.messages_request(body(model="m", max_tokens=5, system=[{"type": "text", "text": "Be brief."}],
                                        messages=messages))
    assert r.chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "user", "content": "And tomorrow?"},
    ]


# Anthropic can only disable parallel calls: otherwise None, as the model's dialect allows
@pytest.mark.parametrize("choice, expect, parallel", [
    (None, "auto", None),
    ({"type": "auto", "disable_parallel_tool_use": True}, "auto", False),
    ({"type": "auto", "disable_parallel_tool_use": False}, "auto", None),
    ({"type": "any"}, "required", None),
    ({"type": "none"}, "none", None),
    ({"type": "tool", "name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}, None),
])
def test_anthropic_tools_and_tool_choice(choice, expect, parallel):
    tools = [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER, "cache_control": None}]
    fields = {"tool_choice": choice} if choice else {}
    r = anthropic.messages_request(body(model="m", max_tokens=5, messages=USER, tools=tools, **fields))
    assert r.chat["tools"] == [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER,
                                                                 "description": "Weather"}}]
    assert r.chat["tool_choice"] == expect and r.chat["parallel_tool_calls"] is parallel


@pytest.mark.parametrize("fields, param", [
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"tool_choice": {"type": "any"}}, "tool_choice"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "messages[0].content[0].type"),
    ({"max_tokens": None}, "max_tokens"),
])
def test_anthropic_refusals(fields, param):
    request = {"model": "m", "max_tokens": 5, "messages": USER, **fields}
    with pytest.raises(ApiError) as info:
        anthropic.messages_request(Body(request))
    assert info.value.status == 400 and param in info.value.message


def test_anthropic_output_config_schema():
    r = anthropic.messages_request(body(model="m", max_tokens=5, messages=USER,
                                        output_config={"format": {"type": "json_schema", "schema": WEATHER}}))
    assert r.chat["schema"] == WEATHER and r.constraint_field == "output_config.format.schema"


# -- Ollama requests --------------------------------------------------------------------------
def test_ollama_messages_tools_options_format():
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather",
                                                                         "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "18C", "tool_name": "get_weather"},
    ]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    r = ollama.chat_request(body(model="m", messages=messages, tools=tools, format=WEATHER, stream=False,
                                 options={"temperature": 0, "num_predict": 7, "seed": 1, "num_ctx": 2048},
                                 keep_alive="5m"))
    assert r.chat["messages"][1]["tool_calls"] == [
        {"id": "", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    assert r.chat["messages"][2] == {"role": "tool", "content": "18C", "name": "get_weather"}
    assert r.chat["schema"] == WEATHER and r.chat["max_tokens"] == 7 and r.chat["temperature"] == 0
    assert r.chat["n_ctx"] == 2048 and r.warnings == [] and not r.stream


def test_ollama_defaults_and_json_format():
    r = ollama.chat_request(body(model="m", messages=USER, tools=[], format="json"))
    assert r.stream and r.chat["json"] is True and "tools" not in r.chat
    assert (r.chat["temperature"], r.chat["top_p"], r.chat["top_k"]) == (0.8, 0.9, 40)


@pytest.mark.parametrize("fields, param", [
    ({"think": True}, "think"), ({"format": "yaml"}, "format"), ({"options": {"temperature": "hot"}},
                                                                 "options.temperature"),
    ({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, "messages[0].images"),
])
def test_ollama_refusals(fields, param):
    with pytest.raises(ApiError) as info:
        ollama.chat_request(Body({"model": "m", "messages": USER, **fields}))
    assert param in info.value.message


# -- engine errors ----------------------------------------------------------------------------
def test_engine_errors_keep_status_and_name_the_field():
    e = api_error(SchemaError("keyword 'anyOf' is not supported", keyword="anyOf", pointer="/properties/a"),
                  "response_format.json_schema.schema")
    assert e.status == 400 and e.param == "response_format.json_schema.schema"
    assert "anyOf" in e.message and "/properties/a" in e.message
    e = api_error(GrammarError("'(' is never closed", rule="root", line=1, column=14), "llamay_grammar")
    assert "line 1, column 14" in e.message and "root" in e.message and e.param == "llamay_grammar"
    assert api_error(UsageError("one constraint at a time")).status == 400
    assert api_error(RuntimeError("boom")).status == 500


def test_error_shapes():
    e = ApiError(400, "n: more than one choice is not supported by llamay", param="n")
    assert openai.error_body(e) == {"error": {"message": e.message, "type": "invalid_request_error", "param": "n",
                                              "code": None}}
    assert anthropic.error_body(e) == {"type": "error", "error": {"type": "invalid_request_error",
                                                                  "message": e.message}}
    assert ollama.error_body(e) == {"error": e.message}
    busy = ApiError(503, "busy", code="overloaded")
    assert anthropic.error_status(busy) == 529 and anthropic.error_body(busy)["error"]["type"] == "overloaded_error"


# -- renderers, checked against the SDK types -------------------------------------------------
def run(renderer, events, done, warnings=()):
    frames = renderer.start(list(warnings))
    for event in events:
        frames += renderer.event(event)
    return frames + renderer.finish(done, TIMING)


TEXT_EVENTS = [TextDelta("Hel"), TextDelta("lo")]
DONE = Done("stop", {"prompt_tokens": 7, "completion_tokens": 2}, ["pattern not enforced at (root)"])
CALL_DONE = Done("tool_calls", {"prompt_tokens": 7, "completion_tokens": 9}, [])


def oa_request(**options):
    r = openai.chat_request(body(model="m", messages=USER, stream=True))
    r.options.update(options)
    return r


def test_openai_chat_stream_chunks():
    frames = run(openai.ChatRenderer(oa_request(include_usage=True)), [*TEXT_EVENTS, CALL], CALL_DONE, ["w1"])
    assert frames[-1] == Frame("[DONE]")
    chunks = [oa_types.chat.ChatCompletionChunk.model_validate(f.data) for f in frames[:-1]]
    assert frames[0].data["llamay_warnings"] == ["w1"] and chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello"
    (call,) = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert (call.index, call.id, call.type, call.function.name) == (0, CALL.id, "function", "get_weather")
    assert json.loads(call.function.arguments) == CALL.arguments
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 16
    assert all("usage" in f.data for f in frames[:-1])


def test_openai_chat_stream_late_warnings_go_on_the_finish_chunk():
    frames = run(openai.ChatRenderer(oa_request()), TEXT_EVENTS, DONE)
    assert frames[0].data["llamay_warnings"] == []
    assert frames[-2].data["llamay_warnings"] == DONE.warnings and "usage" not in frames[-2].data


def test_openai_chat_response():
    r = openai.ChatRenderer(oa_request())
    for event in [*TEXT_EVENTS, CALL]:
        r.event(event)
    out = oa_types.chat.ChatCompletion.model_validate(r.response(CALL_DONE, TIMING, ["w"]))
    assert out.choices[0].message.content == "Hello" and out.choices[0].finish_reason == "tool_calls"
    assert json.loads(out.choices[0].message.tool_calls[0].function.arguments) == CALL.arguments
    assert out.llamay_warnings == ["w"] and out.usage.prompt_tokens == 7


def test_openai_completion_shapes():
    request = openai.completion_request(body(model="m", prompt="Say", echo=True, stream=True))
    frames = run(openai.CompletionRenderer(request), TEXT_EVENTS, Done("length", DONE.usage, []))
    # the SDK's type says finish_reason is never null, yet the API streams null until the end (as here),
    # and the SDK reads chunks without validating: validate the last strictly, read the rest as it does
    chunks = [oa_types.Completion.model_construct(**f.data) for f in frames[:-2]]
    chunks.append(oa_types.Completion.model_validate(frames[-2].data))
    assert "".join(c["text"] for f in frames[:-1] for c in f.data["choices"]) == "SayHello"
    assert chunks[-1].choices[0].finish_reason == "length"
    whole = openai.CompletionRenderer(request)
    for event in TEXT_EVENTS:
        whole.event(event)
    out = oa_types.Completion.model_validate(whole.response(DONE, TIMING, []))
    assert out.choices[0].text == "SayHello" and out.object == "text_completion"


def test_anthropic_stream_events():
    events_type = pydantic.TypeAdapter(an_types.RawMessageStreamEvent)
    request = anthropic.messages_request(body(model="m", max_tokens=5, messages=USER, stream=True))
    frames = run(anthropic.MessageRenderer(request), [*TEXT_EVENTS, CALL, TextDelta("after")], CALL_DONE, ["w"])
    events = [events_type.validate_python(f.data) for f in frames]
    assert [f.event for f in frames] == [e.type for e in events]
    assert [e.type for e in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert frames[0].data["message"]["llamay_warnings"] == ["w"]
    assert [e.index for e in events if e.type == "content_block_start"] == [0, 1, 2]
    tool = events[5].content_block
    assert (tool.type, tool.name, tool.input, tool.id) == ("tool_use", "get_weather", {}, "toolu_" + CALL.id[5:])
    assert json.loads(events[6].delta.partial_json) == CALL.arguments
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens == 9


def test_anthropic_message_response():
    request = anthropic.messages_request(body(model="m", max_tokens=5, messages=USER))
    r = anthropic.MessageRenderer(request)
    for event in [*TEXT_EVENTS, CALL]:
        r.event(event)
    out = an_types.Message.model_validate(r.response(CALL_DONE, TIMING, []))
    assert [b.type for b in out.content] == ["text", "tool_use"] and out.stop_reason == "tool_use"
    assert out.content[1].input == CALL.arguments and out.usage.input_tokens == 7
    empty = anthropic.MessageRenderer(request).response(Done("length", DONE.usage, []), TIMING, [])
    assert an_types.Message.model_validate(empty).stop_reason == "max_tokens"


def test_ollama_chat_lines():
    request = ollama.chat_request(body(model="m", messages=USER))
    frames = run(ollama.OllamaRenderer(request), [*TEXT_EVENTS, CALL], CALL_DONE, ["w"])
    lines = [ol_types.ChatResponse.model_validate(f.data) for f in frames]
    assert frames[0].data["llamay_warnings"] == ["w"] and all("llamay_warnings" not in f.data for f in frames[1:])
    assert "".join(line.message.content for line in lines) == "Hello"
    (call,) = [c for line in lines for c in line.message.tool_calls or []]
    assert call.function.name == "get_weather" and call.function.arguments == CALL.arguments
    last = lines[-1]
    assert last.done and last.done_reason == "stop" and last.eval_count == 9 and last.prompt_eval_count == 7
    assert (last.total_duration, last.prompt_eval_duration, last.eval_duration) == (105_000, 4_000, 100_000)


def test_ollama_first_line_carries_warnings_even_when_it_is_the_last():
    request = ollama.generate_request(body(model="m", prompt="x"))
    frames = run(ollama.OllamaRenderer(request), [], Done("length", DONE.usage, ["late"]), ["early"])
    assert len(frames) == 1 and frames[0].data["llamay_warnings"] == ["early", "late"]
    line = ol_types.GenerateResponse.model_validate(frames[0].data)
    assert line.done and line.done_reason == "length" and line.response == ""


def test_ollama_whole_responses():
    request = ollama.generate_request(body(model="m", prompt="x", stream=False))
    r = ollama.OllamaRenderer(request)
    for event in TEXT_EVENTS:
        r.event(event)
    out = r.response(DONE, TIMING, ["w"])
    assert ol_types.GenerateResponse.model_validate(out).response == "Hello" and out["llamay_warnings"] == ["w"]
    info = {"size": 10, "modified": 0.0, "format": "gguf", "template": "{{ x }}"}
    tags = ol_types.ListResponse.model_validate(ollama.tags(["a", "default"], info))
    assert [m.model for m in tags.models] == ["a", "default"] and tags.models[0].details.format == "gguf"
    shown = ol_types.ShowResponse.model_validate(ollama.show(info))
    assert shown.template == "{{ x }}" and "tools" in shown.capabilities


def test_models_list_shapes():
    page = oa_types.Model.model_validate(openai.model_list(["a"], 5)["data"][0])
    assert page.id == "a" and page.object == "model"
    listed = anthropic.model_list(["a", "b"], 5)
    assert [an_types.ModelInfo.model_validate(m).id for m in listed["data"]] == ["a", "b"]
    assert (listed["first_id"], listed["last_id"], listed["has_more"]) == ("a", "b", False)


# -- framing and headers ----------------------------------------------------------------------
def test_framing():
    assert encode_frame(SSE, Frame({"a": "é"})) == 'data: {"a":"é"}\n\n'.encode()
    assert encode_frame(SSE, Frame({"type": "message_stop"}, "message_stop")) == (
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert encode_frame(SSE, Frame("[DONE]")) == b"data: [DONE]\n\n"
    assert encode_frame(NDJSON, Frame({"done": True})) == b'{"done":true}\n'


def test_warning_headers_are_ascii_and_bounded():
    headers = warning_headers(["pattern not enforced at /properties/naïve", "100% sure", *map(str, range(30))])
    assert len(headers) == 20 and headers[0] == ("Llamay-Warning", "pattern not enforced at /properties/na%C3%AFve")
    assert headers[1][1] == "100%25 sure"
    assert all(value.isascii() for _, value in headers)
