"""The server's bounds on connections, driven with raw sockets: read timeout, idle timeout, connection cap.

Each server here runs with timeouts of a fraction of a second so the tests are fast; the model
is the scripted fixture backend (with a per-token delay for the generations that must outlast
the timeouts).
"""

from __future__ import annotations

import json
import select
import socket
import time

import pytest

from llamay.api import App, running
from llamay.cli import _parser
from llamay.engine import Model
from llamay.vocab import Vocabulary
from tests.test_server_http import SlowFixture

TIMEOUT = 0.5  # the read and idle timeouts of the servers under test
SLACK = 1.0  # how late past a timeout the server may act on a loaded test machine

HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture(scope="module")
def backend(smollm2_vocab: Vocabulary):
    return SlowFixture(smollm2_vocab, script=b"Hello from the fixture.", model_id="fixture-model")


@pytest.fixture
def model(backend):
    backend.delay, backend.fail_after, backend.script = 0.0, None, b"Hello from the fixture."
    return Model(backend)


@pytest.fixture
def server(model):
    with running(App(model), read_timeout=TIMEOUT, idle_timeout=TIMEOUT) as srv:
        yield srv


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def post(path: str, body: bytes, *, length: int | None = None, close: bool = False) -> bytes:
    """A POST request's bytes; ``length`` overrides the Content-Length (to promise more than is sent)."""
    extra = b"Connection: close\r\n" if close else b""
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n").encode() + extra + b"\r\n" + body


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response with a Content-Length body: (status, headers with lower-case names, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before a response: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return int(status_line.split()[1]), headers, body


def read_to_close(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def trickle(sock: socket.socket, parts: list[bytes], every: float) -> None:
    """Send ``parts`` one at a time, ``every`` seconds apart, until the server answers or all are sent."""
    for part in parts:
        sock.sendall(part)
        if select.select([sock], [], [], every)[0]:
            return


def served_health(port: int) -> bool:
    with connect(port) as sock:
        sock.sendall(HEALTH)
        try:
            return read_response(sock)[0] == 200
        except (AssertionError, OSError):
            return False


CHAT = json.dumps({"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 40}).encode()
MESSAGES = json.dumps({"model": "fixture-model", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 40}).encode()


@pytest.mark.parametrize("parts, every, shape", [
    pytest.param([bytes([b]) for b in HEALTH], 0.2, "openai", id="head trickled a byte every 0.2 s"),
    pytest.param([HEALTH[:20]], 0.0, "openai", id="head stops halfway"),
    pytest.param([post("/v1/chat/completions", CHAT[:20], length=len(CHAT))], 0.0, "openai",
                 id="body stops halfway"),
    pytest.param([post("/v1/messages", MESSAGES[:10], length=len(MESSAGES))] + [bytes([b]) for b in MESSAGES[10:]],
                 0.2, "anthropic", id="body trickled a byte every 0.2 s"),
    pytest.param([b"POST /api/chat HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":"], 0.0,
                 "ollama", id="chunked body stops halfway"),
])
def test_a_request_not_complete_within_the_read_timeout_gets_408_and_close(server, parts, every, shape):
    with connect(server.port) as sock:
        started = time.monotonic()
        trickle(sock, parts, every)
        status, headers, body = read_response(sock)
        assert read_to_close(sock) == b""  # and the server closed the connection
        elapsed = time.monotonic() - started
    assert status == 408 and headers["connection"] == "close"
    assert TIMEOUT <= elapsed < TIMEOUT + SLACK  # from the request's first byte, however it trickles
    error = json.loads(body)
    if shape == "openai":
        assert error["error"]["code"] == "request_timeout" and "--read-timeout" in error["error"]["message"]
    elif shape == "anthropic":
        assert error["type"] == "error" and "--read-timeout" in error["error"]["message"]
    else:
        assert "--read-timeout" in error["error"]
    assert served_health(server.port)


def test_a_request_sent_in_pieces_within_the_read_timeout_is_served(server):
    request = post("/v1/chat/completions", CHAT)
    with connect(server.port) as sock:
        trickle(sock, [request[:30], request[30:90], request[90:]], TIMEOUT / 4)
        status, _, body = read_response(sock)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "Hello from the fixture."


@pytest.mark.parametrize("requests_first", [0, 2], ids=["new connection", "after keep-alive requests"])
def test_an_idle_connection_is_closed_silently_after_the_idle_timeout(server, requests_first):
    with connect(server.port) as sock:
        for _ in range(requests_first):
            sock.sendall(HEALTH)
            assert read_response(sock)[0] == 200
        started = time.monotonic()
        assert read_to_close(sock) == b""  # closed, without a response
        elapsed = time.monotonic() - started
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + SLACK
    assert served_health(server.port)  # the server itself carries on


@pytest.mark.parametrize("sends_request", [False, True], ids=["silent client", "client sending a request"])
def test_past_the_connection_cap_a_new_connection_gets_503_and_close(model, sends_request):
    with running(App(model), max_connections=3) as srv:
        held = [connect(srv.port) for _ in range(3)]
        for sock in held:  # served, so the server counts each of them
            sock.sendall(HEALTH)
            assert read_response(sock)[0] == 200
        with connect(srv.port) as extra:
            if sends_request:
                extra.sendall(HEALTH)
            status, headers, body = read_response(extra)
            try:
                assert read_to_close(extra) == b""
            except ConnectionResetError:  # closed with the request unread, which TCP turns into a reset
                assert sends_request
        assert status == 503 and headers["connection"] == "close" and headers["retry-after"] == "1"
        error = json.loads(body)["error"]
        assert error["code"] == "overloaded" and "--max-connections" in error["message"]
        held.pop().close()
        deadline = time.monotonic() + 5
        while not served_health(srv.port):  # once the server has seen the close, a slot is free
            assert time.monotonic() < deadline, "no connection was served after one closed"
            time.sleep(0.05)
        for sock in held:
            sock.close()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_generation_longer_than_the_timeouts_completes(server, backend, stream):
    backend.delay, backend.script = 0.1, b"word " * 12
    body = json.loads(CHAT)
    body.update(stream=stream, max_tokens=100)
    with connect(server.port) as sock:
        started = time.monotonic()
        sock.sendall(post("/v1/chat/completions", json.dumps(body).encode(), close=True))
        response = read_to_close(sock)
        elapsed = time.monotonic() - started
    assert elapsed > 2 * TIMEOUT  # longer than both timeouts, yet not cut
    assert response.startswith(b"HTTP/1.1 200 ")
    if stream:
        assert b"data: [DONE]" in response and response.endswith(b"0\r\n\r\n")
    else:
        assert json.loads(response.split(b"\r\n\r\n", 1)[1])["choices"][0]["message"]["content"] == "word " * 12


@pytest.mark.parametrize("flag, value, option", [
    ("--read-timeout", "2.5", "read_timeout"),
    ("--idle-timeout", "10", "idle_timeout"),
    ("--max-connections", "64", "max_connections"),
])
def test_cli_flags_set_the_bounds(flag, value, option):
    args = _parser().parse_args(["serve", flag, value])
    assert getattr(args, option) == float(value)
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", flag, "0"])
