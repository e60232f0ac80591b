"""OpenAI's Chat Completions and Completions APIs: request bodies to engine arguments, events to responses.

Shapes follow the official ``openai`` SDK's types (``ChatCompletion``,
``ChatCompletionChunk``, ``Completion``, ``CompletionUsage``). A stream is a role chunk
(carrying ``llamay_warnings``), content and ``tool_calls`` delta chunks, a finish chunk,
a usage chunk when ``stream_options.include_usage`` asks, then ``data: [DONE]``.
"""

from __future__ import annotations

from typing import Any

from ..engine import MAX_CHOICES, MAX_TOP_LOGPROBS, Done, Logprob, ToolCall
from .errors import ApiError, bad_field, unsupported
from .fields import DEFAULT_MAX_TOKENS, Body, Constraints, Frame, GenerateRequest, tool_arguments_json
from .render import Choice, Renderer, Timing

#: OpenAI's documented defaults, so a request that leaves them out samples as it would there.
DEFAULT_TEMPERATURE = 1.0

#: Fields accepted with no effect: bookkeeping, caching and routing hints.
_IGNORED = ("metadata", "user", "store", "service_tier", "prompt_cache_key", "prompt_cache_retention",
            "prompt_cache_options", "safety_identifier", "prediction")


def chat_request(body: Body) -> GenerateRequest:
    """``POST /v1/chat/completions`` body as engine arguments; 400 ``ApiError`` naming the field at fault."""
    model = body.get("model", str, "")
    messages = body.get("messages", list, required=True)
    warnings: list[str] = []
    _warn_unsupported(body, warnings)
    for key in ("functions", "function_call"):
        if body.get(key, (list, str, dict)):
            raise unsupported(key, "the legacy functions API (use tools and tool_choice)")
    for key in ("audio", "web_search_options"):
        if body.get(key, dict) is not None:
            raise unsupported(key, "audio output" if key == "audio" else "web search")
    if "audio" in (body.get("modalities", list) or []):
        raise unsupported("modalities", "audio output")
    constraints = Constraints()
    _response_format(body, constraints, warnings)
    constraints.read_llamay_fields(body)
    legacy_max = body.positive_int("max_tokens")
    max_tokens = body.positive_int("max_completion_tokens") or legacy_max
    chat: dict[str, Any] = {
        "messages": messages,
        **constraints.kwargs,
        **_sampling(body),
        "logprobs": _chat_logprobs(body),
        "n": _choices(body),
        "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        "stop": body.stop("stop"),
    }
    tools = body.get("tools", list)
    if tools:
        chat["tools"] = tools
        chat["tool_choice"] = body.get("tool_choice", (str, dict), "auto")
        chat["parallel_tool_calls"] = body.get("parallel_tool_calls", bool)  # absent: as the model's dialect allows
    else:
        body.ignore("tool_choice", "parallel_tool_calls")
    stream = body.get("stream", bool, False)
    options = {"include_usage": _include_usage(body, stream)}
    body.ignore(*_IGNORED)
    return GenerateRequest(model, stream, chat, warnings + body.unknown_warnings(), constraints.field, options)


def completion_request(body: Body) -> GenerateRequest:
    """``POST /v1/completions``: one prompt, continued as raw text (no chat template)."""
    model = body.get("model", str, "")
    prompt = body.get("prompt", (str, list), required=True)
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            raise unsupported("prompt", "an array of prompts or token ids (send one string)")
        prompt = prompt[0]
    warnings: list[str] = []
    _warn_unsupported(body, warnings)
    if body.get("suffix", str):
        raise unsupported("suffix", "fill-in-the-middle")
    best_of = body.get("best_of", int)
    if best_of is not None and best_of > 1:
        raise unsupported("best_of", "best_of above 1")
    constraints = Constraints()
    constraints.read_llamay_fields(body)
    logprobs = body.get("logprobs", int)
    if logprobs is not None and not 0 <= logprobs <= MAX_TOP_LOGPROBS:
        raise bad_field("logprobs", f"must be 0 to {MAX_TOP_LOGPROBS} (alternatives per token), got {logprobs}")
    chat: dict[str, Any] = {
        "prompt": prompt,
        **constraints.kwargs,
        **_sampling(body),
        "logprobs": logprobs,
        "n": _choices(body),
        "max_tokens": body.positive_int("max_tokens") or 16,  # the Completions API's documented default
        "stop": body.stop("stop"),
    }
    stream = body.get("stream", bool, False)
    options = {"include_usage": _include_usage(body, stream), "echo": prompt if body.get("echo", bool) else ""}
    body.ignore(*_IGNORED)
    return GenerateRequest(model, stream, chat, warnings + body.unknown_warnings(), constraints.field, options)


