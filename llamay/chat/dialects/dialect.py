"""A tool-call dialect: how one model family writes calls, as data; its grammar and its stream parser.

A call is always a JSON object ``{"name": <an offered name>, <arguments key>: <that tool's
schema>}``. Dialects differ in what wraps it (``Dialect``): Hermes puts each call between
``<tool_call>`` and ``</tool_call>``; Mistral and Granite write one marker and a JSON array
of calls; Llama 3 writes the bare object (``parameters`` for the arguments), optionally after
``<|python_tag|>``. Where a marker is a single token of the model's vocabulary the grammar
allows that token and refuses the marker's text spelled piece by piece (``ir.token``).

Every dialect also reads the forms trained models fall back to: a fenced ```` ```json ````
block of calls, and a bare object (or, for list dialects, a bare array) that begins
``{"name": "<an offered name>"``. Under ``auto`` each form is a trigger of the free text
(``triggers.TriggerSearch``): a trigger fires once the offered name and its closing quote
are written, so JSON naming no offered tool stays prose; the call's rest is then constrained
to that tool. Trigger whitespace: up to 4 characters between the fence and ``{``, up to 8
between ``{`` (or ``[``) and ``"name"`` (pretty-printed ``{\\n    "name"``), up to 2 around
the colon; a trigger may fire anywhere in the text. A call's opening keeps to these runs in
every form and mode, so that no call the grammar lets the model write reads back as prose. A
fenced block ends at its closing fence, which the grammar requires and the parser consumes.
Under ``required`` and a named tool the output starts with a call in any of the forms,
whichever the model prefers; after a call only further calls (when parallel) may follow.

Parallel calls: ``parallel`` None leaves it to the dialect, False allows one call, True asks
for several. Llama 3's format holds one call per turn (its published templates refuse an
assistant turn with more, as llama.cpp's grammar and vLLM's template do): there the grammar
ends after one call, and asking for several says so in a warning.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ...grammars import json_lexical as jg
from ...grammars.jsonschema.compiler import schema_expr
from ...ir import EMPTY, Expr, Grammar, Ref, alt, byte_set, literal, optional, repeat, seq, star, token
from ...options import DEFAULT, CompileOptions
from ..calls import ToolCall
from ..errors import ToolCallError
from .triggers import WS_BYTES, Scanner, Trigger, TriggerSearch, Ws

if TYPE_CHECKING:
    from ...vocab import Vocabulary

#: Whitespace a fallback trigger allows: after the fence, after ``{`` or ``[``, around the colon.
FENCE_WS, OPEN_WS, COLON_WS = 4, 8, 2

#: Opening fences a fenced block may use.
FENCES = (b"```json", b"```")
FENCE_CLOSE = b"```"

_ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Dialect:
    """How one family writes calls. ``detect``: strings whose presence in a chat template selects it."""

    name: str
    detect: tuple[str, ...]
    open: str | None  # the marker before a call (Hermes) or a list of calls (Mistral, Granite)
    close: str | None = None  # the marker after each call (Hermes)
    listed: bool = False  # after ``open``, a JSON array of calls
    open_optional: bool = False  # the bare object is the family's own form; ``open`` may precede it (Llama 3)
    arguments_key: str = "arguments"
    short_ids: bool = False  # 9 alphanumeric characters (Mistral), not ``call_`` and 24 hex digits
    parallel: bool = True  # several calls in one turn; False where the family's templates render one (Llama 3)
    #: What the tools block says before the call format, where llamay lists the tools itself
    instruction: str = "For each function call, write it in this form:"

    def history_id(self, turn: int, index: int) -> str:
        """An id for a call of turn ``turn`` that came without one (Ollama sends none), in this dialect's shape."""
        return f"{turn:05d}{index:04d}" if self.short_ids else f"call_{turn}_{index}"

    def call_id(self) -> str:
        if self.short_ids:
            return "".join(secrets.choice(_ALNUM) for _ in range(9))
        return "call_" + secrets.token_hex(12)

    @property
    def markers(self) -> tuple[str, ...]:
        return tuple(m for m in (self.open, self.close) if m)

    def call_format(self) -> str:
        """One call's shape, placeholders for the name and arguments: for a tools block llamay writes."""
        shape = f'{{"name": <function-name>, "{self.arguments_key}": <args-json-object>}}'
        if self.listed:
            return f"{self.open}[{shape}]"
        return f"{self.open}\n{shape}\n{self.close}" if self.close is not None else shape

    def write_calls(self, functions: Sequence[dict[str, Any]]) -> str:
        """Calls (``{"name", "arguments"}``) as this dialect writes them: for history a template cannot render."""
        objects = [{"name": f["name"], self.arguments_key: f["arguments"]} for f in functions]
        if self.listed:
            return f"{self.open}{json.dumps(objects, ensure_ascii=False)}"
        if self.close is not None:
            return "\n".join(f"{self.open}\n{json.dumps(o, ensure_ascii=False)}\n{self.close}" for o in objects)
        return "\n".join(json.dumps(o, ensure_ascii=False) for o in objects)


