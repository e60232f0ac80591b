"""``pattern`` regexes (llamay.grammars.jsonschema.regex): the automaton, ``python_regex`` and ECMA-262 agree.

Each string is judged three ways: the automaton compiled from ``pattern_string`` reading the
string's canonical JSON bytes, ``python_regex(p).search``, and ECMA-262 itself (Node's
``RegExp`` with the ``u`` flag, where ``node`` is installed; patterns that only Annex B accepts
run without it, on strings without astral characters, where the two modes agree). Patterns come
from a hand-written table that covers every construct, and from the MaskBench schemas in
../shared/testdata (skipped where absent).
"""

from __future__ import annotations

import gzip
import json
import random
import re
import shutil
import subprocess
from collections import Counter
from functools import cache, lru_cache

import pytest
from conftest import corpus
from feed import accepts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.grammars.jsonschema.regex import RegexError, _Cat, _Chars, _Or, _parse, _Rep, pattern_string, python_regex
from llamay.ir import Grammar

EXAMPLES = settings(
    max_examples=10, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None
)

# Every construct of the subset, and the corners of the JSON encoding.
HANDWRITTEN = [
    "", "a", "^abc$", "^a|b$", "x|^y", "^(a|b)$", "(^a|b$)", "(?:^|,)x(?:,|$)", "(^a)*b", "a$|^$",
    "^(?:foo|bar)+$", "^(?<year>\\d{4})-(?<month>\\d{2})$", "\\d", "\\D", "^\\w+$", "^\\W*$", "\\s", "^\\S+$",
    "^.$", "^.*$", "^[^]$", "[]", "^[]?$", "^[a-z0-9_-]{3,16}$", "^[^a-z]$", "^[\\d\\s]+$", "^[^\\D]$",
    "[\\w-.]", "^[\\b]$", "^\\\\\\/\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\-$", "^\\@\\_\\:$",
    "^\\n\\r\\t\\f\\v\\0$", "^\\x41\\u00e9\\u{1F600}$", "^\\uD83D\\uDE00$", "[\\uD800-\\uDFFF]",
    "^a*?b+?c??d{2}?e{1,}?f{1,3}?$", "^(ab){2,3}$", "^(a|bc)*$", "(a*)*b", "^\\d{4}$", "^xa{0}y$", "^(?:)$",
    "^()$", "\\{\\{.+}}", "a{,b", "x{", "]", "^é+$", "^[à-ÿ]+$", "[😀-😂]", "^[^😀]$", '"', "\\\\",
    "^[\\x00-\\x1f]+$", "^\\u2028$", "^[\\s\\S]{2,4}$", "^(a|ab)(c|bcd)(d*)$", "^$", "^", "$", "a|",
    "^\\d{3}(-\\d{4})?$", "^[a-f0-9]{70}$", "x{70,80}", "^([^,]+(,|$)){2,}$", "(^|\\s)#\\w+", "a$^b|c", "a?^b",
    "a$b?", "(^a|b)+$", "(a$|b)*", "(^|x){2}y", "(^$){3}", "(x?^)+y", "(^a$){2}", "(^a$|b){1,2}", "[a-c]{3}",
    "\\d{3,}-", "-\\d{3}", "x[^]{2}", "^x[a-c]{2}", "[a-c]{2}x$", "(?:ab){2}",
    "^abc+$", "^abcd{2}e$", "^xyz?$", "ab}c{d", "^a-b_c:d+$",  # a quantifier takes the last literal of a run
]  # fmt: skip

# Refused constructs: (pattern, what the message names, 0-based position).
REFUSED = [
    ("a(?=b)", "lookahead (?=", 1),
    ("(?!x)", "lookahead (?!", 0),
    ("(?<=a)b", "lookbehind (?<=", 0),
    ("x(?<!a)b", "lookbehind (?<!", 1),
    ("(a)\\1", "backreference \\1", 3),
    ("(?<n>a)\\k<n>", "backreference \\k", 7),
    ("\\bword", "word boundary \\b", 0),
    ("a\\B", "word boundary \\B", 1),
    ("\\p{L}", "Unicode property escape \\p", 0),
    ("[\\P{L}]", "Unicode property escape \\P", 1),
    ("\\cA", "control escape \\c", 0),
    ("(?i)abc", "inline flags (?i", 0),
    ("ab(?P<n>a)", "group syntax (?P", 2),
    ("^*", "nothing to repeat", 1),
    ("*a", "nothing to repeat", 0),
    ("a**", "nothing to repeat", 2),
    ("a{2}{3}", "nothing to repeat", 4),
    ("x|{2}", "nothing to repeat", 2),
    ("(ab", "missing ')'", 0),
    ("ab)", "unbalanced parenthesis", 2),
    ("x[ab", "unterminated character class", 1),
    ("[az-a]", "range out of order", 3),
    ("a{3,2}", "numbers out of order", 1),
    ("a{5000}", "MAX_REPEAT", 1),
    ("\\x4", "\\xHH", 0),
    ("a\\u12", "\\uHHHH", 1),
    ("\\u{110000}", "\\u{H...}", 0),
    ("abc\\", "\\ at the end", 3),
    ("\\01", "octal escape \\0", 0),
    ("[\\1]", "octal escape \\1", 1),
    ("\\z", "escape \\z", 0),
    ("\\A", "escape \\A", 0),
    ("a{,3}", "{,n}", 1),
    ("abc{,3}", "{,n}", 3),
    ("(?<1a>x)", "group name", 0),
    ("(" * 40 + ")" * 40, "MAX_DEPTH", 32),
]

