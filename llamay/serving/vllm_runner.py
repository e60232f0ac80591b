"""Generations on vLLM's engine (``AsyncLLM``), read back as llamay's token streams.

vLLM batches, pages and schedules the requests, and shares their prompts' prefixes. Each
request's constraint runs inside vLLM's workers, as llamay's logits processor, sent as
``extra_args`` (``llamay.integrations.xargs.to_xargs``), so it works however vLLM spreads the
model over GPUs and nodes. Each token that comes back is also taken by the job's own matcher
here, after a mask fill of its own: that is what the engine reads for the finish reason and the
budget's warning, and a token this matcher refuses (the two constraints disagree) ends the job
with an error, never with a malformed reply.

One thread runs an asyncio loop for the runner's life; ``AsyncLLM`` lives on it, and each job is
a task streaming its request's new tokens (``RequestOutputKind.DELTA``).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from vllm import SamplingParams
from vllm.sampling_params import RequestOutputKind
from vllm.v1.engine.async_llm import AsyncLLM

from ..backends.sampling import TokenLogprob
from ..backends.vllm import VllmBackend
from ..errors import InternalError
from ..integrations.xargs import to_xargs
from .jobs import END, Job, Runner


class VllmRunner(Runner):
    """Runs a ``VllmBackend``'s generations on vLLM's async engine, as many at once as vLLM schedules."""

    def __init__(self, backend: VllmBackend) -> None:
        self.backend = backend
        self._eos = frozenset(backend.vocab.eos_ids)
        self._running = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self.engine: AsyncLLM | None = None
        threading.Thread(target=self._serve, name="llamay-vllm", daemon=True).start()
        self._started.wait()
        if self._error is not None:
            raise self._error

    @property
    def busy(self) -> int:
        return self._running

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self.engine = AsyncLLM.from_engine_args(self.backend.engine_args)
            self.backend.n_ctx = self.engine.model_config.max_model_len  # what vLLM settled on
        except BaseException as e:  # handed to the constructor, which raises it
            self._error = e
            return
        finally:
            self._started.set()
        self._loop.run_forever()

    def _queue(self, jobs: list[Job]) -> None:
        with self._lock:
            self._running += len(jobs)
        for job in jobs:
            asyncio.run_coroutine_threadsafe(self._run(job), self._loop)

    async def _run(self, job: Job) -> None:
        assert self.engine is not None
        request_id = uuid.uuid4().hex
        end: Any = END
        finished = False
        try:
            async for out in self.engine.generate({"prompt_token_ids": job.prompt}, self._params(job), request_id):
                completion = out.outputs[0]
                job.reused = out.num_cached_tokens or 0
                tokens = list(completion.token_ids)
                # a "stop" finish ends on its stop token: EOS, or one vLLM took from the model's generation config,
                # which llamay's vocabulary may not list; it ends the reply, unsent, as EOS does
                if out.finished and completion.finish_reason not in ("stop", "length"):
                    raise InternalError(f"vLLM ended the request: {completion.finish_reason}")
                stopped = out.finished and completion.finish_reason == "stop" and bool(tokens)
                for i, token in enumerate(tokens[:-1] if stopped else tokens):
                    if job.matcher is not None:
                        job.fill_mask()
                        if not job.matcher.accept_token(token):
                            raise InternalError(f"vLLM returned token {token}, which llamay's constraint refuses here")
                    scored = completion.logprobs[i] if completion.logprobs is not None else None
                    if job.deliver(token, _logprob(token, scored, job.sampling.logprobs), self._eos):
                        finished = True
                        break
                finished = finished or out.finished
                if finished or job.abandoned:
                    break
        except BaseException as e:  # the consumer re-raises it
            end = e
        finally:
            if not finished:
                await self.engine.abort(request_id)
            with self._lock:
                self._running -= 1
            job.out.put(end)

    def _params(self, job: Job) -> SamplingParams:
        s = job.sampling
        xargs = to_xargs(job.source, job.source.get("dialect")) if job.source else None
        return SamplingParams(
            temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p, seed=s.seed,
            frequency_penalty=s.frequency_penalty, presence_penalty=s.presence_penalty,
            # vLLM's repetition penalty counts every prompt and reply token: repeat_last_n is not kept
            repetition_penalty=s.repeat_penalty if s.repeat_last_n != 0 else 1.0,
            logit_bias=dict(s.logit_bias) or None, logprobs=s.logprobs, max_tokens=job.budget,
            extra_args=xargs or None, detokenize=False, skip_special_tokens=False,
            output_kind=RequestOutputKind.DELTA)


def _logprob(token: int, scored: dict[int, Any] | None, k: int | None) -> TokenLogprob | None:
    """vLLM's ``{token id: Logprob}`` for one position as llamay's: the token's, and the ``k`` likeliest."""
    if k is None or scored is None:
        return None
    ranked = sorted((entry.rank, i, entry.logprob) for i, entry in scored.items() if entry.rank is not None)
    top = tuple((i, lp) for rank, i, lp in ranked if rank <= k)[:k]
    return TokenLogprob(token, scored[token].logprob, top)
