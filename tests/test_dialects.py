"""Tool-call dialects: each family's call grammar accepts exactly its calls, and its parser reads them back.

The grammar and the parser share one trigger automaton, so for every text the constraint
accepts, the parser must find the calls the text holds, no more, and return the rest as
prose, however the text is cut into deltas.
"""

from __future__ import annotations

import pytest

from llamay import Matcher
from llamay.chat import DIALECTS, CallStream, ChatTemplate, ToolCall, detect, parse_tool_calls
from llamay.chat.dialects.dialect import COLON_WS, FENCE_WS, OPEN_WS
from llamay.chat.tool_grammar import compile_tool_calls

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"]}},
    {"name": "add", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}},
]
NAMES = [t["name"] for t in TOOLS]
PUNE = ("get_weather", {"city": "Pune", "unit": "c"})
ADD = ("add", {"a": 2, "b": 40})

# (dialect, text, prose, calls): texts every dialect's auto grammar accepts, and what they hold
AUTO_CASES = {
    "hermes marker": ("hermes", 'Sure.<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 40}}\n</tool_call>',
                      "Sure.", [ADD]),
    "hermes two markers": ("hermes", '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 40}}</tool_call>\n'
                           '<tool_call>{"name": "get_weather", "arguments": {"city": "Pune", "unit": "c"}}</tool_call>',
                           "", [ADD, PUNE]),
    "fenced, pretty-printed, two calls": (
        "hermes", 'Let me check.\n```json\n{\n  "name": "get_weather",\n  "arguments": {"city": "Pune", "unit": "c"}\n}'
        '\n{"name": "add", "arguments": {"a": 2, "b": 40}}\n```', "Let me check.", [PUNE, ADD]),
    "plain fence": ("hermes", '```\n{"name": "add", "arguments": {"a": 2, "b": 40}}\n```', "", [ADD]),
    "bare object after prose": ("hermes", 'I will add. {"name": "add", "arguments": {"a": 2, "b": 40}}',
                                "I will add.", [ADD]),
    "JSON naming no offered tool stays prose": ("hermes", 'A person: {"name": "John", "arguments": {}}',
                                                'A person: {"name": "John", "arguments": {}}', []),
    "a name that only begins an offered one stays prose": ("hermes", '{"name": "ad"}', '{"name": "ad"}', []),
    "accented prose before JSON keeps its characters whole": (
        "hermes", 'Météo ————{"ville": "Paris"} — été', 'Météo ————{"ville": "Paris"} — été', []),
    "llama3 bare parameters": ("llama3", '{"name": "add", "parameters": {"a": 2, "b": 40}}', "", [ADD]),
    "llama3 python tag": ("llama3", '<|python_tag|>{"name": "add", "parameters": {"a": 2, "b": 40}}', "", [ADD]),
    "mistral list": ("mistral", 'ok [TOOL_CALLS][{"name": "add", "arguments": {"a": 2, "b": 40}}, '
                     '{"name": "get_weather", "arguments": {"city": "Pune", "unit": "c"}}]', "ok", [ADD, PUNE]),
    "mistral bare list": ("mistral", '[{"name": "add", "arguments": {"a": 2, "b": 40}}]', "", [ADD]),
    "granite list": ("granite", '<|tool_call|>[{"name": "add", "arguments": {"a": 2, "b": 40}}]', "", [ADD]),
    "granite fenced fallback": ("granite", '```json\n{"name": "add", "arguments": {"a": 2, "b": 40}}\n```', "", [ADD]),
}

# texts the auto grammar refuses, per dialect
REFUSED = {
    "arguments off the schema": ("hermes", '{"name": "add", "arguments": {"a": "two", "b": 40}}'),
    "a missing required key": ("hermes", '<tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>'),
    "prose after a call": ("hermes", '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 40}}</tool_call> done'),
    "an unclosed fence": ("hermes", '```json\n{"name": "add", "arguments": {"a": 2, "b": 40}}\nok'),
    "hermes key in llama3": ("llama3", '{"name": "add", "arguments": {"a": 2, "b": 40}}'),
    "a call of a tool nobody offered, marked": ("hermes", '<tool_call>{"name": "rm", "arguments": {}}</tool_call>'),
    "whitespace padding before the closing marker": (
        "hermes", '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 40}}\n\n\n </tool_call>'),
}


def accepts(grammar, text: str) -> bool:
    m = Matcher(grammar)
    return m.accept_bytes(text.encode()) and m.is_accepting()


def calls_of(calls: list[ToolCall]) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in calls]


