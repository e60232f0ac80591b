"""What an operator reads: ``/metrics``, ``/health`` and the durations, on the real model and clock.

SmolLM2 on llama.cpp with two slots and the prompt cache, served in-process on loopback;
the official ``ollama`` and ``openai`` clients. Durations are measured from the request and
the first generated token, so a tool call held back until complete still reports the time
its tokens took.
"""

from __future__ import annotations

import http.client
import re
import threading

import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp backend needs llama-cpp-python (ci/setup installs it)")
openai = pytest.importorskip("openai", reason="pip install openai")
ollama = pytest.importorskip("ollama", reason="pip install ollama")

from llamay.api import App, running  # noqa: E402
from llamay.engine import load  # noqa: E402

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                           "parameters": WEATHER}}]
ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]


@pytest.fixture(scope="module")
def server():
    with running(App(load("llamacpp", n_threads=2, slots=2, cache_prompt=True))) as srv:
        yield srv


def scrape(port: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    reply = conn.getresponse()
    assert reply.status == 200 and reply.getheader("Content-Type").startswith("text/plain")
    values = {}
    for line in reply.read().decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_a_held_back_tool_call_reports_the_time_its_tokens_took(server):
    """The call reaches the client only when complete; its time per token still starts at its first token."""
    before = scrape(server.port)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0)
    reply = client.chat.completions.create(model="default", messages=ASK, tools=TOOLS, tool_choice="required",
                                           max_tokens=80, temperature=0)
    assert reply.choices[0].message.tool_calls and reply.usage.completion_tokens > 5
    after = scrape(server.port)
    per_token = (after["llamay_time_per_output_token_seconds_sum"]
                 - before.get("llamay_time_per_output_token_seconds_sum", 0.0))
    assert per_token > 0.5e-3, f"{per_token * 1e3:.3f} ms a token: timed from the call, not its first token"


def test_ollama_durations_split_the_request_at_its_first_token(server):
    client = ollama.Client(host=f"http://127.0.0.1:{server.port}")
    reply = client.chat(model="default", messages=ASK, options={"temperature": 0, "num_predict": 20})
    assert reply.eval_count > 5 and reply.eval_duration / reply.eval_count > 0.5e6
    assert reply.prompt_eval_duration > 0
    assert reply.total_duration >= reply.prompt_eval_duration + reply.eval_duration


def test_metrics_count_tokens_cache_and_times(server):
    before = scrape(server.port)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0)
    messages = [{"role": "user", "content": "Name three rivers in Europe, briefly. " * 20}]
    first = client.chat.completions.create(model="default", messages=messages, max_tokens=8, temperature=0)
    again = client.chat.completions.create(model="default", messages=messages, max_tokens=8, temperature=0)
    after = scrape(server.port)

    def grew(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    cached = again.usage.prompt_tokens_details.cached_tokens
    assert cached > 100  # the resent prompt came from the slot's cache
    assert grew("llamay_prompt_tokens_cached_total") == first.usage.prompt_tokens_details.cached_tokens + cached
    assert grew("llamay_prompt_tokens_evaluated_total") == (first.usage.prompt_tokens + again.usage.prompt_tokens
                                                            - grew("llamay_prompt_tokens_cached_total"))
    assert grew("llamay_tokens_generated_total") == first.usage.completion_tokens + again.usage.completion_tokens
    assert grew('llamay_requests_total{route="/v1/chat/completions",status="200"}') == 2
    assert grew("llamay_time_to_first_token_seconds_count") == 2
    assert grew("llamay_time_to_first_token_seconds_sum") > 0
    assert grew("llamay_time_per_output_token_seconds_count") == 2


def test_slots_busy_shows_a_running_generation(server):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0)
    started, seen = threading.Event(), {}
    stream = client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Tell a story."}],
                                            max_tokens=200, temperature=0, stream=True)
    try:
        for _ in stream:
            if not started.is_set():
                started.set()
                seen = scrape(server.port)
                break
    finally:
        stream.close()
    assert seen["llamay_slots"] == 2 and seen["llamay_slots_busy"] == 1 and seen["llamay_requests_waiting"] == 0
    assert not any(re.search(r'route="/made', name) for name in seen)


def test_metrics_count_the_tokens_a_constraint_forced(server):
    """Forced tokens are appended without sampling: counted apart, within the tokens generated."""
    schema = {"type": "object", "properties": {"destination_city_name": {"type": "string", "maxLength": 12},
                                               "number_of_travelling_adults": {"type": "integer"}},
              "required": ["destination_city_name", "number_of_travelling_adults"], "additionalProperties": False}
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0)
    before = scrape(server.port)
    free = client.chat.completions.create(model="default", messages=ASK, max_tokens=12, temperature=0)
    middle = scrape(server.port)
    shaped = client.chat.completions.create(model="default", messages=ASK, max_tokens=60, temperature=0,
                                            response_format={"type": "json_schema",
                                                             "json_schema": {"name": "trip", "schema": schema}})
    after = scrape(server.port)
    assert free.usage.completion_tokens > 0
    assert middle.get("llamay_tokens_forced_total", 0.0) == before.get("llamay_tokens_forced_total", 0.0)
    forced = after["llamay_tokens_forced_total"] - middle.get("llamay_tokens_forced_total", 0.0)
    assert 5 <= forced < shaped.usage.completion_tokens