def _chat_logprobs(body: Body) -> int | None:
    """``logprobs`` (true: each token's) and ``top_logprobs`` (alternatives per token, which needs ``logprobs``)."""
    wanted = body.get("logprobs", bool, False)
    top = body.get("top_logprobs", int)
    if top is not None and not 0 <= top <= MAX_TOP_LOGPROBS:
        raise bad_field("top_logprobs", f"must be 0 to {MAX_TOP_LOGPROBS}, got {top}")
    if top and not wanted:
        raise bad_field("top_logprobs", "needs logprobs set to true")
    return (top or 0) if wanted else None


def _choices(body: Body) -> int:
    """``n``: how many choices, each a slot's generation from one evaluation of the prompt."""
    n = body.positive_int("n", 1)
    if n > MAX_CHOICES:
        raise bad_field("n", f"must be 1 to {MAX_CHOICES}, got {n}")
    return n


def _warn_unsupported(body: Body, warnings: list[str]) -> None:
    """Fields that ask for what llamay does not do and would change little: ignored with a warning."""
    for key in ("reasoning_effort", "verbosity"):
        if body.get(key, str) is not None:
            warnings.append(f"{key} is not supported and was ignored")


def _sampling(body: Body) -> dict[str, Any]:
    temperature = body.number("temperature", DEFAULT_TEMPERATURE, low=0.0, high=2.0)
    top_p = body.number("top_p", 1.0, low=0.0, high=1.0)
    top_k = body.get("top_k", int, 0)  # llama.cpp's extension
    if top_k < 0:
        raise bad_field("top_k", f"must be 0 or more, got {top_k}")
    return {"temperature": temperature, "top_p": top_p, "top_k": top_k, "seed": body.seed(),
            "frequency_penalty": body.number("frequency_penalty", 0.0, low=-2.0, high=2.0),
            "presence_penalty": body.number("presence_penalty", 0.0, low=-2.0, high=2.0),
            "min_p": body.number("min_p", 0.0, low=0.0, high=1.0),  # llama.cpp's extension
            "logit_bias": _logit_bias(body)}


def _logit_bias(body: Body) -> dict[int, float]:
    """``logit_bias``: token ids (as JSON keys, so strings) to a bias from -100 to 100, added to the logits."""
    bias = body.get("logit_bias", dict) or {}
    out: dict[int, float] = {}
    for key, value in bias.items():
        if not (isinstance(key, str) and key.lstrip("-").isdigit()):
            raise bad_field(f"logit_bias.{key}", "keys are token ids")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -100 <= value <= 100:
            raise bad_field(f"logit_bias.{key}", f"must be a number between -100 and 100, got {value!r}")
        out[int(key)] = float(value)
    return out


def _response_format(body: Body, constraints: Constraints, warnings: list[str]) -> None:
    fmt = body.child("response_format")
    if fmt is None:
        return
    kind = fmt.get("type", str, required=True)
    if kind == "json_object":
        constraints.set("response_format", "json", "object")
    elif kind == "json_schema":
        spec = fmt.child("json_schema")
        if spec is None:
            raise bad_field("response_format.json_schema", "this field is required")
        spec.get("name", str)
        spec.ignore("description", "strict")
        schema = spec.get("schema", (dict, bool))
        if schema is None:
            constraints.set("response_format", "json", True)
        else:
            constraints.set("response_format.json_schema.schema", "schema", schema)
        warnings += spec.unknown_warnings()
    elif kind != "text":
        raise bad_field("response_format.type", f'must be "text", "json_object" or "json_schema", got {kind!r}')
    warnings += fmt.unknown_warnings()


