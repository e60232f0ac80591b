"""Generation off the event loop: a thread per slot runs ``Model.chat``; the requests beyond them wait.

``Model.chat`` blocks while its request generates. A model with a scheduler runs as many
requests at once as it has slots, so the worker gives it that many threads; any other model
runs one at a time, and one thread loses nothing. Requests start in the order they came in.
At most ``queue`` requests wait beyond the running ones; one more is refused at once (503)
rather than left to time out. Each request's items reach the event loop through its own
``asyncio.Queue``; a reply that is not streamed gets its events all at once with its end, so
that the event loop does not wake each token while the model's threads need every core:

    ("ready", warnings)        Model.chat accepted the request (constraint compiled)
    ("event", TextDelta | ToolCall, choice)
    ("choice", Done, choice)   a choice other than the last ended (requests with several choices)
    ("done", Done, Timing)     the last choice ended: the request is answered
    ("error", exception)       before "ready" it is a refusal, after it a mid-stream error
    ("cancelled", None)        the client left while the request was waiting
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..engine import Done, Model
from .errors import overloaded, shutting_down
from .fields import GenerateRequest
from .render import Timing

Item = tuple[Any, ...]


class Worker:
    """A generation thread per slot and a bounded count of waiting requests; thread-safe."""

    def __init__(self, model: Model, queue: int) -> None:
        self.model = model
        self.queue = queue
        self.running = model.scheduler.backend.slots if model.scheduler is not None else 1
        self._busy = 0  # running and waiting
        self._closed = False
        self._lock = threading.Lock()
        self._cancels: set[threading.Event] = set()
        self._executor = ThreadPoolExecutor(max_workers=self.running, thread_name_prefix="llamay-generate")

    @property
    def waiting(self) -> int:
        """Requests accepted and waiting for a slot."""
        return max(0, self._busy - self.running)

    @property
    def generating(self) -> int:
        """Requests in a slot now."""
        return min(self._busy, self.running)

    def submit(self, request: GenerateRequest, cancel: threading.Event, received_ns: int) -> asyncio.Queue[Item]:
        """Queue ``request`` (arrived at ``received_ns``, monotonic); raises ``ApiError`` 503 when ``queue`` wait."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[Item] = asyncio.Queue()

        held: list[Item] = []  # a whole (non-streamed) reply's events, handed over with its end

        def deliver(batch: list[Item]) -> None:
            for item in batch:
                items.put_nowait(item)

        def put(*item: Any) -> None:
            if item[0] in ("event", "choice") and not request.stream:
                held.append(item)
                return
            batch = [*held, item]
            held.clear()
            try:
                loop.call_soon_threadsafe(deliver, batch)
            except RuntimeError:  # the loop closed under us: shutting down
                cancel.set()

        with self._lock:
            if self._closed:
                raise shutting_down()
            if self._busy >= self.running + self.queue:  # every slot generating and ``queue`` waiting
                raise overloaded(self.queue)
            self._busy += 1
            self._cancels.add(cancel)
        self._executor.submit(self._run, request, cancel, put, received_ns)
        return items

    def _run(self, request: GenerateRequest, cancel: threading.Event, put: Callable[..., None],
             received_ns: int) -> None:
        last: Item = ("cancelled", None)
        try:
            if cancel.is_set():
                return
            start = time.monotonic_ns()
            try:
                generate = self.model.complete if "prompt" in request.chat else self.model.chat
                events = generate(**request.chat, stream=True, cancel=cancel)
            except Exception as exc:
                last = ("error", exc)
                return
            choices = events if isinstance(events, list) else [events]
            # compile warnings, where the engine exposes them before the first event
            put("ready", list(getattr(choices[0], "warnings", None) or []))
            first_ns = 0
            try:
                # one after another: on a scheduler every choice generates meanwhile, and waits in its stream
                for index, stream in enumerate(choices):
                    for event in stream:
                        if not isinstance(event, Done):
                            put("event", event, index)
                            continue
                        first_ns = min(first_ns or event.first_token_ns, event.first_token_ns or first_ns)
                        if index < len(choices) - 1:
                            put("choice", event, index)
                        else:
                            now = time.monotonic_ns()
                            last = ("done", event, Timing(received_ns, start, first_ns or now, now))
            except Exception as exc:
                last = ("error", exc)
            finally:
                for stream in choices:
                    close = getattr(stream, "close", None)
                    if close is not None:
                        close()
        finally:
            # counted out before the last item goes: a client that sends its next request as soon as
            # this answer arrives must find the room this one leaves
            with self._lock:
                self._busy -= 1
                self._cancels.discard(cancel)
            put(*last)

    def close(self) -> None:
        """Cancel the running and waiting generations and wait for the thread to finish.

        Waiting requests still run, each seeing its cancel event set at once, so every
        request gets an item ("cancelled") and none is left waiting on its queue.
        """
        with self._lock:
            self._closed = True  # refuse what arrives from now on
            for cancel in self._cancels:
                cancel.set()
        self._executor.shutdown(wait=True)
