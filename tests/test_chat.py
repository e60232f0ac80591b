"""The chat layer: model templates in the sandbox, Hermes tool prompts, and call parsing whole or streamed.

Invariants hunted here:

1. A template renders or raises ``TemplateError``; nothing it asks for leaves the sandbox.
2. The Hermes block is in the prompt exactly when tools are given and the template does not render them.
3. However generated text is cut into deltas, the stream yields the batch parser's prose and calls,
   and never yields a piece of ``<tool_call>`` as prose.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_vocab import write_gguf

from llamay.chat import (
    DEFAULT_TEMPLATE,
    CallStream,
    ChatTemplate,
    MessageError,
    TemplateError,
    ToolCall,
    ToolCallError,
    normalize_messages,
    parse_tool_calls,
)
from llamay.chat.dialects.hermes import HERMES
from llamay.errors import LlamayError, VocabularyError

#: The offered tools' names: the fallback forms (fenced, bare) fire only on these.
NAMES = ["get_weather", "f", "g"]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Météo d'une ville",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris"}, {"type": "text", "text": "and Rome?"}]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18°C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "24°C"},
]
HERMES_BLOCK = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    + json.dumps(WEATHER, ensure_ascii=False)
    + "\n</tools>\n\nFor each function call, return a json object with function name and arguments"
    " within <tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
# The conversation after the system turn, as ChatML with Hermes calls and results (SmolLM2 and the default agree).
CHATML_TURNS = (
    "<|im_start|>user\nWeather in Paris\nand Rome?<|im_end|>\n"
    "<|im_start|>assistant\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\n18°C\n</tool_response>\n<tool_response>\n24°C\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
)
SMOLLM2_SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"


@pytest.fixture(scope="session")
def smollm2_template(smollm2_gguf) -> ChatTemplate:
    return ChatTemplate.from_gguf(smollm2_gguf)


@pytest.fixture(scope="session")
def gemma_template(gemma_gguf) -> ChatTemplate:
    return ChatTemplate.from_gguf(gemma_gguf)


# --- the models' own templates ----------------------------------------------------------------------


def test_smollm2_ships_chatml_without_tools_and_without_bos(smollm2_template):
    t = smollm2_template
    assert (t.is_default, t.renders_tools, t.renders_tool_calls, t.stop) == (False, False, False, ())
    assert (t.bos_token, t.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert "bos_token" not in t.source


def test_gemma_base_has_no_template_and_gets_the_default(gemma_template):
    t = gemma_template
    assert (t.is_default, t.source, t.stop) == (True, DEFAULT_TEMPLATE, ("<|im_end|>",))
    assert (t.bos_token, t.eos_token) == ("<bos>", "<eos>")


TOKENS = {"tokenizer.ggml.tokens": ["<s>", "</s>", "a"]}
GGUF_CASES = {
    "template and token names": (
        {"tokenizer.chat_template": "{{ bos_token }}x{{ eos_token }}", **TOKENS,
         "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 1},
        (False, "<s>", "</s>"),
    ),
    "no template: the default": ({**TOKENS, "tokenizer.ggml.eos_token_id": 1}, (True, "", "</s>")),
    "no tokenizer keys at all": ({"general.name": "m"}, (True, "", "")),
    "BOS id past the tokens": ({**TOKENS, "tokenizer.ggml.bos_token_id": 3}, "bos_token_id 3 is not one of the 3"),
    "template not a string": ({"tokenizer.chat_template": 5}, "tokenizer.chat_template is not a string"),
}  # fmt: skip


@pytest.mark.parametrize(("fields", "expected"), GGUF_CASES.values(), ids=GGUF_CASES.keys())
def test_template_and_special_tokens_are_read_from_gguf_metadata(tmp_path, fields, expected):
    path = write_gguf(tmp_path / "m.gguf", fields)
    if isinstance(expected, str):
        with pytest.raises(VocabularyError, match=expected):
            ChatTemplate.from_gguf(path)
    else:
        t = ChatTemplate.from_gguf(path)
        assert (t.is_default, t.bos_token, t.eos_token) == expected
        assert t.origin == str(path)


RENDER_CASES = {
    "smollm2: conversation with tools, Hermes block in the system turn": (
        "smollm2",
        CONVERSATION,
        [WEATHER],
        "<|im_start|>system\nYou are terse.\n\n" + HERMES_BLOCK + "<|im_end|>\n" + CHATML_TURNS,
    ),
    "smollm2: conversation without tools keeps calls and results as Hermes text": (
        "smollm2",
        CONVERSATION,
        None,
        "<|im_start|>system\nYou are terse.<|im_end|>\n" + CHATML_TURNS,
    ),
    "smollm2: no system message, tools: the Hermes block is the system turn": (
        "smollm2",
        CONVERSATION[1:],
        [WEATHER],
        "<|im_start|>system\n" + HERMES_BLOCK + "<|im_end|>\n" + CHATML_TURNS,
    ),
    "smollm2: no system message, no tools: the template's own system turn": (
        "smollm2",
        [{"role": "user", "content": "Hi"}],
        None,
        SMOLLM2_SYSTEM + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    ),
    "gemma default: ChatML, no BOS written (the tokenizer adds it)": (
        "gemma",
        [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        None,
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    ),
    "gemma default: conversation with tools": (
        "gemma",
        CONVERSATION,
        [WEATHER],
        "<|im_start|>system\nYou are terse.\n\n" + HERMES_BLOCK + "<|im_end|>\n" + CHATML_TURNS,
    ),
}


@pytest.mark.parametrize(("model", "messages", "tools", "expected"), RENDER_CASES.values(), ids=RENDER_CASES.keys())
def test_model_template_renders_the_conversation(request, model, messages, tools, expected):
    template = request.getfixturevalue(f"{model}_template")
    assert template.render(messages, tools) == expected


def test_without_generation_prompt_the_prompt_ends_after_the_last_turn(smollm2_template):
    prompt = smollm2_template.render([{"role": "user", "content": "Hi"}], add_generation_prompt=False)
    assert prompt.endswith("<|im_start|>user\nHi<|im_end|>\n")


# A template that renders tools and calls itself, as Qwen's and Hermes' do.
TOOL_AWARE = (
    "{% if tools %}TOOLS {{ tools | map(attribute='function') | map(attribute='name') | join(',') }}\n{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'tool' %}[result {{ m.tool_call_id }}] {{ m.content }}\n"
    "{% elif m.tool_calls %}[calls{% for c in m.tool_calls %} {{ c.function.name }}{{ c.function.arguments | tojson }}"
    "{% endfor %}]\n"
    "{% else %}[{{ m.role }}] {{ m.content }}\n{% endif %}"
    "{% endfor %}"
)


@pytest.mark.parametrize(
    "source", ["smollm2", "default", TOOL_AWARE], ids=["smollm2 template", "default template", "tool-aware template"]
)
@pytest.mark.parametrize("tools", [None, [], [WEATHER]], ids=["tools None", "tools empty", "one tool"])
def test_hermes_block_appears_exactly_when_the_template_lacks_tools(request, source, tools):
    if source == "smollm2":
        template = request.getfixturevalue("smollm2_template")
    else:
        template = ChatTemplate(None if source == "default" else source)
    prompt = template.render(CONVERSATION, tools)
    assert prompt.count("\n</tools>") == (1 if tools and not template.renders_tools else 0)


def test_tool_aware_template_gets_tools_and_calls_with_object_arguments():
    prompt = ChatTemplate(TOOL_AWARE).render(CONVERSATION, [WEATHER])
    assert prompt == (
        "TOOLS get_weather\n[system] You are terse.\n[user] Weather in Paris\nand Rome?\n"
        '[calls get_weather{"city": "Paris"} get_weather{"city": "Rome"}]\n'
        "[result call_1] 18°C\n[result call_2] 24°C\n"
    )


TOOL_SUPPORT_CASES = {
    "no tools, no calls": ("{% for m in messages %}{{ m.content }}{% endfor %}", False, False),
    "tools variable": ("{% if tools %}{{ tools | tojson }}{% endif %}", True, False),
    "tools only assigned, never given": ("{% set tools = [] %}{{ tools }}", False, False),
    "tool_calls attribute": ("{% for m in messages %}{{ m.tool_calls }}{% endfor %}", False, True),
    "tool_calls item": ("{% for m in messages %}{{ m['tool_calls'] }}{% endfor %}", False, True),
    "tool_calls test": ("{% for m in messages %}{{ 'tool_calls' in m }}{% endfor %}", False, True),
}


@pytest.mark.parametrize(
    ("source", "renders_tools", "renders_tool_calls"), TOOL_SUPPORT_CASES.values(), ids=TOOL_SUPPORT_CASES.keys()
)
def test_tool_support_is_read_from_the_template_source(source, renders_tools, renders_tool_calls):
    template = ChatTemplate(source)
    assert (template.renders_tools, template.renders_tool_calls) == (renders_tools, renders_tool_calls)


HF_ENVIRONMENT_CASES = {
    "tojson keeps non-ASCII": ("{{ {'v': 'é'} | tojson }}", {}, '{"v": "é"}'),
    "tojson indent": ("{{ [1] | tojson(indent=2) }}", {}, "[\n  1\n]"),
    "bos and eos tokens": ("{{ bos_token }}|{{ eos_token }}", {}, "<s>|</s>"),
    "strftime_now": ("{{ strftime_now('%Y') | length }}", {}, "4"),
    "loop controls": ("{% for m in messages %}{{ m.content }}{% break %}{% endfor %}", {}, "a"),
    "do statement": ("{% set ns = namespace(n=0) %}{% do ns.n %}{{ ns.n }}", {}, "0"),
    "namespace assignment": ("{% set ns = namespace(n=0) %}{% set ns.n = 2 %}{{ ns.n }}", {}, "2"),
    "generation tag keeps its body": ("{% generation %}x{% endgeneration %}", {}, "x"),
    "trim_blocks and lstrip_blocks": ("  {% if true %}\nx{% endif %}\n", {}, "x"),
    "extra context variables": ("{{ enable_thinking }}", {"enable_thinking": False}, "False"),
    "add_generation_prompt": ("{{ add_generation_prompt }}", {}, "True"),
}


@pytest.mark.parametrize(
    ("source", "context", "expected"), HF_ENVIRONMENT_CASES.values(), ids=HF_ENVIRONMENT_CASES.keys()
)
def test_template_environment_is_the_one_hf_templates_expect(source, context, expected):
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    assert template.render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], **context) == expected


# --- refusals: the sandbox, the template's own errors ----------------------------------------------------

TEMPLATE_ERROR_CASES = {
    "class hierarchy walk": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "sandbox refused"),
    "function globals": ("{{ raise_exception.__globals__ }}", "sandbox refused.*'__globals__'"),
    "globals in a condition": ("{% if strftime_now.__globals__ %}x{% endif %}", "sandbox refused"),
    "cycler to os": ("{{ cycler.__init__.__globals__.os.popen('id').read() }}", "sandbox refused"),
    "format string reaching attributes": ("{{ '{0.__class__}'.format(messages) }}", "sandbox refused"),
    "attr filter": ("{{ messages | attr('__class__') }}", "sandbox refused"),
    "private template reference": ("{{ self._TemplateReference__context }}", "sandbox refused"),
    "mutating the messages": ("{% do messages.append(1) %}", "sandbox refused.*'append'"),
    "mutating a message": ("{{ messages[0].update({'role': 'x'}) }}", "sandbox refused.*'update'"),
    "reading a file": ("{% include '/etc/passwd' %}", "no loader"),
    "huge range": ("{{ range(10**9) | list }}", "MAX_RANGE"),
    "raise_exception": (
        "{{ raise_exception('Conversation roles must alternate user/assistant') }}",
        "refused the conversation: Conversation roles must alternate user/assistant",
    ),
    "Python error inside the template": ("{{ 'a' + none }}", "TypeError"),
}


@pytest.mark.parametrize(("source", "message"), TEMPLATE_ERROR_CASES.values(), ids=TEMPLATE_ERROR_CASES.keys())
def test_template_failure_is_a_template_error(source, message):
    template = ChatTemplate(source, origin="model.gguf")
    with pytest.raises(TemplateError, match=message) as error:
        template.render([{"role": "user", "content": "hi"}])
    assert str(error.value).endswith(" - at model.gguf")
    assert isinstance(error.value, LlamayError) and error.value.http_status == 400


@pytest.mark.parametrize(
    "source", ["{% for m in messages %}", "{{ messages | nosuchfilter }}", "{% nosuchtag %}"], ids=str
)
def test_template_that_does_not_parse_is_refused_when_loaded(source):
    with pytest.raises(TemplateError, match=r"does not parse: .* - at model.gguf, line 1"):
        ChatTemplate(source, origin="model.gguf")


# --- messages -------------------------------------------------------------------------------------------

NORMALIZE_CASES = {
    "string content kept": ([{"role": "user", "content": "hi"}], [{"role": "user", "content": "hi"}]),
    "None content is empty": ([{"role": "assistant", "content": None}], [{"role": "assistant", "content": ""}]),
    "missing content is empty": ([{"role": "assistant"}], [{"role": "assistant", "content": ""}]),
    "text parts joined by newlines": (
        [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
        [{"role": "user", "content": "a\nb"}],
    ),
    "developer is system": ([{"role": "developer", "content": "x"}], [{"role": "system", "content": "x"}]),
    "arguments string parsed, other keys kept": (
        [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": '{"a": 1}'}}]}],
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
            }
        ],
    ),
    "empty arguments string is an empty object": (
        [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": ""}}]}],
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}],
            }
        ],
    ),
    "empty tool_calls dropped": ([{"role": "assistant", "tool_calls": []}], [{"role": "assistant", "content": ""}]),
    "tool message keeps its id": (
        [{"role": "tool", "tool_call_id": "c", "content": "ok"}],
        [{"role": "tool", "tool_call_id": "c", "content": "ok"}],
    ),
}


@pytest.mark.parametrize(("messages", "expected"), NORMALIZE_CASES.values(), ids=NORMALIZE_CASES.keys())
def test_messages_are_normalized_for_templates(messages, expected):
    assert normalize_messages(messages) == expected


MESSAGE_ERROR_CASES = {
    "not a list": ({"role": "user"}, None, "- at messages$"),
    "message not an object": (["hi"], None, r"- at messages\[0\]$"),
    "unknown role": ([{"role": "bot", "content": "x"}], None, r"unknown role 'bot'.* - at messages\[0\].role"),
    "image part": (
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
        None,
        r"type 'image_url' is not supported .* - at messages\[0\].content\[0\]",
    ),
    "arguments not JSON": (
        [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}],
        None,
        r"not JSON.* - at messages\[0\].tool_calls\[0\].function.arguments",
    ),
    "arguments a JSON array": (
        [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}],
        None,
        r"not a JSON object - at messages\[0\].tool_calls\[0\].function.arguments",
    ),
    "call without a name": (
        [{"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]}],
        None,
        r"no name - at messages\[0\].tool_calls\[0\].function.name",
    ),
    "tool_calls on a user message": (
        [{"role": "user", "tool_calls": [{"function": {"name": "f"}}]}],
        None,
        r"only assistant messages carry tool_calls - at messages\[0\].tool_calls",
    ),
    "tool without a function": ([], [{"type": "function"}], r"- at tools\[0\]$"),
    "tool without a name": (
        [],
        [{"type": "function", "function": {"description": "x"}}],
        r"- at tools\[0\].function.name",
    ),
}


@pytest.mark.parametrize(("messages", "tools", "message"), MESSAGE_ERROR_CASES.values(), ids=MESSAGE_ERROR_CASES.keys())
def test_malformed_message_or_tool_is_refused_naming_the_field(messages, tools, message):
    with pytest.raises(MessageError, match=message):
        ChatTemplate(None).render(messages, tools)


def test_rendering_leaves_the_callers_messages_alone(smollm2_template):
    messages = json.loads(json.dumps(CONVERSATION))
    smollm2_template.render(messages, [WEATHER])
    assert messages == CONVERSATION


# --- call parsing ---------------------------------------------------------------------------------------

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
CALL_CASES = {
    "plain text": ("Hello there.", "Hello there.", []),
    "empty": ("", "", []),
    "trailing whitespace dropped": ("Hi \n", "Hi", []),
    "one call": (CALL, "", [("get_weather", {"city": "Paris"})]),
    "one call, no whitespace": ('<tool_call>{"name":"f","arguments":{}}</tool_call>', "", [("f", {})]),
    "text before, whitespace trimmed": (
        "Let me check.\n\n" + CALL + "\n",
        "Let me check.",
        [("get_weather", {"city": "Paris"})],
    ),
    "two calls": (
        CALL + '\n<tool_call>\n{"name": "f", "arguments": {"n": 1}}\n</tool_call>',
        "",
        [("get_weather", {"city": "Paris"}), ("f", {"n": 1})],
    ),
    "text after a call joins by a newline": ("A " + CALL + " B ", "A\nB", [("get_weather", {"city": "Paris"})]),
    "close tag inside an argument string": (
        '<tool_call>{"name": "f", "arguments": {"s": "a</tool_call>\\"</tool_call>"}}</tool_call>',
        "",
        [("f", {"s": 'a</tool_call>"</tool_call>'})],
    ),
    "tag prefix in prose stays prose": ("a <tool_ b <tool", "a <tool_ b <tool", []),
    "unicode arguments": ('<tool_call>{"name": "f", "arguments": {"v": "é😀"}}</tool_call>', "", [("f", {"v": "é😀"})]),
}


def calls_of(calls: list[ToolCall]) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in calls]


@pytest.mark.parametrize(("text", "prose", "calls"), CALL_CASES.values(), ids=CALL_CASES.keys())
def test_generated_text_splits_into_prose_and_calls(text, prose, calls):
    got_prose, got_calls = parse_tool_calls(text, HERMES, NAMES)
    assert (got_prose, calls_of(got_calls)) == (prose, calls)


def test_every_call_gets_a_distinct_id():
    _, calls = parse_tool_calls(CALL * 20, HERMES, NAMES)
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", c.id) for c in calls)
    assert len({c.id for c in calls}) == 20


CALL_ERROR_CASES = {
    "bad JSON": ('<tool_call>{"name": "f", "arguments": {]}</tool_call>', "is not JSON"),
    "not an object": ("<tool_call>[1, 2]</tool_call>", "not a JSON object"),
    "missing name": ('<tool_call>{"arguments": {}}</tool_call>', 'no "name"'),
    "empty name": ('<tool_call>{"name": "", "arguments": {}}</tool_call>', 'no "name"'),
    "missing arguments": ('<tool_call>{"name": "f"}</tool_call>', '"arguments" is not a JSON object'),
    "arguments as a string": ('<tool_call>{"name": "f", "arguments": "{}"}</tool_call>', '"arguments" is not'),
    "extra keys": ('<tool_call>{"name": "f", "arguments": {}, "id": 1}</tool_call>', r"other than .*\['id'\]"),
    "unclosed block": ('Sure <tool_call>{"name": "f", "arguments": {}}', "never completed.* - at call 1$"),
    "unclosed second block": (CALL + '<tool_call>{"name": "f"', "never completed.* - at call 2$"),
    "open tag only": ("<tool_call>", "never completed"),
    "second call bad": (CALL + "<tool_call>{}</tool_call>", r'no "name".* - at call 2'),
    "close tag only inside a string": ('<tool_call>{"name": "f", "arguments": {"s": "</tool_call>', "never completed"),
}


@pytest.mark.parametrize(("text", "message"), CALL_ERROR_CASES.values(), ids=CALL_ERROR_CASES.keys())
def test_malformed_call_block_raises_never_becomes_prose(text, message):
    with pytest.raises(ToolCallError, match=message) as error:
        parse_tool_calls(text, HERMES, NAMES)
    assert error.value.http_status == 500


# --- streaming: every split agrees with the batch parser -------------------------------------------------


def batches(deltas: list[str]):
    """The events a fresh stream returns for each delta in turn, then for ``finish``."""
    s = CallStream(HERMES, NAMES)
    for delta in deltas:
        yield s.feed(delta)
    yield s.finish()


def stream(deltas: list[str]) -> tuple[list[str], list[ToolCall]]:
    events = [e for batch in batches(deltas) for e in batch]
    return [e for e in events if isinstance(e, str)], [e for e in events if isinstance(e, ToolCall)]


def batch(text: str) -> tuple[str, list[ToolCall]]:
    return parse_tool_calls(text, HERMES, NAMES)


def outcome(run, *args):
    """(prose, calls) or the error message: error cases must fail the same way however they are cut."""
    try:
        prose, calls = run(*args)
    except ToolCallError as e:
        return "error", re.sub(r" - at call \d+$", "", str(e))
    return "".join(prose) if isinstance(prose, list) else prose, calls_of(calls)


def splits(text: str):
    """The text whole, cut at every point, and character by character."""
    yield [text]
    for i in range(1, len(text)):
        yield [text[:i], text[i:]]
    yield list(text)


ALL_TEXTS = [text for text, _, _ in CALL_CASES.values()] + [text for text, _ in CALL_ERROR_CASES.values()]


@pytest.mark.parametrize("text", ALL_TEXTS, ids=[*CALL_CASES, *CALL_ERROR_CASES])
def test_stream_gives_the_batch_result_for_every_split(text):
    expected = outcome(batch, text)
    for deltas in splits(text):
        assert outcome(stream, deltas) == expected, deltas


@pytest.mark.parametrize(("text", "prose"), [(t, p) for t, p, _ in CALL_CASES.values()], ids=list(CALL_CASES))
def test_stream_never_returns_prose_it_must_take_back(text, prose):
    """After every delta, the prose so far is a prefix of the final prose: no piece of a tag ever went out."""
    for deltas in splits(text):
        sent = ""
        for batch in batches(deltas):
            sent += "".join(e for e in batch if isinstance(e, str))
            assert prose.startswith(sent), deltas


HELD_CASES = {
    "prefix of the tag held": (["Hi <tool_"], ["Hi"]),
    "held prefix released when it is not the tag": (["Hi <tool_", "box>"], ["Hi", " <tool_box>"]),
    "trailing whitespace held until text follows": (["a \n", "b"], ["a", " \nb"]),
    "call released whole at its close tag": (
        ['<tool_call>{"name": "f", ', '"arguments": {}}', "</tool_", "call>"],
        [],
    ),
}


@pytest.mark.parametrize(("deltas", "prose"), HELD_CASES.values(), ids=HELD_CASES.keys())
def test_stream_holds_back_what_could_still_be_a_call(deltas, prose):
    s = CallStream(HERMES, NAMES)
    events = [e for d in deltas for e in s.feed(d)]
    assert [e for e in events if isinstance(e, str)] == prose


def test_stream_returns_a_call_in_the_delta_that_closes_it():
    s = CallStream(HERMES, NAMES)
    assert s.feed('<tool_call>{"name": "f", "arguments": {"a": 1}}') == []
    (call,) = s.feed("</tool_call>")
    assert (call.name, call.arguments) == ("f", {"a": 1})


FRAGMENTS = [
    "<tool_call>", "</tool_call>", '{"name": "f", "arguments": {}}', '{"name": "g", "arguments": {"s": "<tool_call>"}}',
    "<", "<tool", "</tool_", '"', "\\", " ", "\n", "a", "b c", "é", "{", "}",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_stream_agrees_with_batch_on_generated_texts(parts, cuts):
    text = "".join(parts)
    points = sorted({c % (len(text) + 1) for c in cuts})
    deltas = [text[i:j] for i, j in zip([0, *points], [*points, len(text)], strict=True)]
    assert outcome(stream, deltas) == outcome(batch, text)


DRAIN_CASES = {
    "cut inside a call: the call as text": (
        ["Sure ", '<tool_call>{"name": "f", "argu'],
        True,
        '<tool_call>{"name": "f", "argu',
    ),
    "cut on a tag prefix: the prefix as text": (["Sure <tool_c"], False, " <tool_c"),
    "cut after a call: held prose joins with a newline": (["A", CALL, "\n <tool"], False, "\n<tool"),
    "nothing held": (["Sure."], False, ""),
}


@pytest.mark.parametrize(("deltas", "in_call", "held"), DRAIN_CASES.values(), ids=DRAIN_CASES.keys())
def test_drain_returns_what_a_cut_generation_left_held_as_text(deltas, in_call, held):
    s = CallStream(HERMES, NAMES)
    for delta in deltas:
        s.feed(delta)
    assert (s.in_call, s.drain(), s.in_call, s.finish()) == (in_call, held, False, [])
