"""The Llama 3, Mistral and Granite dialects end to end, on their published chat templates, without weights.

No weights of these families are here: the model is the fixture backend (a scripted model that
writes its script greedily under the constraint) over the real Llama 3.2 tokenizer, rendering the
family's own template (``testdata/templates``, from llama.cpp's ``models/templates``). So every
layer runs as for a real model of the family: the template renders tools, calls and results; the
dialect is detected from it; the grammar is compiled against a real vocabulary, where Llama 3's
``<|python_tag|>`` is one control token (a token edge) and Mistral's ``[TOOL_CALLS]`` and
Granite's ``<|tool_call|>`` are text; and the stream parser turns what the model wrote into calls.
"""

from __future__ import annotations

import json
import re
from contextlib import ExitStack

import numpy as np
import pytest
from conftest import read_testdata

from llamay import Matcher, allocate_bitmask
from llamay.api import App, running
from llamay.backends.fixture import FixtureBackend
from llamay.chat import DIALECTS, ToolCall
from llamay.chat.tool_grammar import compile_tool_calls
from llamay.engine import Done, Model, TextDelta

PYTHON_TAG = "<|python_tag|>"

#: template file -> the dialect its text selects
FAMILIES = {"llama3": "llama3", "llama3.1": "llama3", "mistral": "mistral", "granite": "granite"}

