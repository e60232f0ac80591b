"""The cyclic collector is paused during a compile, and runs again afterwards, however the compile ends."""

from __future__ import annotations

import gc
import threading

import pytest

from llamay import GrammarError, SchemaError, compile_gbnf, compile_json_schema
from llamay.chat.tool_grammar import compile_tool_calls
from llamay.grammars.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def _collector_on():
    gc.enable()
    yield
    gc.enable()


@pytest.mark.parametrize(
    ("compile_", "refusal"),
    [
        (lambda: compile_json_schema({"type": "object", "properties": {"a": {"type": "string"}}}), None),
        (lambda: compile_json_schema({"not": {"type": "string"}}), SchemaError),
        (lambda: compile_gbnf('root ::= "a" | "b"'), None),
        (lambda: compile_gbnf("root ::= root"), GrammarError),  # left recursion, found by the lowering
        (lambda: compile_tool_calls([{"name": "f", "parameters": {"type": "object"}}], "required"), None),
    ],
    ids=["schema", "refused-schema", "gbnf", "refused-gbnf", "tool-calls"],
)
def test_the_collector_runs_again_after_a_compile(compile_, refusal):
    if refusal is None:
        compile_()
    else:
        with pytest.raises(refusal):
            compile_()
    assert gc.isenabled()


def test_a_collector_the_application_turned_off_stays_off():
    gc.disable()
    compile_json_schema({"type": "integer"})
    assert not gc.isenabled()


def test_pauses_nest_and_end_when_the_outermost_ends():
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_compiles_on_two_threads_leave_the_collector_on():
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with gc_paused():
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    inside.wait(10)
    compile_json_schema({"type": "array", "items": {"type": "number"}})
    assert not gc.isenabled()  # the other thread's compile is still running
    leave.set()
    other.join(10)
    assert gc.isenabled()


def test_an_exception_inside_a_pause_ends_it():
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("bad input")
    assert gc.isenabled()
