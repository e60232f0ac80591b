"""The HTTP layer fuzzed: random, wrong and broken requests on every route, against one server.

Requests are built from the real field names of the three APIs: messages with roles,
content arrays and tool calls, tools whose parameters are JSON Schemas made of real
keywords, response formats, grammars, the ``llamay_*`` fields, sampling fields, ``stream``.
Any field may be missing, of a wrong type, or odd (huge or negative numbers, ``NaN``,
lone surrogates, long strings); unknown fields come along; the bytes may then be cut
short or made invalid UTF-8, and the head may carry a wrong ``Content-Length``, an odd
``Content-Type`` or a bad key. The invariants:

1. No answer is a 5xx, and nothing is logged as an error: a refusal is a 4xx.
2. Every error body has the shape of the route's API, with no traceback or internals in it;
   so do the errors inside a stream.
3. Every request whose bytes are complete gets an answer, and the server goes on answering.

Examples are derandomized (the same every run) and each finding is pinned by an explicit
case. The model is the scripted fixture, capped at a few tokens a generation.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_server_http import assert_shape

from llamay.api import App, running
from llamay.api.app import ROUTES, api_of
from llamay.api.errors import ApiError
from llamay.api.fields import MAX_BODY_DEPTH
from llamay.backends.fixture import FixtureBackend
from llamay.engine import Model
from llamay.options import DEFAULT

KEY = "fuzz-key"
AUTH = (b"Authorization", f"Bearer {KEY}".encode())
TIMEOUT = 30  # seconds: a request that hangs fails the test rather than the run
#: Derandomized: the same examples every run. About 60 s for the whole file on a 2-core machine.
FUZZ = settings(derandomize=True, database=None, deadline=10_000, max_examples=500,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class CappedFixture(FixtureBackend):
    """The fixture, stopping after a few tokens whatever ``max_tokens`` a request asks for."""

    def generate(self, prompt, *, max_tokens, **kwargs):
        return super().generate(prompt, max_tokens=min(max_tokens, 6), **kwargs)


class Errors(logging.Handler):
    """Error records logged while serving: api_error's "internal error", the server's "connection failed"."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[str]:
        """The records logged since the last call, as text."""
        found, self.records = self.records, []
        return [self.format(r) for r in found]


@pytest.fixture(scope="module")
def server(smollm2_vocab):
    errors = Errors()
    logging.getLogger("llamay").addHandler(errors)
    model = Model(CappedFixture(smollm2_vocab, script=b"Hi there.", model_id="fuzz-model"))
    try:
        with running(App(model, api_key=KEY)) as srv:
            srv.errors = errors
            yield srv
    finally:
        logging.getLogger("llamay").removeHandler(errors)


# -- values -----------------------------------------------------------------------------------
ODD_STRINGS = ["", " ", "NaN", "Infinity", "-1", "null", "true", "1e400", "\x00", "\ud800", "a\udfffb", "é😀",
               "<tool_call>", "</tool_call>", "{{ raise_exception('x') }}", "%s%n", "\r\n", "default", "fuzz-model"]