ADD = {"type": "function", "function": {"name": "add", "description": "Add two integers", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string", "maxLength": 20}}, "required": ["city"]}}}
TOOLS = [ADD, WEATHER]
ASK = [{"role": "user", "content": "Add 1 and 2, then tell me the weather in Pune."}]
ADD_CALL = ("add", {"a": 1, "b": 2})
PUNE_CALL = ("get_weather", {"city": "Pune"})
ADD_PARAMETERS = b'{"name": "add", "parameters": {"a": 1, "b": 2}}'
TWO_PARAMETERS = ADD_PARAMETERS + b'\n{"name": "get_weather", "parameters": {"city": "Pune"}}'
CALL_ID = "aB3dE6gH9"  # Mistral's template refuses any other shape of id: 9 alphanumerics
HISTORY = [
    {"role": "user", "content": "Add 1 and 2."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": CALL_ID, "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
    {"role": "tool", "tool_call_id": CALL_ID, "content": "3"},
]


def template(family: str) -> str:
    return read_testdata("templates", f"{family}.jinja")


class MarkerFixture(FixtureBackend):
    """The fixture, writing the control token ``first`` (which has no text to script) before its script."""

    def __init__(self, vocab, first: int, **options) -> None:
        super().__init__(vocab, **options)
        self.first = first
        self._pending = True
        self.fed: list[int] = []

    def begin(self, prompt: list[int]) -> None:
        super().begin(prompt)
        self._pending, self.fed = True, []

    def feed(self, token: int) -> None:
        self._pending = self._pending and token != self.first
        self.fed.append(token)
        super().feed(token)

    def logits(self) -> np.ndarray:
        logits = super().logits()
        if self._pending:
            logits[self.first] = 1e7
        return logits


def model(vocab, family: str, script: bytes = b"", *, tag: bool = False) -> Model:
    """The fixture writing ``script`` (after ``<|python_tag|>`` where ``tag``), rendering ``family``'s template."""
    if tag:
        backend = MarkerFixture(vocab, vocab.special_token_id(PYTHON_TAG), script=script, model_id=family)
    else:
        backend = FixtureBackend(vocab, script=script, model_id=family)
    return Model(backend, chat_template=template(family))


def calls_of(calls) -> list[tuple[str, dict]]:
    return [(c["name"], c["arguments"]) if isinstance(c, dict) else (c.name, c.arguments) for c in calls]


def id_shape(dialect: str) -> re.Pattern[str]:
    return re.compile(r"[A-Za-z0-9]{9}" if DIALECTS[dialect].short_ids else r"call_[0-9a-f]{24}")


# -- the templates: detection and rendering ------------------------------------------------------------


@pytest.mark.parametrize(("family", "dialect"), FAMILIES.items())
def test_the_dialect_is_detected_from_the_published_template(llama3_vocab, family, dialect):
    m = model(llama3_vocab, family)
    assert m.dialect.name == dialect
    assert m.template.renders_tools and not m.template.is_default


#: family -> fragments of the prompt for HISTORY with TOOLS, in order: the tools, the call, the result
RENDERED = {
    "llama3": ['<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions',
               '        "name": "add",\n        "description": "Add two integers"',
               "Add 1 and 2.<|eot_id|>",
               '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "add", "parameters": {"a": 1, "b": 2}}'
               "<|eot_id|>",
               # the result in the ipython role, as JSON: the template's ``is iterable`` holds for a string
               '<|start_header_id|>ipython<|end_header_id|>\n\n"3"<|eot_id|>',
               "<|start_header_id|>assistant<|end_header_id|>\n\n"],
    "llama3.1": ["<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n",
                 '<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions',
                 '        "name": "add",\n',
                 '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "add", "parameters": {"a": 1, "b": 2}}'
                 "<|eot_id|>",
                 '<|start_header_id|>ipython<|end_header_id|>\n\n"3"<|eot_id|>',
                 "<|start_header_id|>assistant<|end_header_id|>\n\n"],
    "mistral": ['[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "add", "description": "Add two integers",'
                ' "parameters": {"type": "object"',
                '{"name": "get_weather"', "[/AVAILABLE_TOOLS][INST]Add 1 and 2.[/INST]",
                f'[TOOL_CALLS][{{"name": "add", "arguments": {{"a": 1, "b": 2}}, "id": "{CALL_ID}"}}]',
                f'[TOOL_RESULTS]{{"content": 3, "call_id": "{CALL_ID}"}}[/TOOL_RESULTS]'],
    # Granite 3.3's template renders no tool_calls: llamay writes the call and the result in (see below)
    "granite": ["<|start_of_role|>available_tools<|end_of_role|>[\n    {\n",
                '            "name": "add",\n',
                "<|start_of_role|>user<|end_of_role|>Add 1 and 2.<|end_of_text|>\n",
                '{"name": "add", "arguments": {"a": 1, "b": 2}}',
                "3",
                "<|start_of_role|>assistant<|end_of_role|>"],
}


@pytest.mark.parametrize(("family", "fragments"), RENDERED.items())
def test_tools_calls_and_results_are_rendered_where_the_family_puts_them(llama3_vocab, family, fragments):
    prompt = model(llama3_vocab, family).template.render(HISTORY, TOOLS)
    at = 0
    for fragment in fragments:
        found = prompt.find(fragment, at)
        assert found >= 0, (fragment, prompt[at:])
        at = found + len(fragment)
    assert prompt[at:].strip() == ""  # the generation prompt ends it


@pytest.mark.parametrize("family", ["llama3", "mistral", "granite"])
def test_without_tools_the_prompt_names_none(llama3_vocab, family):
    prompt = model(llama3_vocab, family).template.render(ASK)
    assert '"add"' not in prompt and "AVAILABLE_TOOLS" not in prompt and "available_tools" not in prompt
    assert "Environment: ipython" not in prompt


def test_a_granite_history_call_is_written_in_granites_own_form(llama3_vocab):
    prompt = model(llama3_vocab, "granite").template.render(HISTORY, TOOLS)
    assert '<|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}]' in prompt
    assert "<tool_call>" not in prompt and "<tool_response>" not in prompt


# -- markers against the real vocabulary -------------------------------------------------------------


@pytest.mark.parametrize(("family", "markers"), [("llama3", {PYTHON_TAG}), ("mistral", set()), ("granite", set())])
def test_a_marker_is_a_token_edge_only_where_the_vocabulary_has_it_as_one_token(llama3_vocab, family, markers):
    m = model(llama3_vocab, family)
    assert set(m.markers.ids) == markers
    for text, i in m.markers.ids.items():
        assert i == llama3_vocab.special_token_id(text) == 128010
        assert m.markers.vocab.grammar_bytes(i) == m.markers.vocab.edge_bytes(i)


def allowed(matcher: Matcher, vocab) -> set[int]:
    mask = allocate_bitmask(vocab.size)
    matcher.fill_next_token_bitmask(mask)
    return {int(i) for i in np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: vocab.size])}


def control_tokens(vocab) -> set[int]:
    """The tokens without text (control tokens), EOS aside."""
    return {i for i in range(vocab.size) if not vocab.token_bytes(i) and i not in vocab.eos_ids}


def tool_grammar(m: Model, mode: str):
    """The constraint ``m`` runs for TOOLS under ``mode``, and the vocabulary it runs on."""
    specs = [{"name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in TOOLS]
    return compile_tool_calls(specs, mode, dialect=m.dialect, vocab=m.backend.vocab), m.markers.vocab


@pytest.mark.parametrize(("mode", "prose"), [("auto", ""), ("auto", "Sure. "), ("required", "")])
def test_llama3_allows_exactly_the_python_tag_token_where_a_call_may_open(llama3_vocab, mode, prose):
    m = model(llama3_vocab, "llama3")
    tag = m.markers.ids[PYTHON_TAG]
    grammar, vocab = tool_grammar(m, mode)
    matcher = Matcher(grammar, vocab)
    assert matcher.accept_bytes(prose.encode())
    assert allowed(matcher, vocab) & control_tokens(llama3_vocab) == {tag}
    assert not matcher.accept_bytes(PYTHON_TAG.encode())  # the tag's text, spelled, is no tag
    assert matcher.accept_token(tag)
    assert not allowed(matcher, vocab) & control_tokens(llama3_vocab)  # once, then the call
    assert matcher.accept_bytes(ADD_PARAMETERS) and matcher.is_accepting()


def test_llama3_under_none_allows_no_python_tag(llama3_vocab):
    grammar, vocab = tool_grammar(model(llama3_vocab, "llama3"), "none")
    matcher = Matcher(grammar, vocab)
    assert matcher.accept_bytes(b"Sure. ")
    assert not allowed(matcher, vocab) & control_tokens(llama3_vocab)
    assert not matcher.accept_bytes(PYTHON_TAG.encode())


#: dialect -> texts its ``required`` constraint refuses: other dialects' calls, its own form bent, unoffered tools
FOREIGN = {
    "llama3": {
        "the Hermes key": '{"name": "add", "arguments": {"a": 1, "b": 2}}',
        "Mistral's marker": '[TOOL_CALLS][{"name": "add", "parameters": {"a": 1, "b": 2}}]',
        "Hermes' marker": '<tool_call>{"name": "add", "parameters": {"a": 1, "b": 2}}</tool_call>',
        "a list": '[{"name": "add", "parameters": {"a": 1, "b": 2}}]',
        "an unoffered tool": '{"name": "delete_everything", "parameters": {}}',
        "arguments off the schema": '{"name": "add", "parameters": {"a": "one", "b": 2}}',
        "a second call in the turn": '{"name": "add", "parameters": {"a": 1, "b": 2}}\n'
                                     '{"name": "get_weather", "parameters": {"city": "Pune"}}',
    },
    "mistral": {
        "Granite's marker": '<|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}]',
        "Hermes' marker": '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>',
        "the marker without a list": '[TOOL_CALLS]{"name": "add", "arguments": {"a": 1, "b": 2}}',
        "Llama 3's key": '[TOOL_CALLS][{"name": "add", "parameters": {"a": 1, "b": 2}}]',
        "an unoffered tool": '[TOOL_CALLS][{"name": "delete_everything", "arguments": {}}]',
        "an unclosed list": '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}',
    },
    "granite": {
        "Mistral's marker": '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}]',
        "the marker without a list": '<|tool_call|>{"name": "add", "arguments": {"a": 1, "b": 2}}',
        "Llama 3's key": '<|tool_call|>[{"name": "add", "parameters": {"a": 1, "b": 2}}]',
        "an unoffered tool": '<|tool_call|>[{"name": "delete_everything", "arguments": {}}]',
        "prose after the calls": '<|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}] done',
    },
}


@pytest.mark.parametrize(("family", "text"), [pytest.param(f, t, id=f"{f}: {k}")
                                              for f, cases in FOREIGN.items() for k, t in cases.items()])
def test_required_refuses_what_is_not_the_dialects_call_of_an_offered_tool(llama3_vocab, family, text):
    grammar, vocab = tool_grammar(model(llama3_vocab, family), "required")
    matcher = Matcher(grammar, vocab)
    assert not (matcher.accept_bytes(text.encode()) and matcher.is_accepting())



@pytest.mark.parametrize("family", FOREIGN)
def test_required_accepts_the_dialects_own_calls(llama3_vocab, family):
    m = model(llama3_vocab, family)
    grammar, vocab = tool_grammar(m, "required")
    matcher = Matcher(grammar, vocab)
    turn = m.dialect.write_calls([{"name": name, "arguments": arguments} for name, arguments in TURN[family]])
    assert matcher.accept_bytes(turn.encode()) and matcher.is_accepting()

# -- calls through Model.chat on the fixture ---------------------------------------------------------

NAMED_WEATHER = {"type": "function", "function": {"name": "get_weather"}}

#: (family, script, chat options, prose, calls): what the fixture writes and what comes back
CHATS = {
    # Llama 3: the bare object with "parameters" is the family's own form; <|python_tag|> may open it
    "llama3 bare object": ("llama3", b'{"name": "add", "parameters": {"a": 1, "b": 2}}', {}, "", [ADD_CALL]),
    "llama3 bare object, required": ("llama3", b'{"name": "add", "parameters": {"a": 1, "b": 2}}',
                                     {"tool_choice": "required"}, "", [ADD_CALL]),
    "llama3 prose then two objects: one call per turn": (
        "llama3", b'Sure. {"name": "add", "parameters": {"a": 1, "b": 2}}\n'
                  b'{"name": "get_weather", "parameters": {"city": "Pune"}}', {}, "Sure.", [ADD_CALL]),
    "llama3 two objects, parallel_tool_calls false": (
        "llama3", b'{"name": "add", "parameters": {"a": 1, "b": 2}}\n'
                  b'{"name": "get_weather", "parameters": {"city": "Pune"}}', {"parallel_tool_calls": False}, "",
        [ADD_CALL]),
    "llama3 pretty-printed fenced block": (
        "llama3", b'Let me see.\n```json\n{\n    "name": "get_weather",\n    "parameters": {"city": "Pune"}\n}\n```',
        {}, "Let me see.", [PUNE_CALL]),
    "llama3 named": ("llama3", b'{"name": "get_weather", "parameters": {"city": "Pune"}}',
                     {"tool_choice": NAMED_WEATHER}, "", [PUNE_CALL]),
    # Mistral: [TOOL_CALLS] (text in this vocabulary) and a list of calls
    "mistral marker and a list of two": (
        "mistral", b'[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}, '
                   b'{"name": "get_weather", "arguments": {"city": "Pune"}}]', {}, "", [ADD_CALL, PUNE_CALL]),
    "mistral prose, then the marker": (
        "mistral", b'On it. [TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}]', {}, "On it.", [ADD_CALL]),
    "mistral list of two, parallel_tool_calls false": (
        "mistral", b'[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}, '
                   b'{"name": "get_weather", "arguments": {"city": "Pune"}}]', {"parallel_tool_calls": False}, "",
        [ADD_CALL]),
    "mistral marker, required": ("mistral", b'[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}]',
                                 {"tool_choice": "required"}, "", [ADD_CALL]),
    "mistral bare list": ("mistral", b'[{"name": "add", "arguments": {"a": 1, "b": 2}}]', {}, "", [ADD_CALL]),
    "mistral bare object": ("mistral", b'Sure: {"name": "add", "arguments": {"a": 1, "b": 2}}', {}, "Sure:",
                            [ADD_CALL]),
    "mistral fenced block, required": ("mistral", b'```json\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n```',
                                       {"tool_choice": "required"}, "", [ADD_CALL]),
    "mistral named": ("mistral", b'[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Pune"}}]',
                      {"tool_choice": NAMED_WEATHER}, "", [PUNE_CALL]),
    # Granite: <|tool_call|> (text in this vocabulary) and a list of calls
    "granite marker and a list of two": (
        "granite", b'<|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}, '
                   b'{"name": "get_weather", "arguments": {"city": "Pune"}}]', {}, "", [ADD_CALL, PUNE_CALL]),
    "granite list of two, parallel_tool_calls false": (
        "granite", b'<|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}, '
                   b'{"name": "get_weather", "arguments": {"city": "Pune"}}]', {"parallel_tool_calls": False}, "",
        [ADD_CALL]),
    "granite marker, required": ("granite", b'<|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}]',
                                 {"tool_choice": "required"}, "", [ADD_CALL]),
    "granite fenced block": ("granite", b'Checking.\n```\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n```', {},
                             "Checking.", [ADD_CALL]),
    "granite bare list, required": ("granite", b'[{"name": "add", "arguments": {"a": 1, "b": 2}}]',
                                    {"tool_choice": "required"}, "", [ADD_CALL]),
    "granite bare object, named": ("granite", b'{"name": "get_weather", "arguments": {"city": "Pune"}}',
                                   {"tool_choice": NAMED_WEATHER}, "", [PUNE_CALL]),
}


@pytest.mark.parametrize(("family", "script", "options", "prose", "calls"), CHATS.values(), ids=CHATS.keys())
def test_a_call_in_each_form_comes_back_as_tool_calls_with_the_dialects_ids(
    llama3_vocab, family, script, options, prose, calls
):
    m = model(llama3_vocab, family, script)
    r = m.chat(ASK, tools=TOOLS, max_tokens=100, **options)
    assert (r.text, calls_of(r.tool_calls), r.finish_reason, r.warnings) == (prose, calls, "tool_calls", [])
    assert all(id_shape(m.dialect.name).fullmatch(c["id"]) for c in r.tool_calls)
    assert len({c["id"] for c in r.tool_calls}) == len(calls)


#: (script after the tag, chat options, calls): <|python_tag|> is a control token, which the fixture writes first
TAGGED = {
    "auto": (ADD_PARAMETERS, {}, [ADD_CALL]),
    "required": (ADD_PARAMETERS, {"tool_choice": "required"}, [ADD_CALL]),
    "named": (ADD_PARAMETERS, {"tool_choice": {"type": "function", "function": {"name": "add"}}}, [ADD_CALL]),
    "two objects: one call per turn": (TWO_PARAMETERS, {}, [ADD_CALL]),
    "parallel_tool_calls false": (TWO_PARAMETERS, {"parallel_tool_calls": False}, [ADD_CALL]),
}


@pytest.mark.parametrize(("script", "options", "calls"), TAGGED.values(), ids=TAGGED.keys())
def test_llama3_python_tag_token_opens_a_call(llama3_vocab, script, options, calls):
    m = model(llama3_vocab, "llama3", script, tag=True)
    r = m.chat(ASK, tools=TOOLS, max_tokens=80, **options)
    assert m.backend.fed[0] == m.markers.ids[PYTHON_TAG]
    assert (r.text, calls_of(r.tool_calls), r.finish_reason) == ("", calls, "tool_calls")
    assert all(id_shape("llama3").fullmatch(c["id"]) for c in r.tool_calls)


def test_llama3_python_tag_spelled_as_text_opens_nothing(llama3_vocab):
    """A model spelling the tag's text piece by piece is refused its last piece: no call, no tag in the text."""
    r = model(llama3_vocab, "llama3", b'<|python_tag|>{"name": "add", "parameters": {"a": 1, "b": 2}}').chat(
        ASK, tools=TOOLS, max_tokens=60)
    assert r.tool_calls == [] and PYTHON_TAG not in r.text


#: family -> its canonical form of two calls after some prose: what the fixture tries to write
CANONICAL = {
    "llama3": b'Sure. {"name": "add", "parameters": {"a": 1, "b": 2}}\n'
              b'{"name": "get_weather", "parameters": {"city": "Pune"}}',
    "mistral": b'Sure. [TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}, '
               b'{"name": "get_weather", "arguments": {"city": "Pune"}}]',
    "granite": b'Sure. <|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}, '
               b'{"name": "get_weather", "arguments": {"city": "Pune"}}]',
}
#: family -> the calls a turn of CANONICAL comes back with: Llama 3's format holds one call per turn
TURN = {"llama3": [ADD_CALL], "mistral": [ADD_CALL, PUNE_CALL], "granite": [ADD_CALL, PUNE_CALL]}


@pytest.mark.parametrize("family", CANONICAL)
def test_streaming_gives_text_deltas_then_whole_calls(llama3_vocab, family):
    events = list(model(llama3_vocab, family, CANONICAL[family]).chat(ASK, tools=TOOLS, max_tokens=100, stream=True))
    kinds = [type(e) for e in events]
    first_call = kinds.index(ToolCall)
    assert set(kinds[:first_call]) == {TextDelta} and kinds[first_call:] == [ToolCall] * len(TURN[family]) + [Done]
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "Sure." and not any(c in t for t in texts for c in "{[<")
    assert calls_of(e for e in events if isinstance(e, ToolCall)) == TURN[family]
    assert events[-1].finish_reason == "tool_calls"


def test_llama3_streaming_with_the_python_tag(llama3_vocab):
    m = model(llama3_vocab, "llama3", ADD_PARAMETERS, tag=True)
    events = list(m.chat(ASK, tools=TOOLS, max_tokens=60, stream=True))
    assert [type(e) for e in events] == [ToolCall, Done] and calls_of(events[:1]) == [ADD_CALL]


@pytest.mark.parametrize("family", CANONICAL)
def test_parallel_tool_calls_true_gives_what_the_format_holds_and_says_so_where_that_is_one_call(llama3_vocab, family):
    r = model(llama3_vocab, family, CANONICAL[family]).chat(ASK, tools=TOOLS, parallel_tool_calls=True, max_tokens=100)
    assert (r.text, calls_of(r.tool_calls), r.finish_reason) == ("Sure.", TURN[family], "tool_calls")
    one_per_turn = not DIALECTS[family].parallel
    assert r.warnings == (["parallel tool calls are not made: the llama3 dialect's format holds one call per turn"
                           " (its chat templates refuse more)"] if one_per_turn else [])


@pytest.mark.parametrize("family", ["mistral", "granite"])
def test_tool_choice_none_cannot_write_the_marker(llama3_vocab, family):
    r = model(llama3_vocab, family, CANONICAL[family]).chat(ASK, tools=TOOLS, tool_choice="none", max_tokens=60)
    assert r.tool_calls == [] and r.text.startswith("Sure.") and DIALECTS[family].open not in r.text


@pytest.mark.parametrize("family", CANONICAL)
def test_json_naming_no_offered_tool_stays_text(llama3_vocab, family):
    key = DIALECTS[family].arguments_key
    script = f'{{"name": "John", "{key}": {{"age": 3}}}}'.encode()
    r = model(llama3_vocab, family, script).chat(ASK, tools=TOOLS, max_tokens=60)
    assert r.tool_calls == [] and r.finish_reason == "stop" and json.loads(r.text)["name"] == "John"


# -- the three API shapes over a loopback server ---------------------------------------------------


@pytest.fixture(scope="module")
def servers(llama3_vocab):
    """A loopback server per family, started on first use, its fixture writing the family's CANONICAL calls."""
    with ExitStack() as stack:
        started: dict[str, int] = {}

        def port(family: str) -> int:
            if family not in started:
                served = model(llama3_vocab, family, CANONICAL[family])
                started[family] = stack.enter_context(running(App(served))).port
            return started[family]

        yield port


def openai_client(port: int):
    openai = pytest.importorskip("openai", reason="pip install openai")
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)


def anthropic_client(port: int):
    anthropic = pytest.importorskip("anthropic", reason="pip install anthropic")
    return anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="unused", max_retries=0)


def ollama_client(port: int):
    ollama = pytest.importorskip("ollama", reason="pip install ollama")
    return ollama.Client(host=f"http://127.0.0.1:{port}")


ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]
API_FAMILIES = ["llama3", "mistral"]


