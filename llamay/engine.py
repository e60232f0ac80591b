"""Where a request meets a backend: messages + constraint + sampling -> events.

``llamay.load().chat()`` and every API route go through ``Model.chat``; nothing else
renders prompts, builds constraints or runs generations. A request flows one way: render
the prompt (the model's template, Hermes tools where it has none), pick the constraint
(schema, grammar, lexicon, any JSON, or the tool-call grammar), run the backend's loop
under a matcher, and turn tokens into text deltas, held-back tool calls, and a final
``Done`` with the finish reason, usage and warnings.
"""

from __future__ import annotations

import codecs
import dataclasses
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from ._core.automaton import CompiledGrammar
from ._core.matcher import Matcher
from .backends import Backend, Sampling, TokenStream, load_backend
from .backends.base import token_budget
from .backends.sampling import TokenLogprob
from .chat import CallStream, ChatTemplate, ToolCall, named, normalize_tools
from .chat.dialects import Markers
from .constraints import Constraints, tool_mode
from .errors import UsageError
from .logprob import Logprob
from .options import DEFAULT, Limits, Tuning
from .serving import runner_for
from .vocab import Vocabulary

log = logging.getLogger("llamay")

TRUNCATED_WARNING = "max_tokens ended the output before the constrained document was complete"
CUT_CALL_WARNING = "a tool call cut short before it was complete was dropped: tool-call markup never goes into content"
BUDGET_CLOSED_WARNING = ("the token budget closed the constrained output: near max_tokens (or the end of the context) "
                         "only tokens that let it complete in the tokens left were allowed")
STOP_NOT_APPLIED_WARNING = "stop strings cut free text only: they were not applied to this constrained document"

#: The most alternatives ``logprobs`` may ask for per token (OpenAI's ``top_logprobs`` bound).
MAX_TOP_LOGPROBS = 20

#: The most choices one request may ask for (``n``): each takes a slot while it generates.
MAX_CHOICES = 16


@dataclass(frozen=True)
class TextDelta:
    """Text of the reply; ``logprobs``, where asked for, those of the tokens generated since the last event."""

    text: str
    logprobs: tuple[Logprob, ...] = ()


@dataclass(frozen=True)
class Done:
    finish_reason: str  # "stop" | "length" | "tool_calls"
    usage: dict[str, int]
    warnings: list[str]
    stop_sequence: str | None = None  # the stop string that ended the text, if one did
    first_token_ns: int = 0  # time.monotonic_ns() when the first token was generated; 0 if none was


@dataclass
class ChatResult:
    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    logprobs: list[Logprob] | None = None  # where asked for: every reported token's, in order


Event = TextDelta | ToolCall | Done


def load(backend: str = "llamacpp", model: str | None = None, *, tool_dialect: str | None = None,
         chat_template: str | None = None, limits: Limits = DEFAULT.limits, tuning: Tuning = DEFAULT.tuning,
         **backend_options: Any) -> Model:
    """Load ``model`` (None: the embedded default, SmolLM2-135M-Instruct) on ``backend``.

    ``tool_dialect`` overrides the dialect detected from the chat template; ``chat_template``
    (Jinja source) replaces the model's own template. ``limits`` bound every request's
    constraint compile; ``tuning`` shapes its automaton (``llamay.options``).
    """
    return Model(load_backend(backend, model, **backend_options), tool_dialect=tool_dialect,
                 chat_template=chat_template, limits=limits, tuning=tuning)


