"""The HTTP plumbing, driven with raw ``http.client`` on loopback: errors, limits, keep-alive, queue, cancel.

The model is the scripted fixture backend over SmolLM2's vocabulary (a subclass here adds a
per-token delay and a failure point), so every test is fast and exact: these tests are
about the server, not about what a model says. ``test_api_clients.py`` drives the real model.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from llamay.api import App, running
from llamay.backends.fixture import FixtureBackend
from llamay.engine import Model
from llamay.vocab import Vocabulary

CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 40}
MESSAGES = {**CHAT, "model": "fixture-model"}
OLLAMA = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "stream": False}


class SlowFixture(FixtureBackend):
    """The fixture with a per-token delay and an optional failure, to test cancellation and mid-stream errors."""

    delay = 0.0
    fail_after: int | None = None
    tokens = 0

    def begin(self, prompt):
        self.tokens = 0
        super().begin(prompt)

    def logits(self):
        if self.fail_after is not None and self.tokens >= self.fail_after:
            raise RuntimeError("the backend failed")
        self.tokens += 1
        time.sleep(self.delay)
        return super().logits()


@pytest.fixture(scope="module")
def backend(smollm2_vocab: Vocabulary):
    return SlowFixture(smollm2_vocab, script=b"Hello from the fixture.", model_id="fixture-model")


@pytest.fixture
def model(backend):
    backend.delay, backend.fail_after, backend.script, backend.tokens = 0.0, None, b"Hello from the fixture.", 0
    return Model(backend)


@pytest.fixture
def server(model):
    with running(App(model, aliases=("alias-name",))) as srv:
        yield srv


def request(port, method, path, body=None, headers=None, conn=None):
    """(status, headers, parsed body) over ``conn`` or a fresh connection."""
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    raw = response.read()
    ctype = response.getheader("Content-Type", "")
    parsed = json.loads(raw) if ctype.startswith("application/json") and raw else raw
    return response.status, response, parsed


def test_health_root_and_version(server):
    status, _, body = request(server.port, "GET", "/health")
    assert status == 200 and body == {"status": "ok", "model": "fixture-model",
                                      "slots": {"total": 1, "busy": 0, "waiting": 0}}
    status, response, body = request(server.port, "GET", "/")
    assert status == 200 and body == b"Ollama is running"
    status, response, body = request(server.port, "HEAD", "/")
    assert status == 200 and body == b"" and response.getheader("Content-Length") == "17"
    status, _, body = request(server.port, "GET", "/api/version")
    assert status == 200 and isinstance(body["version"], str)


@pytest.mark.parametrize("path, body, shape", [
    ("/v1/chat/completions", CHAT, "openai"),
    ("/v1/messages", MESSAGES, "anthropic"),
    ("/api/chat", OLLAMA, "ollama"),
    ("/v1/models", None, "openai"),
    ("/api/tags", None, "ollama"),
])
def test_api_key(model, path, body, shape):
    with running(App(model, api_key="sekrit")) as srv:
        method = "GET" if body is None else "POST"
        status, response, err = request(srv.port, method, path, body)
        assert status == 401 and response.getheader("WWW-Authenticate")
        assert_shape(err, shape, "authentication_error" if shape == "anthropic" else None)
        for header in ({"Authorization": "Bearer sekrit"}, {"x-api-key": "sekrit"}):
            assert request(srv.port, method, path, body, header)[0] == 200
        assert request(srv.port, method, path, body, {"Authorization": "Bearer wrong"})[0] == 401
        assert request(srv.port, "GET", "/health")[0] == 200 and request(srv.port, "GET", "/")[0] == 200


def assert_shape(err, shape, kind=None):
    if shape == "openai":
        assert set(err) == {"error"} and set(err["error"]) == {"message", "type", "param", "code"}
    elif shape == "anthropic":
        assert err["type"] == "error" and set(err["error"]) == {"type", "message"}
        if kind:
            assert err["error"]["type"] == kind
    else:
        assert set(err) == {"error"} and isinstance(err["error"], str)


@pytest.mark.parametrize("method, path, shape, status", [
    ("POST", "/v1/nothing", "openai", 404),
    ("POST", "/v1/messages/batches", "anthropic", 404),
    ("POST", "/api/pull", "ollama", 404),
    ("GET", "/v1/chat/completions", "openai", 405),
])
def test_unknown_routes(server, method, path, shape, status):
    code, _, err = request(server.port, method, path, {} if method == "POST" else None)
    assert code == status
    assert_shape(err, shape)


@pytest.mark.parametrize("path, body, shape", [
    ("/v1/chat/completions", {**CHAT, "model": "gpt-4o"}, "openai"),
    ("/v1/completions", {"model": "nope", "prompt": "x"}, "openai"),
    ("/v1/messages", {**MESSAGES, "model": "claude"}, "anthropic"),
    ("/api/chat", {**OLLAMA, "model": "llama3"}, "ollama"),
    ("/api/generate", {"model": "llama3", "prompt": "x"}, "ollama"),
    ("/api/show", {"model": "llama3"}, "ollama"),
])
def test_unknown_model_is_404(server, path, body, shape):
    status, _, err = request(server.port, "POST", path, body)
    assert status == 404
    assert_shape(err, shape, "not_found_error")
    if shape == "openai":
        assert err["error"]["code"] == "model_not_found" and err["error"]["param"] == "model"


@pytest.mark.parametrize("name", ["fixture-model", "alias-name", "default"])
def test_model_names(server, name):
    assert request(server.port, "POST", "/v1/chat/completions", {**CHAT, "model": name})[0] == 200
    names = [m["id"] for m in request(server.port, "GET", "/v1/models")[2]["data"]]
    assert names == ["fixture-model", "alias-name", "default"]


def _without_model(body: dict) -> dict:
    return {k: v for k, v in body.items() if k != "model"}


@pytest.mark.parametrize("path, body, model_of", [
    ("/v1/chat/completions", _without_model(CHAT), lambda r: r["model"]),
    ("/v1/completions", {"prompt": "x", "max_tokens": 5}, lambda r: r["model"]),
    ("/v1/messages", _without_model(MESSAGES), lambda r: r["model"]),
    ("/api/chat", _without_model(OLLAMA), lambda r: r["model"]),
    ("/api/generate", {"prompt": "x", "stream": False}, lambda r: r["model"]),
    ("/api/show", {}, lambda r: r["model_info"]["general.name"]),
], ids=["openai-chat", "openai-completions", "anthropic", "ollama-chat", "ollama-generate", "ollama-show"])
def test_an_omitted_model_means_the_served_one(server, path, body, model_of):
    status, _, answer = request(server.port, "POST", path, body)
    assert status == 200 and model_of(answer) == "fixture-model"


@pytest.mark.parametrize("path, shape", [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic"),
                                         ("/api/chat", "ollama")])
def test_malformed_json_is_400_and_the_connection_lives_on(server, path, shape):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    for body in (b"{not json", b"[1, 2]", b""):
        status, _, err = request(server.port, "POST", path, body, conn=conn)
        assert status == 400
        assert_shape(err, shape, "invalid_request_error")
    status, _, answer = request(server.port, "POST", path, {"/v1/messages": MESSAGES}.get(path, CHAT), conn=conn)
    assert status == 200, answer


def test_body_limit_answered_from_the_headers(model):
    with running(App(model, max_body=1000)) as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000000000\r\n\r\n")  # and no body at all
        head = b""
        while chunk := sock.recv(65536):  # the server closes: it never read the body
            head += chunk
        head = head.decode()
        assert head.startswith("HTTP/1.1 413 ") and "connection: close" in head.lower()
        assert '"request_too_large"' in head
        sock.close()
        status, _, err = request(srv.port, "POST", "/v1/chat/completions", {**CHAT, "pad": "x" * 2000})
        assert status == 413 and err["error"]["code"] == "request_too_large"
        # a chunked body has no length up front: counted as it arrives
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("POST", "/api/chat", body=iter([b"{" + b" " * 600, b" " * 600 + b"}"]),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        response = conn.getresponse()
        assert response.status == 413 and "error" in json.loads(response.read())
        assert request(srv.port, "POST", "/v1/chat/completions", CHAT)[0] == 200


def test_warnings_in_body_and_headers(server):
    status, response, body = request(server.port, "POST", "/v1/chat/completions",
                                     {**CHAT, "frobnicate": True, "naïve_field": 1})
    assert status == 200
    assert body["llamay_warnings"] == ["unknown field 'frobnicate' was ignored",
                                       "unknown field 'naïve_field' was ignored"]
    headers = response.msg.get_all("Llamay-Warning")
    assert headers == ["unknown field 'frobnicate' was ignored", "unknown field 'na%C3%AFve_field' was ignored"]


def test_refused_schema_and_grammar_name_where(server):
    schema = {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}
    status, _, err = request(server.port, "POST", "/v1/chat/completions", {
        **CHAT, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    assert status == 400 and err["error"]["param"] == "response_format.json_schema.schema"
    assert "'not'" in err["error"]["message"] and "/properties/a" in err["error"]["message"]
    status, _, err = request(server.port, "POST", "/v1/messages", {**MESSAGES, "llamay_grammar": 'root ::= "a" b'})
    assert status == 400 and err["error"]["type"] == "invalid_request_error"
    assert "line 1" in err["error"]["message"] and "'b'" in err["error"]["message"]
    status, _, err = request(server.port, "POST", "/api/chat", {**OLLAMA, "format": {"type": "string", "if": {}}})
    assert status == 400 and "'if'" in err["error"]


def test_unsupported_field_is_400_naming_it(server):
    status, _, err = request(server.port, "POST", "/v1/chat/completions", {**CHAT, "audio": {"voice": "alloy"}})
    assert status == 400 and err["error"]["param"] == "audio"


def read_events(response):
    """SSE (event, data) pairs or NDJSON objects, as they arrive."""
    ctype = response.getheader("Content-Type")
    if ctype == "application/x-ndjson":
        for line in response:
            yield json.loads(line)
        return
    event = None
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
            yield (event, data if data == "[DONE]" else json.loads(data))
            event = None


def stream(port, path, body, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", path, body=json.dumps({**body, "stream": True}),
                 headers={"Content-Type": "application/json", **(headers or {})})
    return conn, conn.getresponse()


def test_stream_formats(server):
    _, response = stream(server.port, "/v1/chat/completions", CHAT)
    assert response.getheader("Content-Type") == "text/event-stream"
    events = list(read_events(response))
    assert events[-1] == (None, "[DONE]") and events[0][1]["llamay_warnings"] == []
    assert "".join(e[1]["choices"][0]["delta"].get("content", "") for e in events[:-1]) == "Hello from the fixture."
    _, response = stream(server.port, "/v1/messages", MESSAGES)
    names = [event for event, _ in read_events(response)]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    _, response = stream(server.port, "/api/generate", {"model": "default", "prompt": "x"})
    assert response.getheader("Content-Type") == "application/x-ndjson"
    lines = list(read_events(response))
    assert lines[-1]["done"] is True and "llamay_warnings" in lines[0]
    assert "".join(line["response"] for line in lines) == "Hello from the fixture."


@pytest.mark.parametrize("path, body", [("/v1/chat/completions", CHAT), ("/v1/messages", MESSAGES),
                                        ("/api/chat", OLLAMA)])
def test_mid_stream_error_in_the_stream_format(server, backend, path, body):
    backend.fail_after = 3
    _, response = stream(server.port, path, body)
    assert response.status == 200
    events = list(read_events(response))
    last = events[-1]
    if path == "/v1/chat/completions":
        assert last[1]["error"]["type"] == "server_error"
    elif path == "/v1/messages":
        assert last[0] == "error" and last[1]["error"]["type"] == "api_error"
    else:
        assert "error" in last
    backend.fail_after = None
    assert request(server.port, "POST", path, body)[0] == 200


def test_error_before_the_first_token_gets_a_status(server, backend):
    backend.fail_after = 0
    _, response = stream(server.port, "/v1/messages", MESSAGES)
    assert response.status == 500 and json.loads(response.read())["type"] == "error"


def test_queue_full_is_503_or_529(model, backend):
    backend.delay, backend.script = 0.02, b"x" * 400
    with running(App(model, queue=0)) as srv:
        busy = threading.Thread(target=request, args=(srv.port, "POST", "/v1/chat/completions",
                                                      {**CHAT, "max_tokens": 100}))
        busy.start()
        deadline = time.monotonic() + 10
        while backend.tokens == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        status, response, err = request(srv.port, "POST", "/v1/chat/completions", CHAT)
        assert status == 503 and response.getheader("Retry-After") == "1"
        assert err["error"]["type"] == "server_error"
        status, response, err = request(srv.port, "POST", "/v1/messages", MESSAGES)
        assert status == 529 and err["error"]["type"] == "overloaded_error"
        status, _, err = request(srv.port, "POST", "/api/chat", OLLAMA)
        assert status == 503 and "busy" in err["error"]
        busy.join()
        backend.delay = 0.0
        assert request(srv.port, "POST", "/v1/chat/completions", CHAT)[0] == 200


@pytest.mark.parametrize("streaming", [True, False])
def test_client_disconnect_cancels_generation(server, backend, streaming):
    backend.delay, backend.script = 0.01, b"word " * 400
    body = {**CHAT, "max_tokens": 1000, "stream": streaming}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    deadline = time.monotonic() + 10
    while backend.tokens < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    time.sleep(0.3)
    stopped_at = backend.tokens
    time.sleep(0.3)
    assert backend.tokens == stopped_at < 200  # not still generating
    backend.delay, backend.script = 0.0, b"Hello from the fixture."
    status, _, answer = request(server.port, "POST", "/v1/chat/completions", CHAT)
    assert status == 200 and answer["choices"][0]["message"]["content"] == "Hello from the fixture."


def test_keep_alive_across_routes_and_errors(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    calls = [("GET", "/v1/models", None, 200), ("POST", "/v1/chat/completions", CHAT, 200),
             ("POST", "/v1/chat/completions", {**CHAT, "n": 99}, 400), ("POST", "/api/generate",
                                                                        {"model": "default", "prompt": "x",
                                                                         "stream": False}, 200),
             ("GET", "/nowhere", None, 404), ("POST", "/v1/messages", MESSAGES, 200)]
    for method, path, body, expect in calls:
        assert request(server.port, method, path, body, conn=conn)[0] == expect
    sock = conn.sock
    assert sock is not None  # one socket served them all
    conn.close()


def test_streamed_keep_alive(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    for _ in range(3):
        conn.request("POST", "/v1/chat/completions", body=json.dumps({**CHAT, "stream": True}),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert list(read_events(response))[-1] == (None, "[DONE]")
    conn.close()


def test_malformed_http_is_answered(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 400 ")
    sock.close()
    assert request(server.port, "GET", "/health")[0] == 200


@pytest.mark.parametrize("anthropic_client", [False, True])
def test_models_routes_in_both_shapes(server, anthropic_client):
    headers = {"anthropic-version": "2023-06-01"} if anthropic_client else {}
    status, _, page = request(server.port, "GET", "/v1/models", headers=headers)
    assert status == 200 and [m["id"] for m in page["data"]] == ["fixture-model", "alias-name", "default"]
    status, _, one = request(server.port, "GET", "/v1/models/alias-name", headers=headers)
    assert status == 200 and one["id"] == "alias-name"
    if anthropic_client:
        assert page["has_more"] is False and one["type"] == "model" and one["display_name"] == "alias-name"
    else:
        assert page["object"] == "list" and one["object"] == "model"
    status, _, err = request(server.port, "GET", "/v1/models/gpt-4o", headers=headers)
    assert status == 404
    assert_shape(err, "anthropic" if anthropic_client else "openai")


def test_shutdown_ends_streams_and_refuses_the_queue(model, backend):
    backend.delay, backend.script = 0.01, b"word " * 400
    results: dict[str, object] = {}

    def streaming():
        _, response = stream(srv.port, "/v1/messages", {**MESSAGES, "max_tokens": 1000})
        results["stream"] = list(read_events(response))

    def waiting():
        results["queued"] = request(srv.port, "POST", "/v1/chat/completions", CHAT)[::2]

    with running(App(model)) as srv:
        first = threading.Thread(target=streaming)
        first.start()
        deadline = time.monotonic() + 10
        while backend.tokens < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        second = threading.Thread(target=waiting)
        second.start()
        time.sleep(0.2)
    first.join(10)
    second.join(10)
    events = results["stream"]
    assert events[0][0] == "message_start" and events[-1][0] == "error"
    assert "shutting down" in events[-1][1]["error"]["message"]
    status, err = results["queued"]
    assert status == 503 and err["error"]["code"] == "shutting_down"


# an unknown format is the kind of keyword llamay accepts and cannot enforce
WARNED = {"type": "object", "properties": {"code": {"type": "string", "format": "colour", "maxLength": 8}},
          "required": ["code"]}
WARNING = "format not enforced at /properties/code"


def test_compile_warnings_reach_every_shape(server, backend):
    backend.script = b'{"code": "abc"}'
    status, response, body = request(server.port, "POST", "/v1/chat/completions", {**CHAT, "llamay_schema": WARNED})
    assert status == 200 and json.loads(body["choices"][0]["message"]["content"]) == {"code": "abc"}
    assert body["llamay_warnings"] == [WARNING]
    assert response.msg.get_all("Llamay-Warning") == [WARNING]
    status, _, body = request(server.port, "POST", "/v1/messages", {**MESSAGES, "llamay_schema": WARNED})
    assert body["llamay_warnings"] == [WARNING]
    status, _, body = request(server.port, "POST", "/api/chat", {**OLLAMA, "format": WARNED})
    assert body["llamay_warnings"] == [WARNING]
    # streams: on the first chunk where the engine tells them before generation, else on the last
    _, response = stream(server.port, "/v1/chat/completions", {**CHAT, "llamay_schema": WARNED})
    chunks = [data for _, data in read_events(response)][:-1]
    assert [w for c in chunks for w in c.get("llamay_warnings", [])] == [WARNING]
    _, response = stream(server.port, "/v1/messages", {**MESSAGES, "llamay_schema": WARNED})
    events = [data for _, data in read_events(response)]
    found = events[0]["message"]["llamay_warnings"] + events[-2].get("llamay_warnings", [])
    assert found == [WARNING]
    _, response = stream(server.port, "/api/chat", {**OLLAMA, "format": WARNED})
    lines = list(read_events(response))
    assert [w for line in lines for w in line.get("llamay_warnings", [])] == [WARNING]


def test_show_names_the_tool_dialect(server):
    status, _, body = request(server.port, "POST", "/api/show", {"model": "default"})
    assert status == 200 and body["model_info"]["llamay.tool_dialect"] == "hermes"


def test_tools_with_response_format_answer_with_a_call_or_the_document(server):
    """Agent SDKs send both: the answer is a call or a document that fits the schema, never a 400 or prose."""
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 8}}, "required": ["answer"]}
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string", "maxLength": 8}}, "required": ["q"]}}}
    status, _, body = request(server.port, "POST", "/v1/chat/completions", {
        **CHAT, "max_tokens": 60, "tools": [tool],
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}})
    assert status == 200
    message = body["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    assert [c["function"]["name"] for c in calls] == ["lookup"] * len(calls)
    assert calls or set(json.loads(message["content"])) == {"answer"}