texts = st.one_of(st.text(max_size=12), st.text(max_size=12), st.sampled_from(ODD_STRINGS),
                  st.sampled_from([1000, 20_000]).map(lambda n: "word " * (n // 5)))
numbers = st.one_of(st.integers(-3, 5), st.sampled_from([2**31, 2**63, -(2**63), 10**30, -(10**30)]),
                    st.floats(allow_nan=False, allow_infinity=False))
json_values = st.recursive(st.none() | st.booleans() | numbers | texts,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                           max_leaves=6)


def odd(plausible: st.SearchStrategy, other: st.SearchStrategy = json_values) -> st.SearchStrategy:
    """Mostly a plausible value, one time in eight ``other``: any JSON value (a wrong type, a wrong shape)."""
    return st.sampled_from([plausible] * 7 + [other]).flatmap(lambda values: values)


# -- JSON Schemas, from real keywords ---------------------------------------------------------
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array", "bogus"]
FORMATS = ["date", "date-time", "time", "duration", "uuid", "email", "ipv4", "ipv6", "hostname", "uri",
           "uri-reference", "json-pointer", "relative-json-pointer", "colour"]
PATTERNS = ["^[a-z]+$", "a{2,5}", "(ab|cd)*", "[", "(?=x)", r"\d+", "^.{0,3}$", "(a", r"\p{L}", "a{99999}"]
KEYWORDS = ["type", "properties", "required", "additionalProperties", "patternProperties", "propertyNames", "items",
            "prefixItems", "additionalItems", "minItems", "maxItems", "enum", "const", "minLength", "maxLength",
            "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "$ref",
            "$defs", "definitions", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "uniqueItems",
            "contains", "dependentRequired", "unevaluatedProperties", "$dynamicRef", "minProperties", "nullable"]
names = st.sampled_from(["a", "b", "city", "x y", "é", "", "$ref"])
bounds = st.one_of(st.integers(-2, 6), numbers)

leaf_schemas = st.one_of(
    st.booleans(),
    st.fixed_dictionaries({"type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), max_size=3)}),
    st.fixed_dictionaries({"type": st.just("string")}, optional={
        "minLength": bounds, "maxLength": bounds, "pattern": st.sampled_from(PATTERNS) | texts,
        "format": st.sampled_from(FORMATS)}),
    st.fixed_dictionaries({"type": st.sampled_from(["integer", "number"])}, optional={
        k: numbers for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")}),
    st.fixed_dictionaries({"enum": st.lists(json_values, max_size=4)}),
    st.fixed_dictionaries({"const": json_values}),
    st.fixed_dictionaries({"$ref": st.sampled_from(["#", "#/$defs/a", "#/definitions/b", "http://x/y", "#/no"])}),
    st.dictionaries(st.sampled_from(KEYWORDS), json_values, max_size=2),  # keywords with values of any type
)


def compound_schemas(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("object")}, optional={
            "properties": st.dictionaries(names, inner, max_size=3), "required": st.lists(names, max_size=3),
            "additionalProperties": st.booleans() | inner, "propertyNames": inner,
            "patternProperties": st.dictionaries(st.sampled_from(PATTERNS), inner, max_size=2),
            "minProperties": bounds, "maxProperties": bounds}),
        st.fixed_dictionaries({"type": st.just("array")}, optional={
            "items": inner, "prefixItems": st.lists(inner, max_size=3), "minItems": bounds, "maxItems": bounds,
            "uniqueItems": st.booleans(), "contains": inner}),
        st.builds(lambda key, branches: {key: branches}, st.sampled_from(["anyOf", "oneOf", "allOf"]),
                  st.lists(inner, max_size=3)),
        st.fixed_dictionaries({"$defs": st.fixed_dictionaries({"a": inner}), "$ref": st.just("#/$defs/a")}),
        st.fixed_dictionaries({"$defs": st.fixed_dictionaries({"a": st.builds(
            lambda s: {"anyOf": [s, {"type": "array", "items": {"$ref": "#/$defs/a"}}]}, inner)}),
            "$ref": st.just("#/$defs/a")}),
        st.fixed_dictionaries({"if": inner, "then": inner}, optional={"else": inner, "not": inner}),
    )


schemas = st.recursive(leaf_schemas, compound_schemas, max_leaves=8)
GRAMMARS = ['root ::= "a"', "root ::= [a-z]+", "root ::= x", 'root ::= "a" | root "b"', 'root ::= ("a"',
            'root ::= "a"{0,5000}', 'r ::= "a"', "root ::= " + "(" * 200 + '"a"' + ")" * 200, 'root ::= [^"]*']
grammars = st.sampled_from(GRAMMARS) | texts

# -- the three APIs' fields -------------------------------------------------------------------
models = odd(st.sampled_from(["default", "fuzz-model", ""]), st.sampled_from(["gpt-4o", "default "]) | texts)
tool_names = odd(st.sampled_from(["get_weather", "add"]), st.sampled_from(["", "a b", "x" * 300]) | texts)
stops = texts | st.lists(texts, max_size=3)
arguments = odd(st.sampled_from(['{"city": "Paris"}', "{}", ""]) | st.dictionaries(names, json_values, max_size=2),
                st.sampled_from(["{", "[]", "null", "[" * 100]))
functions = st.fixed_dictionaries({"name": tool_names}, optional={
    "description": odd(texts), "parameters": odd(schemas), "strict": st.booleans()})
openai_tools = st.lists(odd(st.fixed_dictionaries({"type": odd(st.just("function")), "function": odd(functions)})),
                        max_size=2)
openai_calls = st.lists(odd(st.fixed_dictionaries({"function": odd(st.fixed_dictionaries(
    {"name": tool_names, "arguments": arguments}))}, optional={"id": odd(texts), "type": st.just("function")})),
    max_size=2)
openai_parts = st.lists(odd(st.fixed_dictionaries({"type": st.just("text"), "text": odd(texts)}),
                            st.fixed_dictionaries({"type": st.sampled_from(["image_url", "input_audio", "refusal"])},
                                                  optional={"image_url": json_values})), max_size=3)
openai_messages = st.lists(odd(st.fixed_dictionaries(
    {"role": odd(st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
                 st.sampled_from(["function", "bogus"]))},
    optional={"content": odd(texts | openai_parts), "tool_calls": odd(openai_calls), "tool_call_id": odd(texts),
              "name": odd(texts)})), max_size=4)
openai_choices = st.sampled_from(["auto", "none", "required", "any"]) | st.fixed_dictionaries(
    {"type": st.just("function"), "function": st.fixed_dictionaries({"name": tool_names})})
response_formats = st.fixed_dictionaries(
    {"type": odd(st.sampled_from(["text", "json_object", "json_schema"]), st.just("yaml"))},
    optional={"json_schema": odd(st.fixed_dictionaries({"name": odd(texts)}, optional={
        "schema": odd(schemas), "strict": st.booleans()}))})
lexicons = st.booleans() | st.lists(texts, max_size=3)
LLAMAY = {"llamay_schema": schemas, "llamay_format": odd(st.just("json"), st.just("xml")), "llamay_grammar": grammars,
          "grammar": grammars, "llamay_lexicon": lexicons}
SAMPLING = {"temperature": odd(st.floats(0, 1), numbers), "top_p": odd(st.floats(0, 1), numbers),
            "top_k": odd(st.integers(0, 50), numbers), "seed": odd(st.integers(0, 2**64), numbers)}
small = odd(st.integers(1, 4), bounds)

OPENAI_CHAT = ({"model": models, "messages": openai_messages}, {
    "max_tokens": small, "max_completion_tokens": small, "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({}, optional={"include_usage": odd(st.booleans())}),
    "stop": stops, "tools": openai_tools, "tool_choice": openai_choices, "parallel_tool_calls": st.booleans(),
    "response_format": response_formats, "n": odd(st.just(1), bounds), "logprobs": odd(st.just(False)),
    "top_logprobs": odd(st.just(0), bounds), "logit_bias": st.dictionaries(st.sampled_from(["12", "x"]), numbers),
    "frequency_penalty": odd(st.floats(-2, 2), numbers), "presence_penalty": odd(st.floats(-2, 2), numbers),
    "functions": json_values, "modalities": st.lists(odd(st.just("text"), st.just("audio")), max_size=2),
    "reasoning_effort": texts, "user": texts, "metadata": json_values, **SAMPLING, **LLAMAY})
OPENAI_COMPLETION = ({"model": models, "prompt": odd(texts, st.lists(texts | numbers, max_size=2))}, {
    "max_tokens": small, "stream": st.booleans(), "echo": st.booleans(), "suffix": odd(st.just(""), texts),
    "best_of": odd(st.just(1), bounds), "stop": stops, "n": odd(st.just(1), bounds), "logprobs": odd(st.none()),
    **SAMPLING, **LLAMAY})

anthropic_blocks = st.lists(odd(st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": odd(texts)}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "name": tool_names, "input": odd(
        st.dictionaries(names, json_values, max_size=2))}, optional={"id": odd(texts)}),
    st.fixed_dictionaries({"type": st.just("tool_result")}, optional={
        "tool_use_id": odd(texts), "is_error": odd(st.booleans()),
        "content": odd(texts | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
                                        max_size=2))})),
    st.fixed_dictionaries({"type": st.sampled_from(["image", "thinking", "redacted_thinking", "document"])})),
    max_size=3)