class Model:
    """A loaded model with its template, tool dialect and a cache of compiled constraints; thread-safe.

    ``dialect`` is how the model writes tool calls (detected from its template unless named);
    ``markers`` are that dialect's markers against the model's vocabulary, tokens where they are one.
    ``limits`` and ``tuning`` are what every request's constraint compiles under.
    """

    def __init__(self, backend: Backend, *, tool_dialect: str | None = None, chat_template: str | None = None,
                 limits: Limits = DEFAULT.limits, tuning: Tuning = DEFAULT.tuning) -> None:
        self.backend = backend
        self.limits = limits
        self.tuning = tuning
        source, origin = (chat_template, "the given chat template") if chat_template else (
            backend.chat_template, f"{backend.model_id} chat template")
        self.template = ChatTemplate(source, bos_token=backend.bos_token, eos_token=backend.eos_token,
                                     origin=origin, control_tokens=backend.control_texts,
                                     tool_dialect=named(tool_dialect) if tool_dialect else None)
        if self.template.is_default:
            log.warning("%s has no chat template: using the default (ChatML)", backend.model_id)
        self.dialect = self.template.dialect
        self.markers = Markers(self.dialect, backend.vocab)
        self.constraints = Constraints(backend.vocab, self.dialect, limits=limits, tuning=tuning)
        self._marker_texts = {i: text for text, i in self.markers.ids.items()}
        # a batching runtime runs its requests side by side through its slots; any other, one at a time
        self.scheduler = runner_for(backend)
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        schema: Any = None,
        grammar: str | None = None,
        lexicon: Any = None,
        json: bool | str = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = "auto",
        parallel_tool_calls: bool | None = None,
        max_tokens: int | None = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        stream: bool = False,
        cancel: threading.Event | None = None,
        min_p: float = 0.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        logit_bias: Mapping[int, float] | None = None,
        logprobs: int | None = None,
        n_ctx: int | None = None,
        n: int = 1,
    ) -> ChatResult | ChatStream | list[ChatResult] | list[ChatStream]:
        """Generate a reply; ``stream=True`` returns a ``ChatStream`` of ``TextDelta``, ``ToolCall`` and ``Done``.

        At most one constraint (``schema``, ``grammar``, ``lexicon``, ``json``: ``True`` for any
        JSON value, ``"object"`` for an object); ``tools`` with ``tool_choice`` other than
        ``"none"`` is a constraint of its own, which ``schema`` or ``json`` may join: the answer is
        then calls or that document, each constrained. ``parallel_tool_calls``: None as the model's
        dialect writes calls (several, or one per turn in Llama 3's), False one call, True several
        (one and a warning where the dialect's format holds one). ``max_tokens=None`` runs until
        the context is full. Sampling: ``temperature``, ``top_p``, ``top_k``, ``min_p``, ``seed``,
        ``frequency_penalty`` and ``presence_penalty`` (over the reply), ``repeat_penalty`` over the
        last ``repeat_last_n`` tokens of prompt and reply, ``logit_bias`` ({token id: bias});
        ``llamay.backends.sampling`` gives the order. ``logprobs``: None for none, else each token's
        log probability with that many alternatives (0 to 20), on the events (``TextDelta`` and
        ``ToolCall``) and as ``ChatResult.logprobs``. ``n_ctx`` caps the context this request fills
        (prompt and reply) below the model's own (a larger one is the model's, with a warning).
        ``n`` > 1 returns a list of ``n`` choices (results, or streams), each sampled on its own (with
        ``seed`` given, choice ``i`` uses ``seed + i``) from one evaluation of the prompt where the
        backend batches. Raises ``SchemaError`` / ``GrammarError`` for a refused constraint and ``UsageError`` for
        misuse, before any token is generated.
        """
        tool_list = normalize_tools(tools)
        mode, name = tool_mode(tool_choice, tool_list)
        fields = {"schema": schema, "grammar": grammar, "lexicon": lexicon, "json": json, "tools": tool_list,
                  "mode": mode, "name": name, "parallel": parallel_tool_calls}
        constraint = self.constraints.pick(**fields)
        prompt = self.template.render_parts(messages, tool_list if mode != "none" else None)
        names = [t["function"]["name"] for t in tool_list] if tool_list and mode != "none" else None
        free_text = bool(tool_list) and schema is None and grammar is None and lexicon is None and not json
        sampling = self._sampling(temperature, top_p, top_k, seed, min_p, frequency_penalty, presence_penalty,
                                  repeat_penalty, repeat_last_n, logit_bias, logprobs)
        return self._generate(prompt, constraint, names, max_tokens, stop, sampling, stream, cancel, n_ctx, n,
                              free_text, fields)

    def complete(
        self,
        prompt: str,
        *,
        schema: Any = None,
        grammar: str | None = None,
        lexicon: Any = None,
        json: bool | str = False,
        max_tokens: int | None = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        stream: bool = False,
        cancel: threading.Event | None = None,
        min_p: float = 0.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        logit_bias: Mapping[int, float] | None = None,
        logprobs: int | None = None,
        n_ctx: int | None = None,
        n: int = 1,
    ) -> ChatResult | ChatStream | list[ChatResult] | list[ChatStream]:
        """Continue raw ``prompt`` text, without the chat template (``/v1/completions``, Ollama ``raw``).

        The prompt is the client's own text in the model's format, so control-token text in it
        (``<|im_start|>``) is read as those tokens, as llama-server reads it: a raw prompt has no
        template to guard. ``chat`` keeps messages' text that spells one as text.
        """
        fields = {"schema": schema, "grammar": grammar, "lexicon": lexicon, "json": json}
        constraint = self.constraints.pick(**fields)
        sampling = self._sampling(temperature, top_p, top_k, seed, min_p, frequency_penalty, presence_penalty,
                                  repeat_penalty, repeat_last_n, logit_bias, logprobs)
        return self._generate(prompt, constraint, None, max_tokens, stop, sampling, stream, cancel, n_ctx, n,
                              source=fields)

    # -- request preparation (everything that can fail before generation) -------------------
    def _sampling(self, temperature, top_p, top_k, seed, min_p, frequency_penalty, presence_penalty, repeat_penalty,
                  repeat_last_n, logit_bias, logprobs) -> Sampling:
        """The sampler's settings; ``UsageError`` naming a value out of range or a token id not in the vocabulary."""
        if not 0.0 <= min_p <= 1.0:
            raise UsageError(f"min_p must be between 0 and 1, got {min_p}")
        if repeat_penalty <= 0.0:
            raise UsageError(f"repeat_penalty must be above 0, got {repeat_penalty}")
        if repeat_last_n < -1:
            raise UsageError(f"repeat_last_n must be -1 (the whole context) or 0 or more, got {repeat_last_n}")
        bias = tuple((int(t), float(b)) for t, b in (logit_bias or {}).items())
        size = self.backend.vocab.size
        for token, _ in bias:
            if not 0 <= token < size:
                raise UsageError(f"logit_bias names token {token}; the vocabulary's ids run from 0 to {size - 1}")
        if logprobs is not None and not (type(logprobs) is int and 0 <= logprobs <= MAX_TOP_LOGPROBS):
            raise UsageError(f"logprobs must be None or 0 to {MAX_TOP_LOGPROBS} alternatives, got {logprobs!r}")
        return Sampling(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, min_p=min_p,
                        frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                        repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, logit_bias=bias,
                        logprobs=logprobs)

    def _generate(self, prompt, constraint, tools, max_tokens, stop, sampling, stream, cancel, n_ctx, n,
                  free_text=False, source=None):
        """Run the generation; stop strings apply to free text: all of an unconstrained output, and
        the text beside tool calls (``free_text``), never inside a call or a constrained document."""
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise UsageError(f"max_tokens must be a positive integer or None, got {max_tokens!r}")
        if n_ctx is not None and (type(n_ctx) is not int or n_ctx < 1):
            raise UsageError(f"n_ctx must be a positive integer or None, got {n_ctx!r}")
        if type(n) is not int or not 1 <= n <= MAX_CHOICES:
            raise UsageError(f"n must be 1 to {MAX_CHOICES} choices, got {n!r}")
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if any(not isinstance(s, str) or not s for s in stops):
            raise UsageError("stop must be a non-empty string or a list of them")
        notes = []
        if constraint is not None and not free_text:  # the whole output is the document: a stop would halve it
            notes += [STOP_NOT_APPLIED_WARNING] if stops else []
            stops = []
        else:
            stops += [s for s in self.template.stop if s not in stops]
        prompt_ids = self.backend.tokenize(prompt)
        context = self.backend.n_ctx
        if n_ctx is not None and context and n_ctx > context:
            notes.append(f"n_ctx {n_ctx} is more than the model's context per sequence ({context}): {context} was used")
        elif n_ctx is not None:
            context = n_ctx
        budget = max_tokens if max_tokens is not None else max(1, context - len(prompt_ids))
        if context != self.backend.n_ctx:  # the runner caps at the backend's context; a smaller one is the request's
            budget = token_budget(budget, len(prompt_ids), context)
        vocab = self.markers.vocab if tools is not None else self.backend.vocab
        source = {**source, "dialect": self.dialect.name} if constraint is not None else None
        req = _Request(prompt_ids, constraint, vocab, tools, budget, stops, notes, free_text, source)
        if n == 1:
            events = ChatStream(self, req, sampling, cancel)
            return events if stream else _collect(events)
        samplings = [dataclasses.replace(sampling, seed=None if sampling.seed is None else sampling.seed + i)
                     for i in range(n)]
        choices = _Choices(self, req, cancel) if self.scheduler is not None else None
        streams = [ChatStream(self, req, each, cancel, choices) for each in samplings]
        return streams if stream else [_collect(events) for events in streams]

