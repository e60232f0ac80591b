"""Forced tokens: the bytes the grammar forces, the tokens the model's tokenizer spells them with, and
the engine appending them unsampled, with log probability 0, in fewer evaluations."""

from __future__ import annotations

import json
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import numpy as np
import pytest

from llamay import Matcher, Vocabulary, allocate_bitmask, compile_gbnf, compile_json_schema, ir
from llamay.engine import TextDelta
from llamay.jump_ahead import jump_ahead
from llamay.serving.slots import State

WEATHER = {"enum": ["get_current_weather_forecast"]}
LONG_NAMES = {
    "type": "object",
    "properties": {
        "customer_shipping_address_line": {"type": "string", "maxLength": 12},
        "customer_billing_postal_code": {"type": "integer"},
        "preferred_delivery_time_window": {"enum": ["morning", "afternoon"]},
    },
    "required": ["customer_shipping_address_line", "customer_billing_postal_code",
                 "preferred_delivery_time_window"],
    "additionalProperties": False,
}


def edge_grammar(token: int, tail: str = "b"):
    """``"a" token(X) tail``."""
    g = ir.Grammar()
    g.define("root", ir.seq(ir.literal("a"), ir.token(token), ir.literal(tail)))
    return g.compile()


# --- forced bytes ---------------------------------------------------------------------------------------------

FORCED = [
    pytest.param(lambda: compile_gbnf('root ::= "hello" " " ("a" | "b")'), b"", b"hello ", id="literal-then-choice"),
    pytest.param(lambda: compile_gbnf('root ::= "hello" " " ("a" | "b")'), b"hel", b"lo ", id="mid-literal"),
    pytest.param(lambda: compile_gbnf('root ::= "hello" " " ("a" | "b")'), b"hello a", b"", id="complete"),
    pytest.param(lambda: compile_gbnf('root ::= "ab" | "ac"'), b"", b"a", id="shared-first-byte"),
    pytest.param(lambda: compile_gbnf('root ::= "x" [0-9]+ "y"'), b"x1", b"", id="repetition-or-exit"),
    pytest.param(lambda: compile_json_schema(WEATHER), b"", b'"get_current_weather_forecast"', id="enum"),
    pytest.param(lambda: compile_json_schema(WEATHER), b'"get_cur', b'rent_weather_forecast"', id="enum-mid"),
    pytest.param(lambda: compile_json_schema(LONG_NAMES), b'{"', b'customer_shipping_address_line"', id="key"),
    pytest.param(lambda: compile_json_schema({"type": "integer"}), b"", b"", id="open-value"),
]


@pytest.mark.parametrize(("grammar", "prefix", "forced"), FORCED)
def test_forced_bytes_are_the_one_continuation(grammar, prefix, forced):
    m = Matcher(grammar())
    assert m.accept_bytes(prefix)
    assert m.forced_bytes() == forced


@pytest.mark.parametrize(("grammar", "prefix", "forced"), FORCED)
def test_forced_bytes_leave_the_matcher_as_it_was(grammar, prefix, forced, smollm2_vocab):
    m = Matcher(grammar(), smollm2_vocab)
    assert m.accept_bytes(prefix)
    before = allocate_bitmask(smollm2_vocab.size)
    m.fill_next_token_bitmask(before)
    steps = m.steps
    m.forced_bytes()
    after = allocate_bitmask(smollm2_vocab.size)
    m.fill_next_token_bitmask(after)
    assert m.steps == steps
    np.testing.assert_array_equal(before, after)


def test_a_token_edge_comes_whole_or_not_at_all(smollm2_vocab):
    token = smollm2_vocab.special_token_id("<|im_start|>")
    m = Matcher(edge_grammar(token), smollm2_vocab)
    assert m.accept_bytes(b"a")
    assert m.forced_bytes() == ir.edge_bytes(token) + b"b"
    assert m.forced_bytes(len(ir.edge_bytes(token))) == ir.edge_bytes(token)
    for cut in range(1, len(ir.edge_bytes(token))):
        assert m.forced_bytes(cut) == b""


