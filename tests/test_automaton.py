"""The automaton against an oracle: Python's ``re`` on random regular grammars, and tables."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest
from conftest import corpus
from feed import accepts
from hypothesis import given, reject, settings
from hypothesis import strategies as st
from llamay._core.lowering import kept_except_items, lower

from llamay import GrammarError, LlamayError, Matcher, compile_json_schema, ir
from llamay.grammars.json_lexical import key_excluding
from llamay.grammars.jsonschema.compiler import schema_expr
from llamay.options import CompileOptions, Limits
from tests.irgen import ALPHABET, exprs, grammars, to_regex

_texts = st.binary(max_size=12) | st.lists(st.sampled_from([*ALPHABET, *"é".encode()]), max_size=24).map(bytes)


@settings(max_examples=300, deadline=None)
@given(grammars(recursive=False), st.lists(_texts, min_size=1, max_size=8))
def test_regular_grammars_accept_exactly_what_re_fullmatches(g, texts):
    compiled = g.compile()
    pattern = re.compile(to_regex(g.rules["root"]), re.DOTALL)
    for text in texts:
        assert accepts(compiled, text) == bool(pattern.fullmatch(text)), text


_words = st.lists(st.sampled_from(ALPHABET), max_size=4).map(bytes) | _texts


@settings(max_examples=300, deadline=None)
@given(exprs(refs=False), st.lists(_words, max_size=5), st.lists(_texts, min_size=1, max_size=8), st.booleans())
def test_except_accepts_what_its_item_does_but_the_words(item, words, texts, repeated):
    """The words' trie over the item's DFA: where the item ends, a word must not (alone, or up to three times)."""
    body = ir.Except(item, tuple(words))
    g = ir.Grammar()
    g.define("root", ir.seq(ir.Repeat(body, 0, 3) if repeated else body, ir.literal(";")))
    try:
        compiled = g.compile()
    except GrammarError as e:
        assert "Except item" in str(e)  # whitespace bytes or a counter inside: refused by name
        reject()
    one = re.compile(to_regex(item), re.DOTALL)

    def matches(piece: bytes) -> bool:
        return bool(one.fullmatch(piece)) and piece not in words

    for text in [*words, *texts]:
        if repeated:
            ends, reached = {0}, {0}
            for _ in range(3):
                ends = {j for i in ends for j in range(i, len(text) + 1) if matches(text[i:j])}
                reached |= ends
            want = len(text) in reached
        else:
            want = matches(text)
        assert accepts(compiled, text + b";") == want, text


def test_an_except_items_dfa_is_kept_for_later_compiles():
    """Its subset construction runs in the interpreter: built at every open object, it was a
    third of a large schema's lowering with open objects."""
    key = key_excluding(["a"]).item
    for names in (["a", "b"], ["c"]):
        compile_json_schema({"properties": {name: {"type": "integer"} for name in names}}, closed_objects=False)
        assert key in kept_except_items()


@settings(max_examples=200, deadline=None)
@given(grammars(recursive=False), _texts)
def test_byte_by_byte_and_whole_agree(g, text):
    """h11's habit: the same verdict fed whole and one byte at a time."""
    compiled = g.compile()
    whole, single = Matcher(compiled), Matcher(compiled)
    ok_whole = whole.accept_bytes(text)
    ok_single = all(single.accept_bytes(text[i : i + 1]) for i in range(len(text)))
    assert ok_whole == ok_single
    if ok_whole:
        assert whole.is_accepting() == single.is_accepting()


@settings(max_examples=300, deadline=None)
@given(grammars(recursive=True), st.lists(_texts, max_size=6))
def test_any_bytes_advance_or_are_rejected_without_change(g, texts):
    try:
        compiled = g.compile()
    except GrammarError:
        return  # left recursion and friends: refused, which is tested below
    m = Matcher(compiled)
    for text in texts:
        before = (m.steps, m.is_accepting())
        if not m.accept_bytes(text):
            assert (m.steps, m.is_accepting()) == before


