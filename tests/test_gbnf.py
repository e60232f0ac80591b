"""GBNF: what the parser builds, what the compiled grammar accepts, and what is refused.

Three tables drive the tests:
- ``PARSE_CASES``: grammar text and the hand-written IR it must mean (the kinds of
  llama.cpp's test-grammar-parser, compared as meaning, not as llama.cpp's element lists);
- ``CORPUS_CASES`` and ``INLINE_CASES``: strings accepted and rejected, for the grammars of
  ../shared/testdata/gbnf/llama.cpp and for grammars written here (the kinds of
  test-grammar-integration: quantifier edges, ``.`` over multi-byte characters, nested
  repetition, classes above U+007F, empty alternatives, comments, escapes);
- ``ERROR_CASES``: refused text and the rule, line and column the error must name.

A string is accepted when the byte-level matcher takes all of its bytes and then accepts;
every string is fed whole and byte by byte, and both verdicts must agree.
"""

from __future__ import annotations

import functools
import time

import pytest
from conftest import TESTDATA, corpus

from llamay import ir
from llamay.errors import GrammarError
from llamay.grammars.gbnf import compile_gbnf, parse_gbnf
from llamay.grammars.utf8 import ANY_CHAR, char_class
from llamay.options import DEFAULT

B = ir.byte_range
L = ir.literal
R = ir.Ref


def cc(*ranges: str | tuple[str, str], negated: bool = False) -> ir.Expr:
    """A class from characters and (lo, hi) character pairs, as the IR spells it."""
    pairs = [(ord(r), ord(r)) if isinstance(r, str) else (ord(r[0]), ord(r[1])) for r in ranges]
    return char_class(pairs, negated=negated)


# ---------------------------------------------------------------------------------------
# The parser's output: text -> the IR it means
# ---------------------------------------------------------------------------------------