@pytest.mark.parametrize("family", API_FAMILIES)
def test_openai_returns_the_dialects_calls_as_tool_calls(servers, family):
    oai = openai_client(servers(family))
    r = oai.chat.completions.create(model="default", messages=ASK, tools=TOOLS, max_tokens=100)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Sure."
    calls = choice.message.tool_calls
    assert [(c.type, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("function", *call) for call in TURN[family]]
    assert all(id_shape(FAMILIES[family]).fullmatch(c.id) for c in calls)
    with oai.chat.completions.stream(model="default", messages=ASK, tools=TOOLS, max_tokens=100) as stream:
        final = stream.get_final_completion()
    streamed = final.choices[0].message
    assert streamed.content == "Sure." and final.choices[0].finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in streamed.tool_calls] == TURN[family]


def test_openai_parallel_tool_calls_true_on_llama3_gives_one_call_and_says_why(servers):
    oai = openai_client(servers("llama3"))
    r = oai.chat.completions.create(model="default", messages=ASK, tools=TOOLS, parallel_tool_calls=True,
                                    max_tokens=100)
    assert [c.function.name for c in r.choices[0].message.tool_calls] == ["add"]
    assert any("one call per turn" in w for w in r.llamay_warnings)


@pytest.mark.parametrize("family", API_FAMILIES)
def test_openai_round_trip_renders_the_call_and_its_result(servers, family):
    oai = openai_client(servers(family))
    r = oai.chat.completions.create(model="default", messages=ASK, tools=TOOLS, parallel_tool_calls=False,
                                    max_tokens=100)
    message = r.choices[0].message
    (call,) = message.tool_calls  # Llama 3's template renders one call per turn
    follow = [*ASK, message.model_dump(exclude_none=True),
              {"role": "tool", "tool_call_id": call.id, "content": "3"}]
    r = oai.chat.completions.create(model="default", messages=follow, tools=TOOLS, max_tokens=100)
    assert r.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("family", API_FAMILIES)
