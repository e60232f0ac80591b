"""Several choices of one request (OpenAI's ``n``): each sampled on its own, the prompt evaluated once.

Real SmolLM2 on the llama.cpp backend with 4 slots, in-process and through ``llamay serve`` on
loopback with the official ``openai`` client; the fixture shows a backend without batching
runs its choices one after another.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from llamay import load
from llamay.engine import ChatStream

COLOUR = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue", "black"]},
                                           "shade": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["colour", "shade"]}
ASK = [{"role": "user", "content": "Pick a colour and a shade as JSON."}]


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("llama_cpp", reason="the llamacpp backend needs llama-cpp-python (ci/setup installs it)")
    return load("llamacpp", n_threads=2, slots=4)


@pytest.mark.parametrize("n", [3, 6])  # 6: more choices than slots; those past them evaluate the prompt themselves
def test_every_choice_is_valid_and_the_prompt_is_evaluated_once_per_free_slot(model, n):
    results = model.chat(ASK, schema=COLOUR, n=n, max_tokens=40, temperature=1.0, seed=11)
    assert len(results) == n
    for result in results:
        jsonschema.validate(json.loads(result.text), COLOUR)
    shared = [r.usage["cached_tokens"] == r.usage["prompt_tokens"] for r in results]
    assert shared == [False, True, True, True][:n] + [False] * max(0, n - 4)


def test_a_forked_choice_is_the_generation_its_seed_gives_alone(model):
    """The copy of the prompt's keys and values is exact: choice i is what seed + i gives in a request of its own."""
    together = model.chat(ASK, n=3, max_tokens=16, temperature=1.0, seed=40)
    alone = [model.chat(ASK, max_tokens=16, temperature=1.0, seed=40 + i) for i in range(3)]
    assert [r.text for r in together] == [r.text for r in alone]
    assert len({r.text for r in together}) > 1  # and the choices are not copies of each other


def test_streamed_choices_can_be_read_one_after_another(model):
    streams = model.chat(ASK, n=2, max_tokens=8, temperature=1.0, seed=3, stream=True)
    assert len(streams) == 2 and all(isinstance(s, ChatStream) for s in streams)
    ends = [list(stream)[-1] for stream in streams]
    assert [end.usage["completion_tokens"] for end in ends] == [8, 8]


def test_a_backend_without_batching_runs_its_choices_in_turn(smollm2_vocab):
    from llamay.backends.fixture import FixtureBackend
    from llamay.engine import Model

    results = Model(FixtureBackend(smollm2_vocab, script=b"hello")).chat(ASK, n=3, max_tokens=5)
    assert [r.text for r in results] == ["hello"] * 3


@pytest.mark.parametrize("n", [0, 17, "2"])
def test_a_count_of_choices_out_of_range_is_a_usage_error(model, n):
    from llamay.errors import UsageError

    with pytest.raises(UsageError, match="n must be"):
        model.chat(ASK, n=n, max_tokens=2)


# -- through the server -------------------------------------------------------------------
openai = pytest.importorskip("openai", reason="pip install openai")


@pytest.fixture(scope="module")
def client(model):
    from llamay.api import App, running

    with running(App(model)) as srv:
        yield openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none", max_retries=0)


def test_openai_n_gives_that_many_valid_choices_and_counts_every_token(client):
    reply = client.chat.completions.create(
        model="default", messages=ASK, n=3, max_tokens=40, temperature=1.0, seed=5, logprobs=True,
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": COLOUR}})
    assert [c.index for c in reply.choices] == [0, 1, 2]
    for choice in reply.choices:
        jsonschema.validate(json.loads(choice.message.content), COLOUR)
        assert b"".join(bytes(t.bytes) for t in choice.logprobs.content).decode() == choice.message.content
    assert reply.usage.completion_tokens == sum(len(c.logprobs.content) for c in reply.choices)


def test_openai_n_streams_each_choice_to_its_own_finish(client):
    # seeded: sampled unseeded, a choice may end at EOS before max_tokens
    chunks = list(client.chat.completions.create(model="default", messages=ASK, n=2, max_tokens=6, temperature=1.0,
                                                 seed=3, stream=True, stream_options={"include_usage": True}))
    finished = [c.choices[0].index for c in chunks if c.choices and c.choices[0].finish_reason]
    texts = {i: "".join(c.choices[0].delta.content or "" for c in chunks if c.choices and c.choices[0].index == i)
             for i in (0, 1)}
    roles = [c.choices[0].index for c in chunks if c.choices and c.choices[0].delta.role == "assistant"]
    assert finished == [0, 1] and all(texts.values()) and roles == [0, 1]
    assert chunks[-1].usage.completion_tokens == 12


def test_openai_completions_n_gives_that_many_choices(client):
    reply = client.completions.create(model="default", prompt="Once upon a time", n=2, max_tokens=5, temperature=1.0)
    assert [c.index for c in reply.choices] == [0, 1] and reply.usage.completion_tokens == 10


def test_openai_n_past_the_bound_is_a_400_naming_it(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="default", messages=ASK, n=17, max_tokens=2)
    assert info.value.body["param"] == "n"