class Markers:
    """A dialect's markers against one vocabulary: each as its token edge where it is one token, else its text."""

    def __init__(self, dialect: Dialect, vocab: Vocabulary | None) -> None:
        self.ids: dict[str, int] = {}
        if vocab is not None:
            for text in dialect.markers:
                found = vocab.special_token_id(text)
                if found is not None:
                    self.ids[text] = found
        self.vocab = vocab.with_token_edges(sorted(self.ids.values())) if vocab is not None and self.ids else vocab

    def expr(self, text: str) -> Expr:
        return token(self.ids[text]) if text in self.ids else literal(text)

    def trigger_bytes(self, text: str) -> bytes:
        """The bytes the grammar reads for the marker: its token edge's, or its text."""
        if text in self.ids:
            return self.vocab.edge_bytes(self.ids[text])
        return text.encode()

    def spelled(self) -> list[bytes]:
        """Marker texts free text may not spell: those the model writes as one token."""
        return [text.encode() for text in self.ids]


class CallGrammar:
    """The constraint for ``tools`` under one ``tool_choice`` mode, in ``dialect`` (see the module docstring)."""

    def __init__(self, dialect: Dialect, tools: Sequence[dict], markers: Markers, g: Grammar,
                 warnings: list[str], parallel: bool | None, options: CompileOptions = DEFAULT) -> None:
        self.d = dialect
        self.tools = tools
        self.m = markers
        self.g = g
        self.parallel = (parallel is None or bool(parallel)) and dialect.parallel
        self.names = [json.dumps(t["name"], ensure_ascii=False).encode() for t in tools]
        self._rest: list[Expr] = []
        self.after: Expr = EMPTY
        if not tools:  # ``none``: free text only
            return
        if parallel and not dialect.parallel:
            warnings.append(f"parallel tool calls are not made: the {dialect.name} dialect's format holds one call"
                            " per turn (its chat templates refuse more)")
        for i, tool in enumerate(tools):
            arguments = schema_expr(g, tool.get("parameters", {"type": "object"}), f"/tools/{i}/parameters", warnings,
                                    options)
            g.define(f"call_rest_{i}", seq(
                jg.WS, literal(","), jg.WS, literal(json.dumps(dialect.arguments_key)), jg.WS, literal(":"), jg.WS,
                arguments, jg.WS, literal("}"),
            ))
            self._rest.append(Ref(f"call_rest_{i}"))
        # one head for every tool: the automaton carries a single configuration until the names part
        named = [seq(literal(name), rest) for name, rest in zip(self.names, self._rest, strict=True)]
        g.define("call_body", seq(_run(OPEN_WS), literal('"name"'), _run(COLON_WS), literal(":"), _run(COLON_WS),
                                  alt(*named)))
        # The brace stays at each use of "call". Once the union outgrows the lowering's limit on a
        # rule copied to several places (Tuning.share_states) the body is a frame, and a frame that
        # began with the brace would be entered ahead of it: after ``[`` or a fence the set would
        # hold the whitespace run beside the entered frame, two configurations where one tool has
        # one, stepped for every long whitespace token the mask cache leaves undecided.
        g.define("call", seq(literal("{"), Ref("call_body")))
        g.define("group", alt(*self._groups()))
        if self.parallel:
            self.after = star(seq(jg.WS, Ref("group")))

    # -- the forms of a group of calls ----------------------------------------------------------
    def _more(self, sep: Expr) -> Expr:
        """Further calls inside one group (a list, a fenced block), when parallel."""
        return star(seq(sep, Ref("call"))) if self.parallel else EMPTY

    def _canonical_tail(self) -> Expr:
        """What follows the dialect's ``open`` marker."""
        d = self.d
        if d.listed:
            return seq(jg.WS, literal("["), jg.WS, Ref("call"), self._more(seq(jg.WS, literal(","), jg.WS)), jg.WS,
                       literal("]"))
        if d.close is not None:  # no whitespace budget around the call inside its markers: one newline at most
            return seq(optional(literal("\n")), Ref("call"), optional(literal("\n")), self.m.expr(d.close))
        return seq(jg.WS, Ref("call"))

    def _fence_tail(self) -> Expr:
        return seq(self._more(jg.WS), jg.WS, literal(FENCE_CLOSE))

    def _list_tail(self) -> Expr:
        return seq(self._more(seq(jg.WS, literal(","), jg.WS)), jg.WS, literal("]"))

    def _groups(self) -> list[Expr]:
        d = self.d
        groups = [] if d.open is None else [seq(self.m.expr(d.open), self._canonical_tail())]
        groups.append(seq(alt(*(literal(f) for f in FENCES)), _run(FENCE_WS), Ref("call"), self._fence_tail()))
        if d.listed:
            groups.append(seq(literal("["), _run(OPEN_WS), Ref("call"), self._list_tail()))
        groups.append(Ref("call"))
        return groups

    # -- the modes --------------------------------------------------------------------------
    def calls(self) -> Expr:
        """``required`` and a named tool: calls from the first byte."""
        return seq(Ref("group"), self.after)

    def text(self, auto: bool) -> Expr:
        """``auto`` (free text whose triggers open calls) or ``none`` (free text that opens none).

        A marker the model writes as one token may not be spelled; under ``none`` the marker's
        text cannot be completed either way.
        """
        forbidden = self.m.spelled()
        if not auto and self.d.open is not None and not self.d.open_optional:
            forbidden = list(dict.fromkeys([*forbidden, self.d.open.encode()]))
        opening = self.m.trigger_bytes(self.d.open) if self.d.open is not None else None
        search = search_for(self.d, tuple(self.names) if auto else None, opening, tuple(forbidden))
        return search.rules(self.g, "text_", lambda t: seq(self._fired(t), self.after))

    def _fired(self, trigger: Trigger) -> Expr:
        form, i = trigger.key
        if form == "marker":
            return self._canonical_tail()
        if form == "fence":
            return seq(self._rest[i], self._fence_tail())
        if form == "list":
            return seq(self._rest[i], self._list_tail())
        return self._rest[i]