NESTED = ir.Grammar()
NESTED.define("root", ir.alt(ir.seq(ir.literal("("), ir.Ref("root"), ir.literal(")")), ir.literal("x")))


@pytest.mark.parametrize(
    ("text", "accepted"),
    [(b"x", True), (b"(x)", True), (b"((((x))))", True), (b"((x)", False), (b"(x))", False), (b"()", False)],
)
def test_recursion_is_a_real_pushdown(text, accepted):
    assert accepts(NESTED.compile(), text) == accepted


def test_counted_repetition_keeps_exact_bounds():
    g = ir.Grammar()
    g.define("root", ir.repeat(ir.byte_set(b"ab"), 3, 4000))
    compiled = g.compile()
    assert compiled.n_states < 20  # a counter, not 4000 copies
    assert not accepts(compiled, b"ab")
    assert accepts(compiled, b"aba")
    assert accepts(compiled, b"a" * 4000)
    assert not accepts(compiled, b"a" * 4001)


def test_whitespace_budget_bounds_structural_whitespace_per_document():
    g = ir.Grammar()
    g.define("root", ir.seq(ir.literal("["), ir.star(ir.alt(ir.whitespace(), ir.literal("1"))), ir.literal("]")))
    compiled = g.compile(options=CompileOptions(whitespace_budget=5))
    assert accepts(compiled, b"[ 1 1 1 1 ]")
    assert not accepts(compiled, b"[ 1 1 1 1  ]")
    assert accepts(g.compile(options=CompileOptions(whitespace_budget=None)), b"[" + b" " * 1000 + b"]")


def _rules(**rules):
    g = ir.Grammar()
    for name, expr in rules.items():
        g.define(name, expr)
    return g


@pytest.mark.parametrize(
    ("grammar", "rule", "needle"),
    [
        (_rules(root=ir.seq(ir.Ref("root"), ir.literal("a"))), "root", "left recursion"),
        (_rules(root=ir.alt(ir.seq(ir.Ref("b"), ir.literal("a")), ir.literal("c")), b=ir.Ref("root")), "root", "root"),
        (
            _rules(root=ir.alt(ir.seq(ir.optional(ir.literal("x")), ir.Ref("root"), ir.literal("a")), ir.literal("c"))),
            "root",
            "left recursion",
        ),
        (_rules(root=ir.Ref("nowhere")), "root", "undefined rule 'nowhere'"),
        (_rules(root=ir.Alt(())), "root", "empty alternative"),
        (_rules(root=ir.Bytes(())), "root", "empty byte set"),
        (_rules(other=ir.literal("a")), "root", "root rule"),
        (_rules(root=ir.Repeat(ir.literal("a"), 3, 2)), "root", "bounds"),
        (_rules(root=ir.Repeat(ir.literal("a"), 0, 5000)), "root", "MAX_REPEAT"),
    ],
    ids=["direct-left", "indirect-left", "nullable-prefix-left", "undefined", "empty-alt", "empty-bytes", "no-root",
         "bad-bounds", "over-max-repeat"],
)
def test_refused_grammars_name_the_rule(grammar, rule, needle):
    with pytest.raises(GrammarError) as err:
        grammar.compile()
    assert err.value.rule == rule
    assert needle in str(err.value)


def test_nested_repetitions_stay_small():
    expr = ir.literal("ab")
    for bounds in [(0, 50), (1, 60), (2, 70), (0, 80)]:
        expr = ir.Repeat(expr, *bounds)
    compiled = _rules(root=expr).compile()
    assert compiled.n_states < 100


def test_counted_repetition_of_a_nullable_rule_does_not_spin_the_counter():
    g = _rules(root=ir.Repeat(ir.Repeat(ir.Ref("n"), 0, 30), 0, 30), n=ir.optional(ir.literal("b")))
    assert accepts(g.compile(), b"b" * 900)
    assert not accepts(g.compile(), b"b" * 901)


