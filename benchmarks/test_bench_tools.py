"""Per-token mask cost of a tool call under one offered tool and under three (target: at most 1.10x).

The same call document (the first tool's) is walked under both grammars; warm means each
grammar's mask cache was filled by a first walk, fresh means a new compile per round (every
position met for the first time, as for a new request's tool set).
"""

from __future__ import annotations

import pytest

import llamay
from benchmarks.workloads import greedy_tokens, per_token_stats, walk_document
from llamay.chat.tool_grammar import compile_tool_calls

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "maxLength": 64}, "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}}, "required": ["location"]}},
    {"name": "search_web", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "max_results": {"type": "integer"}, "safe": {"type": "boolean"}},
        "required": ["query"]}},
    {"name": "send_email", "parameters": {"type": "object", "properties": {
        "to": {"type": "array", "items": {"type": "string"}, "maxItems": 10}, "subject": {"type": "string"},
        "body": {"type": "string"}}, "required": ["to", "subject", "body"]}},
]
CALL = (b'<tool_call>\n{"name": "get_weather", "arguments": {"location": "San Francisco, CA", "unit": "celsius", '
        b'"days": 3}}\n</tool_call>')


@pytest.mark.parametrize("fresh", [False, True], ids=["warm", "fresh"])
@pytest.mark.parametrize("n_tools", [1, 3])
@pytest.mark.parametrize("vocab_name", ["smollm2_vocab", "llama3_vocab"])
def test_tool_call_mask_per_token(benchmark, request, vocab_name, n_tools, fresh):
    vocab = request.getfixturevalue(vocab_name)

    def build():
        return compile_tool_calls(TOOLS[:n_tools], "required", parallel=False)

    tokens = greedy_tokens(build(), vocab, CALL)
    mask = llamay.allocate_bitmask(vocab.size)
    matchers = [llamay.Matcher(build(), vocab)]
    walk_document(matchers[0], mask, tokens, vocab.eos_ids[0])
    times: list[float] = []

    def setup():
        if fresh:
            matchers[0] = llamay.Matcher(build(), vocab)

    benchmark.group = f"tool call mask per token ({vocab_name}, {'fresh' if fresh else 'warm'})"
    benchmark.pedantic(lambda: walk_document(matchers[0], mask, tokens, vocab.eos_ids[0], times), setup=setup,
                       rounds=20 if not fresh else 5)
    benchmark.extra_info.update(per_token_stats(times))