def _include_usage(body: Body, stream: bool) -> bool:
    options = body.child("stream_options")
    if options is None:
        return False
    options.ignore("include_obfuscation")
    return bool(options.get("include_usage", bool, False)) and stream


def _usage(choices: list[Choice]) -> dict[str, int]:
    """The prompt once (its choices share its evaluation), the completions of every choice."""
    first = choices[0].done.usage
    prompt = first["prompt_tokens"]
    completion = sum(c.done.usage["completion_tokens"] for c in choices)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": first.get("cached_tokens", 0)}}


class ChatRenderer(Renderer):
    """``chat.completion`` and ``chat.completion.chunk`` objects."""

    id_prefix = "chatcmpl-"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opened: set[int] = set()  # choices whose role has been sent

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None,
               logprobs: tuple[Logprob, ...] = ()) -> dict[str, Any]:
        if self.at not in self.opened:  # a choice's first delta names the role, as the first chunk does choice 0's
            self.opened.add(self.at)
            delta = {"role": "assistant", **delta}
        scored = _chat_logprobs_object(logprobs) if logprobs else None
        chunk = {
            "id": self.id, "object": "chat.completion.chunk", "created": int(self.created), "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": self.at, "delta": delta, "logprobs": scored, "finish_reason": finish_reason}],
        }
        if self.request.options.get("include_usage"):
            chunk["usage"] = None
        return chunk

    def start(self, warnings: list[str]) -> list[Frame]:
        super().start(warnings)
        chunk = self._chunk({"role": "assistant", "content": ""})
        chunk["llamay_warnings"] = list(warnings)
        return [Frame(chunk)]

    def on_text(self, text: str) -> list[Frame]:
        return [Frame(self._chunk({"content": text}, logprobs=self.fresh_logprobs))]

    def on_call(self, call: ToolCall, index: int) -> list[Frame]:
        return [Frame(self._chunk({"tool_calls": [{"index": index, **_tool_call(call)}]}, logprobs=call.logprobs))]

    def on_choice_end(self, done: Done) -> list[Frame]:
        chunk = self._chunk({}, done.finish_reason)
        if late := self.late_warnings(done):
            chunk["llamay_warnings"] = late
        return [Frame(chunk)]

    def finish(self, done: Done, timing: Timing) -> list[Frame]:
        choices = self.ended(done)
        frames = self.on_choice_end(done)
        if self.request.options.get("include_usage"):
            frames.append(Frame({**self._chunk({}), "choices": [], "usage": _usage(choices)}))
        return [*frames, Frame("[DONE]")]

    def error(self, error: ApiError) -> list[Frame]:
        return [Frame(error_body(error))]

    def response(self, done: Done, timing: Timing, warnings: list[str]) -> dict[str, Any]:
        choices = self.ended(done)
        return {
            "id": self.id, "object": "chat.completion", "created": int(self.created), "model": self.model,
            "system_fingerprint": None,
            "choices": [self._choice(i, c) for i, c in enumerate(choices)],
            "usage": _usage(choices),
            "llamay_warnings": warnings,
        }

    def _choice(self, index: int, choice: Choice) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": choice.text or (None if choice.calls else ""),
                                   "refusal": None}
        if choice.calls:
            message["tool_calls"] = [_tool_call(call) for call in choice.calls]
        return {"index": index, "message": message, "finish_reason": choice.done.finish_reason,
                "logprobs": _chat_logprobs_object(choice.logprobs) if self.asked_logprobs else None}