@dataclass
class _Request:
    prompt_ids: list[int]
    constraint: CompiledGrammar | None
    vocab: Vocabulary  # the matcher's: with the dialect's marker tokens as edges where tools are offered
    tools: list[str] | None  # the offered tools' names, whose calls are read out of the text; None: no tools
    max_tokens: int
    stops: list[str]  # cut the text outside tool calls; empty for a constrained document
    notes: list[str]  # warnings known before generation
    free_text: bool  # prose may stand beside the calls (tools under auto or none): the budget closes calls only
    source: dict[str, Any] | None  # the constraint's fields and dialect, for a runner that compiles it elsewhere


class ChatStream:
    """The events of one generation. ``warnings`` and ``prompt_tokens`` are known before the first.

    Iterating runs the generation (in a slot of the model's scheduler, or holding the model's lock
    where its backend runs one generation at a time); ``close()`` ends it early.
    """

    def __init__(self, model: Model, req: _Request, sampling: Sampling, cancel: threading.Event | None,
                 choices: _Choices | None = None) -> None:
        self.prompt_tokens = len(req.prompt_ids)
        self.warnings = (list(req.constraint.warnings) if req.constraint is not None else []) + req.notes
        self.logprobs = sampling.logprobs is not None  # the events carry log probabilities
        self.matcher = Matcher(req.constraint, req.vocab) if req.constraint is not None else None
        self._choices = choices
        self._index = choices.add(self.matcher, sampling) if choices is not None else 0
        self._events = self._run(model, req, sampling, cancel)

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> Event:
        return next(self._events)

    def close(self) -> None:
        self._events.close()
        if self._choices is not None:  # never iterated, it may still be generating among the others
            self._choices.close(self._index)

    def _run(self, model: Model, req: _Request, sampling: Sampling, cancel: threading.Event | None) -> Iterator[Event]:
        backend = model.backend
        matcher = self.matcher
        warnings = list(self.warnings)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = _StopFilter(req.stops)
        calls = CallStream(model.dialect, req.tools) if req.tools is not None else None
        markers = model._marker_texts if calls is not None else {}
        scored = _Scored(model, markers) if sampling.logprobs is not None else None
        n_tokens, made_calls, reason, first_token_ns = 0, False, "length", 0
        with model._lock if model.scheduler is None else nullcontext():
            if self._choices is not None:
                gen = self._choices.stream(self._index)
            elif model.scheduler is not None:
                gen = model.scheduler.generate(req.prompt_ids, matcher=matcher, sampling=sampling,
                                               max_tokens=req.max_tokens, cancel=cancel, source=req.source)
            else:
                gen = model.backend.generate(req.prompt_ids, matcher=matcher, sampling=sampling,
                                             max_tokens=req.max_tokens, cancel=cancel)
            try:
                while True:
                    try:
                        token = next(gen)
                    except StopIteration:
                        reason = "length" if n_tokens >= req.max_tokens else "stop"
                        break
                    if scored is not None:
                        scored.add(gen.logprobs[n_tokens])
                    n_tokens += 1
                    first_token_ns = first_token_ns or time.monotonic_ns()
                    marker = markers.get(token)  # a marker token may have no text of its own (a control token)
                    piece = marker if marker is not None else decoder.decode(backend.vocab.token_bytes(token))
                    for event in _route(piece, calls, text, scored=scored):
                        made_calls = made_calls or isinstance(event, ToolCall)
                        yield event
                    if text.stopped:
                        reason = "stop"
                        break
            finally:
                gen.close()  # returns once the generation has let go of the matcher
        complete = matcher is None or matcher.is_accepting()
        for event in _route(decoder.decode(b"", final=True), calls, text, scored=scored):
            made_calls = made_calls or isinstance(event, ToolCall)
            yield event
        if matcher is not None and reason == "length" and not complete:
            warnings.append(TRUNCATED_WARNING)
        cut = (reason == "length" and not complete) or text.matched is not None or (
            cancel is not None and cancel.is_set())
        if calls is not None and cut and calls.holds_markup:
            # a call cut short (max_tokens, a stop string, cancellation), or what could only have become
            # one, is neither a call nor content
            calls.drain()
            warnings.append(CUT_CALL_WARNING)
        else:
            for event in _route("", calls, text, final=True, scored=scored):
                made_calls = made_calls or isinstance(event, ToolCall)
                yield event
        if held := text.flush():
            yield _scored(TextDelta(held), scored)
        # prose cut by max_tokens is plain truncation: the budget only kept it from opening a call it could not finish
        closed = matcher is not None and matcher.closed_by_budget and (made_calls or not req.free_text)
        if closed:
            warnings.append(BUDGET_CLOSED_WARNING)
            reason = "length"  # a call closed this way is complete and is a call: finish tool_calls, below
        if made_calls and (reason == "stop" or (closed and complete)):
            reason = "tool_calls"
        usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": n_tokens,
                 "cached_tokens": gen.reused, "forced_tokens": gen.forced}
        yield Done(reason, usage, warnings, text.matched, first_token_ns)