def _run(most: int) -> Expr:
    """0 to ``most`` whitespace bytes: a trigger's run (``Ws``), within which the parser sees the call."""
    return repeat(byte_set(WS_BYTES), 0, most)


@lru_cache(maxsize=64)
def search_for(dialect: Dialect, names: tuple[bytes, ...] | None, opening: bytes | None,
               forbidden: tuple[bytes, ...] = ()) -> TriggerSearch:
    """The trigger automaton of ``names`` (JSON-encoded; None: no triggers), ``opening`` the marker's bytes.

    Kept: a request's parser and its grammar ask for the same one, and so do requests alike.
    """
    return TriggerSearch([] if names is None else triggers(dialect, opening, names), forbidden)


def triggers(dialect: Dialect, opening: bytes | None, names: Sequence[bytes]) -> list[Trigger]:
    """The ``auto`` triggers, in priority order: the marker, fenced blocks, bare lists, bare objects."""
    found = [] if opening is None else [Trigger(("marker", None), (opening,))]
    head = (b"{", Ws(OPEN_WS), b'"name"', Ws(COLON_WS), b":", Ws(COLON_WS))
    for i, name in enumerate(names):
        found += [Trigger(("fence", i), (fence, Ws(FENCE_WS), *head, name)) for fence in FENCES]
    if dialect.listed:
        found += [Trigger(("list", i), (b"[", Ws(OPEN_WS), *head, name)) for i, name in enumerate(names)]
    found += [Trigger(("bare", i), (*head, name)) for i, name in enumerate(names)]
    return found


