"""``format`` regexes (llamay.grammars.jsonschema.formats): the JSON-Schema-Test-Suite, and independent checkers.

Soundness: a string the suite calls invalid never fully matches, except the named cases of
``ADMITTED`` (formats in ``APPROXIMATE`` only); every string it calls valid matches. Both hold
for the Python regex (``python_regex``) and for the automaton reading the JSON string. Then
hypothesis: what a regex generates passes an independent checker, and a one-character
mutation of it matches exactly when the checker accepts it.
"""

from __future__ import annotations

import calendar
import ipaddress
import json
import re
import string
from functools import cache

import feed
import pytest
from conftest import corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from llamay import ir
from llamay.grammars.jsonschema import regex
from llamay.grammars.jsonschema.formats import APPROXIMATE, FORMATS

DRAFTS = ("draft2020-12", "draft7", "draft4")

_A_LABEL = "an A-label (xn--) is not decoded: RFC 5891 §4.4 validity is not checked"
# Invalid strings that an APPROXIMATE format's regex admits, by suite description, with the reason.
ADMITTED: dict[str, dict[str, str]] = {
    "hostname": {
        "exceeds maximum overall length (256)": "the 253-character total is not expressed",
        **dict.fromkeys(
            [
                "invalid Punycode",
                "contains illegal char U+302E Hangul single dot tone mark",
                "Begins with a Spacing Combining Mark",
                "Begins with a Nonspacing Mark",
                "Begins with an Enclosing Mark",
                "Exceptions that are DISALLOWED, right-to-left chars",
                "Exceptions that are DISALLOWED, left-to-right chars",
                "MIDDLE DOT with no preceding 'l'",
                "MIDDLE DOT with nothing preceding",
                "MIDDLE DOT with no following 'l'",
                "MIDDLE DOT with nothing following",
                "Greek KERAIA not followed by Greek",
                "Greek KERAIA not followed by anything",
                "Hebrew GERESH not preceded by Hebrew",
                "Hebrew GERESH not preceded by anything",
                "Hebrew GERSHAYIM not preceded by Hebrew",
                "Hebrew GERSHAYIM not preceded by anything",
                "KATAKANA MIDDLE DOT with no Hiragana, Katakana, or Han",
                "KATAKANA MIDDLE DOT with no other characters",
                "Arabic-Indic digits mixed with Extended Arabic-Indic digits",
                "ZERO WIDTH JOINER not preceded by Virama",
                "ZERO WIDTH JOINER not preceded by anything",
                'contains "--" in the 3rd and 4th position',
            ],
            _A_LABEL,
        ),
    },
}


@cache
def pattern(fmt: str) -> re.Pattern:
    return regex.python_regex(f"^(?:{FORMATS[fmt]})$")


@cache
def automaton(fmt: str):
    expr, _ = regex.pattern_string(FORMATS[fmt], search=False)
    g = ir.Grammar()
    g.define("root", expr)
    return g.compile("root")


def matches(fmt: str, s: str) -> bool:
    return pattern(fmt).search(s) is not None


def accepts(fmt: str, s: str) -> bool:
    return feed.accepts(automaton(fmt), json.dumps(s, ensure_ascii=False))


def suite_cases(fmt: str):
    """(description, string, valid) for each string instance of the format's file, every draft."""
    root = corpus("json-schema-test-suite", "tests")
    for draft in DRAFTS:
        path = root / draft / "optional" / "format" / f"{fmt}.json"
        if path.exists():
            for group in json.loads(path.read_text(encoding="utf-8")):
                yield from (
                    (t["description"], t["data"], t["valid"]) for t in group["tests"] if isinstance(t["data"], str)
                )


def test_only_approximate_formats_admit_invalid_strings():
    assert set(ADMITTED) <= APPROXIMATE <= set(FORMATS)


