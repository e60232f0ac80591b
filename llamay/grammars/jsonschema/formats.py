"""JSON Schema ``format`` values as regexes in the subset of ``llamay.grammars.jsonschema.regex``.

A string is valid for a format when it fully matches ``FORMATS[name]`` (the schema compiler
calls ``pattern_string(source, search=False)``). Each regex is built from the productions of
the specification that JSON Schema 2020-12 names for the format, quoted beside the code
(h11's ``_abnf.py`` style). ABNF quoted strings are case-insensitive (RFC 5234 §2.3): where a
regex keeps to one case, that is said below. Per format:

- ``date``: RFC 3339 §5.6 ``full-date`` with the month lengths of §5.7 and the Gregorian
  leap years of Appendix C. Exact.
- ``time``: RFC 3339 ``full-time``; ``T``/``Z`` either case (§5.6 NOTE). A leap second
  (``:60``) only where the time in UTC is 23:59, as the JSON-Schema-Test-Suite expects; which
  days had one (the table of Appendix D) is not checked. Sound: a leap second with an offset
  that is not a whole quarter hour (``+00:20``; no zone uses one) is refused, see
  ``_leap_second_time``.
- ``date-time``: RFC 3339 ``date-time``, the two above joined by ``T``. Sound likewise.
- ``duration``: RFC 3339 Appendix A ``duration``. Sound: designators in upper case only, as
  ISO 8601 writes them.
- ``uuid``: RFC 4122 §3 ``UUID``, hex digits either case, any version and variant. Exact.
- ``ipv4``: dotted quad of 0-255. Sound: RFC 2673's ``decbyte`` also allows leading zeros
  (``010.0.0.1``), refused here as most implementations refuse them (octal ambiguity).
- ``ipv6``: RFC 4291 §2.2 text forms, as RFC 3986 §3.2.2 ``IPv6address`` writes them, with a
  dotted-quad tail; no zone id. Exact.
- ``hostname``: RFC 1123 §2.1 labels (letters, digits, inner hyphens, 1-63 characters) joined
  by dots. APPROXIMATE: the 253-character total is not expressed (a caller that can bound the
  string's length at 253 restores it), and an A-label (``xn--``) is not decoded, so invalid
  Punycode and disallowed code points (RFC 5891 §4.4) pass.
- ``email``: RFC 5321 §4.1.2 ``Mailbox``: dot-string or quoted-string local part; a domain or
  an IPv4 / ``IPv6:`` address literal. ``General-address-literal`` is left out (its tag must
  be IANA-registered, and ``IPv6`` is the only one), as are the size limits of §4.5.3.1,
  which are not syntax. Sound: the tag only as ``IPv6``, and the IPv4 literal's ``Snum``
  without leading zeros, as for ``ipv4``.
- ``uri``, ``uri-reference``: RFC 3986 ``URI`` and ``URI-reference`` (Appendix A). Exact.
- ``iri``, ``iri-reference``: RFC 3987 §2.2 ``IRI`` and ``IRI-reference``: the URI regexes
  with ``ucschar`` (astral planes included) and, in a query, ``iprivate``. Exact.
- ``json-pointer``: RFC 6901 §3 ``json-pointer``. Exact.
- ``relative-json-pointer``: draft-handrews-relative-json-pointer-01 §3 (drafts 7, 2019-09).
  Sound for 2020-12 too, whose draft-bhutton-00 adds an index adjustment (``0+1/a``) that this
  regex refuses.

Not here (no regex is both right and cheap): ``idn-hostname`` and ``idn-email`` (IDNA2008
contextual rules), ``uri-template``, ``regex``.
"""

from __future__ import annotations

__all__ = ["APPROXIMATE", "FORMATS"]


def _alt(*branches: str) -> str:
    return "(?:" + "|".join(branches) + ")"


# RFC 5234 Appendix B.1 core rules.
DIGIT = "[0-9]"
HEXDIG = "[0-9A-Fa-f]"

