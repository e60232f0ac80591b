"""Tool calls in the Hermes dialect, as one grammar: ``<tool_call>{"name": …, "arguments": …}</tool_call>``.

Several tools compile to a union: each alternative starts with its own name literal, so
the first few tokens of the name rule out all but one, and from then on the automaton
carries a single configuration (design section 7). The modes of ``tool_choice``:

- ``required`` / a named tool: calls from the first byte (one, or several when parallel);
- ``auto``: free text, in which completing ``<tool_call>`` enters the constrained call;
  after a call only further calls (when parallel) may follow;
- ``none``: free text in which ``<tool_call>`` cannot be completed.

Free text is a Knuth-Morris-Pratt automaton over the bytes of ``<tool_call>``: rule
``text_k`` means "the last k bytes are the first k of the tag". Its references are tail
calls, so arbitrarily long text runs in constant stack.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from . import json_grammar as jg
from ._core.automaton import CompiledGrammar
from .compile_budget import budget
from .errors import UsageError
from .gc_pause import gc_paused
from .ir import EMPTY, Bytes, Expr, Grammar, Ref, alt, literal, merge_ranges, seq, star
from .schema import schema_expr

OPEN = b"<tool_call>"
CLOSE = b"</tool_call>"
MODES = ("auto", "none", "required", "named")


@gc_paused()
@budget()
def compile_tool_calls(
    tools: Sequence[dict],
    mode: str,
    *,
    name: str | None = None,
    parallel: bool = True,
    whitespace_budget: int | None = 64,
) -> CompiledGrammar:
    """The constraint for ``tools`` under ``mode`` (``name`` picks the tool for ``named``).

    ``tools`` are ``{"name": str, "parameters": <JSON Schema>}``; a refused schema raises
    ``SchemaError`` whose pointer starts at the tool (``/tools/<i>/parameters…``). All tools
    share one compile budget (``limits.COMPILE_SECONDS`` of CPU time), not one each.
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
    g = Grammar()
    warnings: list[str] = []
    block = _block(g, tools, warnings) if tools and mode != "none" else None
    calls = seq(block, star(seq(jg.WS, block))) if parallel else block
    if mode in ("required", "named"):
        g.define("root", calls)
    else:
        after = star(seq(jg.WS, block)) if (block is not None and parallel) else EMPTY
        g.define("root", _text(g, None if mode == "none" else seq(_call_body(g, tools, warnings), after)))
    return g.compile("root", whitespace_budget=whitespace_budget, warnings=warnings)


def _call_body(g: Grammar, tools: Sequence[dict], warnings: list[str]) -> Expr:
    """What follows ``<tool_call>``: one call of any offered tool, then ``</tool_call>``."""
    if "call_body" not in g.rules:
        options = []
        for i, tool in enumerate(tools):
            pointer = f"/tools/{i}/parameters"
            arguments = schema_expr(g, tool.get("parameters", {"type": "object"}), pointer, warnings)
            options.append(seq(
                literal('{'), jg.WS, literal('"name"'), jg.WS, literal(":"), jg.WS,
                literal(json.dumps(tool["name"], ensure_ascii=False)), jg.WS, literal(","), jg.WS,
                literal('"arguments"'), jg.WS, literal(":"), jg.WS, arguments, jg.WS, literal("}"),
            ))
        g.define("call_body", seq(jg.WS, alt(*options), jg.WS, literal(CLOSE)))
    return Ref("call_body")


def _block(g: Grammar, tools: Sequence[dict], warnings: list[str]) -> Expr:
    return seq(literal(OPEN), _call_body(g, tools, warnings))


def _text(g: Grammar, on_open: Expr | None) -> Expr:
    """Free text; completing ``<tool_call>`` continues with ``on_open`` (None: it cannot be completed)."""
    m = len(OPEN)
    fail = [0] * m  # KMP failure function of OPEN
    k = 0
    for i in range(1, m):
        while k and OPEN[i] != OPEN[k]:
            k = fail[k - 1]
        if OPEN[i] == OPEN[k]:
            k += 1
        fail[i] = k

    def delta(state: int, byte: int) -> int:
        while state and OPEN[state] != byte:
            state = fail[state - 1]
        return state + 1 if OPEN[state] == byte else 0

    for state in range(m):
        targets: dict[int, list[int]] = {}
        for byte in range(256):
            targets.setdefault(delta(state, byte), []).append(byte)
        options: list[Expr] = [EMPTY]
        for nxt, byte_list in sorted(targets.items()):
            step = Bytes(merge_ranges((b, b) for b in byte_list))
            if nxt == m:
                if on_open is not None:
                    options.append(seq(step, on_open))
            else:
                options.append(seq(step, Ref(f"text_{nxt}")))
        g.define(f"text_{state}", alt(*options))
    return Ref("text_0")