@pytest.mark.parametrize("verdict", [matches, accepts], ids=["python-regex", "automaton"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_suite_valid_strings_match_and_invalid_ones_do_not(fmt, verdict):
    cases = list(suite_cases(fmt))
    refused = [f"{d}: {s!r}" for d, s, valid in cases if valid and not verdict(fmt, s)]
    admitted = [d for d, s, valid in cases if not valid and verdict(fmt, s)]
    n_valid = sum(valid for *_, valid in cases)
    n_invalid = len(cases) - n_valid
    print(f"{fmt}: {n_valid - len(refused)}/{n_valid} valid matched, {n_invalid - len(admitted)}/{n_invalid} refused")
    assert refused == []
    assert set(admitted) == set(ADMITTED.get(fmt, {})), "an invalid string admitted, or a named one refused now"


# -- independent checkers ---------------------------------------------------------------------

_RFC3339_TIME = re.compile(r"(\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:Z|([+-])(\d\d):(\d\d))", re.ASCII | re.IGNORECASE)


def is_date(s: str) -> bool:
    """RFC 3339 full-date: the calendar of the standard library (year 0 leaps as 2000 does)."""
    fields = s.split("-")
    if [len(f) for f in fields] != [4, 2, 2] or not all(f.isascii() and f.isdigit() for f in fields):
        return False
    year, month, day = map(int, fields)
    return 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year or 2000, month)[1]


def is_time(s: str) -> bool:
    """RFC 3339 full-time; second 60 where UTC is 23:59, at a whole quarter-hour offset."""
    m = _RFC3339_TIME.fullmatch(s)
    if m is None:
        return False
    hour, minute, second = int(m[1]), int(m[2]), int(m[3])
    off_hour, off_minute = (int(m[5]), int(m[6])) if m[4] else (0, 0)
    if hour > 23 or minute > 59 or second > 60 or off_hour > 23 or off_minute > 59:
        return False
    offset = (-1 if m[4] == "-" else 1) * (off_hour * 60 + off_minute)
    return second < 60 or ((hour * 60 + minute - offset) % 1440 == 1439 and offset % 15 == 0)


def is_duration(s: str) -> bool:
    """RFC 3339 Appendix A read as: "P", then a week alone, or date designators then "T" and time
    designators, each group a gapless run of Y M D (H M S), at least one designator in all."""
    date, t, time = s.removeprefix("P").partition("T")
    if not s.startswith("P") or not all(re.fullmatch(r"(?:\d+[A-Z])*", part, re.ASCII) for part in (date, time)):
        return False
    dates, times = re.sub(r"\d", "", date), re.sub(r"\d", "", time)
    if dates == "W":
        return not t
    return dates in "YMD" and times in "HMS" and bool(t) == bool(times) and bool(dates or times)


def is_uuid(s: str) -> bool:
    dashes = (8, 13, 18, 23)
    return len(s) == 36 and all(c == "-" if i in dashes else c in string.hexdigits for i, c in enumerate(s))


def is_ip(cls):
    def check(s: str) -> bool:
        try:
            cls(s)
        except ValueError:
            return False
        return "%" not in s  # an IPv6 zone id

    return check


_LDH = frozenset(string.ascii_letters + string.digits + "-")


def is_ldh_label(label: str) -> bool:
    return label != "" and "-" not in (label[0], label[-1]) and set(label) <= _LDH


def is_hostname(s: str) -> bool:
    """RFC 1123 §2.1 labels; the total length is left to the caller (``hostname`` is APPROXIMATE)."""
    return all(is_ldh_label(label) and len(label) <= 63 for label in s.split("."))


_ATEXT = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-/=?^_`{|}~")


def is_quoted_string(s: str) -> bool:
    if len(s) < 2 or s[0] != '"' or s[-1] != '"':
        return False
    inner = iter(s[1:-1])
    for c in inner:
        if c == "\\":
            c = next(inner, "")
            if not (c and " " <= c <= "~"):
                return False
        elif not (" " <= c <= "~") or c == '"':
            return False
    return True


def is_smtp_ipv6(s: str) -> bool:
    """RFC 5321 IPv6-addr: RFC 4291 text, but a "::" stands for at least two groups."""
    explicit = len([g for g in s.split(":") if g]) + ("." in s)  # a dotted quad is two groups
    return is_ip(ipaddress.IPv6Address)(s) and ("::" not in s or explicit <= 6)


def is_email(s: str) -> bool:
    """RFC 5321 Mailbox, by splitting at the last "@" (a domain has none)."""
    local, at, domain = s.rpartition("@")
    local_ok = is_quoted_string(local) or all(part and set(part) <= _ATEXT for part in local.split("."))
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        domain_ok = is_smtp_ipv6(literal[5:]) if literal.startswith("IPv6:") else is_ip(ipaddress.IPv4Address)(literal)
    else:
        domain_ok = all(is_ldh_label(label) for label in domain.split("."))
    return bool(at) and local_ok and domain_ok


_UNRESERVED_SUB_DELIMS = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=")
_SCHEME = frozenset(string.ascii_letters + string.digits + "+-.")
UCSCHAR = (
    (0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF),
    *((plane << 16, (plane << 16) + 0xFFFD) for plane in range(1, 14)), (0xE1000, 0xEFFFD),
)  # fmt: skip
IPRIVATE = ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))


def is_uri_text(s: str, extra: str = "", wide: tuple = ()) -> bool:
    """unreserved / sub-delims / ``extra`` characters, code points in ``wide``, pct-encoded triplets."""
    others = set(re.sub("%[0-9A-Fa-f]{2}", "", s)) - _UNRESERVED_SUB_DELIMS - set(extra)
    return all(any(lo <= ord(c) <= hi for lo, hi in wide) for c in others)


def is_host(host: str, wide: tuple) -> bool:
    """IP-literal (IPv6address / IPvFuture) or reg-name, which an IPv4address is too."""
    if not (host.startswith("[") and host.endswith("]")):
        return is_uri_text(host, wide=wide)
    literal = host[1:-1]
    version, dot, future = literal.partition(".")
    is_future = (
        version[:1] in ("v", "V") and len(version) > 1 and set(version[1:]) <= set(string.hexdigits)
        and dot == "." and future != "" and set(future) <= _UNRESERVED_SUB_DELIMS | {":"}
    )  # fmt: skip
    return is_future or is_ip(ipaddress.IPv6Address)(literal)


def is_authority(s: str, wide: tuple) -> bool:
    userinfo, _, host = s.rpartition("@")
    port = ""
    if ":" in host.rpartition("]")[2]:  # a port follows the last colon outside an IP-literal
        host, _, port = host.rpartition(":")
    return is_uri_text(userinfo, ":", wide) and is_host(host, wide) and set(port) <= set(string.digits)


def is_uri_reference(s: str, scheme: bool, iri: bool = False) -> bool:
    """RFC 3986 URI (``scheme``) or relative-ref, split at its delimiters and checked part by part;
    ``iri``: RFC 3987's, where ucschar is unreserved too and a query may hold iprivate."""
    wide = UCSCHAR if iri else ()
    if scheme:
        name, colon, s = s.partition(":")
        if not (colon and name[:1] in set(string.ascii_letters) and set(name) <= _SCHEME):
            return False
    rest, _, fragment = s.partition("#")
    rest, _, query = rest.partition("?")
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest_ok = is_authority(authority, wide) and is_uri_text(slash + path, ":@/", wide)
    else:  # path-absolute / path-rootless / path-empty; a relative first segment has no colon
        rest_ok = is_uri_text(rest, ":@/", wide) and (scheme or ":" not in rest.split("/")[0])
    query_wide = wide + IPRIVATE if iri else ()
    return rest_ok and is_uri_text(query, ":@/?", query_wide) and is_uri_text(fragment, ":@/?", wide)


def is_json_pointer(s: str) -> bool:
    """RFC 6901: empty or "/"-led, and every "~" starts "~0" or "~1" (one left-to-right pass)."""
    return s[:1] in ("", "/") and "~" not in re.sub("~[01]", "", s)


def is_relative_json_pointer(s: str) -> bool:
    rest = s.lstrip("0123456789")
    prefix = s[: len(s) - len(rest)]
    return (prefix == "0" or prefix[:1] in set("123456789")) and (rest == "#" or is_json_pointer(rest))


CHECKERS = {
    "date": is_date,
    "time": is_time,
    "date-time": lambda s: s[10:11] in ("T", "t") and is_date(s[:10]) and is_time(s[11:]),
    "duration": is_duration,
    "uuid": is_uuid,
    "ipv4": is_ip(ipaddress.IPv4Address),
    "ipv6": is_ip(ipaddress.IPv6Address),
    "hostname": is_hostname,
    "email": is_email,
    "uri": lambda s: is_uri_reference(s, scheme=True),
    "uri-reference": lambda s: is_uri_reference(s, scheme=True) or is_uri_reference(s, scheme=False),
    "iri": lambda s: is_uri_reference(s, scheme=True, iri=True),
    "iri-reference": lambda s: is_uri_reference(s, True, iri=True) or is_uri_reference(s, False, iri=True),
    "json-pointer": is_json_pointer,
    "relative-json-pointer": is_relative_json_pointer,
}


def test_every_format_has_a_checker():
    assert set(CHECKERS) == set(FORMATS)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_checkers_agree_with_the_suite(fmt):
    """The checkers are references only where they get the suite right (bar APPROXIMATE's gaps)."""
    wrong = [(d, s) for d, s, valid in suite_cases(fmt) if CHECKERS[fmt](s) != valid and d not in ADMITTED.get(fmt, {})]
    assert wrong == []


# Characters that matter to some format, a non-ASCII digit, private-use and astral code points.
_MUTANTS = '09aAfFvVzZtTxX-:.@/%~#?[]+ \n"\\৪é\ue000\U00010300'


def _python_range(m: re.Match) -> str:
    lo, hi = int(m[1] or m[2], 16), int(m[3] or m[4], 16)
    return f"\\U{lo:08X}-\\U{min(hi, lo + 255):08X}"


@cache
def strings(fmt: str) -> st.SearchStrategy[str]:
    """The format's regex as Python reads it, each ``\\u`` range cut to its first 256 code points:
    hypothesis enumerates a class, and ucschar's 900k code points would take minutes (so would
    the classes ``python_regex`` writes)."""
    source = re.sub(r"\\u(?:\{(\w+)\}|(\w{4}))-\\u(?:\{(\w+)\}|(\w{4}))", _python_range, FORMATS[fmt])
    return st.from_regex(source, fullmatch=True, alphabet=st.characters(codec="utf-8"))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=st.data())
def test_generated_strings_pass_the_checker_and_mutants_match_exactly_when_it_accepts(fmt, data):
    s = data.draw(strings(fmt))
    assert CHECKERS[fmt](s) and accepts(fmt, s)
    i = data.draw(st.integers(0, len(s)))
    c = data.draw(st.sampled_from(_MUTANTS))
    mutant = data.draw(st.sampled_from([s[:i] + c + s[i + 1 :], s[:i] + c + s[i:], s[:i] + s[i + 1 :]]))
    assert matches(fmt, mutant) == CHECKERS[fmt](mutant) == accepts(fmt, mutant)