# -- RFC 3339 §5.6 Internet Date/Time Format --------------------------------------------------
# date-fullyear   = 4DIGIT
# date-month      = 2DIGIT  ; 01-12
# date-mday       = 2DIGIT  ; 01-28, 01-29, 01-30, 01-31 based on month/year
# full-date       = date-fullyear "-" date-month "-" date-mday
#
# §5.7: months 04, 06, 09, 11 have 30 days; 02 has 29 in a leap year, else 28; the others 31.
# Appendix C: a leap year is divisible by 4, and centuries only when divisible by 400. In
# digits: the last two are a multiple of 4 other than 00, or they are 00 and the first two are.
_MULTIPLE_OF_4 = "(?:[02468][048]|[13579][26])"
_LEAP_YEAR = _alt(f"{DIGIT}{{2}}(?:0[48]|[2468][048]|[13579][26])", f"{_MULTIPLE_OF_4}00")
FULL_DATE = _alt(
    f"{DIGIT}{{4}}-"
    + _alt(
        "(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])",
        "(?:0[13-9]|1[0-2])-(?:29|30)",
        "(?:0[13578]|1[02])-31",
    ),
    f"{_LEAP_YEAR}-02-29",
)

# time-hour       = 2DIGIT  ; 00-23
# time-minute     = 2DIGIT  ; 00-59
# time-second     = 2DIGIT  ; 00-58, 00-59, 00-60 based on leap second rules
# time-secfrac    = "." 1*DIGIT
# time-numoffset  = ("+" / "-") time-hour ":" time-minute
# time-offset     = "Z" / time-numoffset
# partial-time    = time-hour ":" time-minute ":" time-second [time-secfrac]
# full-time       = partial-time time-offset
# date-time       = full-date "T" full-time
_HOUR = "(?:[01][0-9]|2[0-3])"
_MINUTE = "[0-5][0-9]"
_SECFRAC = r"(?:\.[0-9]+)?"
_OFFSET = f"(?:[Zz]|[+-]{_HOUR}:{_MINUTE})"


def _hh_mm(minutes: int) -> str:
    return f"{minutes // 60:02}:{minutes % 60:02}"


def _leap_second_time() -> str:
    """``full-time`` with second 60: §5.7, "the leap second point is shifted by the zone offset".

    A leap second is inserted at 23:59:60 UTC, and local time = UTC + offset: the offset is
    ``+`` (local + 1 minute) or ``-`` (23:59 - local), modulo a day, and ``Z`` only at 23:59.
    A regex cannot carry the local time over to the offset, so it branches on each local
    hour and minute. All 1440 of them make a 54 kB regex that takes 0.8 s to compile, of the
    2 s ``Limits.compile_seconds`` allows a schema; offsets in civil use are whole quarter
    hours, so only the local minutes 14, 29, 44 and 59 are spelled out (96 branches, 4 kB),
    and a leap second at an offset such as +00:20 is refused.
    """
    day = 24 * 60
    hours = []
    for hour in range(24):
        minutes = []
        for minute in (14, 29, 44, 59):
            local = hour * 60 + minute
            offsets = [rf"\+{_hh_mm((local + 1) % day)}", f"-{_hh_mm(day - 1 - local)}"]
            if local == day - 1:
                offsets.append("[Zz]")
            minutes.append(f"{minute}:60{_SECFRAC}{_alt(*offsets)}")
        hours.append(f"{hour:02}:{_alt(*minutes)}")
    return _alt(*hours)


FULL_TIME = _alt(f"{_HOUR}:{_MINUTE}:{_MINUTE}{_SECFRAC}{_OFFSET}", _leap_second_time())
DATE_TIME = f"{FULL_DATE}[Tt]{FULL_TIME}"

