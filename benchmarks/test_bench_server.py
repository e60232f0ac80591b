"""Server overhead per request: the same generation through the engine directly and over HTTP.

The fixture backend (a scripted model over SmolLM2's vocabulary) keeps model time near zero,
so the difference is what the HTTP layer adds: parsing, translation, the worker thread and
the socket. Time to first byte is measured on a streamed request.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest

from llamay.api import App, running
from llamay.backends.fixture import FixtureBackend
from llamay.engine import Model

SCRIPT = b"Hello from the fixture, a few tokens long."
BODY = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 32, "temperature": 0}


@pytest.fixture(scope="module")
def model(smollm2_vocab):
    return Model(FixtureBackend(smollm2_vocab, script=SCRIPT))


@pytest.fixture(scope="module")
def port(model):
    with running(App(model)) as server:
        yield server.port


def test_engine_direct(benchmark, model):
    benchmark.group = "server overhead (fixture model)"
    benchmark(lambda: model.chat(BODY["messages"], max_tokens=32))


def test_http_keep_alive(benchmark, port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    payload = json.dumps(BODY).encode()

    def call():
        conn.request("POST", "/v1/chat/completions", body=payload, headers={"Content-Type": "application/json"})
        assert conn.getresponse().read()

    benchmark.group = "server overhead (fixture model)"
    benchmark(call)


def test_http_time_to_first_byte(benchmark, port):
    payload = json.dumps({**BODY, "stream": True}).encode()
    firsts: list[float] = []

    def call():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=payload, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read(1)
        firsts.append(time.perf_counter() - t0)
        response.read()
        conn.close()

    benchmark.group = "server time to first byte (fixture model)"
    benchmark.pedantic(call, rounds=50)
    firsts.sort()
    benchmark.extra_info["ttfb_median_ms"] = firsts[len(firsts) // 2] * 1e3