anthropic_messages = st.lists(odd(st.fixed_dictionaries({
    "role": odd(st.sampled_from(["user", "assistant"]), st.sampled_from(["system", "tool"])),
    "content": odd(texts | anthropic_blocks)})), max_size=4)
anthropic_tools = st.lists(odd(st.fixed_dictionaries({"name": tool_names, "input_schema": odd(schemas)}, optional={
    "type": odd(st.just("custom"), st.just("bash_20250124")), "description": texts, "cache_control": json_values})),
    max_size=2)
ANTHROPIC = ({"model": models, "max_tokens": small, "messages": anthropic_messages}, {
    "system": texts | st.lists(odd(st.fixed_dictionaries({"type": st.just("text"), "text": texts})), max_size=2),
    "stream": st.booleans(), "stop_sequences": stops, "tools": anthropic_tools,
    "tool_choice": st.fixed_dictionaries(
        {"type": odd(st.sampled_from(["auto", "any", "tool", "none"]), st.just("x"))},
        optional={"name": tool_names, "disable_parallel_tool_use": odd(st.booleans())}),
    "thinking": st.fixed_dictionaries({"type": odd(st.just("disabled"), st.just("enabled"))},
                                      optional={"budget_tokens": bounds}),
    "output_config": st.fixed_dictionaries({}, optional={"format": odd(st.fixed_dictionaries(
        {"type": odd(st.just("json_schema"), st.just("text"))}, optional={"schema": odd(schemas)})),
        "effort": texts}),
    "metadata": json_values, "mcp_servers": odd(st.just([]), json_values), **SAMPLING, **LLAMAY})