# -- RFC 3339 Appendix A: ISO 8601 durations ------------------------------------------------
# dur-second = 1*DIGIT "S"
# dur-minute = 1*DIGIT "M" [dur-second]
# dur-hour   = 1*DIGIT "H" [dur-minute]
# dur-time   = "T" (dur-hour / dur-minute / dur-second)
# dur-day    = 1*DIGIT "D"
# dur-week   = 1*DIGIT "W"
# dur-month  = 1*DIGIT "M" [dur-day]
# dur-year   = 1*DIGIT "Y" [dur-month]
# dur-date   = (dur-day / dur-month / dur-year) [dur-time]
# duration   = "P" (dur-date / dur-time / dur-week)
# Factored on the leading number so that a single branch is live at a time.
_N = f"{DIGIT}+"
_DUR_TIME = f"T{_N}" + _alt(f"H(?:{_N}M(?:{_N}S)?)?", f"M(?:{_N}S)?", "S")
_DUR_DATE = _alt("D", f"M(?:{_N}D)?", f"Y(?:{_N}M(?:{_N}D)?)?") + f"(?:{_DUR_TIME})?"
DURATION = "P" + _alt(_N + _alt("W", _DUR_DATE), _DUR_TIME)

# -- RFC 4122 §3 ------------------------------------------------------------------------------
# UUID = time-low "-" time-mid "-" time-high-and-version "-"
#        clock-seq-and-reserved clock-seq-low "-" node
# time-low = 4hexOctet; time-mid = 2hexOctet; time-high-and-version = 2hexOctet;
# clock-seq-and-reserved = hexOctet; clock-seq-low = hexOctet; node = 6hexOctet
# hexOctet = hexDigit hexDigit; hexDigit = "0"-"9" / "a"-"f" / "A"-"F"
UUID = f"{HEXDIG}{{8}}-{HEXDIG}{{4}}-{HEXDIG}{{4}}-{HEXDIG}{{4}}-{HEXDIG}{{12}}"

# -- RFC 3986 §3.2.2 IP addresses -------------------------------------------------------------
# dec-octet   = DIGIT / %x31-39 DIGIT / "1" 2DIGIT / "2" %x30-34 DIGIT / "25" %x30-35
# IPv4address = dec-octet "." dec-octet "." dec-octet "." dec-octet
_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"

# h16  = 1*4HEXDIG
# ls32 = ( h16 ":" h16 ) / IPv4address
# IPv6address =                            6( h16 ":" ) ls32
#             /                       "::" 5( h16 ":" ) ls32
#             / [               h16 ] "::" 4( h16 ":" ) ls32
#             / [ *1( h16 ":" ) h16 ] "::" 3( h16 ":" ) ls32
#             / [ *2( h16 ":" ) h16 ] "::" 2( h16 ":" ) ls32
#             / [ *3( h16 ":" ) h16 ] "::"    h16 ":"   ls32
#             / [ *4( h16 ":" ) h16 ] "::"              ls32
#             / [ *5( h16 ":" ) h16 ] "::"              h16
#             / [ *6( h16 ":" ) h16 ] "::"
_H16 = f"{HEXDIG}{{1,4}}"
_LS32 = _alt(f"{_H16}:{_H16}", IPV4)


def _ipv6(around_gap: int) -> str:
    """``IPv6address``, row by row: ``after`` pieces follow the "::" (ls32 counts as two) and
    at most ``around_gap - after`` precede it. RFC 4291 allows 7 pieces beside a "::"; RFC 5321
    §4.1.3 (``IPv6-comp``: "the "::" represents at least 2 16-bit groups") allows 6."""
    rows = [f"(?:{_H16}:){{6}}{_LS32}"]
    for after in range(around_gap + 1):
        tail = "" if after == 0 else _H16 if after == 1 else f"(?:{_H16}:){{{after - 2}}}{_LS32}"
        most_before = around_gap - after
        head = "" if most_before == 0 else f"(?:{_H16}(?::{_H16}){{0,{most_before - 1}}})?"
        rows.append(f"{head}::{tail}")
    return _alt(*rows)


IPV6 = _ipv6(7)