PARSE_CASES = {
    "single-literal": ('root ::= "a"', {"root": B(97)}),
    "multi-byte-literal-is-its-utf8-bytes": ('root ::= "é😀"', {"root": L("é😀".encode())}),
    "alternation-of-literal-class-and-negated-class": (
        'root ::= "ab" | [bdx-z] | [^1-3]',
        {"root": ir.alt(L("ab"), cc("b", "d", ("x", "z")), cc(("1", "3"), negated=True))},
    ),
    "star-plus-optional-on-references": (
        'root ::= a* b+ c?\na ::= "a"\nb ::= "b"\nc ::= "c"',
        {"root": ir.seq(ir.star(R("a")), ir.plus(R("b")), ir.optional(R("c"))), "a": B(97), "b": B(98), "c": B(99)},
    ),
    "postfix-applies-to-the-whole-literal": ('root ::= "ab"*', {"root": ir.star(L("ab"))}),
    "postfix-applies-to-the-last-item-only": ('root ::= "a" "b"+', {"root": ir.seq(B(97), ir.plus(B(98)))}),
    "stacked-postfix-operators-nest": ('root ::= "a"*?', {"root": ir.optional(ir.star(B(97)))}),
    "exact-count": ('root ::= "a"{2}', {"root": ir.repeat(B(97), 2, 2)}),
    "minimum-count": ('root ::= "a"{2,}', {"root": ir.repeat(B(97), 2, None)}),
    "space-inside-braces": ('root ::= "a"{ 4}', {"root": ir.repeat(B(97), 4, 4)}),
    "count-range": ('root ::= "a"{2,4}', {"root": ir.repeat(B(97), 2, 4)}),
    "count-range-with-spaces": ('root ::= "a"{ 2 , 4 }', {"root": ir.repeat(B(97), 2, 4)}),
    "zero-count": ('root ::= "a"{0}', {"root": ir.repeat(B(97), 0, 0)}),
    "count-at-the-limit-with-leading-zeros": ('root ::= "a"{0004096}', {"root": ir.repeat(B(97), 4096, 4096)}),
    "repetition-of-a-group": (
        'root ::= ("a" | "b")+ "c"',
        {"root": ir.seq(ir.plus(ir.alt(B(97), B(98))), B(99))},
    ),
    "redundant-parentheses-vanish": ('root ::= ((("a")))', {"root": B(97)}),
    "leading-empty-alternative": ('root ::= | "a"', {"root": ir.alt(ir.EMPTY, B(97))}),
    "trailing-empty-alternative": ('root ::= "a" |', {"root": ir.alt(B(97), ir.EMPTY)}),
    "empty-literal": ('root ::= ""', {"root": ir.EMPTY}),
    "empty-group": ('root ::= "a" () "b"', {"root": L("ab")}),
    "duplicate-alternatives-merge": ('root ::= "a" | "a" | "b"', {"root": ir.alt(B(97), B(98))}),
    "dot-is-any-character": ("root ::= .", {"root": ANY_CHAR}),
    "literal-escapes": (
        r'root ::= "\n\r\t\\\"\[\]\x41\u00e9\U0001F600"',
        {"root": L('\n\r\t\\"[]Aé😀'.encode())},
    ),
    "hex-escape-is-a-code-point-not-a-byte": (r'root ::= "\x85"', {"root": L(b"\xc2\x85")}),
    "class-with-leading-dash": ("root ::= [-+*/]", {"root": cc("-", "+", "*", "/")}),
    "class-with-trailing-dash": ("root ::= [a-]", {"root": cc("a", "-")}),
    "class-escapes-and-caret-inside": (r"root ::= [\]\\^\x41-\x43]", {"root": cc("]", "\\", "^", ("A", "C"))}),
    "empty-negated-class-is-any-character": ("root ::= [^]", {"root": ANY_CHAR}),
    "class-with-raw-utf8-range": ("root ::= [ぁ-ゟ]", {"root": cc(("ぁ", "ゟ"))}),
    "negated-class-above-u007f": (
        r"root ::= [^\x85\u2028]",
        {"root": cc("\x85", "\u2028", negated=True)},
    ),
    "comments-everywhere": (
        '# leading\nroot ::= ( "a" # inside a group\n | "b" ) # trailing\n# last line',
        {"root": ir.alt(B(97), B(98))},
    ),
    "hash-inside-literal-and-class-is-text": ('root ::= "#" [#]', {"root": ir.seq(B(35), cc("#"))}),
    "rule-continues-after-definition-and-bar-and-in-groups": (
        'root ::=\n  "a" |\n  ( "b"\n    "c" )',
        {"root": ir.alt(B(97), L("bc"))},
    ),
    "crlf-line-endings": ('root ::= a\r\na ::= "x"\r\n', {"root": R("a"), "a": B(120)}),
    "names-with-dashes-digits-underscores": (
        'root ::= my-rule_2 3d\nmy-rule_2 ::= "x"\n3d ::= "y"',
        {"root": ir.seq(R("my-rule_2"), R("3d")), "my-rule_2": B(120), "3d": B(121)},
    ),
    "reference-followed-by-group-without-space": (
        'root ::= f("a")\nf ::= "x"',
        {"root": ir.seq(R("f"), B(97)), "f": B(120)},
    ),
    "raw-newline-inside-literal": ('root ::= "a\nb"', {"root": L("a\nb")}),
    "arithmetic-grammar-means-its-expansion": (
        'root  ::= (expr "=" ws term "\\n")+\n'
        "expr  ::= term ([-+*/] term)*\n"
        'term  ::= ident | num | "(" ws expr ")" ws\n'
        "ident ::= [a-z] [a-z0-9_]* ws\n"
        "num   ::= [0-9]+ ws\n"
        "ws    ::= [ \\t\\n]*\n",
        {
            "root": ir.plus(ir.seq(R("expr"), B(61), R("ws"), R("term"), B(10))),
            "expr": ir.seq(R("term"), ir.star(ir.seq(cc("-", "+", "*", "/"), R("term")))),
            "term": ir.alt(R("ident"), R("num"), ir.seq(B(40), R("ws"), R("expr"), B(41), R("ws"))),
            "ident": ir.seq(cc(("a", "z")), ir.star(cc(("a", "z"), ("0", "9"), "_")), R("ws")),
            "num": ir.seq(ir.plus(cc(("0", "9"))), R("ws")),
            "ws": ir.star(cc(" ", "\t", "\n")),
        },
    ),
}


@pytest.mark.parametrize(("text", "rules"), PARSE_CASES.values(), ids=PARSE_CASES.keys())
def test_parser_builds_the_ir_the_text_means(text, rules):
    assert parse_gbnf(text).grammar.rules == rules


def test_positions_name_where_each_rule_is_defined():
    text = '# comment\nroot ::= a\n\n  a ::= "x" |\n    "y"\nb-2 ::= "z"'
    assert parse_gbnf(text).positions == {"root": (2, 1), "a": (4, 3), "b-2": (6, 1)}


