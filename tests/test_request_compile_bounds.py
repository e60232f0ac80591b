"""The bounds a request's constraint compiles under: one budget of CPU time for all of it, and nesting.

The time bound (``Limits.compile_seconds``) is set here to a multiple of what one tool's schema
costs on this machine, measured first, so the tests are about the budget's accounting and
not about the machine's speed.
"""

from __future__ import annotations

import threading
import time

import pytest

from llamay import GrammarError, SchemaError
from llamay.backends import load_backend
from llamay.chat.tool_grammar import compile_tool_calls
from llamay.compile_budget import budget, clock, deadline
from llamay.engine import Model
from llamay.options import Limits

ASK = [{"role": "user", "content": "Fill in the form."}]


def tool(k: int) -> dict:
    """A tool whose schema costs some milliseconds: a hundred properties, each its own pattern."""
    return {"name": f"form_{k}", "parameters": {"type": "object", "properties": {
        f"p{i}": {"type": "string", "pattern": f"^(x{k}_{i}|[a-f]{{2,{i % 7 + 3}}}y)+z[0-9]{{1,{i % 5 + 2}}}$"}
        for i in range(100)}}}


def openai_tool(k: int) -> dict:
    return {"type": "function", "function": tool(k)}


@pytest.fixture(scope="module")
def tight(one_tool_seconds) -> Limits:
    """Bounds whose compile budget fits one tool three times over."""
    return Limits(compile_seconds=3 * one_tool_seconds)


@pytest.fixture(scope="module")
def one_tool_seconds() -> float:
    """CPU seconds one tool's compile takes here: the least of a few, after a first one warms the caches."""
    times = []
    for k in range(5):
        start = clock()
        compile_tool_calls([tool(1000 + k)], "required")
        times.append(clock() - start)
    return min(times[1:])


def _refused_for_time(exc: BaseException) -> bool:
    name = exc.keyword if isinstance(exc, SchemaError) else str(exc)
    return "COMPILE_SECONDS" in name


def test_tools_each_under_the_bound_are_refused_together(tight):
    """Ten tools that each compile within the bound exceed it together: the clock does not restart per tool."""
    for k in range(3):
        compile_tool_calls([tool(k)], "required", limits=tight)  # each alone fits
    with pytest.raises((SchemaError, GrammarError)) as exc:
        compile_tool_calls([tool(10 + k) for k in range(10)], "required", limits=tight)
    assert _refused_for_time(exc.value)


def test_a_request_spends_one_budget_on_all_its_tools(tight):
    """Through ``Model.chat``, as the server calls it: each tool alone is served, ten at once are refused."""
    model = Model(load_backend("fixture", script=b"ok"), limits=tight)
    r = model.chat(ASK, tools=[openai_tool(20)], tool_choice="required", max_tokens=4)
    assert r.finish_reason == "length"
    with pytest.raises((SchemaError, GrammarError)) as exc:
        model.chat(ASK, tools=[openai_tool(30 + k) for k in range(10)], tool_choice="required", max_tokens=4)
    assert _refused_for_time(exc.value)


def _gil_chunk_longer_than(seconds: float) -> int:
    """A ``sum(range(n))`` length that runs longer than ``seconds``: one C call, so it keeps the GIL throughout."""
    n = 100_000
    while True:
        start = time.monotonic()
        sum(range(n))
        if time.monotonic() - start > seconds:
            return n
        n *= 2


def test_threads_competing_for_the_interpreter_do_not_spend_the_budget(tight):
    """Threads holding the GIL slow the compile's wall time past the budget, not its CPU time.

    Each spinner keeps the GIL for one C call longer than the whole budget, so the first time
    the compile hands the interpreter over, its wall time alone exceeds the budget.
    """
    chunk = _gil_chunk_longer_than(2 * tight.compile_seconds)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(chunk))

    spinners = [threading.Thread(target=spin) for _ in range(3)]
    for t in spinners:
        t.start()
    try:
        start = time.monotonic()
        compile_tool_calls([tool(40)], "required", limits=tight)
        wall = time.monotonic() - start
    finally:
        stop.set()
        for t in spinners:
            t.join()
    assert wall > tight.compile_seconds  # a wall-clock budget would have refused it


def nested(levels: int) -> dict:
    node: dict = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


DEEP = {"type": "function", "function": {"name": "deep", "parameters": nested(5000)}}


@pytest.mark.parametrize("constraint", [
    {"schema": nested(5000)},
    {"tools": [DEEP], "tool_choice": "required"},
    {"tools": [DEEP], "tool_choice": "none"},
], ids=["schema", "tools-required", "tools-none"])
def test_a_constraint_nested_past_the_bound_is_refused_by_name(constraint):
    model = Model(load_backend("fixture", script=b"ok"))
    with pytest.raises(SchemaError) as exc:
        model.chat(ASK, **constraint, max_tokens=4)
    assert exc.value.keyword == "MAX_DEPTH"


def test_a_budget_is_shared_inside_and_fresh_outside():
    """An inner block, or a compile inside one asking for another length, keeps the outer deadline."""
    with budget(2.0):
        first = deadline(2.0)
        with budget(5.0):
            assert deadline(5.0) == first
        assert deadline(2.0) == first
    assert deadline(2.0) != first
