"""The sampling controls clients send: penalties, logit bias and min-p, in the one sampler every backend uses.

The arithmetic is pinned on small arrays; the behaviour on SmolLM2 through ``llamay serve``
(in-process, loopback) with the official ``openai`` and ``ollama`` clients: a raw prompt of
"1 1 1 ..." that greedy decoding continues forever is the loop the penalties must break.
"""

from __future__ import annotations

import collections
import json

import jsonschema
import numpy as np
import pytest

from llamay.backends.sampling import Sampling, adjust, last_tokens, sample

LOOP = "1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"
NEG = -np.inf


@pytest.mark.parametrize(("sampling", "prompt", "reply", "expected"), [
    (Sampling(logit_bias=((0, 5.0), (1, -100.0))), [], [], [6.0, -98.0, -4.0, NEG]),
    (Sampling(logit_bias=((3, 100.0),)), [], [], [1.0, 2.0, -4.0, NEG]),  # a bias never un-masks
    (Sampling(repeat_penalty=2.0), [0], [2], [0.5, 2.0, -8.0, NEG]),  # positive divided, negative multiplied
    (Sampling(repeat_penalty=2.0, repeat_last_n=1), [0], [2], [1.0, 2.0, -8.0, NEG]),  # only the last token
    (Sampling(repeat_penalty=2.0, repeat_last_n=-1), [0, 1], [], [0.5, 1.0, -4.0, NEG]),  # the whole context
    (Sampling(frequency_penalty=1.0, presence_penalty=0.5), [1], [0, 0, 2], [-1.5, 2.0, -5.5, NEG]),  # reply only
])
def test_bias_and_penalties_adjust_the_logits(sampling, prompt, reply, expected):
    logits = np.array([1.0, 2.0, -4.0, NEG], dtype=np.float32)
    adjust(logits, sampling, prompt, reply)
    np.testing.assert_array_equal(logits, np.array(expected, dtype=np.float32))


@pytest.mark.parametrize(("n", "expected"), [(0, []), (1, [5]), (3, [3, 4, 5]), (9, [1, 2, 3, 4, 5]),
                                             (-1, [1, 2, 3, 4, 5])])
def test_repeat_last_n_counts_back_over_reply_then_prompt(n, expected):
    assert last_tokens([1, 2, 3], [4, 5], n) == expected


def test_min_p_keeps_only_tokens_near_the_best():
    logits = np.array([3.0, 2.9, 0.0, NEG], dtype=np.float32)
    rng = np.random.default_rng(0)
    wide = {sample(logits.copy(), Sampling(temperature=1.0), rng) for _ in range(300)}
    narrow = {sample(logits.copy(), Sampling(temperature=1.0, min_p=0.5), rng) for _ in range(300)}
    assert wide == {0, 1, 2} and narrow == {0, 1}


# -- through the server, on the real model ---------------------------------------------------
openai = pytest.importorskip("openai", reason="pip install openai")
ollama = pytest.importorskip("ollama", reason="pip install ollama")


@pytest.fixture(scope="module")
def served():
    pytest.importorskip("llama_cpp", reason="the llamacpp backend needs llama-cpp-python (ci/setup installs it)")
    from llamay.api import App, running
    from llamay.engine import load

    model = load("llamacpp", n_threads=2, slots=2, cache_prompt=True)
    with running(App(model)) as srv:
        yield model, srv.port


def most_repeated(model, text: str) -> int:
    return collections.Counter(model.backend.encode(text, special=False)).most_common(1)[0][1] if text else 0


@pytest.mark.parametrize(("options", "loops"), [({"repeat_penalty": 1.0}, True), ({"repeat_penalty": 2.0}, False)])
def test_ollama_repeat_penalty_breaks_a_loop(served, options, loops):
    model, port = served
    reply = ollama.Client(host=f"http://127.0.0.1:{port}").generate(
        model="default", prompt=LOOP, raw=True, options={"temperature": 0, "num_predict": 20, **options})
    assert (most_repeated(model, reply.response) >= 8) is loops, reply.response


@pytest.mark.parametrize(("penalty", "loops"), [(0.0, True), (2.0, False)])
def test_openai_frequency_penalty_breaks_a_loop(served, penalty, loops):
    model, port = served
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    reply = client.completions.create(model="default", prompt=LOOP, max_tokens=20, temperature=0,
                                      frequency_penalty=penalty)
    assert (most_repeated(model, reply.choices[0].text) >= 8) is loops, reply.choices[0].text


def test_a_strong_negative_bias_keeps_a_token_out(served):
    model, port = served
    space = model.backend.encode(" 1", special=False)[0]
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    plain = client.completions.create(model="default", prompt=LOOP, max_tokens=10, temperature=0)
    biased = client.completions.create(model="default", prompt=LOOP, max_tokens=10, temperature=0,
                                       logit_bias={str(space): -100})
    assert space in model.backend.encode(plain.choices[0].text, special=False)
    assert space not in model.backend.encode(biased.choices[0].text, special=False)


def test_a_bias_toward_a_refused_token_cannot_break_the_constraint(served):
    model, port = served
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    pushed = {str(t): 100 for t in model.backend.encode("Sure! Here you go", special=False)}
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    reply = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "A number as JSON."}], max_tokens=30,
        temperature=0, logit_bias=pushed,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}})
    jsonschema.validate(json.loads(reply.choices[0].message.content), schema)


def test_min_p_of_one_samples_as_greedy(served):
    _, port = served
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    ask = {"model": "default", "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 12}
    greedy = client.chat.completions.create(**ask, temperature=0)
    hot = client.chat.completions.create(**ask, temperature=1.5, seed=3, extra_body={"min_p": 1.0})
    assert hot.choices[0].message.content == greedy.choices[0].message.content


def test_a_bias_on_a_token_the_vocabulary_lacks_is_a_400_naming_it(served):
    _, port = served
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="logit_bias"):
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
                                       logit_bias={"99999999": 5})
