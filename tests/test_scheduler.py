"""Continuous batching on llama.cpp: requests run side by side in slots, join and leave between steps.

Real SmolLM2 on the llama.cpp backend, driven through ``Model.chat`` from threads (the way the
server's worker drives it) and through the scheduler directly where a test needs a prompt no
text spells.
"""

from __future__ import annotations

import json
import random
import threading
import time

import jsonschema
import pytest

from llamay import load
from llamay.backends.llamacpp import DecodeError
from llamay.backends.sampling import Sampling
from llamay.serving.slots import State

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
CITY = {"type": "object", "properties": {"city": {"enum": ["Lima", "Cusco", "Arequipa"]}}, "required": ["city"]}
QUESTIONS = [f"Describe person number {i} as JSON." for i in range(6)]
#: A document no budget here can finish: a request under it runs to its max_tokens.
STORY = {"type": "object", "properties": {"story": {"type": "string", "minLength": 2000}}, "required": ["story"]}


@pytest.fixture(scope="module")
def batched():
    return load("llamacpp", n_threads=2, slots=4, cache_prompt=True)


@pytest.fixture(scope="module")
def one_at_a_time():
    return load("llamacpp", n_threads=2)


def ask(model, question, **options):
    return model.chat([{"role": "user", "content": question}], **options)


def together(calls, stagger: float = 0.0) -> list:
    """Run the callables on threads at once (``stagger`` seconds apart); their results in order."""
    out: list = [None] * len(calls)

    def run(i):
        try:
            out[i] = calls[i]()
        except Exception as exc:  # handed back to the test
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
        time.sleep(stagger)
    for thread in threads:
        thread.join(timeout=120)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_replies_do_not_depend_on_order_or_company(batched, one_at_a_time, seed):
    """Sent at once in a shuffled order, each greedy reply is the one-at-a-time model's, and valid."""
    expected = [ask(one_at_a_time, q, schema=PERSON, max_tokens=40).text for q in QUESTIONS]
    order = list(range(len(QUESTIONS)))
    random.Random(seed).shuffle(order)
    replies = together([lambda i=i: ask(batched, QUESTIONS[i], schema=PERSON, max_tokens=40) for i in order],
                       stagger=0.03 * seed)
    got = {i: reply.text for i, reply in zip(order, replies, strict=True)}
    assert [got[i] for i in range(len(QUESTIONS))] == expected
    for text in expected:
        jsonschema.validate(json.loads(text), PERSON)


def test_each_sequence_keeps_its_own_constraint(batched):
    kinds = [PERSON, CITY, None, PERSON, CITY]
    replies = together([lambda k=k: ask(batched, "Tell me about Peru as JSON.", schema=k, max_tokens=40,
                                        temperature=0.8, seed=7) for k in kinds])
    for kind, reply in zip(kinds, replies, strict=True):
        if kind is not None:
            jsonschema.validate(json.loads(reply.text), kind)


def test_a_short_request_leaves_without_waiting_for_a_long_one(batched):
    """Started after a long generation, a short one finishes first: requests join and leave between steps."""
    finished: dict[str, float] = {}

    def timed(name, **options):
        reply = ask(batched, "Write a long story about the sea.", **options)
        finished[name] = time.monotonic()
        return reply

    long, short = together([lambda: timed("long", max_tokens=150, schema=STORY),
                            lambda: timed("short", max_tokens=5)], stagger=0.3)
    assert long.usage["completion_tokens"] == 150 and short.usage["completion_tokens"] == 5
    assert finished["short"] < finished["long"]


def test_a_long_prompt_is_evaluated_in_chunks_beside_running_sequences(batched):
    """While a 1,500-token prompt is evaluated, a running sequence keeps getting tokens between its chunks."""
    stamps: list[float] = []

    def running():
        stream = batched.chat([{"role": "user", "content": "Count slowly."}], max_tokens=120, schema=STORY,
                              stream=True)
        for _ in stream:
            stamps.append(time.monotonic())

    def long_prompt():
        start = time.monotonic()
        reply = ask(batched, "Summarize: " + "the cat sat on the mat and looked outside. " * 150, max_tokens=2)
        return start, time.monotonic(), reply

    _, (start, end, reply) = together([running, long_prompt], stagger=0.5)
    assert reply.usage["prompt_tokens"] > 1000
    during = [t for t in stamps if start < t < end]
    assert len(during) >= 3, (len(during), end - start)  # a single batch would have held them all back


def test_a_cancelled_request_frees_its_slot_and_the_others_run_on(batched):
    cancel = threading.Event()
    stream = batched.chat([{"role": "user", "content": "Write a long story."}], max_tokens=200, temperature=0.9,
                          seed=5, stream=True, cancel=cancel)
    other = together([lambda: next(iter(stream)),
                      lambda: ask(batched, "Name a city in Peru as JSON.", schema=CITY, max_tokens=20)])
    cancel.set()
    events = list(stream)
    assert events[-1].usage["completion_tokens"] < 200
    jsonschema.validate(json.loads(other[1].text), CITY)
    deadline = time.monotonic() + 10
    while batched.scheduler.busy and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(slot.state is State.IDLE for slot in batched.scheduler.slots)


def test_a_failed_evaluation_reaches_its_request_and_the_scheduler_goes_on(batched):
    """A token id past the vocabulary fails llama.cpp's batch: the request gets the error, the next one runs."""
    bad = batched.scheduler.generate([batched.backend.vocab.size + 10], matcher=None, sampling=Sampling(),
                                     max_tokens=3)
    with pytest.raises(DecodeError, match="llama_decode returned"):
        list(bad)
    jsonschema.validate(json.loads(ask(batched, "A city in Peru, as JSON.", schema=CITY, max_tokens=20).text), CITY)


def test_more_requests_than_slots_wait_for_a_free_slot(batched):
    replies = together([lambda i=i: ask(batched, f"Person {i} as JSON.", schema=PERSON, max_tokens=30)
                        for i in range(7)])
    for reply in replies:
        assert not isinstance(reply, Exception), reply
        assert reply.finish_reason in ("stop", "length")


def test_the_server_runs_a_request_per_slot_and_refuses_past_the_queue(batched):
    """Over HTTP with the official client: 4 slots generate and 1 waits (``queue=1``); one more is a 503.

    Once the slots free, the waiting request runs and a new one is served again.
    """
    import openai

    from llamay.api import App, running

    with running(App(batched, queue=1)) as srv:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none", max_retries=0)
        long = {"model": "default", "messages": [{"role": "user", "content": "Write a long story."}],
                "max_tokens": 120, "temperature": 0.9,  # a story that cannot end sooner: every holder runs 120 tokens
                "response_format": {"type": "json_schema", "json_schema": {"name": "story", "schema": STORY}}}
        worker = srv.worker
        holders = [threading.Thread(target=lambda i=i: client.chat.completions.create(**long, seed=i))
                   for i in range(5)]
        for thread in holders:
            thread.start()
        deadline = time.monotonic() + 20
        while (batched.scheduler.busy < 4 or worker.waiting < 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (batched.scheduler.busy, worker.waiting) == (4, 1)
        with pytest.raises(openai.InternalServerError) as refused:
            client.chat.completions.create(**long)
        assert refused.value.status_code == 503
        for thread in holders:
            thread.join(timeout=120)
        reply = client.chat.completions.create(**{**long, "max_tokens": 20, "response_format": {
            "type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}})
        jsonschema.validate(json.loads(reply.choices[0].message.content), CITY)
