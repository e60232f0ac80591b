"""OpenAI-style messages and tools made ready for a chat template, in the Hermes dialect where it lacks tools.

Every API shape is turned into OpenAI's before it gets here. Templates are written for
HF's ``apply_chat_template``: string content (many concatenate it with ``+``), tool-call
arguments as objects. A template that never renders ``tools`` gets a Hermes system block
listing them; one that never renders ``tool_calls`` gets calls and results as Hermes text:
assistant ``<tool_call>`` blocks, and results as a user turn of ``<tool_response>`` blocks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .dialects import Dialect
from .dialects.hermes import HERMES
from .errors import MessageError

__all__ = ["adapt_messages", "hermes_system_block", "normalize_messages", "normalize_tools"]

#: Roles a message may carry; OpenAI's ``developer`` is a system message to every template.
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}

_HERMES_PREAMBLE = (
    "# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)



def normalize_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of ``messages`` with string ``content`` and ``tool_calls`` whose arguments are objects.

    ``content`` may be a string, None, or a list of ``{"type": "text", "text": ...}`` parts
    (joined by newlines); ``tool_calls`` arguments a JSON string or an object. Other parts
    (images, audio) and malformed fields raise ``MessageError`` naming the field.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise MessageError("messages is not a list of messages - at messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise MessageError(f"a message is not an object - at {where}")
        role = message.get("role")
        role = _ROLES.get(role) if isinstance(role, str) else None
        if role is None:
            raise MessageError(
                f"unknown role {message.get('role')!r} ({', '.join(_ROLES)} are known) - at {where}.role"
            )
        normalized = {**message, "role": role, "content": _text(message.get("content"), f"{where}.content")}
        calls = message.get("tool_calls")
        normalized.pop("tool_calls", None)
        if calls and role == "assistant":
            normalized["tool_calls"] = _calls(calls, f"{where}.tool_calls")
        elif calls:
            raise MessageError(f"only assistant messages carry tool_calls - at {where}.tool_calls")
        out.append(normalized)
    return out


def normalize_tools(tools: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """``tools`` as OpenAI's ``{"type": "function", "function": {"name", ...}}`` objects, checked."""
    if tools is None:
        return []
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise MessageError("tools is not a list of tools - at tools")
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or tool.get("type", "function") != "function":
            raise MessageError(f'a tool is not {{"type": "function", "function": {{...}}}} - at tools[{i}]')
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise MessageError(f"a tool has no name - at tools[{i}].function.name")
        out.append({**tool, "type": "function", "function": dict(function)})
    return out


def hermes_system_block(tools: Sequence[Mapping[str, Any]], dialect: Dialect = HERMES) -> str:
    """The Hermes system text: each tool's JSON on a line inside ``<tools>``, and ``dialect``'s call format."""
    listing = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return f"{_HERMES_PREAMBLE}{listing}\n</tools>\n\n{dialect.instruction}\n{dialect.call_format()}"


def adapt_messages(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    *,
    renders_tools: bool,
    renders_tool_calls: bool,
    dialect: Dialect = HERMES,
) -> list[dict[str, Any]]:
    """``normalize_messages``' output with the parts the template cannot render written in.

    Without ``renders_tools`` and with ``tools``, the Hermes block is appended to the first
    system message (or is one, put first). Without ``renders_tool_calls``, assistant calls
    become text after the message's content, in ``dialect``'s own form (what the model is
    constrained to write); under Hermes each run of tool results becomes one user message of
    ``<tool_response>`` blocks, under another dialect results stay ``tool`` turns.
    """
    out = [dict(m) for m in messages]
    _pair_ids(out, dialect)
    if not renders_tool_calls:
        out = _written_turns(out, dialect)
    if tools and not renders_tools:
        block = hermes_system_block(tools, dialect)
        if out and out[0]["role"] == "system":
            content = out[0]["content"]
            out[0]["content"] = f"{content}\n\n{block}" if content else block
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


def _pair_ids(messages: list[dict[str, Any]], dialect: Dialect) -> None:
    """Calls without an id get one in the dialect's shape, and the results after them without a
    ``tool_call_id`` are paired with them in order: templates that check ids (Mistral's) need both."""
    pending: list[str] = []
    for turn, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            pending = []
            for index, call in enumerate(message["tool_calls"]):
                if not call.get("id"):
                    call["id"] = dialect.history_id(turn, index)
                pending.append(call["id"])
        elif message["role"] == "tool" and not message.get("tool_call_id") and pending:
            message["tool_call_id"] = pending.pop(0)


def _written_turns(messages: list[dict[str, Any]], dialect: Dialect) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    responses: dict[str, Any] | None = None  # the user turn collecting the current run of tool results
    for message in messages:
        if message["role"] == "tool" and dialect is HERMES:
            block = f"<tool_response>\n{message['content']}\n</tool_response>"
            if responses is None:
                responses = {"role": "user", "content": block}
                out.append(responses)
            else:
                responses["content"] += "\n" + block
            continue
        responses = None
        if "tool_calls" in message:
            written = dialect.write_calls([call["function"] for call in message.pop("tool_calls")])
            message["content"] = f"{message['content']}\n{written}" if message["content"] else written
        out.append(message)
    return out


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (bytes, Mapping)) or not isinstance(content, Iterable):
        raise MessageError(f"content is neither a string nor a list of parts - at {where}")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind != "text":
            raise MessageError(f"content part of type {kind!r} is not supported (text parts are) - at {where}[{j}]")
        if not isinstance(part.get("text"), str):
            raise MessageError(f"a text part has no string text - at {where}[{j}].text")
        texts.append(part["text"])
    return "\n".join(texts)


def _calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Iterable):
        raise MessageError(f"tool_calls is not a list - at {where}")
    out = []
    for k, call in enumerate(calls):
        here = f"{where}[{k}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise MessageError(f"a tool call has no function object - at {here}.function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise MessageError(f"a tool call has no name - at {here}.function.name")
        out.append({**call, "type": "function", "function": {"name": name, "arguments": _arguments(function, here)}})
    return out


def _arguments(function: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Arguments as an object: OpenAI sends a JSON string, Ollama an object; templates want the object."""
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as e:
            raise MessageError(f"tool call arguments are not JSON: {e} - at {where}.function.arguments") from None
        except RecursionError:  # only a string can nest this deep: a request body is bounded before parsing
            raise MessageError(f"tool call arguments nest too deeply - at {where}.function.arguments") from None
    if not isinstance(arguments, Mapping):
        raise MessageError(f"tool call arguments are not a JSON object - at {where}.function.arguments")
    return dict(arguments)