ollama_messages = st.lists(odd(st.fixed_dictionaries(
    {"role": odd(st.sampled_from(["system", "user", "assistant", "tool"]), st.just("bogus"))},
    optional={"content": odd(texts), "images": odd(st.just([]), json_values), "tool_name": odd(texts),
              "tool_call_id": odd(texts), "tool_calls": odd(openai_calls)})), max_size=4)
ollama_options = st.fixed_dictionaries({}, optional={
    **SAMPLING, "num_predict": small, "stop": stops, "num_ctx": numbers})
OLLAMA_COMMON = {"stream": st.booleans(), "format": odd(st.just("json") | schemas, st.sampled_from(["yaml", ""])),
                 "options": ollama_options, "think": odd(st.just(False), st.sampled_from([True, "high"])),
                 "keep_alive": texts | numbers, "logprobs": odd(st.just(False)), **LLAMAY}
OLLAMA_CHAT = ({"model": models, "messages": ollama_messages}, {"tools": openai_tools, **OLLAMA_COMMON})
OLLAMA_GENERATE = ({"model": models, "prompt": texts}, {
    "system": texts, "raw": st.booleans(), "suffix": odd(st.just(""), texts), "images": odd(st.just([]), json_values),
    "template": texts, "context": st.lists(numbers, max_size=3), **OLLAMA_COMMON})
OLLAMA_SHOW = ({"model": models}, {"name": models, "verbose": st.booleans()})

BODIES = {"/v1/chat/completions": OPENAI_CHAT, "/v1/completions": OPENAI_COMPLETION, "/v1/messages": ANTHROPIC,
          "/api/chat": OLLAMA_CHAT, "/api/generate": OLLAMA_GENERATE, "/api/show": OLLAMA_SHOW}
assert {path for method, path in ROUTES if method == "POST"} == set(BODIES)


#: What is wrong with a request, one thing at a time ("none": only what its values and shapes make of it).
FAULTS = ["none"] * 12 + ["wrong_type", "missing", "raw_value", "truncated", "invalid_utf8", "surrogate", "chunked",
                         "short_length", "long_length", "bad_length", "broken_chunked", "method", "key"]
