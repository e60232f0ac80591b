"""Tool calls as one grammar, in a model's dialect (``llamay.chat.dialects``).

Several tools compile to a union: each call starts with its own name literal, so the first
few tokens of the name rule out all but one, and from then on the automaton carries a
single configuration (docs/tool-calls.md). The modes of ``tool_choice``:

- ``required`` / a named tool: calls from the first byte (one, or several when parallel),
  in any of the dialect's forms;
- ``auto``: free text, in which a trigger (the dialect's marker, a fenced ``json`` block or a
  bare object naming an offered tool) opens a constrained call; after a call only further
  calls (when parallel) may follow;
- ``none``: free text in which the dialect's marker cannot be written.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core.automaton import CompiledGrammar
from ..compile_budget import budget
from ..errors import UsageError
from ..grammars import json_lexical as jg
from ..grammars.gc_pause import gc_paused
from ..grammars.jsonschema.compiler import schema_expr
from ..ir import Grammar, Ref, alt
from ..vocab import Vocabulary
from .dialects import CallGrammar, Dialect, Markers
from .dialects.hermes import HERMES

MODES = ("auto", "none", "required", "named")


@gc_paused()
@budget()
def compile_tool_calls(
    tools: Sequence[dict],
    mode: str,
    *,
    name: str | None = None,
    parallel: bool | None = None,
    whitespace_budget: int | None = 64,
    number_digits: tuple[int | None, int | None, int | None] | None = jg.NUMBER_DIGITS,
    dialect: Dialect = HERMES,
    vocab: Vocabulary | None = None,
    schema=None,
    json: bool | str = False,
) -> CompiledGrammar:
    """The constraint for ``tools`` under ``mode`` (``name`` picks the tool for ``named``), in ``dialect``.

    ``tools`` are ``{"name": str, "parameters": <JSON Schema>}``; a refused schema raises
    ``SchemaError`` whose pointer starts at the tool (``/tools/<i>/parameters…``). All tools
    share one compile budget (``limits.COMPILE_SECONDS`` of CPU time), not one each. With
    ``vocab``, a marker that is one of its tokens is that token (match the grammar with
    ``Markers(dialect, vocab).vocab``); without, markers are their text. ``schema`` or ``json``
    (``True``, or ``"object"``) make ``auto``'s answer either calls or that document, not prose.
    ``parallel``: None as the dialect writes calls (several, or one per turn in Llama 3's), False
    one call, True several where the dialect's format holds them (where it does not, one and a
    warning). ``whitespace_budget`` and ``number_digits`` are ``compile_json_schema``'s, for the
    whole constraint.
    """
    if mode not in MODES:
        raise UsageError(f"unknown tool_choice mode {mode!r}")
    names = [t["name"] for t in tools]
    if mode == "named":
        if name not in names:
            raise UsageError(f"tool_choice names {name!r}, which is not among the offered tools {names}")
        tools = [tools[names.index(name)]]
    if mode in ("required", "named") and not tools:
        raise UsageError(f"tool_choice {mode!r} needs at least one tool")
    caps = jg.number_digits(number_digits)
    g = Grammar()
    warnings: list[str] = []
    calls = CallGrammar(dialect, tools if mode != "none" else [], Markers(dialect, vocab), g, warnings, parallel, caps)
    document = None
    if schema is not None:
        document = schema_expr(g, schema, "", warnings, number_digits=caps)
    elif json:
        value = jg.define_any_value(g, caps)  # defines json_object too
        document = value if json is True else Ref("json_object")
    if mode in ("required", "named"):
        if document is not None:
            warnings.append(f"the response format is not enforced: tool_choice {mode!r} asks for a call")
        g.define("root", calls.calls())
    elif document is not None and mode == "auto":
        g.define("root", alt(calls.calls(), document))
    else:
        g.define("root", calls.text(auto=mode == "auto"))
    return g.compile("root", whitespace_budget=whitespace_budget, warnings=warnings)
