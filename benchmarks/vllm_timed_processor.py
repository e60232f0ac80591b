"""llamay's vLLM logits processor with its per-step cost written down, for ``benchmarks.vllm_overhead``.

Each ``apply`` and ``update_state`` call appends a line to ``LLAMAY_VLLM_TIMINGS``: the call,
the constrained rows, the batch's rows, its start (``perf_counter``) and its duration in seconds.
Imported by vLLM's worker, from vLLM's environment.
"""

from __future__ import annotations

import os
import time

from llamay.integrations.vllm import LlamayLogitsProcessor


class TimedLlamayLogitsProcessor(LlamayLogitsProcessor):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log = open(os.environ["LLAMAY_VLLM_TIMINGS"], "a", buffering=1)  # noqa: SIM115 (lives with the worker)

    def update_state(self, batch_update):
        start = time.perf_counter()
        super().update_state(batch_update)
        if batch_update is not None:
            self.log.write(f"update {len(self.rows)} {batch_update.batch_size} {start} {time.perf_counter() - start}\n")

    def apply(self, logits):
        start = time.perf_counter()
        out = super().apply(logits)
        self.log.write(f"apply {len(self.rows)} {logits.shape[0]} {start} {time.perf_counter() - start}\n")
        return out