INCOMPLETE = {"short_length", "long_length", "bad_length", "broken_chunked"}  # the server must wait for more bytes

#: JSON text put in place of a field's value as it is: what ``json.dumps`` would never write.
RAW_VALUES = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" * 5000, '"\\ud800"', '"\\udc00x"',
              '"\\u0000"', "[" * 400 + "]" * 400, '"' + "[" * 100_000 + '"', "9" * 30]
STRING = re.compile(r'"(?:[^"\\]|\\.)*"(\s*:)?')  # a string literal, and the colon after a key
CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "text/plain", "", "multipart/form-data",
                 "application/json; charset=latin-1", "application/x-www-form-urlencoded", "*/*"]
BAD_KEYS = [(b"Authorization", b"Bearer wrong"), (b"Authorization", b"Basic Zm9vOmJhcg=="),
            (b"Authorization", b"Bearer"), (b"Authorization", b"bearer  " + KEY.encode()), (b"x-api-key", b"\xff\xfe"),
            (b"Authorization", "Bearer é".encode()), (b"X-Api-Key", KEY.encode() + b" ")]


@st.composite
def bodies(draw, fields: tuple[dict, dict], fault: str) -> dict:
    """The route's required fields, a few of its optional ones, an unknown one; for the faults
    "wrong_type" and "missing", one field of any JSON value, or a required one left out."""
    required, optional = fields
    chosen = draw(st.lists(st.sampled_from(sorted(optional)), max_size=4, unique=True))
    body = {key: draw(values) for key, values in [*required.items(), *((k, optional[k]) for k in chosen)]}
    if fault == "wrong_type":
        body[draw(st.sampled_from(sorted(body)))] = draw(json_values)
    elif fault == "missing":
        del body[draw(st.sampled_from(sorted(required)))]
    body.update(draw(st.dictionaries(texts, json_values, max_size=1)))
    return body


@st.composite
def encoded(draw, body: dict, fault: str) -> bytes:
    """``body`` as bytes: JSON as a client writes it (escaped to ASCII or not), or with the fault's damage."""
    text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    values = [m.end() for m in STRING.finditer(text) if not m.group(1)]
    if fault == "surrogate" and values:  # an escaped lone surrogate ending one string value: valid JSON, not text
        end = draw(st.sampled_from(values)) - 1
        text = text[:end] + "\\ud800" + text[end:]
    if fault == "raw_value":
        key = json.dumps(draw(st.sampled_from(sorted(body))))
        text = text.replace(key + ": ", f"{key}: {draw(st.sampled_from(RAW_VALUES))}, {key}_was: ", 1)
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate written raw is invalid UTF-8
    cut = draw(st.integers(0, max(0, len(data) - 1)))
    if fault == "truncated":
        return data[:cut]
    if fault == "invalid_utf8":
        return data[:cut] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])) + data[cut:]
    return data


@st.composite
def requests(draw, path: str) -> tuple[str, bytes, bool]:
    """(method, the request's bytes, whether they are complete) for a POST route."""
    fault = draw(st.sampled_from(FAULTS))
    data = draw(encoded(draw(bodies(BODIES[path], fault)), fault))
    method = draw(st.sampled_from(["GET", "PUT", "DELETE", "OPTIONS", "PATCH"])) if fault == "method" else "POST"
    headers = [(b"Host", b"fuzz"), draw(st.sampled_from(BAD_KEYS)) if fault == "key" else AUTH]
    if ctype := draw(st.sampled_from(CONTENT_TYPES)):
        headers.append((b"Content-Type", ctype.encode()))
    if fault == "bad_length":
        headers.append((b"Content-Length", draw(st.sampled_from([b"abc", b"-1", b"1e3", b"", b"0x10", b"1, 2"]))))
    elif fault in ("chunked", "broken_chunked"):
        headers.append((b"Transfer-Encoding", b"chunked"))
        size = len(data) + (3 if fault == "broken_chunked" else 0)
        data = b"%x\r\n%s\r\n0\r\n\r\n" % (size, data) if data else b"0\r\n\r\n"
    else:
        length = len(data) + {"short_length": -5, "long_length": 10}.get(fault, 0)
        headers.append((b"Content-Length", b"%d" % max(0, length)))
    target = path + draw(st.sampled_from(["", "?stream=true", "?x=%ff"]))
    head = b"%s %s HTTP/1.1\r\n" % (method.encode(), target.encode())
    head += b"".join(k + b": " + v + b"\r\n" for k, v in headers)
    return method, head + b"\r\n" + data, fault not in INCOMPLETE


