"""Free text that watches for tool-call triggers: one search automaton, read by the grammar and the parser.

Under ``tool_choice: "auto"`` the model writes prose until it opens a call, and a model
trained for tools opens one in more than one way: its dialect's marker, a fenced
```` ```json ```` block, or a bare object beginning ``{"name": "<an offered name>"``. Each such
opening is a *trigger*: a short pattern of literal bytes and bounded whitespace runs
(trained models pretty-print, ``{\\n  "name": …``). A trigger names an offered tool where
it can, so that JSON naming no offered tool never fires one and stays prose.

``TriggerSearch`` is the deterministic automaton of "text, up to the first trigger" (the
subset construction of every trigger's chain, restarted at every byte). The grammar is
read off it (``rules``): one rule per automaton state, whose byte classes continue the
text, and whose firing bytes continue with the call the trigger opened. The stream parser
runs the same automaton over the decoded text (``Scanner``), so the two cannot disagree
on where a call begins. Byte 0xFF never occurs in UTF-8 text: the vocabulary spells a
token edge (a marker that is one special token) with it, so free text refuses it and a
marker trigger may start with it; once inside such an edge no text restarts until it ends.
``forbidden`` patterns are refused outright (a marker's text spelled piece by piece, where
the marker is a token).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ...ir import EDGE_BYTE, EMPTY, JSON_WHITESPACE, Bytes, Expr, Grammar, Ref, alt, merge_ranges, seq

#: Whitespace a trigger's runs may hold: JSON's.
WS_BYTES = JSON_WHITESPACE



@dataclass(frozen=True)
class Ws:
    """A run of 0 to ``most`` whitespace bytes inside a trigger."""

    most: int


@dataclass(frozen=True)
class Trigger:
    """What fires (``key``, passed back to the grammar and the parser) on which bytes (``parts``)."""

    key: Hashable
    parts: tuple[bytes | Ws, ...]

    def regex(self) -> re.Pattern[bytes]:
        """The trigger as a regular expression anchored at the end of the text it ends."""
        return _regex(self.parts)


@dataclass(frozen=True)
class Fire:
    """A transition that completes ``trigger``."""

    trigger: Trigger


class TriggerSearch:
    """The search automaton over ``triggers`` (earlier ones win a tie) and ``forbidden`` byte strings.

    ``step(state, byte)`` is the next state (an int), a ``Fire``, or None for a byte free text
    may not hold there. ``hold[state]`` is how many of the last bytes may still become a trigger.
    Bytes that no trigger tells apart share one column (``column``), so the construction
    visits a few dozen classes per state, not 256 bytes.
    """

    def __init__(self, triggers: Sequence[Trigger], forbidden: Sequence[bytes] = ()) -> None:
        self.triggers = list(triggers)
        nfa = self._nfa = _Nfa()
        starts = [nfa.chain(t.parts, ("fire", i)) for i, t in enumerate(self.triggers)]
        starts += [nfa.chain((word,), ("refuse", None)) for word in forbidden]
        self._origin = nfa.closure(starts)
        self.column, self.classes = _byte_classes(nfa)
        nfa.index(self.column)
        self._ids: dict[tuple[frozenset[int], bool], int] = {}
        self._sets: list[tuple[frozenset[int], bool]] = []
        self.sealed: list[bool] = []  # inside a token edge: no text may begin or end here
        self.hold: list[int] = []
        self.start = self._state(self._origin, False)
        rows: dict[int, list[int | Fire | None]] = {}
        todo = [self.start]
        while todo:
            state = todo.pop()
            row: list[int | Fire | None] = []
            moves = nfa.moves(self._sets[state][0])
            for c, members in enumerate(self.classes):
                outcome = self._next(state, moves.get(c, ()), members[0])
                if isinstance(outcome, tuple):
                    known = len(self._sets)
                    outcome = self._state(*outcome)
                    if outcome == known:
                        todo.append(outcome)
                row.append(outcome)
            rows[state] = row
        self.table = [rows[s] for s in range(len(self._sets))]

    def step(self, state: int, byte: int) -> int | Fire | None:
        return self.table[state][self.column[byte]]

    def _state(self, members: frozenset[int], sealed: bool) -> int:
        found = self._ids.get((members, sealed))
        if found is None:
            found = self._ids[members, sealed] = len(self._sets)
            self._sets.append((members, sealed))
            self.sealed.append(sealed)
            self.hold.append(max((self._nfa.depth[m] for m in members), default=0))
        return found

    def _next(self, state: int, moved_to, byte: int) -> tuple[frozenset[int], bool] | Fire | None:
        """Where ``state`` goes on ``byte``, whose class moves its NFA states to ``moved_to``."""
        sealed = self._sets[state][1]
        moved = self._nfa.closure(moved_to)
        ends = [self._nfa.ends[m] for m in moved if m in self._nfa.ends]
        fired = [i for kind, i in ends if kind == "fire"]
        if fired:
            return Fire(self.triggers[min(fired)])
        if ends:  # a forbidden word completed
            return None
        if byte == EDGE_BYTE or sealed:
            inside = frozenset(m for m in moved if self._nfa.in_edge[m])
            return (inside, True) if inside else None
        return (moved | self._origin, False)

    def rules(self, g: Grammar, prefix: str, on_fire: Callable[[Trigger], Expr]) -> Ref:
        """Define ``{prefix}{state}`` for every state; text may end in any unsealed one."""
        for state, row in enumerate(self.table):
            targets: dict[int | Trigger, list[int]] = {}
            for members, outcome in zip(self.classes, row, strict=True):
                if outcome is not None:
                    targets.setdefault(outcome.trigger if isinstance(outcome, Fire) else outcome, []).extend(members)
            options: list[Expr] = [] if self.sealed[state] else [EMPTY]
            for target, members in sorted(targets.items(), key=lambda kv: min(kv[1])):
                step = Bytes(merge_ranges((b, b) for b in sorted(members)))
                options.append(seq(step, Ref(f"{prefix}{target}") if isinstance(target, int) else on_fire(target)))
            g.define(f"{prefix}{state}", alt(*options))
        return Ref(f"{prefix}{self.start}")


def _byte_classes(nfa: _Nfa) -> tuple[list[int], list[list[int]]]:
    """Bytes no edge tells apart share a class: (class of each byte, the bytes of each class)."""
    signature: dict[int, list[int]] = {b: [] for b in range(256)}
    for k, accepted in enumerate(sorted({a for edges in nfa.edges for a, _ in edges})):
        for b in accepted:
            signature[b].append(k)
    signature[EDGE_BYTE].append(-1)  # never free text
    ids: dict[tuple[int, ...], int] = {}
    column = [ids.setdefault(tuple(signature[b]), len(ids)) for b in range(256)]
    classes: list[list[int]] = [[] for _ in ids]
    for b, c in enumerate(column):
        classes[c].append(b)
    return column, classes


@lru_cache(maxsize=1024)
def _regex(parts: tuple[bytes | Ws, ...]) -> re.Pattern[bytes]:
    body = b"".join(re.escape(p) if isinstance(p, bytes) else b"[ \\t\\n\\r]{0,%d}" % p.most for p in parts)
    return re.compile(b"(?:" + body + b")\\Z")


class _Nfa:
    """Chains of byte steps with optional whitespace runs; ``depth``: the most bytes a thread has read there."""

    def __init__(self) -> None:
        self.edges: list[list[tuple[bytes, int]]] = []
        self.eps: list[list[int]] = []
        self.depth: list[int] = []
        self.in_edge: list[bool] = []
        self.ends: dict[int, tuple[str, int | None]] = {}
        self.by_class: list[dict[int, list[int]]] = []

    def _new(self, depth: int, in_edge: bool) -> int:
        self.edges.append([])
        self.eps.append([])
        self.depth.append(depth)
        self.in_edge.append(in_edge)
        return len(self.edges) - 1

    def chain(self, parts: Sequence[bytes | Ws], end: tuple[str, int | None]) -> int:
        first = parts[0]
        edge = isinstance(first, bytes) and first[:1] == bytes([EDGE_BYTE])
        start = cur = self._new(0, False)
        depth = 0
        for part in parts:
            if isinstance(part, bytes):
                for b in part:
                    depth += 1
                    nxt = self._new(depth, edge)
                    self.edges[cur].append((bytes([b]), nxt))
                    cur = nxt
                edge = False  # an edge is one token: whatever follows it is text again
            else:
                run_end = self._new(depth + part.most, False)
                self.eps[cur].append(run_end)
                for k in range(part.most):
                    nxt = run_end if k == part.most - 1 else self._new(depth + k + 1, False)
                    self.edges[cur].append((WS_BYTES, nxt))
                    if nxt != run_end:
                        self.eps[nxt].append(run_end)
                    cur = nxt
                depth += part.most
                cur = run_end
        self.ends[cur] = end
        return start

    def closure(self, states) -> frozenset[int]:
        seen = set(states)
        todo = list(seen)
        while todo:
            for nxt in self.eps[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return frozenset(seen)

    def index(self, column: Sequence[int]) -> None:
        """Each state's targets by byte class (``column``), for ``move``."""
        self.by_class = []
        for edges in self.edges:
            row: dict[int, list[int]] = {}
            for accepted, nxt in edges:
                for c in {column[b] for b in accepted}:
                    row.setdefault(c, []).append(nxt)
            self.by_class.append(row)

    def moves(self, states: frozenset[int]) -> dict[int, set[int]]:
        """Where ``states`` go, by byte class (classes that lead nowhere are absent)."""
        out: dict[int, set[int]] = {}
        for s in states:
            for c, targets in self.by_class[s].items():
                out.setdefault(c, set()).update(targets)
        return out