@pytest.mark.parametrize(("dialect", "text", "prose", "calls"), AUTO_CASES.values(), ids=AUTO_CASES.keys())
def test_auto_accepts_each_form_and_the_parser_reads_it(dialect, text, prose, calls):
    d = DIALECTS[dialect]
    assert accepts(compile_tool_calls(TOOLS, "auto", dialect=d), text)
    got_prose, got_calls = parse_tool_calls(text, d, NAMES)
    assert (got_prose, calls_of(got_calls)) == (prose, calls)


@pytest.mark.parametrize(("dialect", "text"), REFUSED.values(), ids=REFUSED.keys())
def test_auto_refuses_what_is_not_a_call_of_an_offered_tool(dialect, text):
    assert not accepts(compile_tool_calls(TOOLS, "auto", dialect=DIALECTS[dialect]), text)


@pytest.mark.parametrize(("dialect", "text", "prose", "calls"),
                         [c for c in AUTO_CASES.values() if c[3] and not c[2]], ids=[k for k, c in AUTO_CASES.items()
                                                                                      if c[3] and not c[2]])
def test_required_takes_every_form_of_calls_from_the_first_byte(dialect, text, prose, calls):
    d = DIALECTS[dialect]
    assert accepts(compile_tool_calls(TOOLS, "required", dialect=d), text)
    assert not accepts(compile_tool_calls(TOOLS, "required", dialect=d), "Sure. " + text)


# a call's opening with its whitespace runs as slots, and the most each run may hold (the triggers' bounds)
_ADD = '"add", "arguments": {{"a": 2, "b": 40}}}}'
OPENINGS = {
    "bare object": ("hermes", '{{{open}"name"{colon}:{colon}' + _ADD, {"open": OPEN_WS, "colon": COLON_WS}),
    "fenced": ("hermes", '```json{fence}{{{open}"name"{colon}:{colon}' + _ADD + "\n```",
               {"fence": FENCE_WS, "open": OPEN_WS, "colon": COLON_WS}),
    "hermes marker": ("hermes", '<tool_call>\n{{{open}"name"{colon}:{colon}' + _ADD + "\n</tool_call>",
                      {"open": OPEN_WS, "colon": COLON_WS}),
    "llama3 bare": ("llama3", '{{{open}"name"{colon}:{colon}"add", "parameters": {{"a": 2, "b": 40}}}}',
                    {"open": OPEN_WS, "colon": COLON_WS}),
    "mistral bare list": ("mistral", '[{lead}{{{open}"name"{colon}:{colon}' + _ADD + "]",
                          {"lead": OPEN_WS, "open": OPEN_WS, "colon": COLON_WS}),
}


@pytest.mark.parametrize("mode", ["required", "named"])
@pytest.mark.parametrize(("dialect", "template", "bounds"), OPENINGS.values(), ids=OPENINGS.keys())
def test_every_call_opening_the_grammar_allows_reads_back_as_a_call(mode, dialect, template, bounds):
    """Runs up to the triggers' bounds are allowed; a longer run is refused, not written and then read as prose."""
    d = DIALECTS[dialect]
    grammar = compile_tool_calls(TOOLS, mode, dialect=d, name="add" if mode == "named" else None)
    for slot, most in bounds.items():
        for n in (0, 1, most, most + 1, 64):
            text = template.format(**(dict.fromkeys(bounds, "") | {slot: " " * n}))
            allowed = accepts(grammar, text)
            assert allowed == (n <= most), text
            if allowed:
                prose, calls = parse_tool_calls(text, d, NAMES)
                assert (prose, calls_of(calls)) == ("", [ADD]), text


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_parallel_false_allows_one_call(dialect):
    d = DIALECTS[dialect]
    one = compile_tool_calls(TOOLS, "required", dialect=d, parallel=False)
    key = d.arguments_key
    call = f'{{"name": "add", "{key}": {{"a": 2, "b": 40}}}}'
    assert accepts(one, call)
    assert not accepts(one, call + "\n" + call)


@pytest.mark.parametrize("parallel", [None, True], ids=["parallel unsaid", "parallel asked"])
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_several_calls_only_where_the_dialects_format_holds_them_and_a_warning_where_asked_in_vain(dialect, parallel):
    """Llama 3's templates render one call per turn; the others several."""
    d = DIALECTS[dialect]
    grammar = compile_tool_calls(TOOLS, "required", dialect=d, parallel=parallel)
    call = f'{{"name": "add", "{d.arguments_key}": {{"a": 2, "b": 40}}}}'
    assert accepts(grammar, call + "\n" + call) == d.parallel == (dialect != "llama3")
    assert len(grammar.warnings) == (parallel is True and not d.parallel)