# -- exchanging and checking ------------------------------------------------------------------
class _Stream:
    """A socket's read file that ``http.client.HTTPResponse`` cannot close, so responses can follow one another."""

    def __init__(self, file) -> None:
        self.file = file

    def __getattr__(self, name: str):
        return getattr(self.file, name)

    def makefile(self, mode: str) -> _Stream:
        return self

    def close(self) -> None:
        pass


def exchange(port: int, method: str, data: bytes, complete: bool) -> list[tuple[int, dict[str, str], bytes]]:
    """Send ``data``; read one response, or, for bytes that are not a complete request, every response
    until the server closes (the write side is closed so that it sees the end)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(data)
        if not complete:
            sock.shutdown(socket.SHUT_WR)
        stream = _Stream(sock.makefile("rb"))
        replies = []
        while (complete and not replies) or (not complete and stream.peek(1)):
            response = http.client.HTTPResponse(stream, method=method)
            response.begin()
            replies.append((response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()))
        return replies


#: A normal request for each POST route.
MINIMAL = {"/v1/chat/completions": {"model": "default", "messages": [{"role": "user", "content": "hi"}]},
           "/v1/completions": {"model": "default", "prompt": "hi"},
           "/v1/messages": {"model": "default", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]},
           "/api/chat": {"model": "default", "messages": [{"role": "user", "content": "hi"}], "stream": False},
           "/api/generate": {"model": "default", "prompt": "hi", "stream": False},
           "/api/show": {"model": "default"}}


def post(server, path: str, data: bytes) -> tuple[int, dict]:
    """(status, parsed body) of one well-framed POST with the key."""
    head = b"POST %s HTTP/1.1\r\nHost: fuzz\r\n%s: %s\r\nContent-Length: %d\r\n\r\n" % (path.encode(), *AUTH,
                                                                                       len(data))
    ((status, _, body),) = exchange(server.port, "POST", head + data, True)
    return status, json.loads(body)


def api_for(server, method: str, path: str, headers: dict[str, str]) -> str:
    """The API whose error shape the route answers in (the router's own rule)."""
    try:
        return server.app.route(method, path, headers).api
    except ApiError:
        return api_of(path)


def message(body: dict) -> str:
    """An error body's message, in any of the three shapes."""
    return body["error"] if isinstance(body["error"], str) else body["error"]["message"]


def check_error(body: dict, api: str) -> None:
    assert_shape(body, "openai" if api == "llamay" else api)
    for internal in ("Traceback", "internal error", 'File "', "object at 0x"):
        assert internal not in message(body), body


def frames(content_type: str, data: bytes) -> list[dict]:
    """The JSON objects of an SSE or NDJSON stream."""
    lines = data.decode().splitlines()
    if content_type == "application/x-ndjson":
        return [json.loads(line) for line in lines if line]
    return [json.loads(line[6:]) for line in lines if line.startswith("data: ") and line != "data: [DONE]"]


def check(server, method: str, path: str, data: bytes, complete: bool) -> None:
    replies = exchange(server.port, method, data, complete)
    logged = server.errors.take()
    assert not logged, "\n".join(logged)
    assert replies or not complete, "no answer to a complete request"
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    api = api_for(server, method, path, {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in head)})
    for i, (status, headers, body) in enumerate(replies):
        assert status < 500, (status, body)
        ctype = headers.get("content-type", "")
        if status >= 400 and method != "HEAD":
            assert ctype == "application/json", (status, ctype)
            # a request h11 refuses, or the rest of a body read as the next request, is answered as OpenAI's
            shape = api if i == 0 and not body.startswith(b'{"error":{"message":"malformed HTTP') else "openai"
            check_error(json.loads(body), shape)
        elif ctype in ("text/event-stream", "application/x-ndjson"):
            for frame in frames(ctype, body):
                assert "error" not in frame, frame  # a mid-stream error is a 5xx that came too late for a status
    assert exchange(server.port, "GET", b"GET /health HTTP/1.1\r\nHost: fuzz\r\n\r\n", True)[0][0] == 200