def test_two_edges_sharing_their_first_bytes_force_neither(smollm2_vocab):
    first, second = smollm2_vocab.special_token_id("<|im_start|>"), smollm2_vocab.special_token_id("<|im_end|>")
    assert ir.edge_bytes(first)[:3] == ir.edge_bytes(second)[:3]  # ids 1 and 2: only the last byte differs
    g = ir.Grammar()
    g.define("root", ir.seq(ir.literal("a"), ir.alt(ir.token(first), ir.token(second))))
    m = Matcher(g.compile(), smollm2_vocab)
    assert m.accept_bytes(b"a")
    assert m.forced_bytes() == b""


def allowed_bytes(m: Matcher) -> list[int]:
    """Every byte the matcher accepts next, one by one (the oracle)."""
    out = []
    for b in range(256):
        if m.accept_bytes(bytes((b,))):
            out.append(b)
            m.rollback(1)
    return out


WALKED = [
    lambda: compile_json_schema(LONG_NAMES),
    lambda: compile_json_schema({"type": "array", "items": {"enum": ["alpha", "alphabet", "beta"]}, "maxItems": 3}),
    lambda: compile_json_schema({"type": "object", "properties": {"name": {"const": "get_weather"},
                                 "arguments": {"type": "object", "properties": {"city": {"type": "string"}},
                                               "required": ["city"]}}, "required": ["name", "arguments"]}),
    lambda: compile_gbnf('root ::= "call " name "(" [0-9]{1,3} ")"\nname ::= "alpha" | "alpine" | "beta"'),
]


@pytest.mark.parametrize("grammar", WALKED)
@pytest.mark.parametrize("seed", range(3))
def test_forced_bytes_agree_with_the_byte_by_byte_oracle(grammar, seed):
    """Along random walks: where bytes are forced, each point allows that byte alone and the document is not
    complete; where the forced bytes stop, the document may end there or two bytes are allowed."""
    rng = random.Random(seed)
    m = Matcher(grammar())
    for _ in range(400):
        forced = m.forced_bytes()
        for byte in forced:
            assert allowed_bytes(m) == [byte] and not m.is_accepting()
            assert m.accept_bytes(bytes((byte,)))
        options = allowed_bytes(m)
        assert m.is_accepting() or len(options) > 1 or (options and options[0] >= 0x80)
        if not options:
            break
        assert m.accept_bytes(bytes((rng.choice(options),)))


# --- the trie's extension test ----------------------------------------------------------------------------------

EXTENDS = [(b"", True), (b"a", True), (b"ab", True), (b"abc", False), (b"b", False), (b"x", False),
           (b"abd", False), (b"bc", False)]


@pytest.mark.parametrize(("prefix", "extends"), EXTENDS)
def test_the_trie_says_whether_a_token_goes_on_past_bytes(prefix, extends):
    vocab = Vocabulary([b"a", b"ab", b"abc", b"b", b""], eos_ids=[4])
    assert vocab.trie.extends(prefix) is extends


# --- forced tokens, on real tokenizers ------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["smollm2", "gemma", "llama3"])
def tokenizer(request):
    """(vocabulary, encode) of a real model: its own tokenizer, text kept as text."""
    if request.param == "llama3":
        tokenizers = pytest.importorskip("tokenizers")
        path = request.getfixturevalue("llama3_tokenizer_json")
        tok = tokenizers.Tokenizer.from_file(str(path))
        return request.getfixturevalue("llama3_vocab"), lambda text: tok.encode(text, add_special_tokens=False).ids
    llama_cpp = pytest.importorskip("llama_cpp")
    path = request.getfixturevalue(f"{request.param}_gguf")
    llama = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    return (request.getfixturevalue(f"{request.param}_vocab"),
            lambda text: llama.tokenize(text.encode(), add_bos=False, special=False))


def spelled(vocab: Vocabulary, tokens: list[int]) -> bytes:
    return b"".join(vocab.token_bytes(t) for t in tokens)


def assert_tokenizer_spelling(vocab, encode, previous: int | None, tokens: list[int]) -> None:
    """``tokens`` are what the tokenizer writes for their bytes after ``previous``, which stays whole."""
    before = vocab.token_bytes(previous) if previous is not None else b""
    ids = list(encode((before + spelled(vocab, tokens)).decode()))
    assert ids == ([previous] if before else []) + tokens