class Scanner:
    """``TriggerSearch`` run over text as it arrives: prose that can no longer start a trigger, then the trigger.

    ``feed`` returns ``(prose, fired)``: prose is safe to emit; ``fired`` is ``(trigger,
    matched)`` once a trigger completes, where ``matched`` is the trigger's own text (the
    prose before it is in ``prose``). Text is scanned as its UTF-8 bytes.
    """

    def __init__(self, search: TriggerSearch) -> None:
        self.search = search
        self.state = search.start
        self.held = b""

    def feed(self, data: bytes) -> tuple[bytes, tuple[Trigger, bytes] | None, bytes]:
        """Scan ``data``; returns (prose, fired, rest): ``rest`` is what follows a trigger, unscanned."""
        out = bytearray()
        for i, byte in enumerate(data):
            outcome = self.search.step(self.state, byte)
            buf = self.held + bytes([byte])
            if isinstance(outcome, Fire):
                match = outcome.trigger.regex().search(buf)
                begin = match.start() if match else 0
                out += buf[:begin]
                self.state, self.held = self.search.start, b""
                return bytes(out), (outcome.trigger, buf[begin:]), data[i + 1 :]
            # a refused byte cannot come from a constrained model; unconstrained text restarts
            self.state = self.search.start if outcome is None else outcome
            keep = min(self.search.hold[self.state], len(buf))
            out += buf[: len(buf) - keep]
            self.held = buf[len(buf) - keep :] if keep else b""
        return bytes(out), None, b""

    def put_back(self, data: bytes) -> None:
        """Scanned text not to be sent yet (whitespace that may turn out to precede a call): sent with what follows."""
        self.held = data + self.held

    def flush(self) -> bytes:
        """What is held back, once no more text comes: prose after all."""
        held, self.held, self.state = self.held, b"", self.search.start
        return held