# -- RFC 1123 §2.1 host names (RFC 952 <hname> with a leading digit allowed) -------------------
# <hname> ::= <name>*["."<name>]
# <name>  ::= <let-or-digit>[*[<let-or-digit-or-hyphen>]<let-or-digit>]   ; 1-63 characters
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"

# -- RFC 5321 §4.1.2 / §4.1.3 -----------------------------------------------------------------
# Mailbox        = Local-part "@" ( Domain / address-literal )
# Local-part     = Dot-string / Quoted-string
# Dot-string     = Atom *("."  Atom)
# Atom           = 1*atext      ; RFC 5322 §3.2.3: ALPHA / DIGIT / "!" / "#" / "$" / "%" / "&"
#                               ;   / "'" / "*" / "+" / "-" / "/" / "=" / "?" / "^" / "_" / "`"
#                               ;   / "{" / "|" / "}" / "~"
# Quoted-string  = DQUOTE *QcontentSMTP DQUOTE
# QcontentSMTP   = qtextSMTP / quoted-pairSMTP
# qtextSMTP      = %d32-33 / %d35-91 / %d93-126
# quoted-pairSMTP = %d92 %d32-126
# Domain         = sub-domain *("." sub-domain)
# sub-domain     = Let-dig [Ldh-str]
# Ldh-str        = *( ALPHA / DIGIT / "-" ) Let-dig
# address-literal = "[" ( IPv4-address-literal / IPv6-address-literal / General-address-literal ) "]"
# IPv4-address-literal = Snum 3("."  Snum)
# IPv6-address-literal = "IPv6:" IPv6-addr
_ATOM = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+"
_LOCAL_PART = _alt(rf"{_ATOM}(?:\.{_ATOM})*", r'"(?:[ !#-\[\]-~]|\\[ -~])*"')
_SUB_DOMAIN = "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_ADDRESS_LITERAL = rf"\[(?:{IPV4}|IPv6:{_ipv6(6)})\]"
EMAIL = rf"{_LOCAL_PART}@(?:{_SUB_DOMAIN}(?:\.{_SUB_DOMAIN})*|{_ADDRESS_LITERAL})"

# -- RFC 3986 Appendix A, and RFC 3987 §2.2 which widens it ---------------------------------
# unreserved    = ALPHA / DIGIT / "-" / "." / "_" / "~"
# sub-delims    = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "="
# pct-encoded   = "%" HEXDIG HEXDIG
# scheme        = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
# IP-literal    = "[" ( IPv6address / IPvFuture  ) "]"
# IPvFuture     = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
_UNRESERVED_SUB_DELIMS = r"A-Za-z0-9\-._~!$&'()*+,;="
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_IP_LITERAL = rf"\[(?:{IPV6}|[Vv]{HEXDIG}+\.[{_UNRESERVED_SUB_DELIMS}:]+)\]"

# RFC 3987 (IRIs) has the productions of RFC 3986 under "i" names, with two changes:
# iunreserved    = ALPHA / DIGIT / "-" / "." / "_" / "~" / ucschar
# iquery         = *( ipchar / iprivate / "/" / "?" )
# ucschar        = %xA0-D7FF / %xF900-FDCF / %xFDF0-FFEF
#                / %x10000-1FFFD / %x20000-2FFFD / ... / %xD0000-DFFFD / %xE1000-EFFFD
# iprivate       = %xE000-F8FF / %xF0000-FFFFD / %x100000-10FFFD
_UCSCHAR = (
    r"\u00A0-\uD7FF\uF900-\uFDCF\uFDF0-\uFFEF"
    + "".join(rf"\u{{{plane:X}0000}}-\u{{{plane:X}FFFD}}" for plane in range(1, 14))
    + r"\u{E1000}-\u{EFFFD}"
)
_IPRIVATE = r"\uE000-\uF8FF\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}"