def assert_cut_where_more_text_could_merge(vocab, full: list[int], tokens: list[int]) -> None:
    """``tokens`` are ``full`` (the tokenizer's spelling of every forced byte) up to its first token from which
    the bytes to the end begin a longer token: text that follows could merge into those."""
    n = len(tokens)
    assert tokens == full[:n]
    assert n == len(full) or vocab.trie.extends(spelled(vocab, full[n:]))
    assert not any(vocab.trie.extends(spelled(vocab, full[k:])) for k in range(n))


def test_a_forced_name_is_appended_as_the_tokenizer_spells_it(tokenizer):
    vocab, encode = tokenizer
    m = Matcher(compile_json_schema(WEATHER), vocab)
    tokens = jump_ahead(m, encode, None)
    assert tokens, "the whole value is forced: some of it must be appended"
    assert b'"get_current_weather_forecast"'.startswith(spelled(vocab, tokens))
    assert_tokenizer_spelling(vocab, encode, None, tokens)
    assert m.steps == len(tokens)
    assert_cut_where_more_text_could_merge(vocab, list(encode('"get_current_weather_forecast"')), tokens)


def test_a_token_that_would_merge_with_the_forced_bytes_stops_the_jump(tokenizer):
    vocab, encode = tokenizer
    quote = encode('"')
    assert len(quote) == 1
    m = Matcher(compile_json_schema(WEATHER), vocab)
    assert m.accept_token(quote[0])
    tokens = jump_ahead(m, encode, quote[0])
    merges = encode('"get_current_weather_forecast"')[0] != quote[0]
    assert (tokens == []) is merges
    if tokens:
        assert_tokenizer_spelling(vocab, encode, quote[0], tokens)


def test_the_last_token_is_left_to_sample_where_more_text_could_merge_into_it(tokenizer):
    vocab, encode = tokenizer
    opening = list(encode('{"'))
    m = Matcher(compile_json_schema(LONG_NAMES), vocab)
    assert all(m.accept_token(t) for t in opening)
    tokens = jump_ahead(m, encode, opening[-1])
    assert spelled(vocab, tokens) + m.forced_bytes() == b'customer_shipping_address_line"'  # then space or colon
    full = list(encode('{"customer_shipping_address_line"'))
    if full[:len(opening)] == opening:
        assert tokens, "the name is forced and the opening stays whole: some of it is appended"
        assert_cut_where_more_text_could_merge(vocab, full[len(opening):], tokens)
    else:  # the tokenizer merges the quote into the name: the jump waits for the next sampled token
        assert tokens == []


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_the_jump_takes_no_more_tokens_than_the_limit(tokenizer, limit):
    vocab, encode = tokenizer
    m = Matcher(compile_json_schema(WEATHER), vocab)
    assert len(jump_ahead(m, encode, None, limit=limit)) <= limit


def test_a_marker_token_is_appended_as_itself(smollm2_vocab):
    token = smollm2_vocab.special_token_id("<|im_start|>")
    m = Matcher(edge_grammar(token, "done"), smollm2_vocab)
    assert m.accept_bytes(b"a")
    tokens = jump_ahead(m, lambda text: [], None)  # no text tokenizes: only the edge is appended
    assert tokens == [token]


@pytest.mark.parametrize("schema", [LONG_NAMES, {"type": "array", "items": WEATHER, "minItems": 2, "maxItems": 2}])
@pytest.mark.parametrize("seed", range(4))
def test_a_random_walk_with_jumps_ends_valid(tokenizer, schema, seed):
    """Random tokens from the mask, then each forced run: the document completes, valid, and every run is
    the tokenizer's own spelling after the token before it."""
    vocab, encode = tokenizer
    rng = np.random.default_rng(seed)
    m = Matcher(compile_json_schema(schema), vocab)
    mask = allocate_bitmask(vocab.size)
    written: list[int] = []
    jumped = 0
    for left in range(200, 0, -1):
        m.fill_next_token_bitmask(mask, tokens_left=left)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab.size]
        token = int(rng.choice(np.flatnonzero(bits)))
        assert m.accept_token(token)
        if token in vocab.eos_ids:
            break
        written.append(token)
        run = jump_ahead(m, encode, token)
        if run:
            assert_tokenizer_spelling(vocab, encode, token, run)
        written += run
        jumped += len(run)
    assert m.is_terminated()
    jsonschema.validate(json.loads(spelled(vocab, written)), schema)
    assert jumped > 0