# -- the fuzz tests ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(BODIES))
@FUZZ
@given(data=st.data())
def test_post_routes(server, path, data):
    method, raw, complete = data.draw(requests(path))
    check(server, method, path, raw, complete)


GET_PATHS = sorted({path for method, path in ROUTES if method == "GET"} | {
    "/v1/models", "/v1/models/fuzz-model", "/v1/models/default", "/v1/models/gpt-4o", "/v1/models/a/b",
    "/v1/models/%ff", "/v1/nothing", "/api/pull", "/v1/messages/batches", "//", "/health/../api/tags"})


@settings(FUZZ, max_examples=200)
@given(path=st.sampled_from(GET_PATHS), method=st.sampled_from(["GET", "HEAD", "POST", "DELETE"]),
       key=st.sampled_from([AUTH, AUTH, *BAD_KEYS]), anthropic=st.booleans(),
       body=st.sampled_from([b"", b"{}", b"\xff"]))
def test_get_routes(server, path, method, key, anthropic, body):
    head = [b"Host: fuzz", b": ".join(key)] + ([b"anthropic-version: 2023-06-01"] if anthropic else [])
    head.append(b"Content-Length: %d" % len(body))
    check(server, method, path, b"%s %s HTTP/1.1\r\n%s\r\n\r\n%s" % (method.encode(), path.encode(),
                                                                      b"\r\n".join(head), body), True)


def test_still_serves_after_fuzzing(server):
    """A normal request on every POST route after everything above."""
    for path, body in MINIMAL.items():
        status, answer = post(server, path, json.dumps(body).encode())
        assert status == 200 and ("Hi" in json.dumps(answer) or path == "/api/show"), answer
    assert not server.errors.take()


# -- nesting: MAX_BODY_DEPTH ------------------------------------------------------------------
DEEP = 100_000


@pytest.mark.parametrize("path", sorted(BODIES))
@pytest.mark.parametrize("nest", ["[]", "{}", '{"a":}'])
def test_deep_body_is_400_naming_the_limit(server, path, nest):
    opener, closer = nest[:-1], nest[-1]
    deep = (opener * DEEP + closer * DEEP).encode()
    data = json.dumps({**MINIMAL[path], "extra": "@"}).encode().replace(b'"@"', deep)
    status, err = post(server, path, data)
    assert status == 400 and "MAX_BODY_DEPTH" in json.dumps(err), err
    check_error(err, api_for(server, "POST", path, {}))
    assert not server.errors.take()


@pytest.mark.parametrize("path", sorted(BODIES))
def test_brackets_inside_strings_do_not_count(server, path):
    text = "[{" * DEEP + '\\"]' + "\\\\" + "[" * DEEP
    status, answer = post(server, path, json.dumps({**MINIMAL[path], "extra": text}).encode())
    assert status == 200, answer


@pytest.mark.parametrize("levels", [100, DEFAULT.limits.max_depth + 20])
def test_deep_schema_within_the_body_bound(server, levels):
    """A schema nested ``levels`` deep (two JSON levels each) fits the body bound: it compiles, or
    the compiler refuses it by ``MAX_DEPTH``; never a 500."""
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    assert 2 * levels + 2 < MAX_BODY_DEPTH
    status, answer = post(server, "/v1/chat/completions",
                          json.dumps({**MINIMAL["/v1/chat/completions"], "llamay_schema": schema}).encode())
    assert status == 200 or (status == 400 and "MAX_DEPTH" in answer["error"]["message"]), answer
    assert not server.errors.take()