# ---------------------------------------------------------------------------------------
# Acceptance: the compiled grammar over bytes
# ---------------------------------------------------------------------------------------


@functools.cache
def compiled(text: str, root: str = "root"):
    return compile_gbnf(text, root)


def matcher(grammar):
    return pytest.importorskip("llamay._core.matcher", reason="the Cython core is not built").Matcher(grammar)


def accepts(grammar, data: str | bytes) -> bool:
    """Whole and byte by byte, with the same verdict (h11's ``tr()`` habit)."""
    raw = data.encode() if isinstance(data, str) else data
    whole = matcher(grammar)
    verdict = whole.accept_bytes(raw) and whole.is_accepting()
    stepped = matcher(grammar)
    assert verdict == (all(stepped.accept_bytes(raw[i : i + 1]) for i in range(len(raw))) and stepped.is_accepting())
    return verdict


# Cases that fail because of a known bug below the parser, with the reason. Strict: when the
# bug is fixed the case passes, pytest reports it, and its entry here is removed.
KNOWN_BUGS: dict[tuple[str, str], str] = {}


def cases(name: str, accepted: list, rejected: list):
    for expected, strings in ((True, accepted), (False, rejected)):
        for data in strings:
            bug = KNOWN_BUGS.get((name, data))
            marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
            verb = "accepts" if expected else "rejects"
            yield pytest.param(name, data, expected, id=f"{name}-{verb}-{data!r:.40}", marks=marks)


# The quirks of these grammars (TEST-CASE-KINDS.md, last section) are tested as written:
# json.gbnf's exponent is [0-9] [1-9]{0,15}, integers stop at 16 digits, indents at 20.
CORPUS_CASES: dict[str, tuple[list, list]] = {
    "arithmetic.gbnf": (
        ["1+2=3\n", "x = 5\n", "(a+b)*c=d\n", "a=b\nc=d\n", "1 +2 =3\n", "foo_1/( 1 +2 )=3\n", "x=( 1 )\n", "x=\ty\n"],
        ["", "1+2=3", "1+=3\n", "+1=2\n", "1+2\n", "A=1\n", "(1=2\n", "1 + 2=3\n", "=1\n", "1=2=3\n"],
    ),
    "c.gbnf": (
        [
            "",
            "int main(){}",
            "int f(int x){return x;}",
            "int main(){x = 1;}",
            "int main(){while(a<b){a = a+1;}}",
            "float g(){// hi\n}",
            "char h(){/* a * b */}",
            "int f(){foo (1, 2);}",
            "int f(){if(x==1){return 0;}else{return 1;}}",
            "int f(){for(int i = 0; i<10; i = i+1){}}",
            "int f(){x = -y*( z+1 );}",
            "int a(){}char b(){}",
        ],
        [
            "int main()",
            "int main(){x = 1}",
            "intmain(){}",
            "void main(){}",
            "int main(){x=1;}",
            "int f(){/* never closed}",
            "int f(){foo(1);}",
            "int f(){x = -y*(z+1);}",
            "int f(){foo (,);}",
            "int 1f(){}",
        ],
    ),
    "chess.gbnf": (
        [
            "1. e4 e5\n2. Nf3 Nc6\n",
            "1. d4 d5\n2. c4 dxc4\n3. e4 O-O-O\n",
            "1. e4 e5\n10. Qxf7# O-O\n",
            "1. e8=Q+ Rh1\n99. a1=N Kb2\n",
            "1. Nbd7 R1e2\n2. Bxe5 exd5\n",
        ],
        [
            "1. e4 e5\n",
            "1. e4 e5\n2. Nf3 Nc6",
            "1. e9 e5\n2. a3 a6\n",
            "1. e4 e5\n0. a3 a6\n",
            "1. e4 e5\n100. a3 a6\n",
            "1. Pe4 e5\n2. a3 a6\n",
            "1. e4  e5\n2. a3 a6\n",
            "1. O-O-O-O e5\n2. a3 a6\n",
            "1. e4 e5\n2. e4++ a6\n",
            "2. e4 e5\n3. a3 a6\n",
        ],
    ),
    "english.gbnf": (
        ["Hello, world!", "a\tb\nc", "[x]", "a\\b", "^_^", "{}~`", "It's 3:45 (p.m.)", '"quoted"'],
        ["", " leading", "trailing ", "two  spaces", "café", "a\rb", "a\x00b"],
    ),
    "japanese.gbnf": (
        ["こんにちは", "カタカナ", "日本語", "東京、大阪。", "ひらがな カタカナ", "ぁゟァヿ、〾一鿿"],
        [
            "hello",
            "日本語 ",
            "ｱ",  # U+FF71, halfwidth katakana
            "゠",  # U+30A0, one before the katakana range
            "〿",  # U+303F, one past the punctuation range
            "ꀀ",  # U+A000, one past the CJK range
            "぀",  # U+3040, one before hiragana
            "㐀",  # U+3400, CJK extension A
            "日本語".encode()[:-1],  # cut inside a character
            b"\xe0\x81\x81",  # an overlong encoding
        ],
    ),
    "json.gbnf": (
        [
            "{}",
            "{} ",
            '{"a": 1}',
            '{"a":[1,2.5,-3e1,true,null]}',
            '{"k": "\\u00e9\\n\\"\\\\"}',
            '{\n  "a": {"b": []}\n}',
            '{"é": "日本"}',
            '{"a": 1e1}',
            '{"a": 1234567890123456}',
            "{\n" + " " * 20 + '"a": 0}',
            '{"a": -0.5E+9}',
        ],
        [
            "[]",
            "{}  ",
            '{"a":01}',
            '{"a":1,}',
            '{"a"}',
            "{a:1}",
            '{"a":"\x01"}',
            '{"a":"\x7f"}',
            '{"a":"\\q"}',
            '{"a":"\\u12"}',
            '{"a":tru}',
            '{"a":1.}',
            '{"a":.5}',
            '{"a":1}x',
            "{",
            '{"a": 1e10}',
            '{"a": 12345678901234567}',
            "{\n" + " " * 21 + '"a": 0}',
        ],
    ),
    "json_arr.gbnf": (
        ["[\n]", "[\n1,\n2]", '[\n{"a": 1},\n"x"]', "[\n 1,\n 2\n]", "[\n1e10]", "[\ntrue,\nnull]"],
        ["[]", "[\n1, 2]", "[\n1,\n2] ", "[\n1e0]", "[\n  1]", "{}", "[\n1,\n]"],
    ),
    "list.gbnf": (
        [
            "- a\n",
            "- milk\n- eggs\n",
            "- café ☕\n",
            "- tab\there\n",
            "- \x86 next to NEL\n",
            "- \u2027\u202a\n",
            "- emoji 😀\n",
        ],
        [
            "",
            "- \n",
            "- a",
            "-a\n",
            "- a\rb\n",
            "- a\x0bb\n",
            "- a\x0cb\n",
            "- a\x85b\n",
            "- a\u2028b\n",
            "- a\u2029b\n",
            b"- \x85\n",  # a lone continuation byte is not UTF-8
            b"- \xc2\n",
        ],
    ),
}