# --- the engine: forced runs appended in one evaluation ----------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_models(smollm2_gguf):
    """SmolLM2 on llama.cpp, with and without the jump ahead: two slots each, no prompt cache (reproducible)."""
    pytest.importorskip("llama_cpp")
    import llamay

    return {jump: llamay.load("llamacpp", str(smollm2_gguf), slots=2, n_ctx=1024, n_threads=2, jump_ahead=jump)
            for jump in (True, False)}


ORDER = [{"role": "user", "content": "Give the order's shipping address, postal code and delivery window."}]


@pytest.mark.parametrize("stream", [False, True])
def test_forced_tokens_are_appended_in_fewer_evaluations_and_the_document_stays_valid(smollm2_models, stream):
    for jump, model in smollm2_models.items():
        before = model.scheduler.steps
        reply = model.chat(ORDER, schema=LONG_NAMES, max_tokens=120, logprobs=2, stream=stream)
        if stream:
            events = list(reply)
            text, done = "".join(e.text for e in events if isinstance(e, TextDelta)), events[-1]
            logprobs = [lp for e in events if isinstance(e, TextDelta) for lp in e.logprobs]
        else:
            text, done, logprobs = reply.text, reply, reply.logprobs
        jsonschema.validate(json.loads(text), LONG_NAMES)
        tokens, forced = done.usage["completion_tokens"], done.usage["forced_tokens"]
        assert len(logprobs) == tokens
        # one evaluation for the prompt and for each sampled token's run but the last (EOS, or the budget's end)
        assert model.scheduler.steps - before == tokens - forced + (done.finish_reason == "stop")
        if jump:
            assert forced >= 10, "the three property names are forced after their opening quote"
            assert sum(lp.logprob == 0.0 and [t.token for t in lp.top] == [lp.token] for lp in logprobs) >= forced
        else:
            assert forced == 0


def test_a_backend_that_runs_one_generation_at_a_time_jumps_too(smollm2_vocab):
    """The stepped loop (transformers, mlx, the fixture) appends forced runs as well, through ``feed_tokens``."""
    from llamay.backends.fixture import FixtureBackend
    from llamay.engine import Model

    script = (b'{"customer_shipping_address_line": "1 Main St", "customer_billing_postal_code": 12345, '
              b'"preferred_delivery_time_window": "morning"}')
    for jump in (True, False):
        backend = FixtureBackend(smollm2_vocab, script=script)
        backend.jump_ahead = jump
        reply = Model(backend).chat(ORDER, schema=LONG_NAMES, max_tokens=120)
        assert reply.text.encode() == script
        assert (reply.usage["forced_tokens"] > 10) is jump


def test_beside_another_slot_a_forced_run_waits_rather_than_cost_a_second_pass(smollm2_models):
    """llama.cpp's pass over several KV streams takes as many tokens from each: every step holds as many written
    tokens of each generating slot, so a longer run waits; a slot alone evaluates its whole run at once."""
    model = smollm2_models[True]
    backend, slots = model.backend, model.scheduler.slots
    widths: list[set[int]] = []  # per step: the token counts of the generating slots

    def decode(tokens, positions, seqs, outputs):
        generating = {s.seq for s in slots if s.state is State.GENERATE}
        counts = Counter(seq for seq in seqs if seq in generating)
        widths.append(set(counts.values()))
        return type(backend).decode(backend, tokens, positions, seqs, outputs)

    backend.decode = decode
    try:
        with ThreadPoolExecutor(2) as pool:
            replies = list(pool.map(lambda ask: model.chat([{"role": "user", "content": ask}], schema=LONG_NAMES,
                                                           max_tokens=120),
                                    ["Give an order as JSON.", "Give another order as JSON."]))
    finally:
        del backend.decode
    for reply in replies:
        jsonschema.validate(json.loads(reply.text), LONG_NAMES)
        assert reply.usage["forced_tokens"] >= 10
    assert all(len(w) <= 1 for w in widths), widths
    assert any(w and max(w) > 1 for w in widths), "some step evaluated a forced run whole"
