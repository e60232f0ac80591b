"""GBNF, llama.cpp's grammar syntax, compiled onto the IR.

The parser is hand-written recursive descent over a small cursor, following the
behaviour of llama.cpp's own parser (``llama-grammar.cpp``) where it is defined:

- a rule ends at the end of its line; it may continue on the next line only after
  ``::=``, after ``|`` or inside parentheses (newlines there are plain space);
- ``#`` starts a comment that runs to the end of the line, wherever space may go;
- string literals and classes hold code points (raw text or ``\\x`` ``\\u`` ``\\U``
  escapes), which match their UTF-8 bytes; ``.`` and ``[^...]`` match any complete
  UTF-8 character outside the set;
- a postfix operator applies to the item just before it (a whole literal, class,
  reference or group), and operators may be stacked (``"a"*?`` is ``("a"*)?``).

Where llama.cpp is lax, llamay refuses with a ``GrammarError`` naming rule, line and
column (1-based; columns count characters): token terminals (``<think>``,
``<[1000]>``), since llamay constrains bytes, not one model's token ids; a bound above
``ir.MAX_REPEAT`` (llama.cpp quietly turns large ones into ``*``); ``{m,n}`` with
``n < m``; reversed ranges and classes matching no character; a rule defined twice;
surrogate or out-of-range code points. Rule names may also contain ``_``.

Depth is bounded (``Limits.max_depth``) both for the parser's own recursion and for
the IR it builds, so neither this module nor the lowering can overflow the stack.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from .. import ir
from ..compile_budget import budget
from ..errors import GrammarError
from ..options import DEFAULT, CompileOptions, Limits, Tuning
from .gc_pause import gc_paused
from .utf8 import ANY_CHAR, MAX_CODE_POINT, char_class

if TYPE_CHECKING:
    from .._core.automaton import CompiledGrammar

__all__ = ["ParsedGrammar", "compile_gbnf", "parse_gbnf"]

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_POSTFIX = frozenset("*+?{")
_NOTHING = ir.Alt(())  # what ``char_class`` returns for a set with no character in it
_LINE_END = re.compile(r"[\r\n]")
_LITERAL_SPECIAL = re.compile(r'["\\\ud800-\udfff]')  # where a literal's plain run of text ends


@dataclass(frozen=True)
class ParsedGrammar:
    """The rules of a GBNF text as IR, and where each rule's name was written."""

    grammar: ir.Grammar
    positions: dict[str, tuple[int, int]]  # rule name -> (line, column) of its definition