def test_counted_repetition_of_a_nullable_recursive_rule_is_refused():
    g = _rules(root=ir.Repeat(ir.Ref("n"), 0, 100),
               n=ir.alt(ir.EMPTY, ir.seq(ir.literal("("), ir.Ref("n"), ir.literal(")"))))
    with pytest.raises(GrammarError, match="empty string and recurses"):
        g.compile()


def test_right_recursion_runs_in_constant_stack():
    g = _rules(root=ir.alt(ir.seq(ir.byte_set(b"ab"), ir.Ref("root")), ir.literal(".")))
    m = Matcher(g.compile())
    assert m.accept_bytes(b"ab" * 5000)
    assert all(stack == () for _, _, stack, _ in m.configurations())


def test_thousands_of_alternatives_share_their_prefixes():
    g = _rules(root=ir.alt(*(ir.literal(f"w{i}") for i in range(5000))))
    m = Matcher(g.compile())
    assert m.accept_bytes(b"w4999") and m.is_accepting()


def _quotient(compiled):
    """The automaton with every state replaced by the first state of its class (edges, rule starts)."""
    arrays = {name: a.copy() for name, a in compiled.tables.items()}
    canon = compiled.state_classes
    for name in ("b_tgt", "x_tgt", "rule_start"):
        arrays[name] = canon[arrays[name]].astype(arrays[name].dtype)
    return type(compiled)(arrays, -1, list(compiled.rule_names), [], compiled.limits)


_BYTES = sorted({*ALPHABET, *"é".encode()})


@settings(max_examples=300, deadline=None)
@given(grammars(recursive=True), st.data())
def test_state_classes_keep_every_verdict(g, data):
    """Merging each bisimulation class onto one state changes no verdict: along a random walk
    through the language, every next byte and the end are judged alike."""
    try:
        compiled = g.compile()
    except GrammarError:
        return
    canon = compiled.state_classes
    assert (canon[canon] == canon).all() and (canon <= range(len(canon))).all()
    a, b = Matcher(compiled), Matcher(_quotient(compiled))
    for _ in range(data.draw(st.integers(0, 30))):
        assert a.is_accepting() == b.is_accepting()
        live = []
        for x in _BYTES:
            try:
                ok = a.accept_bytes(bytes([x]))
            except LlamayError as exc:  # a recursive grammar can be refused as too ambiguous: the walk ends
                assert "MAX_CONFIGURATIONS" in str(exc)
                reject()
            assert ok == b.accept_bytes(bytes([x])), bytes([x])
            if ok:
                live.append(x)
                a.rollback(1)
                b.rollback(1)
        if not live:
            break
        x = bytes([data.draw(st.sampled_from(live))])
        assert a.accept_bytes(x) and b.accept_bytes(x)


def _coarsest_bisimulation(t) -> list[int]:
    """Partition refinement in plain Python, round by round (the oracle): a class id per state."""
    n = len(t["final"])
    cls = [int(t["state_rule"][s]) * 2 + int(t["final"][s]) for s in range(n)]
    count = len(set(cls))
    while True:
        table: dict = {}
        new = [table.setdefault((cls[s], *_signature(t, cls, s)), len(table)) for s in range(n)]
        if len(table) == count:
            return new
        cls, count = new, len(table)


def _signature(t, cls, s):
    b, x = range(t["b_start"][s], t["b_start"][s + 1]), range(t["x_start"][s], t["x_start"][s + 1])
    byte = {(int(t["b_lo"][e]), int(t["b_hi"][e]), int(t["b_ws"][e]), cls[t["b_tgt"][e]]) for e in b}
    special = {(int(t["x_kind"][e]), int(t["x_arg"][e]), cls[t["x_tgt"][e]]) for e in x}
    return tuple(sorted(byte)), tuple(sorted(special))


def _check_classes(compiled):
    """The same partition as the oracle's, each class named by its first state."""
    ref = _coarsest_bisimulation(compiled.tables)
    first: dict[int, int] = {}
    for s, c in enumerate(compiled.state_classes.tolist()):
        assert c == first.setdefault(ref[s], s), s