# Length bounds: (pattern, minLength, maxLength, exact, strings to try beside random ones).
# ``None`` for ``exact``: no string fits, pattern_string returns no expression.
LENGTHS = [
    ("^[a-z0-9_]+$", 3, 10, True, ["ab", "abc", "a" * 10, "a" * 11]),
    ("^\\d{4}$", 0, 3, None, ["123", "1234"]),
    ("^\\d{4}$", 4, 4, True, ["1234"]),
    ("^abc", 5, 8, True, ["abcd", "abcde", "abcdefgh", "abcdefghi"]),
    ("abc$", 0, 4, True, ["abc", "xabc", "xxabc"]),
    ("abc", 4, 10, False, ["abc", "abcd", "xabcx"]),
    (".*", 2, 3, True, ["", "a", "ab", "abc", "abcd"]),
    ("^(a+|b{2})$", 3, 5, True, ["aa", "aaa", "aaaaa", "aaaaaa", "bb"]),
    ("^(\\d{3})+$", 4, 10, True, ["123", "123456", "123456789", "123456789012"]),
    ("^[a-z]+-[a-z]+$", 0, 5, False, ["a-b", "ab-cd", "abc-de"]),
    ("^[a-z]+-[a-z]+$", 0, 2, None, ["a-"]),
    ("", 1, None, True, ["", "a"]),
    ("^$", 1, None, None, [""]),
    ("^x*$", 3, 2, None, ["xx", "xxx"]),
    ("^.{2,}$", 0, 10_000, True, ["a", "a" * 10_000, "a" * 10_001]),
    ("^\\d+$", 5000, 9000, True, ["1" * 4999, "1" * 5000, "1" * 9000, "1" * 9001]),
    ("^ab|cd$", 3, 3, True, ["ab", "abc", "xcd", "abcd", "cd"]),
]

# Canonical spellings: (pattern, JSON bytes accepted, the same value spelled otherwise: rejected).
SPELLINGS = [
    ("^a$", b'"a"', b'"\\u0061"'),
    ("^/$", b'"/"', b'"\\/"'),
    ("^\\n$", b'"\\n"', b'"\\u000a"'),
    ("^\\x1f$", b'"\\u001f"', b'"\\u001F"'),
    ("^é$", '"é"'.encode(), b'"\\u00e9"'),
    ("^😀$", '"😀"'.encode(), b'"\\ud83d\\ude00"'),
    ('^"$', b'"\\""', b'"\\u0022"'),
    ("^\\\\$", b'"\\\\"', b'"\\u005c"'),
    ("^\\x7f$", b'"\x7f"', b'"\\u007f"'),
]

NODE_ORACLE = r"""
const lines = require('readline').createInterface({input: process.stdin});
lines.on('line', line => {
  const {pattern, strings} = JSON.parse(line);
  let re, unicode = true;
  try { re = new RegExp(pattern, 'u'); } catch (e) { unicode = false; re = new RegExp(pattern); }
  process.stdout.write(JSON.stringify({unicode, found: strings.map(s => re.test(s))}) + '\n');
});
"""

# Characters every random string may draw from: JSON's escapes, controls, the non-ASCII planes.
SPECIALS = '"\\\n\r\t\x00\x08\x1f\x7f \xa0é中😀\u2028\ufeffaZ09_-.,/:'