class _Choices:
    """The token streams of one request's choices on a batching runner: queued together when the first is read,
    so that a scheduler evaluates the prompt once (``Runner.generate_choices``)."""

    def __init__(self, model: Model, req: _Request, cancel: threading.Event | None) -> None:
        self.scheduler = model.scheduler
        self.req = req
        self.cancel = cancel
        self.entries: list[tuple[Matcher | None, Sampling]] = []
        self.streams: list[TokenStream] | None = None
        self.lock = threading.Lock()

    def add(self, matcher: Matcher | None, sampling: Sampling) -> int:
        self.entries.append((matcher, sampling))
        return len(self.entries) - 1

    def stream(self, index: int) -> TokenStream:
        with self.lock:
            if self.streams is None:
                self.streams = self.scheduler.generate_choices(self.req.prompt_ids, self.entries,
                                                               max_tokens=self.req.max_tokens, cancel=self.cancel,
                                                               source=self.req.source)
            return self.streams[index]

    def close(self, index: int) -> None:
        with self.lock:
            if self.streams is not None:
                self.streams[index].close()


class _Scored:
    """Log probabilities of the tokens generated since the last event, as ``Logprob`` values, to attach to the next.

    What no event follows (the tokens of a stop string, of a call cut short and dropped) is not
    reported: the text it stands for is not in the reply either.
    """

    def __init__(self, model: Model, markers: Mapping[int, str]) -> None:
        self.vocab = model.backend.vocab
        self.markers = markers
        self.pending: list[Logprob] = []

    def add(self, scored: TokenLogprob) -> None:
        top = tuple(self._logprob(token, logprob) for token, logprob in scored.top)
        self.pending.append(dataclasses.replace(self._logprob(scored.token, scored.logprob), top=top))

    def take(self) -> tuple[Logprob, ...]:
        out, self.pending = tuple(self.pending), []
        return out

    def _logprob(self, token: int, logprob: float) -> Logprob:
        raw = self.vocab.token_bytes(token)
        name = self.markers.get(token) or (None if raw else self.vocab.special_texts.get(token, ""))
        if name is not None:  # a control token has no bytes of its own: its name stands for it
            return Logprob(name, name.encode(), logprob)
        return Logprob(raw.decode("utf-8", "replace"), raw, logprob)


