"""Ollama's chat and generate APIs and its model routes: request bodies to engine arguments, events to NDJSON.

Shapes follow the official ``ollama`` SDK's types (``ChatResponse``, ``GenerateResponse``,
``ListResponse``, ``ShowResponse``). Ollama messages carry tool-call arguments as objects
and tool results as ``role: tool`` with ``tool_name``; both become OpenAI-style messages.
A stream is one JSON object a line; the first carries ``llamay_warnings``, the last has
``done: true``, ``done_reason`` and the timing fields (nanoseconds).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..engine import MAX_TOP_LOGPROBS, Done, Logprob, ToolCall
from .errors import ApiError, bad_field, unsupported
from .fields import DEFAULT_MAX_TOKENS, NDJSON, Body, Constraints, Frame, GenerateRequest
from .render import Renderer, Timing

#: Ollama's documented sampling defaults.
DEFAULT_OPTIONS = {"temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.0, "repeat_penalty": 1.1,
                   "repeat_last_n": 64, "presence_penalty": 0.0, "frequency_penalty": 0.0}

#: ``options`` that llamay honours.
_OPTIONS = ("temperature", "top_p", "top_k", "seed", "num_predict", "stop", "min_p", "repeat_penalty",
            "repeat_last_n", "presence_penalty", "frequency_penalty", "num_ctx")

#: Load-time options: the server fixed them when it started (``llamay serve`` flags). A request's
#: are accepted, since clients send them, and ignored with a warning that says so.
_SERVER_OPTIONS = ("numa", "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "logits_all", "vocab_only",
                   "use_mmap", "use_mlock", "embedding_only", "num_thread", "num_keep")

#: Samplers llamay does not have, each with the value that turns it off: any other value asks for
#: sampling that llamay cannot do, and is refused (400). Mirostat's tau and eta do nothing while it is off.
_OFF = {"mirostat": (0, "Mirostat sampling"), "typical_p": (1.0, "locally typical sampling"),
        "tfs_z": (1.0, "tail-free sampling")}
_MIROSTAT_ONLY = ("mirostat_tau", "mirostat_eta")

_IGNORED = ("keep_alive",)


def chat_request(body: Body) -> GenerateRequest:
    """``POST /api/chat`` body as engine arguments; 400 ``ApiError`` naming the field at fault."""
    model = body.get("model", str, "")
    messages = [_message(m, f"messages[{i}]") for i, m in enumerate(body.get("messages", list, []))]
    chat, warnings, field = _common(body)
    chat["messages"] = messages
    tools = body.get("tools", list)
    if tools:
        chat["tools"] = tools
    return GenerateRequest(model, body.get("stream", bool, True), chat, warnings + body.unknown_warnings(), field)


def generate_request(body: Body) -> GenerateRequest:
    """``POST /api/generate``: ``system`` and ``prompt`` as a chat turn, or ``raw`` text continued as it is."""
    model = body.get("model", str, "")
    prompt = body.get("prompt", str, "")
    system = body.get("system", str)
    if body.get("suffix", str):
        raise unsupported("suffix", "fill-in-the-middle")
    if body.get("images", list):
        raise unsupported("images", "image input")
    chat, warnings, field = _common(body)
    raw = bool(body.get("raw", bool))
    if body.get("template", str):
        warnings.append("template was ignored: the model's own chat template was used")
    if body.get("context", list):
        warnings.append("context was ignored: llamay keeps no conversation state")
    if raw:
        chat.pop("tools", None)
        chat["prompt"] = prompt
    else:
        chat["messages"] = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}]
    stream = body.get("stream", bool, True)
    return GenerateRequest(model, stream, chat, warnings + body.unknown_warnings(), field, {"generate": True})


def _common(body: Body) -> tuple[dict[str, Any], list[str], str | None]:
    """``format``, ``options`` and the refusals shared by chat and generate."""
    think = body.get("think", (bool, str))
    if think not in (None, False):
        raise unsupported("think", "thinking")
    for key in ("width", "height", "steps"):
        if body.get(key, int) is not None:
            raise unsupported(key, "image generation")
    constraints = Constraints()
    fmt = body.get("format", (str, dict))
    if isinstance(fmt, dict):
        constraints.set("format", "schema", fmt)
    elif fmt == "json":
        constraints.set("format", "json", True)
    elif fmt:
        raise bad_field("format", f'must be "json" or a JSON schema, got {fmt!r}')
    constraints.read_llamay_fields(body)
    chat, warnings = _options(body.child("options"))
    chat["logprobs"] = _logprobs(body)
    body.ignore(*_IGNORED)
    return {**constraints.kwargs, **chat}, warnings, constraints.field


def _logprobs(body: Body) -> int | None:
    """``logprobs`` (each token's) and ``top_logprobs`` (alternatives per token, 0 to 20, which needs ``logprobs``)."""
    wanted = body.get("logprobs", bool, False)
    top = body.get("top_logprobs", int)
    if top is not None and not 0 <= top <= MAX_TOP_LOGPROBS:
        raise bad_field("top_logprobs", f"must be 0 to {MAX_TOP_LOGPROBS}, got {top}")
    if top and not wanted:
        raise bad_field("top_logprobs", "needs logprobs set to true")
    return (top or 0) if wanted else None


def _options(options: Body | None) -> tuple[dict[str, Any], list[str]]:
    if options is None:
        return {**DEFAULT_OPTIONS, "max_tokens": DEFAULT_MAX_TOKENS, "seed": None, "stop": None}, []
    temperature = options.number("temperature", DEFAULT_OPTIONS["temperature"], low=0.0, high=2.0)
    top_p = options.number("top_p", DEFAULT_OPTIONS["top_p"], low=0.0, high=1.0)
    top_k = options.get("top_k", int, DEFAULT_OPTIONS["top_k"])
    num_predict = options.get("num_predict", int)
    repeat_last_n = options.get("repeat_last_n", int, DEFAULT_OPTIONS["repeat_last_n"])
    if repeat_last_n < -1:
        raise bad_field(options.path("repeat_last_n"), f"must be -1 (all) or 0 or more, got {repeat_last_n}")
    chat = {"temperature": temperature, "top_p": top_p, "top_k": max(0, top_k), "seed": options.seed(),
            "max_tokens": num_predict if num_predict is not None and num_predict > 0 else DEFAULT_MAX_TOKENS,
            "stop": options.stop("stop"),
            "min_p": options.number("min_p", DEFAULT_OPTIONS["min_p"], low=0.0, high=1.0),
            "repeat_penalty": options.number("repeat_penalty", DEFAULT_OPTIONS["repeat_penalty"], low=0.01, high=10.0),
            "repeat_last_n": repeat_last_n,
            "presence_penalty": options.number("presence_penalty", 0.0, low=-2.0, high=2.0),
            "frequency_penalty": options.number("frequency_penalty", 0.0, low=-2.0, high=2.0),
            "n_ctx": options.positive_int("num_ctx")}
    for key, (off, sampler) in _OFF.items():
        value = options.get(key, (int, float))
        if value is not None and value != off:
            raise unsupported(options.path(key), f"{sampler} ({key} {value!r}; {off!r} turns it off)")
    warnings = [f"options.{k} is set when the server starts (llamay serve's flags); the request's was ignored"
                for k in _SERVER_OPTIONS if options.data.get(k) is not None]
    options.ignore(*_SERVER_OPTIONS, *_MIROSTAT_ONLY)
    return chat, warnings + [f"options.{k} is not supported and was ignored"
                             for k in options.data if k not in options.seen]


def _message(message: Any, where: str) -> dict[str, Any]:
    """An Ollama message as an OpenAI one: call arguments stay objects, ``tool_name`` becomes ``name``."""
    if not isinstance(message, dict):
        raise bad_field(where, "must be an object")
    if message.get("images"):
        raise unsupported(f"{where}.images", "image input")
    out: dict[str, Any] = {"role": message.get("role"), "content": message.get("content") or ""}
    if message.get("role") == "tool":
        if message.get("tool_name"):
            out["name"] = message["tool_name"]
        if message.get("tool_call_id"):
            out["tool_call_id"] = message["tool_call_id"]
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise bad_field(f"{where}.tool_calls", "must be an array")
        out["tool_calls"] = [_call(call, f"{where}.tool_calls[{k}]") for k, call in enumerate(calls)]
    return out


def _call(call: Any, where: str) -> dict[str, Any]:
    """An Ollama call as OpenAI's; one without an id (the SDK sends none) gets one from the chat layer,
    in the shape the model's dialect writes."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise bad_field(f"{where}.function", "must be an object")
    return {"id": str(call.get("id") or ""), "type": "function",
            "function": {"name": function.get("name"), "arguments": function.get("arguments") or {}}}


def _created_at(created: float) -> str:
    return datetime.fromtimestamp(created, timezone.utc).isoformat().replace("+00:00", "Z")


class OllamaRenderer(Renderer):
    """NDJSON lines for ``/api/chat`` (``message``) and ``/api/generate`` (``response``)."""

    media_type = NDJSON

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.generate = bool(self.request.options.get("generate"))
        self.pending: list[str] | None = None  # warnings for the first line, until it is sent

    def _line(self, text: str, calls: list[ToolCall] | None = None, done: bool = False) -> dict[str, Any]:
        line: dict[str, Any] = {"model": self.model, "created_at": _created_at(self.created)}
        if self.generate:
            line["response"] = text
        else:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = [_tool_call(c, self.calls.index(c)) for c in calls]
            line["message"] = message
        line["done"] = done
        if self.asked_logprobs and not done:
            line["logprobs"] = [_logprob(lp) for lp in self.fresh_logprobs]
        if self.pending is not None:
            line["llamay_warnings"], self.pending = self.pending, None
        return line

    def start(self, warnings: list[str]) -> list[Frame]:
        super().start(warnings)
        self.pending = list(warnings)
        return []

    def on_text(self, text: str) -> list[Frame]:
        return [Frame(self._line(text))]

    def on_call(self, call: ToolCall, index: int) -> list[Frame]:
        return [Frame(self._line("", [call]))]

    def _final(self, done: Done, timing: Timing) -> dict[str, Any]:
        return {"done_reason": "length" if done.finish_reason == "length" else "stop",
                "total_duration": timing.total_ns, "load_duration": 0,
                "prompt_eval_count": done.usage["prompt_tokens"], "prompt_eval_duration": timing.prompt_ns,
                "eval_count": done.usage["completion_tokens"], "eval_duration": timing.eval_ns}

    def finish(self, done: Done, timing: Timing) -> list[Frame]:
        late = self.late_warnings(done)
        line = {**self._line("", done=True), **self._final(done, timing)}
        if late:
            line["llamay_warnings"] = [*line.get("llamay_warnings", []), *late]
        return [Frame(line)]

    def error(self, error: ApiError) -> list[Frame]:
        return [Frame(error_body(error))]

    def response(self, done: Done, timing: Timing, warnings: list[str]) -> dict[str, Any]:
        self.pending = None
        line = {**self._line(self.text, self.calls, done=True), **self._final(done, timing)}
        if self.asked_logprobs:
            line["logprobs"] = [_logprob(lp) for lp in self.logprobs]
        line["llamay_warnings"] = warnings
        return line


def _logprob(lp: Logprob) -> dict[str, Any]:
    """Ollama's ``Logprob``: the token, its log probability and bytes, and the alternatives'."""
    return {"token": lp.token, "logprob": lp.logprob, "bytes": list(lp.raw),
            "top_logprobs": [{"token": alt.token, "logprob": alt.logprob, "bytes": list(alt.raw)} for alt in lp.top]}


def _tool_call(call: ToolCall, index: int) -> dict[str, Any]:
    return {"id": call.id, "function": {"index": index, "name": call.name, "arguments": call.arguments}}


def _details(info: dict[str, Any]) -> dict[str, Any]:
    return {"parent_model": "", "format": info.get("format", ""), "family": info.get("family", ""),
            "families": [info["family"]] if info.get("family") else None,
            "parameter_size": info.get("parameter_size", ""), "quantization_level": info.get("quantization", "")}


def tags(names: list[str], info: dict[str, Any]) -> dict[str, Any]:
    """``GET /api/tags``: every name the served model answers to."""
    modified = _created_at(info.get("modified", 0.0))
    return {"models": [{"name": name, "model": name, "modified_at": modified, "size": info.get("size", 0),
                        "digest": info.get("digest", ""), "details": _details(info)} for name in names]}


def show(info: dict[str, Any]) -> dict[str, Any]:
    """``POST /api/show``."""
    return {"modelfile": "", "parameters": "", "template": info.get("template") or "", "license": "",
            "details": _details(info), "model_info": info.get("model_info", {}),
            "capabilities": ["completion", "tools"], "modified_at": _created_at(info.get("modified", 0.0))}


def show_request(body: Body) -> str:
    """The model ``/api/show`` asks about; "" (none named) means the served model."""
    name = body.get("model", str) or body.get("name", str) or ""
    body.ignore("verbose")
    return name


def error_body(error: ApiError) -> dict[str, Any]:
    """``{"error": "..."}``."""
    return {"error": error.message}