class _Cursor:
    """A position in the text, and errors that say where it is.

    Lines are counted at each ``\\n``; a lone ``\\r`` ends a rule but does not start a line.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.rule: str | None = None  # the rule being parsed, named in errors
        self._line_starts = [0]
        i = text.find("\n")
        while i >= 0:
            self._line_starts.append(i + 1)
            i = text.find("\n", i + 1)

    def peek(self, ahead: int = 0) -> str:
        """The character ``ahead`` of the cursor, or ``""`` past the end."""
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else ""

    def location(self, pos: int) -> tuple[int, int]:
        line = bisect_right(self._line_starts, pos)
        return line, pos - self._line_starts[line - 1] + 1

    def error(self, message: str, at: int | None = None, rule: str | None = None) -> GrammarError:
        line, column = self.location(self.pos if at is None else at)
        return GrammarError(message, rule=self.rule if rule is None else rule, line=line, column=column)

    def skip_space(self, newlines: bool) -> None:
        # space ::= ([ \t] | "#" [^\r\n]* | [\r\n] if newlines are allowed here)*
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in " \t" or (newlines and c in "\r\n"):
                self.pos += 1
            elif c == "#":
                end = _LINE_END.search(text, self.pos)
                self.pos = end.start() if end else n
            else:
                return

    def describe(self) -> str:
        """The character under the cursor, as an error message shows it."""
        c = self.peek()
        return "the end of the text" if not c else repr(c)


class _Parser:
    """Recursive descent; every parse method returns ``(expr, depth)``.

    ``depth`` bounds how deeply the IR expression nests (each Seq, Alt or Repeat level
    counts one); the lowering recurses that deep into a rule, so it is capped here,
    where the error can point at the text.
    """

    def __init__(self, text: str, limits: Limits) -> None:
        self.cur = _Cursor(text)
        self.max_depth = limits.max_depth
        self.rules: dict[str, ir.Expr] = {}
        self.defined_at: dict[str, int] = {}
        self.first_use: dict[str, tuple[int, str]] = {}  # name -> (offset, referencing rule)
        self.open_groups = 0

    # grammar ::= space rule*
    def grammar(self) -> ParsedGrammar:
        cur = self.cur
        cur.skip_space(newlines=True)
        while cur.peek():
            self.rule()
            cur.skip_space(newlines=True)
        for name, (at, user) in self.first_use.items():
            if name not in self.rules:
                raise cur.error(f"rule {name!r} is used in rule {user!r} but never defined", at, rule=name)
        grammar = ir.Grammar()
        for name, expr in self.rules.items():
            grammar.define(name, expr)
        return ParsedGrammar(grammar, {name: cur.location(at) for name, at in self.defined_at.items()})

    # rule ::= name space "::=" space alternates ("\r"? "\n" | end)
    def rule(self) -> None:
        cur = self.cur
        start = cur.pos
        if cur.peek() not in _NAME_CHARS:
            if cur.peek() == "|":  # named after the rule the line was meant to continue
                raise cur.error(
                    "a line starts with '|': a rule continues on the next line only after '::=', "
                    "after '|' or inside parentheses"
                )
            cur.rule = None
            raise cur.error(f"expected a rule name, found {cur.describe()}")
        name = self.name()
        cur.rule = name
        if name in self.defined_at:
            line, column = cur.location(self.defined_at[name])
            raise cur.error(f"rule {name!r} is defined twice (first at line {line}, column {column})", start)
        cur.skip_space(newlines=False)
        if not cur.text.startswith("::=", cur.pos):
            raise cur.error(f"expected '::=' after the rule name {name!r}, found {cur.describe()}")
        cur.pos += 3
        cur.skip_space(newlines=True)
        expr, depth = self.alternates(nested=False)
        self.check_depth(depth, start)
        c = cur.peek()
        if c == "\r":
            cur.pos += 2 if cur.peek(1) == "\n" else 1
        elif c == "\n":
            cur.pos += 1
        elif c == ")":
            raise cur.error("')' closes no group")
        elif c == ":" and cur.text.startswith("::=", cur.pos):
            raise cur.error("'::=' in the middle of a rule: each rule must start on a new line")
        elif c:
            raise cur.error(f"unexpected character {c!r}")
        self.rules[name] = expr
        self.defined_at[name] = start

    # alternates ::= sequence ("|" space sequence)*
    def alternates(self, nested: bool) -> tuple[ir.Expr, int]:
        cur = self.cur
        options = [self.sequence(nested)]
        while cur.peek() == "|":
            cur.pos += 1
            cur.skip_space(newlines=True)
            options.append(self.sequence(nested))
        if len(options) == 1:
            return options[0]
        # Not ir.alt: its duplicate check is quadratic, and untrusted text may hold 10^5 options.
        unique = dict.fromkeys(x for e, _ in options for x in (e.items if isinstance(e, ir.Alt) else (e,)))
        if len(unique) == 1:
            return next(iter(unique)), max(d for _, d in options)
        return ir.Alt(tuple(unique)), 1 + max(d for _, d in options)

    # sequence ::= (item space postfix*)*
    def sequence(self, nested: bool) -> tuple[ir.Expr, int]:
        cur = self.cur
        items: list[tuple[ir.Expr, int]] = []
        while True:
            c = cur.peek()
            if c in _POSTFIX:
                if not items:
                    raise cur.error(f"{c!r} has nothing before it to repeat")
                items[-1] = self.postfix(*items[-1])
            else:
                item = self.item()
                if item is None:
                    break
                items.append(item)
            cur.skip_space(newlines=nested)
        if not items:
            return ir.EMPTY, 0
        if len(items) == 1:
            return items[0]
        return ir.seq(*(e for e, _ in items)), 1 + max(d for _, d in items)

    # item ::= literal | class | "." | name | "(" space alternates ")"
    def item(self) -> tuple[ir.Expr, int] | None:
        """The item at the cursor, or ``None`` where the sequence ends."""
        cur = self.cur
        c = cur.peek()
        if c == '"':
            return self.literal()
        if c == "[":
            return self.char_class()
        if c == ".":
            cur.pos += 1
            return ANY_CHAR, 2
        if c in _NAME_CHARS:
            at = cur.pos
            name = self.name()
            self.first_use.setdefault(name, (at, cur.rule or ""))
            return ir.Ref(name), 0
        if c == "(":
            return self.group()
        if c == "<" or (c == "!" and cur.peek(1) == "<"):
            raise self.token_terminal()
        return None

    def group(self) -> tuple[ir.Expr, int]:
        cur = self.cur
        start = cur.pos
        self.open_groups += 1
        if self.open_groups > self.max_depth:
            raise cur.error(f"parentheses nested deeper than {self.max_depth} (limit MAX_DEPTH)")
        cur.pos += 1
        cur.skip_space(newlines=True)
        expr, depth = self.alternates(nested=True)
        if cur.peek() != ")":
            if not cur.peek():
                raise cur.error("'(' is never closed", start)
            raise cur.error(
                f"expected ')' to close the group opened at column {cur.location(start)[1]}, found {cur.describe()}"
            )
        cur.pos += 1
        self.open_groups -= 1
        self.check_depth(depth, start)
        return expr, depth

    # postfix ::= "*" | "+" | "?" | "{" space int space ("," space int? space)? "}"
    def postfix(self, item: ir.Expr, depth: int) -> tuple[ir.Expr, int]:
        cur = self.cur
        start = cur.pos
        op = cur.peek()
        cur.pos += 1
        if op == "*":
            rep = ir.star(item)
        elif op == "+":
            rep = ir.plus(item)
        elif op == "?":
            rep = ir.optional(item)
        else:
            rep = self.counted(item, start)
        self.check_depth(depth + 1, start)
        return rep, depth + 1

    def counted(self, item: ir.Expr, start: int) -> ir.Expr:
        """The ``{m}``, ``{m,}`` or ``{m,n}`` after ``item``; the cursor is past the ``{``."""
        cur = self.cur
        nested = self.open_groups > 0
        cur.skip_space(nested)
        lo = self.bound()
        hi: int | None = lo
        cur.skip_space(nested)
        if cur.peek() == ",":
            cur.pos += 1
            cur.skip_space(nested)
            hi = self.bound() if cur.peek() in _DIGITS else None
            cur.skip_space(nested)
        if cur.peek() != "}":
            raise cur.error(
                f"expected ',' or '}}' in the repetition opened at column {cur.location(start)[1]}, "
                f"found {cur.describe()}"
            )
        cur.pos += 1
        if hi is not None and hi < lo:
            raise cur.error(f"repetition {{{lo},{hi}}}: the maximum is below the minimum", start)
        return ir.repeat(item, lo, hi)

    def bound(self) -> int:
        cur = self.cur
        start = cur.pos
        while cur.peek() in _DIGITS:
            cur.pos += 1
        if start == cur.pos:
            raise cur.error(f"expected a repetition count, found {cur.describe()}")
        digits = cur.text[start : cur.pos].lstrip("0") or "0"
        # Compared as text first: int() of a huge digit string is slow, and refused past 4300 digits.
        if len(digits) > len(str(ir.MAX_REPEAT)) or int(digits) > ir.MAX_REPEAT:
            raise cur.error(f"repetition bound {digits} is above {ir.MAX_REPEAT} (limit MAX_REPEAT)", start)
        return int(digits)

    # name ::= [a-zA-Z0-9_-]+
    def name(self) -> str:
        cur = self.cur
        start = cur.pos
        while cur.peek() in _NAME_CHARS:
            cur.pos += 1
        return cur.text[start : cur.pos]

    # literal ::= "\"" (char - "\"")* "\""
    def literal(self) -> tuple[ir.Expr, int]:
        cur = self.cur
        start = cur.pos
        cur.pos += 1
        chars = []
        while cur.peek() != '"':
            if not cur.peek():
                raise cur.error("string literal is never closed", start)
            special = _LITERAL_SPECIAL.search(cur.text, cur.pos)
            end = special.start() if special else len(cur.text)
            if end > cur.pos:  # copied whole: a per-character loop would make a 1 MiB literal slow
                chars.append(cur.text[cur.pos : end])
                cur.pos = end
            else:
                chars.append(chr(self.char()))
        cur.pos += 1
        return (ir.literal("".join(chars)), 1) if chars else (ir.EMPTY, 0)

    # class ::= "[" "^"? (char ("-" char)?)* "]"     (a "-" before "]" is itself)
    def char_class(self) -> tuple[ir.Expr, int]:
        cur = self.cur
        start = cur.pos
        cur.pos += 1
        negated = cur.peek() == "^"
        cur.pos += negated
        ranges = []
        while cur.peek() != "]":
            if not cur.peek():
                raise cur.error("character class is never closed", start)
            lo_at = cur.pos
            lo = hi = self.char()
            if cur.peek() == "-" and cur.peek(1) not in ("]", ""):
                cur.pos += 1
                hi = self.char()
                if hi < lo:
                    raise cur.error(f"range {cur.text[lo_at : cur.pos]!r} is reversed", lo_at)
            ranges.append((lo, hi))
        cur.pos += 1
        expr = _class_expr(tuple(ranges), negated)
        if expr == _NOTHING:
            raise cur.error(f"character class {cur.text[start : cur.pos]!r} matches no character", start)
        return expr, 2

    # char ::= [^\\] | "\\" ([nrt\\"[\]] | "x" hex{2} | "u" hex{4} | "U" hex{8})
    def char(self) -> int:
        """One code point of a literal or class: raw text or an escape."""
        cur = self.cur
        start = cur.pos
        c = cur.peek()
        cur.pos += 1
        if c == "\\":
            e = cur.peek()
            cur.pos += 1
            if e in _SIMPLE_ESCAPES:
                return ord(_SIMPLE_ESCAPES[e])
            if e not in _HEX_ESCAPES:
                shown = "'\\' at the end of the text" if not e else f"escape '\\{e}'"
                raise cur.error(f'unknown {shown}: use \\n \\r \\t \\\\ \\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH', start)
            size = _HEX_ESCAPES[e]
            digits = cur.text[cur.pos : cur.pos + size]
            if len(digits) != size or not set(digits) <= _HEX:
                raise cur.error(f"escape '\\{e}' needs exactly {size} hex digits", start)
            cur.pos += size
            code = int(digits, 16)
        else:
            code = ord(c)
        if code > MAX_CODE_POINT or 0xD800 <= code <= 0xDFFF:
            raise cur.error(f"U+{code:04X} is not a valid code point: UTF-8 cannot encode it", start)
        return code

    def token_terminal(self) -> GrammarError:
        cur = self.cur
        end = cur.text.find(">", cur.pos, cur.pos + 64)
        shown = cur.text[cur.pos : end + 1] if end >= 0 else cur.text[cur.pos : cur.pos + 16]
        return cur.error(
            f"token terminal {shown!r} is not supported: it names an entry of one model's vocabulary, "
            "and llamay constrains bytes; write the text as a string literal instead"
        )

    def check_depth(self, depth: int, at: int) -> None:
        if depth > self.max_depth:
            raise self.cur.error(f"expression nested deeper than {self.max_depth} levels (limit MAX_DEPTH)", at)


@lru_cache(maxsize=1024)
def _class_expr(ranges: tuple[tuple[int, int], ...], negated: bool) -> ir.Expr:
    """``utf8.char_class``, memoized: grammars repeat their classes, and each build splits the ranges anew."""
    return char_class(ranges, negated=negated)


def parse_gbnf(text: str, limits: Limits = DEFAULT.limits) -> ParsedGrammar:
    """Parse GBNF ``text`` into IR rules; raises ``GrammarError`` with rule, line and column.

    Every rule is checked, reachable from the root or not: syntax, token terminals,
    bounds, and references to rules that are never defined (reported at their first use).
    """
    if not isinstance(text, str):
        raise TypeError(f"GBNF text must be a str, not {type(text).__name__}")
    # len(text) is a lower bound on the UTF-8 size: it spares encoding a huge text to refuse it.
    size = limits.max_source_bytes
    if len(text) > size or len(text.encode("utf-8", "surrogatepass")) > size:
        raise GrammarError(f"grammar text is over {size} bytes (limit MAX_SOURCE_BYTES)")
    return _Parser(text, limits).grammar()


@gc_paused()
def compile_gbnf(
    text: str, root: str = "root", *, limits: Limits = DEFAULT.limits, tuning: Tuning = DEFAULT.tuning
) -> CompiledGrammar:
    """Compile GBNF ``text`` into an automaton that starts at rule ``root``.

    Raises ``GrammarError`` naming rule, line and column for anything refused: syntax
    errors, token terminals, bounds over ``limits``, undefined rules, a missing root,
    and (found by the lowering) left recursion and grammars over the size bound. A grammar's
    whitespace is its own: no budget applies.
    """
    with budget(limits.compile_seconds):
        parsed = parse_gbnf(text, limits)
        if root not in parsed.positions:
            raise GrammarError(f"there is no rule {root!r} to start from", rule=root)
        return _lower(parsed, root, CompileOptions(whitespace_budget=None, limits=limits, tuning=tuning))


def _lower(parsed: ParsedGrammar, root: str, options: CompileOptions) -> CompiledGrammar:
    """Lower ``parsed``, locating a refusal of the lowering in the text."""
    try:
        return parsed.grammar.compile(root, options=options)
    except GrammarError as err:
        # The lowering names a counted repetition's frame "<rule>{m,n}"; GBNF names hold no "{".
        where = parsed.positions.get((err.rule or "").partition("{")[0])
        if where is not None:
            err.locate(*where)
        raise