#: three tools whose union outgrows what the lowering copies to each use of a rule (Tuning.share_states)
UNION = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "maxLength": 64}, "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}}, "required": ["location"]}},
    {"name": "search_web", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "max_results": {"type": "integer"}, "safe": {"type": "boolean"}},
        "required": ["query"]}},
    {"name": "send_email", "parameters": {"type": "object", "properties": {
        "to": {"type": "array", "items": {"type": "string"}, "maxItems": 10}, "subject": {"type": "string"},
        "body": {"type": "string"}}, "required": ["to", "subject", "body"]}},
]


@pytest.mark.parametrize("parallel", [False, True], ids=["one call", "parallel"])
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_union_of_tools_walks_a_call_with_no_more_configurations_than_one_tool(dialect, parallel):
    """What a mask step costs follows the configurations it steps (``benchmarks.tool_union_cost``: at most 1.10x)."""
    d = DIALECTS[dialect]
    text = d.write_calls([{"name": "get_weather", "arguments": {"location": "Pune", "days": 3}}]).encode()
    one, union = (Matcher(compile_tool_calls(UNION[:n], "required", dialect=d, parallel=parallel)) for n in (1, 3))
    for i in range(len(text)):
        assert len(union.configurations()) <= len(one.configurations()), text[:i]
        assert one.accept_bytes(text[i : i + 1]) and union.accept_bytes(text[i : i + 1])


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_none_cannot_open_a_call_with_the_marker(dialect):
    d = DIALECTS[dialect]
    grammar = compile_tool_calls(TOOLS, "none", dialect=d)
    assert accepts(grammar, 'Plain text, {"name": "add"} and all.')
    if d.open is not None and not d.open_optional:
        assert not accepts(grammar, f"Now {d.open}")


@pytest.mark.parametrize(("dialect", "text", "prose", "calls"), AUTO_CASES.values(), ids=AUTO_CASES.keys())
def test_the_stream_gives_the_batch_result_for_every_split(dialect, text, prose, calls):
    d = DIALECTS[dialect]
    for cut in range(1, len(text)):
        s = CallStream(d, NAMES)
        events = [*s.feed(text[:cut]), *s.feed(text[cut:]), *s.finish()]
        got = "".join(e for e in events if isinstance(e, str)), calls_of([e for e in events if isinstance(e, ToolCall)])
        assert got == (prose, calls), cut


@pytest.mark.parametrize(("dialect", "text", "prose", "calls"), AUTO_CASES.values(), ids=AUTO_CASES.keys())
def test_the_stream_never_sends_prose_it_must_take_back(dialect, text, prose, calls):
    s = CallStream(DIALECTS[dialect], NAMES)
    sent = ""
    for ch in text:
        sent += "".join(e for e in s.feed(ch) if isinstance(e, str))
        assert prose.startswith(sent)


def test_mistral_ids_are_nine_alphanumerics():
    _, calls = parse_tool_calls('[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}]', DIALECTS["mistral"])
    assert len(calls[0].id) == 9 and calls[0].id.isalnum()


TEMPLATES = {
    "hermes": "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}{% if tools %}<tool_call>{% endif %}",
    "llama3": "{{ '<|start_header_id|>ipython<|end_header_id|>\\n\\n' }}",
    "mistral": "{% if tools %}[AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]",
    "granite": "<|start_of_role|>available_tools<|end_of_role|><|tool_call|>",
}


@pytest.mark.parametrize(("name", "template"), TEMPLATES.items())
def test_a_dialect_is_detected_from_its_template(name, template):
    assert detect(template).name == name


def test_a_template_without_tool_markers_gets_hermes():
    assert detect("{{ messages }}").name == "hermes" and detect(None).name == "hermes"


@pytest.mark.parametrize("name", list(DIALECTS))
def test_a_template_without_tools_is_told_the_dialects_own_call_format(name):
    """Where llamay lists the tools itself, it shows the form the constraint will hold the model to."""
    d = DIALECTS[name]
    prompt = ChatTemplate(None, tool_dialect=d).render([{"role": "user", "content": "hi"}],
                                                       [{"type": "function", "function": TOOLS[1]}])
    assert d.call_format() in prompt and '"name": "add"' in prompt
    others = [o.call_format() for o in DIALECTS.values() if o is not d]
    assert not any(other in prompt for other in others)