def test_anthropic_returns_the_dialects_calls_as_tool_use_blocks(servers, family):
    claude = anthropic_client(servers(family))
    m = claude.messages.create(model="default", max_tokens=100, messages=ASK, tools=ANTHROPIC_TOOLS)
    assert m.stop_reason == "tool_use" and [b.type for b in m.content] == ["text"] + ["tool_use"] * len(TURN[family])
    assert m.content[0].text == "Sure."
    assert [(b.name, b.input) for b in m.content[1:]] == TURN[family]
    ids = [b.id for b in m.content[1:]]
    assert all(i.startswith("toolu_") for i in ids) and len(set(ids)) == len(ids)
    with claude.messages.stream(model="default", max_tokens=100, messages=ASK, tools=ANTHROPIC_TOOLS) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [(b.name, b.input) for b in final.content if b.type == "tool_use"] == TURN[family]


@pytest.mark.parametrize("family", API_FAMILIES)
def test_anthropic_round_trip_renders_the_call_and_its_result(servers, family):
    claude = anthropic_client(servers(family))
    m = claude.messages.create(model="default", max_tokens=100, messages=ASK, tools=ANTHROPIC_TOOLS,
                               tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    (block,) = [b for b in m.content if b.type == "tool_use"]
    follow = [*ASK, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "3"}]}]
    m = claude.messages.create(model="default", max_tokens=100, messages=follow, tools=ANTHROPIC_TOOLS)
    assert m.stop_reason == "tool_use"


