"""The llama.cpp prompt cache: a request evaluates only what follows the prefix its slot holds.

What a cached prefix gives must be what the same tokens give evaluated afresh in the same pieces.
At the backend: a sequence cut back to a prefix (``forget``) and given the rest has the logits of
a second backend of the same cache layout that evaluated the prefix, then the rest, from nothing.
A resent prompt gives them bit for bit. A prompt cut back to a shorter prefix does on SmolLM2; on
gemma-3 the new positions land in other cache cells than a fresh evaluation's and its logits move
by up to about 2 (of a range of 40), so there the next token must agree. gemma-3 attends through
a sliding window, so its prompt here is longer than the window: a window cache that dropped old
positions could not be cut back to a prefix (with the cache on, the backend keeps the full-size one).
Through the engine: what a request reuses is reported as ``cached_tokens``, a conversation comes
back to the slot that holds it, and greedy output matches a model without the cache.
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


def evaluate(backend, tokens: list[int], start: int = 0) -> np.ndarray:
    """Evaluate ``tokens`` at positions ``start`` on in sequence 0, in batch-size pieces; the last one's logits."""
    for at in range(0, len(tokens), backend.batch_size):
        piece = tokens[at:at + backend.batch_size]
        last = at + len(piece) == len(tokens)
        backend.decode(piece, range(start + at, start + at + len(piece)), [0] * len(piece),
                       [last and k == len(piece) - 1 for k in range(len(piece))])
    return backend.logits_at((len(tokens) - 1) % backend.batch_size).copy()


def after(backend, prefix: list[int], rest: list[int]) -> np.ndarray:
    """The logits once ``prefix`` is evaluated, then ``rest``, from nothing."""
    backend.forget(0, 0)
    evaluate(backend, prefix)
    return evaluate(backend, rest, len(prefix))


def held(backend) -> tuple[int, int]:
    memory = llama_cpp.llama_get_memory(backend._ctx.ctx)
    return llama_cpp.llama_memory_seq_pos_min(memory, 0), llama_cpp.llama_memory_seq_pos_max(memory, 0)


def test_a_resent_prompt_cut_to_all_but_its_last_token_gives_the_fresh_logits(pair):
    cached, fresh, prompt, _ = pair
    cached.forget(0, 0)
    evaluate(cached, [*prompt, prompt[0]])  # and a reply token the resent prompt does not hold
    cached.forget(0, len(prompt) - 1)
    logits = evaluate(cached, prompt[-1:], len(prompt) - 1)
    np.testing.assert_array_equal(logits, after(fresh, prompt[:-1], prompt[-1:]))


@pytest.mark.parametrize("shared", [0.25, 0.9])
def test_a_different_prompt_reuses_exactly_the_prefix_it_shares(pair, shared):
    cached, fresh, prompt, exact = pair
    k = int(len(prompt) * shared)
    other = prompt[:k] + cached.encode(" and the rest is green.", special=False)
    cached.forget(0, 0)
    evaluate(cached, prompt)
    cached.forget(0, k)
    logits = evaluate(cached, other[k:], k)
    assert held(cached) == (0, len(other) - 1)  # nothing of the longer prompt is left behind
    expected = after(fresh, other[:k], other[k:])
    if exact:
        np.testing.assert_array_equal(logits, expected)
    else:
        assert np.argmax(logits) == np.argmax(expected)


SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
SYSTEM = {"role": "system", "content": "You answer with JSON. " * 40}


@pytest.fixture(scope="module")
def models():
    """SmolLM2 with the cache on two slots, and without the cache on one: the reference for greedy output."""
    return load("llamacpp", cache_prompt=True, slots=2, n_threads=2), load("llamacpp", n_threads=2)


def test_an_agent_loop_pays_only_for_each_new_turn(models):
    """Each turn reuses the conversation so far, reply included, stays valid, and says the fresh model's words."""
    cached, fresh = models
    messages = [SYSTEM, {"role": "user", "content": "Name a city in France."}]
    before = 0
    for turn in range(3):
        reply = cached.chat(messages, schema=SCHEMA, max_tokens=40)
        assert json.loads(reply.text)["city"]
        assert reply.text == fresh.chat(messages, schema=SCHEMA, max_tokens=40).text
        if turn:
            assert reply.usage["cached_tokens"] >= before, (turn, reply.usage, before)
        before = reply.usage["prompt_tokens"]
        messages += [{"role": "assistant", "content": reply.text}, {"role": "user", "content": "Another one."}]


def test_two_conversations_each_come_back_to_the_slot_that_holds_them(models):
    """Interleaved, each turn reuses its own conversation so far, which the other slot does not hold."""
    cached, _ = models
    talks = [[{"role": "system", "content": f"You answer with JSON about {country}. " * 20},
              {"role": "user", "content": f"Name a city in {country}."}] for country in ("Peru", "Japan")]
    before = [0, 0]
    for turn in range(3):
        for i, messages in enumerate(talks):
            reply = cached.chat(messages, schema=SCHEMA, max_tokens=30)
            if turn:
                assert reply.usage["cached_tokens"] >= before[i], (turn, i, reply.usage, before)
            before[i] = reply.usage["prompt_tokens"]
            messages += [{"role": "assistant", "content": reply.text}, {"role": "user", "content": "Another."}]


def test_without_the_cache_nothing_is_reused(models):
    _, fresh = models
    messages = [SYSTEM, {"role": "user", "content": "Name a city in Chile."}]
    first, again = (fresh.chat(messages, schema=SCHEMA, max_tokens=30) for _ in range(2))
    assert again.usage["cached_tokens"] == 0
    assert again.text == first.text
