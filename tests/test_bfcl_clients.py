"""A seeded sample of BFCL entries through the official SDKs against the real default model.

``required`` (OpenAI), ``any`` (Anthropic) and a named tool always decode under the offered
tools' schemas: every call that comes back names an offered tool and its arguments validate.
A 135M model can run a free-form string argument into ``max_tokens``; such an answer must say
``length`` and carry no call, and most answers must be complete calls.
"""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from tests.bfcl import entries
from tests.conftest import corpus
from tests.test_api_clients import claude, oai, olm, server  # noqa: F401  (fixtures)

N_ENTRIES = 12
MAX_TOKENS = 160


@pytest.fixture(scope="module")
def sample():
    pool = [(eid, tools, rec) for stem, eid, tools, rec in entries(corpus("bfcl"))
            if stem in ("BFCL_v4_simple_python", "BFCL_v4_multiple") and rec]
    return random.Random(5).sample(pool, N_ENTRIES)


def _question(eid: str) -> str:
    folder = corpus("bfcl")
    for path in folder.glob("BFCL_v4_*.json"):
        for line in path.open(encoding="utf-8"):
            rec = json.loads(line)
            if rec["id"] == eid:
                return rec["question"][0][-1]["content"]
    raise KeyError(eid)


def _check(calls, finish, tools, outcomes):
    schemas = {t["name"]: t["parameters"] for t in tools}
    if finish == "length" and not calls:
        outcomes.append("truncated")
        return
    assert calls, finish
    for name, arguments in calls:
        assert name in schemas
        jsonschema.validate(arguments, schemas[name])
    outcomes.append("call")


@pytest.mark.parametrize("api", ["openai", "anthropic", "ollama"])
def test_forced_calls_validate(api, sample, oai, claude, olm):  # noqa: F811
    outcomes: list[str] = []
    for i, (eid, tools, _) in enumerate(sample):
        question = [{"role": "user", "content": _question(eid)}]
        named = tools[0]["name"] if i % 3 == 2 else None
        if api == "openai":
            oa_tools = [{"type": "function", "function": t} for t in tools]
            choice = {"type": "function", "function": {"name": named}} if named else "required"
            r = oai.chat.completions.create(model="default", messages=question, tools=oa_tools, tool_choice=choice,
                                            max_tokens=MAX_TOKENS, temperature=0, seed=1)
            c = r.choices[0]
            calls = [(t.function.name, json.loads(t.function.arguments)) for t in c.message.tool_calls or []]
            finish = c.finish_reason
        elif api == "anthropic":
            an_tools = [{"name": t["name"], "input_schema": t["parameters"]} for t in tools]
            choice = {"type": "tool", "name": named} if named else {"type": "any"}
            m = claude.messages.create(model="default", messages=question, tools=an_tools, tool_choice=choice,
                                       max_tokens=MAX_TOKENS, extra_body={"temperature": 0})
            calls = [(b.name, b.input) for b in m.content if b.type == "tool_use"]
            finish = {"tool_use": "tool_calls", "max_tokens": "length"}.get(m.stop_reason, m.stop_reason)
        else:  # Ollama has no tool_choice: the offered tools under "auto"
            r = olm.chat(model="default", messages=question, tools=[{"type": "function", "function": t} for t in tools],
                         options={"temperature": 0, "seed": 1, "num_predict": MAX_TOKENS})
            calls = [(t.function.name, dict(t.function.arguments)) for t in r.message.tool_calls or []]
            finish = r.done_reason
            if not calls:  # "auto": a text answer is allowed, but never a call left in the text
                assert "<tool_call>" not in (r.message.content or "")
                outcomes.append("text")
                continue
        if named:
            assert all(name == named for name, _ in calls)
        _check(calls, finish, tools, outcomes)
    print(api, outcomes)
    if api != "ollama":
        assert outcomes.count("call") >= 0.75 * len(outcomes), outcomes