@pytest.mark.parametrize("family", API_FAMILIES)
def test_ollama_returns_the_dialects_calls_as_tool_calls(servers, family):
    olm = ollama_client(servers(family))
    r = olm.chat(model="default", messages=ASK, tools=TOOLS, options={"num_predict": 100})
    assert r.done and r.message.content == "Sure."
    assert [(c.function.name, dict(c.function.arguments)) for c in r.message.tool_calls] == TURN[family]
    parts = list(olm.chat(model="default", messages=ASK, tools=TOOLS, options={"num_predict": 100}, stream=True))
    assert "".join(p.message.content for p in parts) == "Sure." and parts[-1].done
    streamed = [c for p in parts for c in p.message.tool_calls or []]
    assert [(c.function.name, dict(c.function.arguments)) for c in streamed] == TURN[family]


@pytest.mark.parametrize("family", API_FAMILIES)
def test_ollama_round_trip_renders_the_call_and_its_result(servers, family):
    olm = ollama_client(servers(family))
    r = olm.chat(model="default", messages=ASK, tools=TOOLS, options={"num_predict": 100})
    first = r.message.tool_calls[0]  # Ollama has no parallel_tool_calls; Llama 3's template renders one call
    follow = [*ASK, {"role": "assistant", "content": "", "tool_calls": [first.model_dump()]},
              {"role": "tool", "content": "3", "tool_name": first.function.name}]
    r = olm.chat(model="default", messages=follow, tools=TOOLS, options={"num_predict": 100})
    assert r.done and r.message.tool_calls