@pytest.fixture(scope="module")
def ecma():
    """``ecma(pattern, strings)``: ECMA-262's verdicts (None for a string the oracle cannot judge)."""
    if shutil.which("node") is None:
        yield None
        return
    proc = subprocess.Popen(
        ["node", "-e", NODE_ORACLE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
    )

    def verdicts(pattern: str, strings: list[str]) -> list[bool | None]:
        proc.stdin.write(json.dumps({"pattern": pattern, "strings": strings}) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        astral = [any(ord(c) > 0xFFFF for c in s) for s in strings]
        return [None if not reply["unicode"] and a else f for f, a in zip(reply["found"], astral, strict=True)]

    yield verdicts
    proc.stdin.close()
    proc.wait(timeout=10)


@cache
def automaton(pattern: str, lo: int = 0, hi: int | None = None):
    expr, _ = pattern_string(pattern, lo, hi)
    if expr is None:
        return None
    grammar = Grammar()
    grammar.define("root", expr)
    return grammar.compile("root")


def automaton_matches(pattern: str, s: str, lo: int = 0, hi: int | None = None) -> bool:
    compiled = automaton(pattern, lo, hi)
    return compiled is not None and accepts(compiled, json.dumps(s, ensure_ascii=False).encode())


def alphabet(pattern: str) -> str:
    return "".join(sorted(set(pattern) - {"\\"} | set(SPECIALS)))


def strings_for(pattern: str) -> st.SearchStrategy[str]:
    """Matches of the pattern, matches mutated, and random strings over the pattern's characters."""
    chars = alphabet(pattern)
    anything = st.text(st.sampled_from(chars), max_size=12)
    if automaton(pattern) is None:
        return anything
    matches = st.builds(sample, st.just(_parse(pattern)), st.randoms(use_true_random=False), anything, anything)
    edits = st.lists(st.tuples(st.integers(0, 40), st.sampled_from("idr"), st.sampled_from(chars)), max_size=3)
    return st.one_of(matches, st.builds(mutate, matches, edits), anything)


def sample(tree, rng: random.Random, before: str, after: str) -> str:
    """A string the tree's anchor-free reading matches, between ``before`` and ``after``.

    Written here rather than with ``st.from_regex``, which spells out classes such as ``[^a]``
    code point by code point (seconds per pattern). Anchors are ignored: the verdicts judge.
    """

    def walk(node) -> str:
        if isinstance(node, _Chars):
            if not node.ranges:
                return ""
            lo, hi = rng.choice(node.ranges)
            return chr(rng.choice((lo, hi, rng.randint(lo, min(hi, lo + 300)), rng.randint(lo, hi))))
        if isinstance(node, _Cat):
            return "".join(map(walk, node.items))
        if isinstance(node, _Or):
            return walk(rng.choice(node.items))
        if isinstance(node, _Rep):
            top = node.lo + 3 if node.hi is None else node.hi
            count = rng.choice((node.lo, top, rng.randint(node.lo, min(top, node.lo + 3))))
            return "".join(walk(node.item) for _ in range(count))
        return ""  # an anchor

    return before * rng.randint(0, 1) + walk(tree) + after * rng.randint(0, 1)


def mutate(s: str, edits: list[tuple[int, str, str]]) -> str:
    for at, op, c in edits:
        i = at % (len(s) + 1)
        s = s[:i] + c + s[i:] if op == "i" else s[:i] + s[i + 1 :] if op == "d" else s[:i] + c + s[i + 1 :]
    return s


def check_agreement(pattern: str, strings: list[str], ecma) -> None:
    found = [python_regex(pattern).search(s) is not None for s in strings]
    for s, f in zip(strings, found, strict=True):
        assert automaton_matches(pattern, s) == f, f"automaton and python_regex disagree on {s!r}"
    if ecma is not None:
        for s, f, e in zip(strings, found, ecma(pattern, strings), strict=True):
            assert e is None or e == f, f"python_regex and ECMA-262 disagree on {s!r}"


# -- MaskBench ------------------------------------------------------------------------------

MASKBENCH_SAMPLE = 60
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})


