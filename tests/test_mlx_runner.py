"""MLX generations side by side through mlx-lm's batch generator (``llamay.serving.MlxRunner``), on SmolLM2.

The runner and the one-at-a-time loop share the backend's weights: a shallow copy of the
session's MLX backend with ``slots`` set gets the runner, the original keeps the stepped loop.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import threading
import time
import weakref

import jsonschema
import pytest

pytest.importorskip("mlx", reason="the mlx backend needs mlx and mlx-lm: pip install 'mlx[cpu]' mlx-lm (Linux)")
try:
    import mlx.core  # noqa: F401
except ImportError as e:  # plain `mlx` on Linux installs without libmlx
    pytest.skip(f"mlx does not import ({e}): pip install 'mlx[cpu]'", allow_module_level=True)
pytest.importorskip("mlx_lm", reason="the mlx backend needs mlx-lm: pip install mlx-lm")

from llamay import Model
from llamay.serving.mlx_runner import IDLE_WAIT, MlxRunner
from tests.test_backends_agree import backend as shared_backend

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
SUBJECTS = ("a cat", "a king", "a robot", "a sailor")


def ask(subject: str) -> list[dict]:
    return [{"role": "user", "content": f"Describe {subject} as JSON with a name and an age."}]


@pytest.fixture
def solo(request) -> Model:
    return Model(shared_backend(request, "mlx"))


@pytest.fixture
def batched(request) -> Model:
    backend = copy.copy(shared_backend(request, "mlx"))
    backend.slots, backend.cache_prompt = 4, True
    model = Model(backend)
    assert isinstance(model.scheduler, MlxRunner)
    return model


def at_once(model: Model, calls: list) -> list:
    """Each call (a no-argument function) on a thread of its own, started together; their results in order."""
    results: list = [None] * len(calls)

    def run(i: int) -> None:
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_concurrent_constrained_replies_equal_the_one_at_a_time_loop(solo, batched):
    """Batched evaluation changes no token: four schema requests at once write what the stepped loop writes alone."""
    alone = [solo.chat(ask(s), schema=PERSON, max_tokens=28) for s in SUBJECTS]
    together = at_once(batched, [lambda s=s: batched.chat(ask(s), schema=PERSON, max_tokens=28) for s in SUBJECTS])
    assert [r.text for r in together] == [r.text for r in alone]
    for reply in together:
        jsonschema.validate(json.loads(reply.text), PERSON)


def test_seeded_sampling_with_penalties_and_logprobs_matches_the_stepped_loop(solo, batched):
    """The runner chooses through the same sampler: a seed, a penalty and log probabilities mean the same there."""
    options = {"max_tokens": 10, "temperature": 1.0, "seed": 5, "frequency_penalty": 0.5, "logprobs": 2}
    alone = solo.chat(ask("the sea"), **options)
    (together,) = at_once(batched, [lambda: batched.chat(ask("the sea"), **options)])
    assert together.text == alone.text
    assert [lp.token for lp in together.logprobs] == [lp.token for lp in alone.logprobs]
    for a, b in zip(together.logprobs, alone.logprobs, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)


def test_a_resent_conversation_reuses_the_kept_cache(batched):
    first = batched.chat(ask("a lighthouse"), max_tokens=8)
    again = batched.chat(ask("a lighthouse"), max_tokens=8)
    assert again.text == first.text
    assert again.usage["cached_tokens"] == again.usage["prompt_tokens"] - 1
    longer = [*ask("a lighthouse"), {"role": "assistant", "content": first.text}, {"role": "user", "content": "More."}]
    follow = batched.chat(longer, max_tokens=4)
    assert follow.usage["cached_tokens"] >= first.usage["prompt_tokens"]


def test_a_closed_stream_frees_its_sequence_and_the_next_request_runs(batched):
    stream = batched.chat(ask("a long journey"), max_tokens=200, stream=True)
    next(iter(stream))
    stream.close()
    deadline = time.monotonic() + 5
    while batched.scheduler.busy and time.monotonic() < deadline:
        time.sleep(0.01)
    assert batched.scheduler.busy == 0
    assert batched.chat(ask("a cat"), schema=PERSON, max_tokens=28).finish_reason == "stop"


def test_choices_under_a_schema_are_each_valid(batched):
    replies = batched.chat(ask("a dog"), schema=PERSON, max_tokens=28, n=3, temperature=1.0, seed=3)
    assert len(replies) == 3
    for reply in replies:
        jsonschema.validate(json.loads(reply.text), PERSON)


def test_requests_after_idle_spells_start_no_new_threads(batched):
    """mlx gives each thread using a stream a worker thread that never ends: the runner keeps one loop thread."""
    batched.chat(ask("a cat"), max_tokens=2)
    before = len(os.listdir("/proc/self/task"))
    for i in range(6):
        batched.chat(ask(f"cat number {i}"), max_tokens=2)
        time.sleep(0.05)  # the loop goes idle between requests
    assert len(os.listdir("/proc/self/task")) == before


def test_the_loop_thread_ends_once_its_model_is_dropped(request):
    backend = copy.copy(shared_backend(request, "mlx"))
    backend.slots = 2
    model = Model(backend)
    model.chat(ask("a cat"), max_tokens=2)
    thread, ref = model.scheduler._thread, weakref.ref(model.scheduler)
    del model
    gc.collect()
    assert ref() is None
    thread.join(IDLE_WAIT * 3)
    assert not thread.is_alive()