class CompletionRenderer(Renderer):
    """``text_completion`` objects, streamed or whole; ``echo`` puts the prompt first."""

    id_prefix = "cmpl-"

    def _chunk(self, text: str, finish_reason: str | None = None, logprobs: tuple[Logprob, ...] | None = None,
               offset: int = 0) -> dict[str, Any]:
        scored = _completion_logprobs_object(logprobs, offset) if logprobs is not None else None
        chunk = {
            "id": self.id, "object": "text_completion", "created": int(self.created), "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": self.at, "text": text, "logprobs": scored, "finish_reason": finish_reason}],
        }
        if self.request.options.get("include_usage"):
            chunk["usage"] = None
        return chunk

    def start(self, warnings: list[str]) -> list[Frame]:
        super().start(warnings)
        chunk = self._chunk(self.request.options.get("echo", ""))
        chunk["llamay_warnings"] = list(warnings)
        return [Frame(chunk)]

    def on_text(self, text: str) -> list[Frame]:
        offset = len(self.request.options.get("echo", "")) + len(self.text) - len(text)
        return [Frame(self._chunk(text, logprobs=self.fresh_logprobs if self.asked_logprobs else None,
                                  offset=offset))]

    def on_call(self, call: ToolCall, index: int) -> list[Frame]:
        return []  # no tools are offered on this route

    def on_choice_end(self, done: Done) -> list[Frame]:
        chunk = self._chunk("", _completion_reason(done))
        if late := self.late_warnings(done):
            chunk["llamay_warnings"] = late
        return [Frame(chunk)]

    def finish(self, done: Done, timing: Timing) -> list[Frame]:
        choices = self.ended(done)
        frames = self.on_choice_end(done)
        if self.request.options.get("include_usage"):
            frames.append(Frame({**self._chunk(""), "choices": [], "usage": _usage(choices)}))
        return [*frames, Frame("[DONE]")]

    def error(self, error: ApiError) -> list[Frame]:
        return [Frame(error_body(error))]

    def response(self, done: Done, timing: Timing, warnings: list[str]) -> dict[str, Any]:
        echo = self.request.options.get("echo", "")
        choices = self.ended(done)
        body: dict[str, Any] = {**self._chunk(""), "choices": []}
        for index, choice in enumerate(choices):
            self.at = index
            logprobs = tuple(choice.logprobs) if self.asked_logprobs else None
            body["choices"] += self._chunk(echo + choice.text, _completion_reason(choice.done), logprobs,
                                           len(echo))["choices"]
        return {**body, "usage": _usage(choices), "llamay_warnings": warnings}


def _chat_logprobs_object(logprobs) -> dict[str, Any]:
    """Chat Completions' ``logprobs``: ``content``, a ``ChatCompletionTokenLogprob`` per token."""
    return {"content": [{**_token(lp), "top_logprobs": [_token(alt) for alt in lp.top]} for lp in logprobs],
            "refusal": None}


def _token(lp: Logprob) -> dict[str, Any]:
    return {"token": lp.token, "logprob": lp.logprob, "bytes": list(lp.raw)}


def _completion_logprobs_object(logprobs, offset: int) -> dict[str, Any]:
    """The Completions API's ``logprobs``: parallel lists, and each token's offset into the choice's text."""
    offsets = []
    for lp in logprobs:
        offsets.append(offset)
        offset += len(lp.token)
    return {"tokens": [lp.token for lp in logprobs], "token_logprobs": [lp.logprob for lp in logprobs],
            "top_logprobs": [{alt.token: alt.logprob for alt in lp.top} for lp in logprobs], "text_offset": offsets}


def _completion_reason(done: Done) -> str:
    return "length" if done.finish_reason == "length" else "stop"


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": tool_arguments_json(call.arguments)}}


def model_object(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "llamay"}


def model_list(names: list[str], created: int) -> dict[str, Any]:
    return {"object": "list", "data": [model_object(name, created) for name in names]}


_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error",
                429: "rate_limit_error"}
_ERROR_CODES = {401: "invalid_api_key", 404: "not_found", 413: "request_too_large"}


def error_body(error: ApiError) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}``."""
    kind = _ERROR_TYPES.get(error.status, "server_error" if error.status >= 500 else "invalid_request_error")
    return {"error": {"message": error.message, "type": kind, "param": error.param,
                      "code": error.code or _ERROR_CODES.get(error.status)}}