@lru_cache(maxsize=1)
def maskbench_patterns() -> list[str]:
    """The distinct ``pattern`` values and ``patternProperties`` names of the MaskBench schemas."""
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    found.add(value)
                elif key == "patternProperties" and isinstance(value, dict):
                    found.update(value)
                if key not in DATA_KEYWORDS:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(corpus("jsonschemabench").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                walk(json.loads(line)["schema"])
    return sorted(found)


@lru_cache(maxsize=1)
def maskbench_sample() -> list[str]:
    """A fixed sample of the compiled MaskBench patterns that use more than literal text and anchors.

    Not those with an unbounded repetition inside another (``^((.+),?)+$``): on a string that
    almost matches, the backtracking matchers of Python and Node take exponential time.
    """
    literal = re.compile(r"\^?[\w@ /:-]*\$?")
    candidates = []
    for p in maskbench_patterns():
        try:
            pattern_string(p)
        except RegexError:
            continue
        if not literal.fullmatch(p) and not nested_unbounded(_parse(p)):
            candidates.append(p)
    return random.Random(0).sample(candidates, MASKBENCH_SAMPLE)


def nested_unbounded(node, inside: bool = False) -> bool:
    if isinstance(node, _Rep):
        return (inside and node.hi is None) or nested_unbounded(node.item, inside or node.hi is None)
    return isinstance(node, (_Cat, _Or)) and any(nested_unbounded(x, inside) for x in node.items)


# -- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", HANDWRITTEN)
@EXAMPLES
@given(data=st.data())
def test_handwritten_patterns_agree_with_python_and_ecma(pattern, data, ecma):
    check_agreement(pattern, data.draw(st.lists(strings_for(pattern), min_size=1, max_size=8)), ecma)


@pytest.fixture
def sampled(request) -> str:
    return maskbench_sample()[request.param]


@pytest.mark.parametrize("sampled", range(MASKBENCH_SAMPLE), indirect=True)
@EXAMPLES
@given(data=st.data())
def test_maskbench_patterns_agree_with_python_and_ecma(sampled, data, ecma):
    check_agreement(sampled, data.draw(st.lists(strings_for(sampled), min_size=1, max_size=8)), ecma)


def test_every_maskbench_pattern_compiles_or_is_refused_by_name():
    tally: Counter = Counter()
    for p in maskbench_patterns():
        try:
            expr, _ = pattern_string(p)
            python_regex(p)
        except RegexError as exc:
            tally[f"refused: {re.sub(r' - at position .*', '', str(exc))}"] += 1
            continue
        if expr is None:
            tally["matches nothing"] += 1
            continue
        automaton(p)
        tally["compiled"] += 1
    print(dict(tally))
    assert tally["compiled"] >= 0.98 * len(maskbench_patterns())


@pytest.mark.parametrize(("pattern", "what", "position"), REFUSED)
def test_refused_constructs_are_named_with_their_position(pattern, what, position):
    for compile_ in (pattern_string, python_regex):
        with pytest.raises(RegexError) as info:
            compile_(pattern)
        assert what in str(info.value)
        assert info.value.position == position
        assert str(info.value).endswith(f"at position {position}")


@pytest.mark.parametrize(("pattern", "canonical", "other"), SPELLINGS)
def test_only_the_canonical_spelling_is_accepted(pattern, canonical, other):
    compiled = automaton(pattern)
    assert json.loads(canonical) == json.loads(other)
    assert accepts(compiled, canonical)
    assert not accepts(compiled, other)


@pytest.mark.parametrize("value", [*SPECIALS, 'a"b\\c', "\x00\x1f\x7f", "😀😁", "中文", "\u2028\u2029"])
def test_any_character_is_matched_in_its_json_spelling(value):
    assert automaton_matches("^[^]+$", value)
    assert automaton_matches("^(?:.|\\s)+$", value)


@pytest.mark.parametrize(("pattern", "lo", "hi", "exact", "samples"), LENGTHS)
@EXAMPLES
@given(data=st.data())
def test_length_bounds_combine_exactly_where_claimed(pattern, lo, hi, exact, samples, data):
    expr, enforced = pattern_string(pattern, lo, hi)
    assert (expr is None) == (exact is None)
    found = python_regex(pattern).search
    drawn = data.draw(st.lists(strings_for(pattern), max_size=6))
    if expr is None:
        assert enforced
        assert not any(found(s) and lo <= len(s) <= (hi if hi is not None else len(s)) for s in samples + drawn)
        return
    assert enforced == exact
    for s in samples + drawn:
        fits = found(s) is not None and lo <= len(s) and (hi is None or len(s) <= hi)
        accepted = automaton_matches(pattern, s, lo, hi)
        if exact:
            assert accepted == fits, s
        else:
            assert fits <= accepted <= (found(s) is not None), s


def test_unanchored_pattern_is_a_search():
    assert automaton_matches("a", "xay")
    assert automaton_matches("^a", "ay")
    assert not automaton_matches("^a", "ya")
    assert automaton_matches("a$", "ya")
    assert not automaton_matches("a$", "a\n")


def test_whole_value_mode_needs_a_full_match():
    expr, _ = pattern_string("a|bc", search=False)
    grammar = Grammar()
    grammar.define("root", expr)
    compiled = grammar.compile("root")
    assert accepts(compiled, b'"bc"')
    assert not accepts(compiled, b'"abc"')
    assert not accepts(compiled, b'"bcd"')