@settings(max_examples=200, deadline=None)
@given(grammars(recursive=True))
def test_state_classes_are_the_coarsest_bisimulation(g):
    try:
        compiled = g.compile()
    except GrammarError:
        return
    _check_classes(compiled)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "minimum": 0},
        {"type": "integer", "minimum": -5, "maximum": 1200},
        {"type": "string", "pattern": "^[a-z0-9_-]{2,40}$"},
        {"type": "object", "properties": {"base": {"type": "number"}, "side": {"type": "string"}}},
        {"type": "array", "items": {"type": "string", "format": "date-time"}, "maxItems": 3},
        {  # from JSONSchemaBench (Github_easy): digits in a number and in a string pattern, side by side
            "type": "object",
            "properties": {
                "customFloor": {"minimum": 0, "type": "number"},
                "customParams": {"type": "object"},
                "delDomain": {"pattern": "\\.[a-zA-Z]{2,3}$", "type": "string"},
                "unit": {"pattern": "^[0-9]+$", "type": "string"},
            },
            "required": ["unit", "delDomain"],
        },
    ],
    ids=["minimum", "range", "pattern", "open-object", "date-times", "openx-adapter"],
)
def test_state_classes_of_schemas_are_the_coarsest_bisimulation(schema):
    """Schemas lower to long chains (number bounds, unrolled repetitions) that random grammars rarely build."""
    _check_classes(compile_json_schema(schema, closed_objects=False))


