"""Anthropic's Messages API: request bodies to engine arguments, events to messages and stream events.

Shapes follow the official ``anthropic`` SDK's types (``Message``, ``Usage``, the
``Raw*Event`` stream types). Content blocks become OpenAI-style messages for the engine:
``tool_use`` blocks are assistant ``tool_calls``, ``tool_result`` blocks are ``role:
tool`` messages. A stream is ``message_start`` (its message carries ``llamay_warnings``),
indexed ``content_block_start`` / ``content_block_delta`` / ``content_block_stop``,
``message_delta`` with the stop reason and usage, and ``message_stop``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..engine import Done, ToolCall
from .errors import ApiError, bad_field, unsupported
from .fields import Body, Constraints, Frame, GenerateRequest, tool_arguments_json
from .render import Renderer, Timing

DEFAULT_TEMPERATURE = 1.0

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}

_IGNORED = ("metadata", "service_tier", "cache_control", "inference_geo", "speed", "diagnostics", "container",
            "user_profile_id", "workspace_id")


def messages_request(body: Body) -> GenerateRequest:
    """``POST /v1/messages`` body as engine arguments; 400 ``ApiError`` naming the field at fault."""
    model = body.get("model", str, "")
    max_tokens = body.positive_int("max_tokens", required=True)
    messages = _messages(body.get("system", (str, list)), body.get("messages", list, required=True))
    thinking = body.child("thinking")
    if thinking is not None and thinking.get("type", str) not in (None, "disabled"):
        raise unsupported("thinking", "extended thinking")
    if body.get("mcp_servers", list):
        raise unsupported("mcp_servers", "MCP servers")
    constraints = Constraints()
    warnings: list[str] = []
    output = body.child("output_config")
    if output is not None:
        output.ignore("effort")
        fmt = output.child("format")
        if fmt is not None:
            kind = fmt.get("type", str, required=True)
            if kind != "json_schema":
                raise bad_field("output_config.format.type", f'must be "json_schema", got {kind!r}')
            constraints.set("output_config.format.schema", "schema", fmt.get("schema", (dict, bool), required=True))
            warnings += fmt.unknown_warnings()
        warnings += output.unknown_warnings()
    constraints.read_llamay_fields(body)
    chat: dict[str, Any] = {
        "messages": messages,
        **constraints.kwargs,
        "temperature": body.number("temperature", DEFAULT_TEMPERATURE, low=0.0, high=1.0),
        "top_p": body.number("top_p", 1.0, low=0.0, high=1.0),
        "top_k": _top_k(body),
        "seed": body.seed(),  # not Anthropic's; for reproducible tests
        "max_tokens": max_tokens,
        "stop": body.stop("stop_sequences"),
    }
    chat.update(_tools(body.get("tools", list), body.child("tool_choice")))
    body.ignore(*_IGNORED)
    stream = body.get("stream", bool, False)
    return GenerateRequest(model, stream, chat, warnings + body.unknown_warnings(), constraints.field)


def _top_k(body: Body) -> int:
    top_k = body.get("top_k", int, 0)
    if top_k < 0:
        raise bad_field("top_k", f"must be 0 or more, got {top_k}")
    return top_k


def _messages(system: Any, messages: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system if isinstance(system, str) else _texts(system, "system")})
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_field(where, "must be an object")
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            raise bad_field(f"{where}.role", f'must be "user" or "assistant", got {role!r}')
        if isinstance(content, str):
            out.append({"role": role, "content": content})
        elif isinstance(content, list):
            out += _blocks(role, content, f"{where}.content")
        else:
            raise bad_field(f"{where}.content", "must be a string or an array of content blocks")
    return out


def _blocks(role: str, blocks: list[Any], where: str) -> list[dict[str, Any]]:
    """One Anthropic message's blocks as OpenAI messages: tool results first, then the turn itself."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        here = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and role == "assistant":
            if not isinstance(block.get("name"), str) or not isinstance(block.get("input", {}), dict):
                raise bad_field(here, "a tool_use block needs a string name and an object input")
            calls.append({"id": call_id(str(block.get("id", f"toolu_{j}"))), "type": "function",
                          "function": {"name": block["name"], "arguments": block.get("input", {})}})
        elif kind == "tool_result" and role == "user":
            text = _result_text(block.get("content"), f"{here}.content")
            results.append({"role": "tool", "tool_call_id": call_id(str(block.get("tool_use_id", ""))),
                            "content": f"Error: {text}" if block.get("is_error") else text})
        elif kind in ("thinking", "redacted_thinking") and role == "assistant":
            continue
        elif kind in ("text", "tool_use", "tool_result"):
            raise bad_field(here, f"a malformed {kind} block, or one a {role} message cannot carry")
        else:
            raise unsupported(f"{here}.type", f"{kind!r} content blocks")
    out = list(results)
    if role == "assistant":
        message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    elif texts or not results:
        out.append({"role": "user", "content": "\n".join(texts)})
    return out


