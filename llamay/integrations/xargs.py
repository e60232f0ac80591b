"""A llamay constraint carried in another engine's per-request arguments.

vLLM passes them as ``vllm_xargs`` (``SamplingParams.extra_args``), whose values can only be
strings, numbers or lists of those: a schema or a tool list travels as a JSON string, and JSON
``true`` arrives as ``1``. The names:

- ``llamay_schema``: a JSON Schema, as a JSON string;
- ``llamay_grammar``: GBNF text;
- ``llamay_json``: ``1`` for any JSON value, ``"object"`` for an object;
- ``llamay_lexicon``: ``1`` for the built-in English word list, or a list of words;
- ``llamay_tools``: OpenAI's ``tools`` list, as a JSON string, with ``llamay_tool_choice``
  (``auto``, the default, ``required``, ``none``, or a tool's name) and
  ``llamay_parallel_tool_calls`` (``0`` or ``1``; unset: as the dialect writes calls);
- ``llamay_dialect``: how the model writes tool calls (default: detected from its chat template).

Any other ``llamay_`` name is refused, so a misspelt one cannot pass as unconstrained. A tool
named ``auto``, ``none`` or ``required`` cannot be chosen by name here: the name reads as the mode.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..chat import normalize_tools
from ..chat.dialects import DIALECTS
from ..constraints import tool_mode
from ..errors import UsageError

PREFIX = "llamay_"
NAMES = ("schema", "grammar", "json", "lexicon", "tools", "tool_choice", "parallel_tool_calls", "dialect")


@dataclass(frozen=True)
class ConstraintArgs:
    """``Constraints.pick``'s keywords for one request, and the tool dialect it names (None: the model's)."""

    fields: dict[str, Any] = field(default_factory=dict)
    dialect: str | None = None

    @property
    def tools(self) -> bool:
        return bool(self.fields.get("tools")) and self.fields.get("mode") != "none"


def constraint_args(extra: Mapping[str, Any] | None) -> ConstraintArgs | None:
    """The constraint a request's arguments carry; None where they carry none.

    Raises ``UsageError`` naming the argument that is malformed or unknown.
    """
    given = {k[len(PREFIX):]: v for k, v in (extra or {}).items() if isinstance(k, str) and k.startswith(PREFIX)}
    unknown = sorted(set(given) - set(NAMES))
    if unknown:
        raise UsageError(f"unknown argument {PREFIX}{unknown[0]}; llamay reads {', '.join(PREFIX + n for n in NAMES)}")
    if not given:
        return None
    fields: dict[str, Any] = {}
    if "schema" in given:
        fields["schema"] = _json_text(given["schema"], "schema")
    if "grammar" in given:
        if not isinstance(given["grammar"], str):
            raise UsageError(f"{PREFIX}grammar must be GBNF text")
        fields["grammar"] = given["grammar"]
    if "json" in given:
        fields["json"] = _json_kind(given["json"])
    if "lexicon" in given:
        fields["lexicon"] = _lexicon(given["lexicon"])
    if "tools" in given:
        tools = normalize_tools(_json_text(given["tools"], "tools"))
        choice = given.get("tool_choice", "auto")
        if choice not in ("auto", "none", "required"):
            choice = {"type": "function", "function": {"name": choice}}
        fields["mode"], fields["name"] = tool_mode(choice, tools)
        fields["tools"] = tools
        parallel = given.get("parallel_tool_calls")
        if parallel not in (None, 0, 1):
            raise UsageError(f"{PREFIX}parallel_tool_calls must be 0 or 1, got {parallel!r}")
        fields["parallel"] = None if parallel is None else bool(parallel)
    elif "tool_choice" in given or "parallel_tool_calls" in given:
        raise UsageError(f"{PREFIX}tool_choice and {PREFIX}parallel_tool_calls need {PREFIX}tools")
    dialect = given.get("dialect")
    if dialect is not None and dialect not in DIALECTS:
        raise UsageError(f"{PREFIX}dialect {dialect!r} is not one of {', '.join(DIALECTS)}")
    if not fields:
        raise UsageError(f"{PREFIX}dialect names how tool calls are written; it needs {PREFIX}tools")
    return ConstraintArgs(fields, dialect)


def _json_text(value: Any, name: str) -> Any:
    if not isinstance(value, str):
        raise UsageError(f"{PREFIX}{name} must be a JSON string (vllm_xargs values cannot be objects)")
    try:
        return json.loads(value)
    except ValueError as e:
        raise UsageError(f"{PREFIX}{name} is not valid JSON: {e}") from None


def _json_kind(value: Any) -> bool | str:
    if value == "object":
        return "object"
    if value in (1, True, "true"):
        return True
    raise UsageError(f'{PREFIX}json must be 1 (any JSON value) or "object", got {value!r}')


def _lexicon(value: Any) -> bool | list[str]:
    if value in (1, True, "true"):
        return True
    if isinstance(value, list) and value and all(isinstance(w, str) for w in value):
        return value
    raise UsageError(f"{PREFIX}lexicon must be 1 (the built-in word list) or a list of words, got {value!r}")


def to_xargs(fields: Mapping[str, Any], dialect: str | None = None) -> dict[str, Any]:
    """The arguments that carry ``Constraints.pick``'s keywords to another engine: ``constraint_args``' inverse."""
    out: dict[str, Any] = {}
    if fields.get("schema") is not None:
        out[PREFIX + "schema"] = json.dumps(fields["schema"])
    if fields.get("grammar") is not None:
        out[PREFIX + "grammar"] = fields["grammar"]
    if fields.get("json"):
        out[PREFIX + "json"] = "object" if fields["json"] == "object" else 1
    if fields.get("lexicon") is not None:
        out[PREFIX + "lexicon"] = 1 if fields["lexicon"] is True else list(fields["lexicon"])
    if fields.get("tools"):
        out[PREFIX + "tools"] = json.dumps(list(fields["tools"]))
        mode = fields.get("mode", "auto")
        out[PREFIX + "tool_choice"] = fields["name"] if mode == "named" else mode
        if fields.get("parallel") is not None:
            out[PREFIX + "parallel_tool_calls"] = int(fields["parallel"])
    if dialect is not None and fields.get("tools"):
        out[PREFIX + "dialect"] = dialect
    return out