@pytest.mark.parametrize("subset", ["Github_easy", "Glaiveai2K"])
def test_state_classes_on_a_corpus_sample(subset):
    """Every 25th schema of a JSONSchemaBench subset: real schemas split classes in orders the others do not."""
    with gzip.open(corpus("jsonschemabench", f"{subset}.jsonl.gz"), "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for i, line in enumerate(lines) if i % 25 == 0]
    for record in records:
        try:
            compiled = compile_json_schema(record["schema"], closed_objects=False)
        except LlamayError:
            continue
        _check_classes(compiled)


def test_alternatives_that_end_alike_share_classes():
    """``ab;|cb;`` lowers to two paths: the states of their common ending behave alike."""
    g = ir.Grammar()
    g.define("root", ir.alt(ir.literal("ab;"), ir.literal("cb;")))
    compiled = g.compile()
    assert len(set(compiled.state_classes.tolist())) < compiled.n_states


@pytest.mark.parametrize("expr", [
    ir.plus(ir.seq(ir.byte_set(b"ab"), ir.byte_set(b"cd"))),
    ir.seq(ir.literal("x"), ir.star(ir.seq(ir.literal(","), ir.literal("x")))),
    ir.repeat(ir.literal("xy"), 2, None),
], ids=["plus", "list", "at-least-two"])
def test_a_loop_holds_one_copy_of_its_item(expr):
    """``x+`` and a list ``A (S A)*`` loop through one copy of the repeated part, so no two states
    behave alike (bisimulation would have had copies to merge)."""
    g = ir.Grammar()
    g.define("root", ir.seq(ir.literal("["), expr, ir.literal("]")))
    compiled = g.compile()
    assert len(set(compiled.state_classes.tolist())) == compiled.n_states


def test_a_rule_lowers_alike_whatever_was_lowered_before():
    """Lowering keeps what it built for permanent bodies (``ir.permanent``: the JSON integer)
    across compiles, and nothing it keeps may change how a later grammar lowers. A cache of rule
    references once kept ``root``'s answer (it names ``z``) under the integer's id, so that a
    later rule ``z`` whose body is the integer seemed to call itself and became a frame."""
    from llamay.grammars import json_lexical as jg

    integer = jg.integer(jg.NUMBER_DIGITS.integer)

    def later() -> list[str]:
        g = ir.Grammar()
        g.define("z", integer)
        g.define("root", ir.seq(ir.Ref("z"), ir.literal("!")))
        return g.compile().rule_names

    before = later()
    g = ir.Grammar()
    g.define("z", ir.literal("q"))
    g.define("root", ir.seq(ir.Ref("z"), ir.alt(ir.seq(integer, ir.literal("x")), integer)))
    g.compile()
    assert later() == before == ["root"]


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("subset", ["Github_easy", "Glaiveai2K", "Kubernetes"])
def test_copied_fragments_lower_exactly_as_built_ones(subset, closed):
    """Lowering copies a fragment it built before for the same IR node (schemas repeat subtrees),
    and a permanent frame (the any-JSON rules of open objects) kept from an earlier compile:
    every 10th schema of a subset lowers to the same tables as when every fragment is built."""
    with gzip.open(corpus("jsonschemabench", f"{subset}.jsonl.gz"), "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for i, line in enumerate(lines) if i % 10 == 0]
    compared = 0
    for record in records:
        grammar, warnings = ir.Grammar(), []
        options = CompileOptions(closed_objects=closed)
        try:
            grammar.define("root", schema_expr(grammar, record["schema"], "", warnings, options))
            copied = lower(grammar.rules, "root", options, warnings=[])
        except LlamayError:
            continue
        built = lower(grammar.rules, "root", options, warnings=[], copies=False).tables
        for name, array in copied.tables.items():
            np.testing.assert_array_equal(array, built[name], err_msg=name)
        compared += 1
    assert compared >= len(records) // 2


def test_a_permanent_frame_is_kept_only_where_its_calls_are_calls():
    """A permanent body's frame, kept from one grammar, is reused in another only where every rule it
    calls is a frame there too; where one is inlined instead, the body is built again."""
    body = ir.permanent(ir.seq(ir.literal("a"), ir.Ref("t")))
    recursive = ir.alt(ir.literal("b"), ir.seq(ir.literal("c"), ir.Ref("t")))  # a frame: the body calls it
    for t, text, other in [(recursive, b"accb", b"ad"), (ir.literal("d"), b"ad", b"ab"), (recursive, b"ab", b"ad")]:
        g = ir.Grammar()
        g.define("root", body)
        g.define("t", t)
        kept = g.compile()
        built = lower(g.rules, "root", CompileOptions(whitespace_budget=None), warnings=[], copies=False)
        for name, array in kept.tables.items():
            np.testing.assert_array_equal(array, built.tables[name], err_msg=name)
        assert accepts(kept, text) and not accepts(kept, other)
        assert ("t" in kept.rule_names) == (t is recursive)


@pytest.mark.parametrize("wraps", [0, 2, 6])
def test_a_copied_fragment_is_refused_as_deep_as_a_built_one(wraps):
    """A node used twice, then a third time nested deeper: with copies it is refused (MAX_DEPTH)
    exactly where building it would be, and otherwise lowers to the same tables."""
    node = ir.literal("ab")
    for i in range(3):
        node = ir.alt(ir.seq(ir.literal("x"), node), ir.literal(f"y{i}"))
    wrapped = node
    for i in range(wraps):
        wrapped = ir.alt(ir.seq(ir.literal("z"), wrapped), ir.literal(f"w{i}"))
    rules = {"root": ir.seq(node, ir.literal(";"), node, ir.literal(";"), wrapped)}
    outcomes = []
    for copies in (True, False):
        try:
            options = CompileOptions(whitespace_budget=None, limits=Limits(max_depth=16))
            outcomes.append(lower(rules, "root", options, warnings=[], copies=copies).tables)
        except GrammarError as exc:
            assert "MAX_DEPTH" in str(exc)
            outcomes.append(None)
    assert (outcomes[0] is None) == (outcomes[1] is None) == (wraps == 6)
    if outcomes[0] is not None:
        for name, array in outcomes[0].items():
            np.testing.assert_array_equal(array, outcomes[1][name], err_msg=name)