CORPUS_DIR = TESTDATA / "gbnf" / "llama.cpp"
CORPUS_FILES = sorted({p.name for p in CORPUS_DIR.glob("*.gbnf")} | set(CORPUS_CASES))


def corpus_text(name: str) -> str:
    return (corpus("gbnf", "llama.cpp") / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_grammar_compiles(name):
    pytest.importorskip("llamay._core.automaton", reason="the Cython core is not built")
    assert compiled(corpus_text(name)) is not None


@pytest.mark.parametrize(
    ("name", "data", "expected"), [c for name, (ok, bad) in CORPUS_CASES.items() for c in cases(name, ok, bad)]
)
def test_corpus_grammar_accepts_what_it_means(name, data, expected):
    assert accepts(compiled(corpus_text(name)), data) == expected


INLINE_CASES: dict[str, tuple[str, list, list]] = {
    "dot-is-one-code-point-of-any-length": (
        'root ::= ... "abc" ...',
        ["123abc456", "日本語abc😀😀😀", "\n\t\x00abcé\x7f\U0010ffff"],
        ["12abc456", "1234abc456", "abc", "123abc45", b"\xff\xff\xffabc123", b"\x80\x80\x80abc123"],
    ),
    "dot-rejects-what-is-not-utf8": (
        "root ::= .",
        ["a", "é", "€", "😀"],
        ["", "ab", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xff"],
    ),
    "star": ('root ::= "a"*', ["", "a", "a" * 100], ["b", "aab", "a" * 99 + "b"]),
    "plus": ('root ::= "a"+', ["a", "a" * 100], ["", "b", "aab"]),
    "optional": ('root ::= "a"?', ["", "a"], ["aa", "b"]),
    "mixed-quantifiers-over-classes": (
        "root ::= [aeiou]+ [bcdfg]* [aeiou]?",
        ["a", "aebbe", "ieee", "abca", "oooo"],
        ["", "b", "abcab", "aX"],
    ),
    "exact-count": ("root ::= [ab]{4}", ["abab", "bbbb"], ["aba", "ababa", ""]),
    "minimum-count": ("root ::= [ab]{4,}", ["abab", "a" * 50], ["aba", ""]),
    "maximum-count": ("root ::= [ab]{0,4}", ["", "a", "abab"], ["ababa"]),
    "count-range-over-group-with-inner-count": (
        'root ::= ([a-z]{2} " "?){3,5}',
        ["abcdef", "ab cd ef ", "ab cd ef gh ij", "abcd efgh ij "],
        ["ab cd", "abcdefghijkl", "ab cd e", "ab  cd ef", "ab cd ef gh ij kl"],
    ),
    "large-count-edges": ('root ::= "x"{100,200}', ["x" * 100, "x" * 150, "x" * 200], ["x" * 99, "x" * 201, ""]),
    "count-at-max-repeat": ("root ::= [0-9]{1,4096}", ["7", "1" * 4096], ["", "1" * 4097, "1" * 100 + "a"]),
    "large-minimum-count": ('root ::= "ab"{300,}', ["ab" * 300, "ab" * 1000], ["ab" * 299, "ab" * 300 + "a"]),
    "zero-count-matches-nothing-there": ('root ::= "a" "b"{0} "c"', ["ac"], ["abc", "a"]),
    "zero-count-inside-a-counted-repetition": ('root ::= ("x"{0}){0,100}', [""], ["x"]),
    "counted-repetition-inside-counted-repetition": (
        'root ::= ("a"{2,3}){2,3}',
        ["a" * n for n in range(4, 10)],
        ["a" * 3, "a" * 10, ""],
    ),
    "large-counts-nested": ('root ::= ("a"{100}){2,3}', ["a" * 200, "a" * 300], ["a" * 250, "a" * 100, "a" * 301]),
    "star-inside-star": ("root ::= ( [x]* )*", ["", "x", "xx", "x" * 30], ["y", "xy"]),
    "optional-inside-plus": ('root ::= ("a"? "b"?)+', ["", "a", "ab", "ba", "abba"], ["c"]),
    "multi-byte-range": ("root ::= [α-ω]+", ["αβγ", "ω"], ["Α", "a", "", "αa"]),
    "range-across-utf8-lengths": (
        r"root ::= [\x7f-\u0800]",
        ["\x7f", "\x80", "\u07ff", "\u0800"],
        ["\u0801", "~", b"\xc2", b"\xe0\xa0"],
    ),
    "range-up-to-four-byte-characters": (
        r"root ::= [\u0100-\U0001F600]",
        ["\u0100", "\uffff", "\U00010000", "\U0001f600"],
        ["\u00ff", "\U0001f601", b"\xed\xa0\x80"],
    ),
    "negated-single-character-above-u007f": ("root ::= [^é]", ["e", "日", "😀", "\x00"], ["é", "", b"\xc3"]),
    "negated-class-leaving-only-ascii": (r"root ::= [^\u0080-\U0010FFFF]+", ["abc", "\x00\x7f"], ["é", "aé"]),
    "negated-class-matches-whole-characters-only": (
        "root ::= [^a]+",
        ["bcd", "日本", "😀"],
        ["a", "ba", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80"],
    ),
    "trailing-empty-alternative": ('root ::= "a" |', ["", "a"], ["aa"]),
    "empty-alternative-in-group": ('root ::= ( | "b") "c"', ["c", "bc"], ["b", "bbc"]),
    "empty-group": ('root ::= "a" () "b"', ["ab"], ["a", "a b"]),
    "comments-are-not-text": (
        '# leading\nroot ::= ( "a" # inside, "quoted" [class\n | "b" ) # trailing\n',
        ["a", "b"],
        ["#", "a # inside"],
    ),
    "hash-in-literal-is-text": ('root ::= "#" [#]', ["##"], ["#"]),
    "literal-escapes": (
        r'root ::= "\x41\u00e9\U0001F600\t\r\n\\\"\[\]"',
        ['Aé😀\t\r\n\\"[]'],
        ["Aé😀", "\\x41"],
    ),
    "class-escapes": (r"root ::= [\x41-\x43\]\\]", ["A", "C", "]", "\\"], ["D", "[", "x"]),
    "hex-escape-is-a-code-point": (r'root ::= "\x85"', [b"\xc2\x85"], [b"\x85"]),
    "raw-utf8-literal": ('root ::= "日本"', ["日本"], ["日", "日本語"]),
    "crlf-line-endings": ('root ::= a\r\na ::= "x"\r\n', ["x"], ["", "xx"]),
    "reference-chain": ('root ::= a\na ::= b\nb ::= "x"', ["x"], ["", "xx"]),
    "right-recursion": ('root ::= "a" root | "b"', ["b", "ab", "a" * 500 + "b"], ["", "a", "ba"]),
    "balanced-parentheses": (
        'root ::= "(" root ")" root | ""',
        ["", "()", "(())()", "(" * 300 + ")" * 300],
        ["(", ")(", "(()", "())"],
    ),
    "recursion-through-a-group": ('root ::= "[" (root ("," root)*)? "]"', ["[]", "[[],[[]]]"], ["[", "[,]", "[[]"]),
    "nullable-rule-before-recursion-on-the-right": (
        'root ::= e "x" root?\ne ::= "blah" |',
        ["x", "blahx", "xblahxx"],
        ["", "blah", "bla"],
    ),
    "many-literal-alternatives": (
        "root ::= " + " | ".join(f'"w{i}"' for i in range(5000)),
        ["w4999"],
        ["w5000"],
    ),
    "medium-expression-grammar": (
        "root ::= expr\n"
        "expr ::= term ([-+*/] term)*\n"
        'term ::= name | num | call | "(" sp expr sp ")"\n'
        'call ::= name "(" sp (expr (sp "," sp expr)*)? sp ")"\n'
        "name ::= [a-z]+\n"
        "num ::= [0-9]+\n"
        "sp ::= [ \\t\\n\\r]?",
        ["x", "f(x)", "f( x , 1 )+g()", "( a*b )/c", "max(min(a,b),c)-1"],
        ["", "+", "x+", "f(,)", "(x", "x++y", "f(x", "x y", "f(x))"],
    ),
}


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [c for name, (_, ok, bad) in INLINE_CASES.items() for c in cases(name, ok, bad)],
)
def test_grammar_accepts_what_it_means(name, data, expected):
    assert accepts(compiled(INLINE_CASES[name][0]), data) == expected


def test_first_bytes_are_the_first_set():
    """A fresh matcher takes exactly the bytes that can start the grammar (test-llama-grammar's idea)."""
    g = compiled(corpus_text("arithmetic.gbnf"))
    first = set(b"abcdefghijklmnopqrstuvwxyz0123456789(")
    assert {b for b in range(256) if matcher(g).accept_bytes(bytes([b]))} == first


def test_another_rule_can_be_the_root():
    g = compiled('root ::= "a" expr\nexpr ::= [0-9]+', root="expr")
    assert accepts(g, "42")
    assert not accepts(g, "a42")


def test_deeply_nested_counts_end_in_bounded_time():
    """Nested {0,99} once hung llama.cpp: here it compiles or is refused by a size bound, quickly."""
    text = "root ::= ((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}"
    start = time.monotonic()
    try:
        compile_gbnf(text)
    except GrammarError as err:
        assert (err.rule, err.line, err.column) == ("root", 1, 1)
    assert time.monotonic() - start < 2 * DEFAULT.limits.compile_seconds


def test_nesting_at_the_depth_limit_compiles():
    """The parser's depth bound keeps the lowering, which recurses as deep, off the stack limit."""
    depth = DEFAULT.limits.max_depth - 1
    g = compiled("root ::= " + '"a"' + "?" * depth)
    assert accepts(g, "a") and accepts(g, "")
    g = compiled("root ::= " + "(" * depth + '"a" | "b"' + ")" * depth)
    assert accepts(g, "b") and not accepts(g, "ab")


@pytest.mark.parametrize("recursive", [False, True], ids=["inlined", "frames"])
def test_long_rule_chains_compile_without_deep_recursion(recursive):
    """20,000 rules each calling the next: sizes and frame bodies come from worklists, not the C stack.

    (The chain once crashed the process; before that, it raised RecursionError.)
    """
    n = 20_000
    loop = " | r0" if recursive else ""  # a cycle through every rule makes each one a frame
    text = "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1}\n' for i in range(n)) + f'r{n} ::= "b"{loop}\n'
    g = compiled(text)
    assert accepts(g, "a" * n + "b")
    assert not accepts(g, "a" * (n - 1) + "b")


# ---------------------------------------------------------------------------------------
# Refusals: rule, line and column
# ---------------------------------------------------------------------------------------

TOO_BIG = 'root ::= "' + "a" * DEFAULT.limits.max_source_bytes + '"'
TOO_BIG_IN_UTF8 = 'root ::= "' + "é" * (DEFAULT.limits.max_source_bytes // 2) + '"'

# (text, rule, line, column, message fragment); line and column 1-based, columns in characters
ERROR_CASES = {
    "token-terminal-by-text": ('root ::= <think> "x"', "root", 1, 10, "token terminal '<think>'.*constrains bytes"),
    "token-terminal-by-id": ('root ::= "a" <[1000]>', "root", 1, 14, "token terminal '<\\[1000\\]>'"),
    "negated-token-terminal": ('x ::= "a"\nroot ::= !<[11]>', "root", 2, 10, "token terminal '!<\\[11\\]>'"),
    "token-terminal-in-a-group": ('root ::= ( "a" | <b> )', "root", 1, 18, "token terminal"),
    "count-above-max-repeat": ('root ::= "a"{4097}', "root", 1, 14, "4097 is above 4096.*MAX_REPEAT"),
    "maximum-above-max-repeat": ('root ::= "a"{0,5000}', "root", 1, 16, "5000 is above 4096"),
    "minimum-above-max-repeat": ('root ::= "a"{5000,}', "root", 1, 14, "5000 is above 4096"),
    "huge-count": ('root ::= "a"{' + "9" * 5000 + "}", "root", 1, 14, "is above 4096"),
    "maximum-below-minimum": ('root ::= "a"{3,2}', "root", 1, 13, "maximum is below the minimum"),
    "count-without-minimum": ('root ::= "a"{,}', "root", 1, 14, "expected a repetition count"),
    "count-without-minimum-then-unterminated-literal": ('root ::= "a"{,10} "', "root", 1, 14, "repetition count"),
    "count-not-closed": ('root ::= "a"{2 "b"', "root", 1, 16, "expected ',' or '}'"),
    "undefined-rule-at-its-first-use": ('root ::= x\nx ::= "a" y | y', "y", 2, 11, "'y' is used in rule 'x'"),
    "undefined-rule-in-an-unreachable-rule": ('root ::= "a"\nz ::= w', "w", 2, 7, "never defined"),
    "unterminated-literal": ('root ::= "abc', "root", 1, 10, "string literal is never closed"),
    "unterminated-class": ("root ::= [abc", "root", 1, 10, "character class is never closed"),
    "class-with-dash-at-the-end-of-text": ("root ::= [a-", "root", 1, 10, "never closed"),
    "unknown-escape": (r'root ::= "\q"', "root", 1, 11, "unknown escape '\\\\q'"),
    "backslash-at-the-end": ('root ::= "\\', "root", 1, 11, "unknown '\\\\' at the end"),
    "short-hex-escape": (r'root ::= "\x4"', "root", 1, 11, "needs exactly 2 hex digits"),
    "non-hex-unicode-escape": (r"root ::= [\u12G4]", "root", 1, 11, "needs exactly 4 hex digits"),
    "code-point-above-u10ffff": (r'root ::= "\U00110000"', "root", 1, 11, "U\\+110000 is not a valid code point"),
    "surrogate-code-point": (r"root ::= [\uD800]", "root", 1, 11, "U\\+D800 is not a valid code point"),
    "raw-surrogate": ('root ::= "\ud800"', "root", 1, 11, "not a valid code point"),
    "reversed-range": ("root ::= [z-a]", "root", 1, 11, "range 'z-a' is reversed"),
    "empty-class": ("root ::= []", "root", 1, 10, "matches no character"),
    "negated-class-of-everything": (r"root ::= [^\x00-\U0010FFFF]", "root", 1, 10, "matches no character"),
    "missing-definition-sign": ('root = "a"', "root", 1, 6, "expected '::='"),
    "definition-sign-on-the-next-line": ('root\n::= "a"', "root", 1, 5, "expected '::='"),
    "stray-character": ('root ::= "a" @', "root", 1, 14, "unexpected character '@'"),
    "unmatched-closing-parenthesis": ('root ::= "a" )', "root", 1, 14, "closes no group"),
    "unclosed-group": ('root ::= ( "a"', "root", 1, 10, "'\\(' is never closed"),
    "group-closed-by-wrong-bracket": ('root ::= ( "a" ]', "root", 1, 16, "expected '\\)'"),
    "repetition-of-nothing": ('root ::= *"a"', "root", 1, 10, "'\\*' has nothing before it"),
    "repetition-after-bar": ('root ::= "a" | +', "root", 1, 16, "'\\+' has nothing before it"),
    "two-rules-on-one-line": ('root ::= "a" b ::= "c"', "root", 1, 16, "each rule must start on a new line"),
    "continuation-line-starting-with-bar": ('root ::= "a"\n  | "b"', "root", 2, 3, "a line starts with '\\|'"),
    "rule-defined-twice": ('root ::= "a"\nroot ::= "b"', "root", 2, 1, "defined twice.*line 1, column 1"),
    "text-before-any-rule-name": ('"a" ::= "b"', None, 1, 1, "expected a rule name"),
    "unicode-space-is-not-space": ('root ::=\u00a0"a"', "root", 1, 9, "unexpected character"),
    "parentheses-too-deep": (
        "root ::= " + "(" * 200 + '"a"' + ")" * 200,
        "root",
        1,
        10 + DEFAULT.limits.max_depth,
        "parentheses nested deeper than 128.*MAX_DEPTH",
    ),
    "repetitions-too-deep": (
        'root ::= "a"' + "?" * 200,
        "root",
        1,
        13 + DEFAULT.limits.max_depth - 1,
        "nested deeper than 128 levels.*MAX_DEPTH",
    ),
    "missing-root": ('expr ::= "a"', "root", None, None, "no rule 'root'"),
    "empty-text-has-no-root": ("# only a comment\n", "root", None, None, "no rule 'root'"),
    "text-over-the-size-limit": (TOO_BIG, None, None, None, "MAX_SOURCE_BYTES"),
    "text-over-the-size-limit-in-utf8": (TOO_BIG_IN_UTF8, None, None, None, "MAX_SOURCE_BYTES"),
}


@pytest.mark.parametrize(("text", "rule", "line", "column", "message"), ERROR_CASES.values(), ids=ERROR_CASES.keys())
def test_refused_text_names_rule_line_and_column(text, rule, line, column, message):
    # These are all refused before lowering, so the core need not be built.
    with pytest.raises(GrammarError, match=message) as info:
        compile_gbnf(text)
    assert (info.value.rule, info.value.line, info.value.column) == (rule, line, column)


LEFT_RECURSION_CASES = {
    "direct": ('root ::= "a" | root "a"', {"root"}),
    "direct-in-a-group": ('root ::= ("a" | root) "b"', {"root"}),
    "through-a-repetition": ('root ::= "x"? root* "a"', {"root"}),
    "indirect-through-one-rule": ('root ::= "x" | foo "a"\nfoo ::= root "b"', {"root", "foo"}),
    "indirect-through-two-rules": (
        'root ::= foo | "x"\nfoo ::= bar "a"\nbar ::= root "b"',
        {"root", "foo", "bar"},
    ),
    "indirect-through-three-rules-not-at-the-root": (
        'root ::= "s" a\na ::= b "1" | "x"\nb ::= c "2"\nc ::= a "3"',
        {"a", "b", "c"},
    ),
    "through-a-nullable-prefix": (
        'root ::= foo\nfoo ::= "d" | empty asdf "d"\nasdf ::= foo "e"\nempty ::= "blah" |',
        {"foo", "asdf"},
    ),
    "through-a-nullable-rule-on-its-own-line": (
        'root ::= opt root "x" | "y"\nopt ::= "o"?',
        {"root"},
    ),
}


@pytest.mark.parametrize(("text", "cycle"), LEFT_RECURSION_CASES.values(), ids=LEFT_RECURSION_CASES.keys())
def test_left_recursion_is_refused_at_the_rule_definition(text, cycle):
    pytest.importorskip("llamay._core.automaton", reason="the Cython core is not built")
    with pytest.raises(GrammarError, match="left recursion") as info:
        compile_gbnf(text)
    err = info.value
    assert err.rule in cycle
    assert (err.line, err.column) == parse_gbnf(text).positions[err.rule]


def test_gbnf_text_must_be_a_str():
    with pytest.raises(TypeError, match="must be a str"):
        compile_gbnf(b'root ::= "a"')