class CallStream:
    """Generated text split into prose and complete calls, delta by delta (streaming holds each call back).

    Runs the grammar's own trigger automaton over the text, so a call begins exactly where the
    constraint let one begin; from there it reads the form the trigger opened until the call
    (or the group of calls) is complete. A ``None`` ``names`` reads only the marker form.
    Whitespace next to a call is formatting and dropped; prose resuming after calls is joined
    to the prose before them by a newline.
    """

    def __init__(self, dialect: Dialect, names: Sequence[str] | None = None) -> None:
        self.d = dialect
        encoded = tuple(json.dumps(n, ensure_ascii=False).encode() for n in names or ())
        opening = dialect.open.encode() if dialect.open is not None else None
        self._scanner = Scanner(search_for(dialect, encoded, opening))
        self._form: str | None = None  # the open group's form, None in prose
        self._body = ""  # the open group's text, from its trigger on
        self._calls = 0
        self._text_out = False
        self._after_call = False
        self._decoder = json.JSONDecoder()

    @property
    def in_call(self) -> bool:
        return self._form is not None

    @property
    def holds_markup(self) -> bool:
        """Whether a call is open, or text held back could still open one: what a cut output must not show."""
        return self._form is not None or bool(self._scanner.held.strip())

    def feed(self, delta: str) -> list[str | ToolCall]:
        out: list[str | ToolCall] = []
        data = delta.encode("utf-8", "surrogatepass")
        while True:
            if self._form is not None:
                self._body += data.decode("utf-8", "surrogatepass")
                data = b""
                calls, rest = self._close_group()
                if calls is None:
                    return out
                out += calls
                self._form, self._body, self._after_call = None, "", True
                data = rest.encode("utf-8", "surrogatepass")
                continue
            prose, fired, rest = self._scanner.feed(data)
            if text := self._prose(prose.decode("utf-8", "replace"), keep_tail=fired is None):
                out.append(text)
            if fired is None:
                return out
            trigger, matched = fired
            self._form = trigger.key[0]
            self._body = matched.decode("utf-8", "surrogatepass")
            data = rest

    def finish(self) -> list[str | ToolCall]:
        if self._form is not None:
            raise ToolCallError(f"a tool call is never completed: {_snippet(self._body)} - at call {self._calls + 1}")
        tail = self._prose(self._scanner.flush().decode("utf-8", "replace"), keep_tail=False)
        return [tail] if tail else []

    def drain(self) -> str:
        """What is held back, as prose (an open call as written), leaving the stream empty."""
        held = self._body + self._scanner.flush().decode("utf-8", "replace")
        self._form, self._body = None, ""
        return self._prose(held, keep_tail=False)

    # -- the open group --------------------------------------------------------------------
    def _close_group(self) -> tuple[list[ToolCall] | None, str]:
        """The group's calls and the text after it, once complete; (None, "") while it is not."""
        body, d = self._body, self.d
        if self._form == "marker" and d.close is not None:
            end = _outside_strings(body, d.close, len(d.open or ""))
            if end < 0:
                return None, ""
            inner = body[len(d.open or "") : end].strip()
            return [self._call(self._load(inner))], body[end + len(d.close) :]
        start = len(d.open or "") if self._form == "marker" else 0
        if self._form == "fence":
            start = body.index("{")
        values, pos = [], start
        while True:
            pos = _skip_ws(body, pos)
            if pos >= len(body):
                return None, ""
            if self._form == "fence" and body.startswith(FENCE_CLOSE.decode(), pos):
                return [self._call(v) for v in values], body[pos + len(FENCE_CLOSE) :]
            if self._form == "fence" and body[pos] != "{":
                if FENCE_CLOSE.decode().startswith(body[pos:]):
                    return None, ""
                raise ToolCallError(f"a fenced block of calls holds text: {_snippet(body)} - at call {self._calls + 1}")
            try:
                value, pos = self._decoder.raw_decode(body, pos)
            except ValueError:
                return None, ""  # not complete yet
            if self._form != "fence":
                calls = value if isinstance(value, list) and (d.listed or self._form == "list") else [value]
                return [self._call(v) for v in calls], body[pos:]
            values.append(value)

    def _load(self, text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError as e:
            where = f"call {self._calls + 1}"
            raise ToolCallError(f"a tool call is not JSON ({e}): {_snippet(text)} - at {where}") from None

    def _call(self, value: Any) -> ToolCall:
        self._calls += 1
        where = f"call {self._calls}"
        if not isinstance(value, dict):
            raise ToolCallError(f"a tool call is not a JSON object: {_snippet(json.dumps(value))} - at {where}")
        name = value.get("name")
        key = next((k for k in (self.d.arguments_key, "arguments", "parameters") if k in value), self.d.arguments_key)
        arguments = value.get(key)
        if not isinstance(name, str) or not name:
            raise ToolCallError(f'a tool call has no "name" string: {_snippet(json.dumps(value))} - at {where}')
        if not isinstance(arguments, dict):
            raise ToolCallError(f'a tool call\'s "{key}" is not a JSON object - at {where}')
        if extra := sorted(value.keys() - {"name", key}):
            raise ToolCallError(f"a tool call has keys other than name and {key}: {extra} - at {where}")
        return ToolCall(self.d.call_id(), name, arguments)

    def _prose(self, text: str, *, keep_tail: bool) -> str:
        """``text`` as it goes out: whitespace after a call dropped, before a trigger held back or dropped."""
        if keep_tail:  # what may turn out to be the whitespace before a call waits
            stripped = text.rstrip()
            self._scanner.put_back(text[len(stripped) :].encode())
            text = stripped
        else:
            text = text.rstrip()
        if self._after_call:
            text = text.lstrip()
            if not text:
                return ""
            self._after_call = False
            if self._text_out:
                text = "\n" + text
        self._text_out = self._text_out or bool(text)
        return text


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _outside_strings(text: str, word: str, start: int) -> int:
    """Where ``word`` first stands in ``text`` past ``start`` outside a JSON string, or -1."""
    inside = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if not inside and text.startswith(word, i):
            return i
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = inside
        elif ch == '"':
            inside = not inside
    return -1


def _snippet(text: str, limit: int = 80) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_tool_calls(text: str, dialect: Dialect, names: Sequence[str] | None = None) -> tuple[str, list[ToolCall]]:
    """The prose of a whole generated text and its calls, in order (the stream fed once)."""
    stream = CallStream(dialect, names)
    events = [*stream.feed(text), *stream.finish()]
    return "".join(e for e in events if isinstance(e, str)), [e for e in events if isinstance(e, ToolCall)]
