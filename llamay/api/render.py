"""The shape every response translator has: engine events in, stream frames or one JSON body out.

A renderer is pure: it holds what the response has said so far (text, calls, warnings
sent) and turns each engine event into the frames of its API's stream; the same
renderer builds the non-streaming body from what it accumulated. The server feeds it
and writes what it returns; it never looks inside the frames.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from ..engine import Done, Logprob, TextDelta, ToolCall
from .errors import ApiError
from .fields import SSE, Frame, GenerateRequest


@dataclass(frozen=True)
class Timing:
    """Monotonic nanoseconds: the request's arrival, generation start, first generated token, ``Done``.

    Prompt evaluation runs from the start to the first generated token and generation from
    there to the end, whatever the first event the client sees (a tool call is held back
    until it is complete); the total counts from the arrival, so time spent queued shows.
    """

    received_ns: int
    start_ns: int
    first_ns: int
    end_ns: int

    @property
    def prompt_ns(self) -> int:
        return max(0, self.first_ns - self.start_ns)

    @property
    def eval_ns(self) -> int:
        return max(0, self.end_ns - self.first_ns)

    @property
    def total_ns(self) -> int:
        return max(0, self.end_ns - self.received_ns)

    @property
    def first_token_ns(self) -> int:
        """From the request's arrival to its first generated token."""
        return max(0, self.first_ns - self.received_ns)


@dataclass
class Choice:
    """What one choice of the response has said so far, and its end once it came."""

    text_parts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    logprobs: list[Logprob] = field(default_factory=list)
    done: Done | None = None

    @property
    def text(self) -> str:
        return "".join(self.text_parts)


class Renderer:
    """Base of the per-route translators; subclasses override the frame builders.

    ``choices`` holds each choice's state (one, unless a request asks OpenAI's ``n``); ``at``
    is the one being rendered, and ``text``, ``calls`` and ``logprobs`` are its.
    """

    media_type = SSE
    id_prefix = "resp_"

    def __init__(self, request: GenerateRequest, *, created: float | None = None, response_id: str | None = None):
        self.request = request
        self.model = request.model
        self.created = time.time() if created is None else created
        self.id = response_id or self.id_prefix + secrets.token_hex(12)
        self.choices = [Choice()]
        self.at = 0
        self.sent_warnings: list[str] = []
        self.asked_logprobs = request.chat.get("logprobs") is not None
        self.fresh_logprobs: tuple[Logprob, ...] = ()  # those of the event being rendered

    @property
    def choice(self) -> Choice:
        return self.choices[self.at]

    @property
    def text(self) -> str:
        return self.choice.text

    @property
    def calls(self) -> list[ToolCall]:
        return self.choice.calls

    @property
    def logprobs(self) -> list[Logprob]:
        return self.choice.logprobs

    def _select(self, index: int) -> Choice:
        while len(self.choices) <= index:
            self.choices.append(Choice())
        self.at = index
        return self.choice

    # -- stream ---------------------------------------------------------------------------
    def start(self, warnings: list[str]) -> list[Frame]:
        """Frames before the first event; ``warnings`` are those known before generation."""
        self.sent_warnings = list(warnings)
        return []

    def event(self, event: TextDelta | ToolCall, index: int = 0) -> list[Frame]:
        choice = self._select(index)
        self.fresh_logprobs = event.logprobs
        choice.logprobs += event.logprobs
        if isinstance(event, TextDelta):
            choice.text_parts.append(event.text)
            return self.on_text(event.text)
        choice.calls.append(event)
        return self.on_call(event, len(choice.calls) - 1)

    def end_choice(self, done: Done, index: int) -> list[Frame]:
        """Choice ``index``, not the last, has ended (``finish`` ends the last, and the response)."""
        self._select(index).done = done
        return self.on_choice_end(done)

    def on_choice_end(self, done: Done) -> list[Frame]:
        raise NotImplementedError  # only OpenAI's routes take ``n``

    def ended(self, done: Done) -> list[Choice]:
        """Every choice, the last ended by ``done``."""
        self._select(len(self.choices) - 1).done = done
        return self.choices

    def on_text(self, text: str) -> list[Frame]:
        raise NotImplementedError

    def on_call(self, call: ToolCall, index: int) -> list[Frame]:
        raise NotImplementedError

    def finish(self, done: Done, timing: Timing) -> list[Frame]:
        raise NotImplementedError

    def error(self, error: ApiError) -> list[Frame]:
        """A mid-stream error, in the stream's own format."""
        raise NotImplementedError

    def late_warnings(self, done: Done) -> list[str]:
        """Warnings ``Done`` brings that the stream's first frame could not carry (e.g. truncation)."""
        late = [w for w in done.warnings if w not in self.sent_warnings]
        self.sent_warnings += late
        return late

    # -- one body -------------------------------------------------------------------------
    def response(self, done: Done, timing: Timing, warnings: list[str]) -> dict[str, Any]:
        raise NotImplementedError