# -- what the fuzzing found, pinned -----------------------------------------------------------
@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {**MINIMAL["/v1/chat/completions"], "seed": -1, "temperature": 0.5}),
    ("/v1/messages", {**MINIMAL["/v1/messages"], "seed": -7, "temperature": 0.5}),
    ("/api/chat", {**MINIMAL["/api/chat"], "options": {"seed": -1, "temperature": 0.5}}),
])
def test_negative_seed_is_a_random_seed(server, path, body):
    """A negative seed reached numpy, which refuses one: a 500. It is llama.cpp's and Ollama's "random"."""
    status, answer = post(server, path, json.dumps(body).encode())
    assert status == 200, answer
    assert not server.errors.take()


@pytest.mark.parametrize("path, field, value, param", [
    ("/v1/chat/completions", "messages", [{"role": "user", "content": "a\ud800"}], "messages[0].content"),
    ("/v1/completions", "prompt", "\udfff", "prompt"),
    ("/v1/messages", "llamay_lexicon", ["cat", "\ud800"], "llamay_lexicon[1]"),
    ("/api/generate", "system", "\udc00\ud800", "system"),
    ("/api/chat", "x\ud800", 1, "x\\ud800"),
])
def test_lone_surrogate_is_400_naming_the_field(server, path, field, value, param):
    """``json.dumps`` writes a lone surrogate as ``\\ud800``: valid JSON, but the string it decodes to is no
    text, and encoding it to UTF-8 (the tokenizer) raised ``UnicodeEncodeError``: a 500."""
    status, err = post(server, path, json.dumps({**MINIMAL[path], field: value}).encode())
    assert status == 400 and message(err).startswith(param + ": holds an unpaired UTF-16 surrogate"), err
    check_error(err, api_for(server, "POST", path, {}))
    assert not server.errors.take()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat"])
def test_a_refused_tool_schema_names_tools(server, path):
    """The refusal named ``schema``, a field the request did not have; the tools carry the constraint."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"not": {}}}}]
    status, err = post(server, path, json.dumps({**MINIMAL[path], "tools": tools}).encode())
    assert status == 400 and message(err).startswith("tools: ") and "'not'" in message(err), err


@pytest.mark.parametrize("raw", ["NaN", "-Infinity", "Infinity"])
def test_nan_and_infinity_are_not_json(server, raw):
    """Python's parser takes them, and they went on to the compilers and into prompts."""
    data = json.dumps({**MINIMAL["/v1/chat/completions"], "llamay_schema": {"const": "@"}}).encode()
    status, err = post(server, "/v1/chat/completions", data.replace(b'"@"', raw.encode()))
    assert status == 400 and f"{raw} is not a JSON number" in message(err), err


def test_deep_tool_call_arguments_string(server):
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[" * 5000}}
    messages = [{"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "user", "content": "hi"}]
    status, err = post(server, "/v1/chat/completions", json.dumps({"messages": messages}).encode())
    logged = server.errors.take()
    assert status == 400 and "messages[0].tool_calls[0].function.arguments" in message(err), err
    assert not logged


def test_tiny_temperature(server):
    status, err = post(server, "/v1/chat/completions",
                       json.dumps({**MINIMAL["/v1/chat/completions"], "temperature": 1e-310}).encode())
    logged = server.errors.take()
    assert status == 200, err
    assert not logged


@pytest.mark.parametrize("framing, body", [
    (b"Transfer-Encoding: chunked", b"zz\r\n{}\r\n0\r\n\r\n"),  # a chunk size that is not hex: 400
    (b"Content-Length: 100", b"{}"),  # the client leaves mid-body: nothing to answer, nothing to log
])
def test_body_framing_h11_refuses(server, framing, body):
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: fuzz\r\n%s: %s\r\n%s\r\n\r\n" % (*AUTH, framing)
    replies = exchange(server.port, "POST", head + body, complete=False)
    logged = server.errors.take()
    assert [status for status, _, _ in replies] == ([400] if b"chunked" in framing else []), replies
    assert not logged, logged