def _texts(blocks: list[Any], where: str) -> str:
    parts = []
    for j, block in enumerate(blocks):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise unsupported(f"{where}[{j}]", "content other than text blocks")
        parts.append(block["text"])
    return "\n".join(parts)


def _result_text(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return _texts(content, where)
    raise bad_field(where, "must be a string or an array of text blocks")


def _tools(tools: list[Any] | None, choice: Body | None) -> dict[str, Any]:
    """Anthropic ``tools`` / ``tool_choice`` as the OpenAI shapes the engine takes."""
    kind = choice.get("type", str, required=True) if choice is not None else "auto"
    # Anthropic can only disable parallel calls: otherwise they are as the model's dialect allows (None)
    disabled = choice.get("disable_parallel_tool_use", bool, False) if choice is not None else False
    parallel = False if disabled else None
    if not tools:
        if kind in ("any", "tool"):
            raise bad_field("tool_choice", f'"{kind}" needs tools')
        return {}
    converted = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise bad_field(f"tools[{i}]", "must be an object")
        if tool.get("type") not in (None, "custom"):
            raise unsupported(f"tools[{i}].type", f"the server tool {tool.get('type')!r}")
        name, schema = tool.get("name"), tool.get("input_schema")
        if not isinstance(name, str) or not name:
            raise bad_field(f"tools[{i}].name", "this field is required")
        if not isinstance(schema, dict):
            raise bad_field(f"tools[{i}].input_schema", "must be an object")
        function = {"name": name, "parameters": schema}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        converted.append({"type": "function", "function": function})
    modes: dict[str, Any] = {"auto": "auto", "any": "required", "none": "none"}
    if kind == "tool":
        name = choice.get("name", str, required=True) if choice is not None else None
        mode: Any = {"type": "function", "function": {"name": name}}
    elif kind in modes:
        mode = modes[kind]
    else:
        raise bad_field("tool_choice.type", f'must be "auto", "any", "tool" or "none", got {kind!r}')
    return {"tools": converted, "tool_choice": mode, "parallel_tool_calls": parallel}


def tool_use_id(call: ToolCall) -> str:
    """Anthropic's id prefix on the engine's call id (``call_`` and 24 hex digits, or a dialect's own)."""
    return "toolu_" + call.id.removeprefix("call_")


def call_id(tool_use: str) -> str:
    """The engine's call id back from ``tool_use_id``: templates check ids in their dialect's shape
    (Mistral's: 9 alphanumerics). A client's own ids pass through."""
    rest = tool_use.removeprefix("toolu_")
    if rest == tool_use:
        return tool_use
    if len(rest) == 24 and all(c in "0123456789abcdef" for c in rest):
        return "call_" + rest
    return rest if len(rest) == 9 and rest.isascii() and rest.isalnum() else tool_use


class MessageRenderer(Renderer):
    """``message`` objects and the Messages stream events."""

    id_prefix = "msg_"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index = -1  # the content block being streamed
        self.open_text = False

    def _message(self, content: list[dict[str, Any]], stop: dict[str, str | None], usage: dict[str, int],
                 warnings: list[str]) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                **stop, "usage": usage, "llamay_warnings": warnings}

    def _stop(self, done: Done | None) -> dict[str, str | None]:
        """``stop_reason`` and ``stop_sequence``: "stop_sequence" names the caller's string that cut the text;
        the template's own end-of-turn strings are a plain ``end_turn``."""
        if done is None:
            return {"stop_reason": None, "stop_sequence": None}
        if done.finish_reason == "stop" and done.stop_sequence in (self.request.chat["stop"] or []):
            return {"stop_reason": "stop_sequence", "stop_sequence": done.stop_sequence}
        return {"stop_reason": _STOP_REASONS[done.finish_reason], "stop_sequence": None}

    def start(self, warnings: list[str]) -> list[Frame]:
        super().start(warnings)
        message = self._message([], self._stop(None), {"input_tokens": 0, "output_tokens": 0}, list(warnings))
        return [Frame({"type": "message_start", "message": message}, "message_start")]

    def _close_text(self) -> list[Frame]:
        if not self.open_text:
            return []
        self.open_text = False
        return [Frame({"type": "content_block_stop", "index": self.index}, "content_block_stop")]

    def on_text(self, text: str) -> list[Frame]:
        frames = []
        if not self.open_text:
            self.index += 1
            self.open_text = True
            frames.append(Frame({"type": "content_block_start", "index": self.index,
                                 "content_block": {"type": "text", "text": ""}}, "content_block_start"))
        frames.append(Frame({"type": "content_block_delta", "index": self.index,
                             "delta": {"type": "text_delta", "text": text}}, "content_block_delta"))
        return frames

    def on_call(self, call: ToolCall, index: int) -> list[Frame]:
        frames = self._close_text()
        self.index += 1
        block = {"type": "tool_use", "id": tool_use_id(call), "name": call.name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": tool_arguments_json(call.arguments)}
        return [*frames,
                Frame({"type": "content_block_start", "index": self.index, "content_block": block},
                      "content_block_start"),
                Frame({"type": "content_block_delta", "index": self.index, "delta": delta}, "content_block_delta"),
                Frame({"type": "content_block_stop", "index": self.index}, "content_block_stop")]

    def finish(self, done: Done, timing: Timing) -> list[Frame]:
        event: dict[str, Any] = {"type": "message_delta", "delta": self._stop(done), "usage": _usage(done)}
        if late := self.late_warnings(done):
            event["llamay_warnings"] = late
        return [*self._close_text(), Frame(event, "message_delta"),
                Frame({"type": "message_stop"}, "message_stop")]

    def error(self, error: ApiError) -> list[Frame]:
        return [Frame(error_body(error), "error")]

    def response(self, done: Done, timing: Timing, warnings: list[str]) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": self.text}] if self.text or not self.calls else []
        content += [{"type": "tool_use", "id": tool_use_id(c), "name": c.name, "input": c.arguments}
                    for c in self.calls]
        return self._message(content, self._stop(done), _usage(done), warnings)


def _usage(done: Done) -> dict[str, int]:
    return {"input_tokens": done.usage["prompt_tokens"], "output_tokens": done.usage["completion_tokens"]}


def model_object(name: str, created: int) -> dict[str, Any]:
    """A ``ModelInfo``."""
    stamp = datetime.fromtimestamp(created, timezone.utc).isoformat().replace("+00:00", "Z")
    return {"type": "model", "id": name, "display_name": name, "created_at": stamp, "lifecycle": "active"}


def model_list(names: list[str], created: int) -> dict[str, Any]:
    """``GET /v1/models`` as Anthropic pages it: everything on one page."""
    return {"data": [model_object(name, created) for name in names], "has_more": False,
            "first_id": names[0] if names else None, "last_id": names[-1] if names else None}


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}


def error_status(error: ApiError) -> int:
    """Anthropic says 529 where the others say 503 for a full queue."""
    return 529 if error.code == "overloaded" else error.status


def error_body(error: ApiError) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}``."""
    status = error_status(error)
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}
