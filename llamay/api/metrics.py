"""What ``GET /metrics`` reports, in Prometheus' text format (prometheus_client writes it).

Counters by route and status, the slots and the queue as the worker holds them at the scrape,
the tokens generated (and of those, the ones a constraint forced) and the prompt tokens evaluated
or served from cache, and histograms of the times a client waits, measured from the request's
arrival, so queueing counts. The route
label is one of the server's own routes (``/v1/models/{id}`` for any model) or ``other``: a
path a client invents never becomes a new series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Seconds to the first token: from a cached prompt on a GPU to a long one queued behind others on a CPU.
FIRST_TOKEN_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
#: Seconds per generated token: from a GPU's few milliseconds to a large model on a busy CPU.
TOKEN_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28)


class Metrics:
    """One server's metrics; ``watch`` binds the gauges to what runs the generations."""

    def __init__(self, routes: Iterable[str]) -> None:
        self.routes = frozenset(routes)
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("llamay_requests", "Requests answered, by route and HTTP status (499: the client "
                                "left before the answer)", ["route", "status"], registry=r)
        self.generated = Counter("llamay_tokens_generated", "Tokens generated", registry=r)
        self.forced = Counter("llamay_tokens_forced", "Tokens generated that a constraint forced: appended "
                              "without sampling, several in one evaluation", registry=r)
        self.evaluated = Counter("llamay_prompt_tokens_evaluated", "Prompt tokens evaluated", registry=r)
        self.cached = Counter("llamay_prompt_tokens_cached", "Prompt tokens served from a slot's KV cache, "
                              "not evaluated", registry=r)
        self.first_token = Histogram("llamay_time_to_first_token_seconds", "From a request's arrival to its "
                                     "first generated token", buckets=FIRST_TOKEN_BUCKETS, registry=r)
        self.per_token = Histogram("llamay_time_per_output_token_seconds", "Each request's mean time between "
                                   "its generated tokens, after the first", buckets=TOKEN_BUCKETS, registry=r)
        self.slots = Gauge("llamay_slots", "Generations that can run at once", registry=r)
        self.busy = Gauge("llamay_slots_busy", "Slots generating now", registry=r)
        self.waiting = Gauge("llamay_requests_waiting", "Requests waiting for a slot", registry=r)

    def watch(self, slots: int, busy: Callable[[], int], waiting: Callable[[], int]) -> None:
        """Read the slot gauges from ``busy`` and ``waiting`` at each scrape."""
        self.slots.set(slots)
        self.busy.set_function(busy)
        self.waiting.set_function(waiting)

    def observe(self, path: str, status: int, stats: dict[str, Any]) -> None:
        """Count one answered request; ``stats`` carry a generation's tokens and times (seconds)."""
        self.requests.labels(self.route(path), str(status)).inc()
        if "completion" not in stats:
            return
        self.generated.inc(stats["completion"])
        self.forced.inc(stats.get("forced", 0))
        self.evaluated.inc(stats["prompt"] - stats["cached"])
        self.cached.inc(stats["cached"])
        if stats["completion"]:
            self.first_token.observe(stats["first_token_s"])
        if stats["completion"] > 1:
            self.per_token.observe(stats["eval_s"] / (stats["completion"] - 1))

    def route(self, path: str) -> str:
        """The label for ``path``: the route it names, ``/v1/models/{id}`` for any model, else ``other``."""
        if path in self.routes:
            return path
        return "/v1/models/{id}" if path.startswith("/v1/models/") else "other"

    def render(self) -> bytes:
        return generate_latest(self.registry)
