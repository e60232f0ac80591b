"""The llama.cpp prompt cache: a request evaluates only what follows the prefix the KV cache holds.

What a cached prefix gives must be what the same tokens give evaluated afresh in the same pieces:
a second backend of the same cache layout starts from nothing, evaluates the shared prefix, then
the rest, and the logits are compared. A resent prompt gives them bit for bit. A prompt cut back
to a shorter prefix does on SmolLM2; on gemma-3 the new positions land in other cache cells than a
fresh evaluation's and its logits move by up to about 2 (of a range of 40), so there the cache
must hold exactly the prompt's positions and the next token must agree. gemma-3 attends through a
sliding window, so its prompt here is longer than the window: a window cache that dropped old
positions could not be cut back to a prefix (with the cache on, the backend keeps the full-size one).
"""

from __future__ import annotations

import json

import llama_cpp
import numpy as np
import pytest

from llamay import load
from llamay.backends.llamacpp import load as load_llamacpp

#: Prompt words per model: gemma-3's past its 512-token sliding window.
WORDS = {"smollm2_gguf": 300, "gemma_gguf": 700}
#: Whether a prompt cut back to a prefix gives the fresh evaluation's logits bit for bit.
EXACT = {"smollm2_gguf": True, "gemma_gguf": False}


@pytest.fixture(params=sorted(WORDS), scope="module")
def pair(request):
    """Two backends with the cache on the same model file (one to test, one for reference), and a prompt."""
    path = request.getfixturevalue(request.param)
    cached = load_llamacpp(str(path), cache_prompt=True, n_threads=2)
    reference = load_llamacpp(str(path), cache_prompt=True, n_threads=2)
    text = " ".join(f"item {i} is {'red' if i % 3 else 'blue'};" for i in range(WORDS[request.param] // 4))
    return cached, reference, cached.encode(text, special=False), EXACT[request.param]


def after(backend, prefix: list[int], rest: list[int]) -> np.ndarray:
    """The logits once ``prefix`` is evaluated as one batch and ``rest`` as another, from nothing."""
    backend.llama.reset()
    backend.begin(prefix)
    assert backend.reused == 0
    backend.llama.eval(rest)
    return backend.logits().copy()


def test_a_resent_prompt_evaluates_only_its_last_token(pair):
    cached, fresh, prompt, _ = pair
    cached.begin(prompt)
    cached.feed(int(np.argmax(cached.logits())))  # a reply token the resent prompt does not hold
    cached.begin(prompt)
    assert cached.reused == len(prompt) - 1
    np.testing.assert_array_equal(cached.logits(), after(fresh, prompt[:-1], prompt[-1:]))


@pytest.mark.parametrize("shared", [0.25, 0.9])
def test_a_different_prompt_reuses_exactly_the_prefix_it_shares(pair, shared):
    cached, fresh, prompt, exact = pair
    k = int(len(prompt) * shared)
    other = prompt[:k] + cached.encode(" and the rest is green.", special=False)
    cached.begin(prompt)
    cached.begin(other)
    assert cached.reused == k
    memory = llama_cpp.llama_get_memory(cached.llama._ctx.ctx)
    held = (llama_cpp.llama_memory_seq_pos_min(memory, 0), llama_cpp.llama_memory_seq_pos_max(memory, 0))
    assert held == (0, len(other) - 1)  # nothing of the longer prompt is left behind
    logits, expected = cached.logits().copy(), after(fresh, other[:k], other[k:])
    if exact:
        np.testing.assert_array_equal(logits, expected)
    else:
        assert np.argmax(logits) == np.argmax(expected)


def test_without_the_cache_every_prompt_is_evaluated_afresh(smollm2_gguf):
    fresh = load_llamacpp(str(smollm2_gguf), cache_prompt=False, n_threads=2)
    prompt = fresh.encode("one two three " * 50, special=False)
    fresh.begin(prompt)
    first = fresh.logits().copy()
    fresh.begin(prompt)
    assert fresh.reused == 0
    np.testing.assert_array_equal(fresh.logits(), first)


SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}


def test_an_agent_loop_pays_only_for_each_new_turn():
    """Through ``Model.chat``: each turn reuses the conversation so far, reply included, and stays valid."""
    model = load("llamacpp", cache_prompt=True)
    messages = [{"role": "system", "content": "You answer with JSON. " * 40},
                {"role": "user", "content": "Name a city in France."}]
    before = 0
    for turn in range(3):
        reply = model.chat(messages, schema=SCHEMA, max_tokens=40)
        assert json.loads(reply.text)["city"]
        assert reply.usage["cached_tokens"] == model.backend.reused
        if turn:
            assert model.backend.reused >= before, (turn, model.backend.reused, before)
        before = reply.usage["prompt_tokens"]
        messages += [{"role": "assistant", "content": reply.text},
                     {"role": "user", "content": "Another one."}]