def _scored(event: Event, scored: _Scored | None) -> Event:
    """``event`` carrying the log probabilities pending, where they are asked for."""
    if scored is None or not scored.pending:
        return event
    return dataclasses.replace(event, logprobs=scored.take())


class _StopFilter:
    """Cuts the text at the first stop string, holding back what could still become one."""

    def __init__(self, stops: list[str]) -> None:
        self.stops = stops
        self.held = ""
        self.stopped = False
        self.matched: str | None = None

    def feed(self, piece: str) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        buf = self.held + piece
        found = [(i, s) for s in self.stops for i in [buf.find(s)] if i >= 0]
        if found:
            cut, self.matched = min(found)
            self.held, self.stopped = "", True
            return buf[:cut], True
        keep = max((k for s in self.stops for k in range(min(len(s) - 1, len(buf)), 0, -1)
                    if buf.endswith(s[:k])), default=0)
        self.held = buf[len(buf) - keep:] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out


def _route(piece: str, calls: CallStream | None, text: _StopFilter, final: bool = False,
           scored: _Scored | None = None) -> Iterator[Event]:
    """``piece`` as events: tool calls read out of it, and the text beside them through the stop filter;
    the first event carries the log probabilities pending (``scored``)."""
    items: list = [piece] if calls is None else calls.feed(piece) + (calls.finish() if final else [])
    for item in items:
        if isinstance(item, str):
            out, stopped = text.feed(item)
            if out:
                yield _scored(TextDelta(out), scored)
            if stopped:
                return
        else:
            if held := text.flush():  # text held back for a stop string that did not come: it precedes the call
                yield _scored(TextDelta(held), scored)
            yield _scored(item, scored)


def _collect(events: ChatStream) -> ChatResult:
    parts: list[str] = []
    calls: list[dict[str, Any]] = []
    logprobs: list[Logprob] | None = [] if events.logprobs else None
    for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, ToolCall):
            calls.append({"id": event.id, "name": event.name, "arguments": event.arguments})
        else:
            return ChatResult("".join(parts), calls, event.finish_reason, event.usage, event.warnings, logprobs)
        if logprobs is not None:
            logprobs += event.logprobs
    raise AssertionError("the event stream ended without Done")