def _uri(ucschar: str = "", iprivate: str = "") -> tuple[str, str]:
    """(URI, URI-reference); with RFC 3987's ``ucschar`` and ``iprivate``, (IRI, IRI-reference)."""

    def chars(extra: str = "") -> str:
        """unreserved / pct-encoded / sub-delims, and the characters named."""
        return f"(?:[{_UNRESERVED_SUB_DELIMS}{ucschar}{extra}]|%{HEXDIG}{{2}})"

    # pchar         = unreserved / pct-encoded / sub-delims / ":" / "@"
    # segment       = *pchar
    # segment-nz    = 1*pchar
    # segment-nz-nc = 1*( unreserved / pct-encoded / sub-delims / "@" )   ; no colon
    # path-abempty  = *( "/" segment )
    # path-absolute = "/" [ segment-nz *( "/" segment ) ]
    # path-rootless = segment-nz *( "/" segment )
    # path-noscheme = segment-nz-nc *( "/" segment )
    # path-empty    = 0<pchar>
    pchar = chars(":@")
    path_abempty = f"(?:/{pchar}*)*"
    path_absolute = f"/(?:{pchar}+{path_abempty})?"
    # userinfo      = *( unreserved / pct-encoded / sub-delims / ":" )
    # host          = IP-literal / IPv4address / reg-name      ; an IPv4address is a reg-name too
    # reg-name      = *( unreserved / pct-encoded / sub-delims )
    # port          = *DIGIT
    # authority     = [ userinfo "@" ] host [ ":" port ]
    authority = f"(?:{chars(':')}*@)?(?:{_IP_LITERAL}|{chars()}*)(?::{DIGIT}*)?"
    # query         = *( pchar / "/" / "?" )
    # fragment      = *( pchar / "/" / "?" )
    query_fragment = f"(?:\\?{chars(':@/?' + iprivate)}*)?(?:#{chars(':@/?')}*)?"
    # hier-part     = "//" authority path-abempty / path-absolute / path-rootless / path-empty
    # URI           = scheme ":" hier-part [ "?" query ] [ "#" fragment ]
    # relative-part = "//" authority path-abempty / path-absolute / path-noscheme / path-empty
    # relative-ref  = relative-part [ "?" query ] [ "#" fragment ]
    # URI-reference = URI / relative-ref
    network_path = f"//{authority}{path_abempty}"
    absolute = f"{_SCHEME}:" + _alt(network_path, path_absolute, f"{pchar}+{path_abempty}", "") + query_fragment
    relative = _alt(network_path, path_absolute, f"{chars('@')}+{path_abempty}", "") + query_fragment
    return absolute, _alt(absolute, relative)


URI, URI_REFERENCE = _uri()
IRI, IRI_REFERENCE = _uri(_UCSCHAR, _IPRIVATE)

# -- RFC 6901 §3 ------------------------------------------------------------------------------
# json-pointer    = *( "/" reference-token )
# reference-token = *( unescaped / escaped )
# unescaped       = %x00-2E / %x30-7D / %x7F-10FFFF   ; all but "/" and "~"
# escaped         = "~" ( "0" / "1" )
JSON_POINTER = "(?:/(?:[^/~]|~[01])*)*"

# -- draft-handrews-relative-json-pointer-01 §3 -----------------------------------------------
# relative-json-pointer =  non-negative-integer <json-pointer>
# relative-json-pointer =/ non-negative-integer "#"
# non-negative-integer  =  %x30 / %x31-39 *( %x30-39 )
RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{JSON_POINTER})"

FORMATS: dict[str, str] = {
    "date": FULL_DATE,
    "time": FULL_TIME,
    "date-time": DATE_TIME,
    "duration": DURATION,
    "uuid": UUID,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "hostname": HOSTNAME,
    "email": EMAIL,
    "uri": URI,
    "uri-reference": URI_REFERENCE,
    "iri": IRI,
    "iri-reference": IRI_REFERENCE,
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
}

#: Formats whose regex may admit an invalid string (the schema compiler warns for these).
APPROXIMATE: frozenset[str] = frozenset({"hostname"})
