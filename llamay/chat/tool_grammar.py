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
from ..options import DEFAULT, NUMBER_DIGITS, CompileOptions, Limits, Tuning
from ..vocab import Vocabulary
from .dialects import CallGrammar, Dialect, Markers
from .dialects.hermes import HERMES

MODES = ("auto", "none", "required", "named")


@gc_paused()
def compile_tool_calls(
    tools: Sequence[dict],
    mode: str,
    *,
    name: str | None = None,
    parallel: bool | None = None,
    whitespace_budget: int | None = 64,
    number_digits: tuple[int | None, int | None, int | None] | None = NUMBER_DIGITS,
    dialect: Dialect = HERMES,
    vocab: Vocabulary | None = None,
    schema=None,
    json: bool | str = False,
    limits: Limits = DEFAULT.limits,
    tuning: Tuning = DEFAULT.tuning,
) -> CompiledGrammar:
    """The constraint for ``tools`` under ``mode`` (``name`` picks the tool for ``named``), in ``dialect``.

    ``tools`` are ``{"name": str, "parameters": <JSON Schema>}``; a refused schema raises
    ``SchemaError`` whose pointer starts at the tool (``/tools/<i>/parameters…``). All tools
    share one compile budget (``limits.compile_seconds`` of CPU time), not one each. With
    ``vocab``, a marker that is one of its tokens is that token (match the grammar with
    ``Markers(dialect, vocab).vocab``); without, markers are their text. ``schema`` or ``json``
    (``True``, or ``"object"``) make ``auto``'s answer either calls or that document, not prose.
    ``parallel``: None as the dialect writes calls (several, or one per turn in Llama 3's), False
    one call, True several where the dialect's format holds them (where it does not, one and a
    warning). ``whitespace_budget``, ``number_digits``, ``limits`` and ``tuning`` are
    ``compile_json_schema``'s, for the whole constraint.
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
    options = CompileOptions(
        whitespace_budget=whitespace_budget, number_digits=number_digits, limits=limits, tuning=tuning
    )
    with budget(limits.compile_seconds):
        return _compile(tools, mode, parallel, dialect, vocab, schema, json, options)


def _compile(tools, mode: str, parallel, dialect: Dialect, vocab, schema, json, options: CompileOptions
             ) -> CompiledGrammar:
    """``compile_tool_calls`` once its arguments are checked, within the request's budget."""
    g = Grammar()
    warnings: list[str] = []
    offered = tools if mode != "none" else []
    calls = CallGrammar(dialect, offered, Markers(dialect, vocab), g, warnings, parallel, options)
    document = None
    if schema is not None:
        document = schema_expr(g, schema, "", warnings, options)
    elif json:
        value = jg.define_any_value(g, options.number_digits)  # defines json_object too
        document = value if json is True else Ref("json_object")
    if mode in ("required", "named"):
        if document is not None:
            warnings.append(f"the response format is not enforced: tool_choice {mode!r} asks for a call")
        g.define("root", calls.calls())
    elif document is not None and mode == "auto":
        g.define("root", alt(calls.calls(), document))
    else:
        g.define("root", calls.text(auto=mode == "auto"))
    return g.compile("root", options=options, warnings=warnings)
