"""Lowering: IR rules onto the core's flat pushdown automaton.

Theory of operation. Every *frame rule* becomes a small NFA over bytes with one start
and one final state; reaching the final state pops the frame. Frame rules are the root,
rules that take part in recursion, rules too big to copy, and counted repetitions.
Everything else is inlined at each use, so a JSON Schema without ``$ref`` is one frame:
the mask cache (``_core.maskcache``) can then decide most tokens from the top frame alone.

Edges are of four kinds: a byte range (optionally charged to the whitespace budget);
``CALL r`` (push a frame returning to the edge's target, enter rule ``r`` with counter 0);
``INC`` (start one more iteration of the frame's counted repetition, if under ``max``);
``EXIT`` (leave it, if at least ``min`` iterations were started). Plain epsilon edges exist
only while building: they are eliminated before the arrays are emitted, so the runtime
closure follows only calls, counters and pops.

Refused here, by rule name: undefined rules, a missing root, ``Alt()`` and empty byte
sets, bad repetition bounds, left recursion (direct, indirect or through a nullable
prefix: the automaton expands a call before it reads a byte, so it would never stop),
and automata over ``limits.MAX_STATES``.
"""

from __future__ import annotations

import time

import numpy as np

from . import limits
from ._core.automaton import CALL, EXIT, INC, CompiledGrammar
from .errors import GrammarError
from .ir import Alt, Bytes, Expr, Ref, Repeat, Seq, alt, seq

_EPS = 0


class _State:
    __slots__ = ("bytes", "eps", "final", "rule")

    def __init__(self, rule: int) -> None:
        self.bytes: list[tuple[int, int, int, bool]] = []
        self.eps: list[tuple[int, int, int]] = []  # (kind, arg, target)
        self.final = False
        self.rule = rule


class _Lowering:
    def __init__(self, rules: dict[str, Expr], root: str) -> None:
        self.rules = rules
        self.states: list[_State] = []
        self.rule_ids: dict[object, int] = {}
        self.rule_names: list[str] = []
        self.rule_start: list[int] = []
        self.rule_bounds: list[tuple[int, int]] = []
        self.recursive = _recursive_rules(rules)
        self.size_memo: dict[Expr, int] = {}
        self.deadline = time.monotonic() + limits.COMPILE_SECONDS
        self.root = root
        self.nullable_rules = _nullable_rules(rules)
        self.inline_entries: dict[tuple[str, int, int], int] = {}
        self.pending: list[tuple[Expr, int, int, int, str]] = []

    # -- sizes decide what is inlined and what is unrolled -------------------------------
    def size(self, expr: Expr, depth: int = 0) -> int:
        got = self.size_memo.get(expr)
        if got is not None:
            return got
        if depth > limits.MAX_DEPTH:
            raise GrammarError(f"nesting deeper than {limits.MAX_DEPTH} (limit MAX_DEPTH)", rule=self.root)
        if isinstance(expr, Bytes):
            n = 1
        elif isinstance(expr, (Seq, Alt)):
            n = 1 + sum(self.size(x, depth + 1) for x in expr.items)
        elif isinstance(expr, Ref):
            n = 1 if self.is_frame(expr.name) else self.size(self.rules[expr.name], 0)
        else:
            body = self.size(expr.item, depth + 1)
            n = 2 + body * (1 if self.counted(expr) else max(expr.min, expr.max or 1, 1))
        n = min(n, limits.MAX_STATES + 1)
        self.size_memo[expr] = n
        return n

    def is_frame(self, name: str) -> bool:
        return (
            name in self.recursive or name == self.root or self.size(self.rules[name]) > limits.INLINE_STATES
        )

    def counted(self, rep: Repeat) -> bool:
        """Whether ``rep`` runs on a frame counter rather than unrolled states."""
        top = rep.max if rep.max is not None else rep.min
        return top > 1 and self.size(rep.item) * top > limits.UNROLL_STATES

    def nullable(self, expr: Expr) -> bool:
        return _nullable(expr, self.nullable_rules)

    def non_empty(self, expr: Expr) -> Expr | None:
        """``expr`` without the empty string; None when nothing else is left.

        A nullable rule is expanded in place; a nullable *recursive* rule cannot be, and under
        a counter its empty matches would spin the counter: such a grammar is refused.
        """
        if not self.nullable(expr):
            return expr
        if isinstance(expr, Ref):
            if expr.name in self.recursive:
                raise GrammarError(
                    f"rule {expr.name!r} matches the empty string and recurses; it cannot be repeated a counted "
                    "number of times (write the empty case outside the repetition)", rule=expr.name)
            return self.non_empty(self.rules[expr.name])
        parts: list[Expr] = []
        if isinstance(expr, Seq):
            if not expr.items:
                return None
            head, tail = expr.items[0], seq(*expr.items[1:])
            first = self.non_empty(head)
            if first is not None:
                parts.append(seq(first, tail))
            rest = self.non_empty(tail)
            if rest is not None:
                parts.append(rest)
        elif isinstance(expr, Alt):
            parts = [p for p in map(self.non_empty, expr.items) if p is not None]
        elif isinstance(expr, Repeat):
            item = self.non_empty(expr.item)
            if item is None or expr.max == 0:
                return None
            if expr.max == 1:
                return item
            return seq(item, Repeat(expr.item, 0, None if expr.max is None else expr.max - 1))
        return alt(*parts) if parts else None

    # -- construction ---------------------------------------------------------------------
    def new_state(self, rule: int) -> int:
        if len(self.states) > limits.MAX_STATES:
            raise GrammarError(
                f"grammar needs more than {limits.MAX_STATES} automaton states (limit MAX_STATES)", rule=self.root
            )
        self.states.append(_State(rule))
        return len(self.states) - 1

    def frame_rule(self, key: object, name: str, body: Expr, bounds: tuple[int, int] = (0, 0)) -> int:
        rid = self.rule_ids.get(key)
        if rid is not None:
            return rid
        rid = len(self.rule_names)
        self.rule_ids[key] = rid
        self.rule_names.append(name)
        self.rule_bounds.append(bounds)
        start, final = self.new_state(rid), self.new_state(rid)
        self.rule_start.append(start)
        self.states[final].final = True
        outer, self.pending = self.pending, []
        if bounds == (0, 0):
            self.frag(body, start, final, rid, name, 0)
        else:
            # item{min,max} on a counter: start --EXIT--> final; start --INC--> loop --item--> start
            loop = self.new_state(rid)
            self.states[start].eps.append((EXIT, 0, final))
            self.states[start].eps.append((INC, 0, loop))
            self.frag(body, loop, start, rid, name, 0)
        while self.pending:
            expr, s, t, r, n = self.pending.pop()
            self.frag(expr, s, t, r, n, 0)
        self.pending = outer
        return rid

    def frag(self, expr: Expr, s: int, t: int, rid: int, name: str, depth: int) -> None:
        """Connect ``s`` to ``t`` through ``expr``. Never adds an edge into ``s`` (loops get their own state)."""
        if depth > limits.MAX_DEPTH:
            raise GrammarError(f"nesting deeper than {limits.MAX_DEPTH} (limit MAX_DEPTH)", rule=name)
        if time.monotonic() > self.deadline:
            raise GrammarError(f"compile took over {limits.COMPILE_SECONDS} s (limit COMPILE_SECONDS)", rule=name)
        states = self.states
        if isinstance(expr, Bytes):
            if not expr.ranges:
                raise GrammarError("empty byte set matches nothing", rule=name)
            for lo, hi in expr.ranges:
                if not 0 <= lo <= hi <= 255:
                    raise GrammarError(f"byte range {lo}..{hi} is not within 0..255", rule=name)
                states[s].bytes.append((lo, hi, t, expr.whitespace))
        elif isinstance(expr, Seq):
            cur = s
            for i, item in enumerate(expr.items):
                nxt = t if i == len(expr.items) - 1 else self.new_state(rid)
                self.frag(item, cur, nxt, rid, name, depth + 1)
                cur = nxt
            if not expr.items:
                states[s].eps.append((_EPS, 0, t))
        elif isinstance(expr, Alt):
            if not expr.items:
                raise GrammarError("empty alternative matches nothing", rule=name)
            for item in _left_factor(expr.items):
                self.frag(item, s, t, rid, name, depth + 1)
        elif isinstance(expr, Ref):
            if expr.name not in self.rules:
                raise GrammarError(f"undefined rule {expr.name!r}", rule=name)
            if self.is_frame(expr.name):
                callee = self.frame_rule(expr.name, expr.name, self.rules[expr.name])
                states[s].eps.append((CALL, callee, t))
            else:
                # inlined once per (rule, target, frame): every use that continues at ``t`` shares
                # the copy, and it is built later from a worklist, so chains of rules do not nest
                key = (expr.name, t, rid)
                entry = self.inline_entries.get(key)
                if entry is None:
                    entry = self.inline_entries[key] = self.new_state(rid)
                    self.pending.append((self.rules[expr.name], entry, t, rid, expr.name))
                states[s].eps.append((_EPS, 0, entry))
        elif isinstance(expr, Repeat):
            self.repeat(expr, s, t, rid, name, depth)
        else:
            raise GrammarError(f"not an IR expression: {expr!r}", rule=name)

    def repeat(self, rep: Repeat, s: int, t: int, rid: int, name: str, depth: int) -> None:
        lo, hi = rep.min, rep.max
        if lo < 0 or (hi is not None and hi < lo):
            raise GrammarError(f"repetition bounds {{{lo},{hi}}} are invalid", rule=name)
        if max(lo, hi or 0) > limits.MAX_REPEAT:
            raise GrammarError(f"repetition bound above {limits.MAX_REPEAT} (limit MAX_REPEAT)", rule=name)
        states = self.states
        if self.counted(rep):
            if self.nullable(rep.item):
                # empty iterations would each bump the counter: x{m,n} = (x minus ""){0,n}
                item = self.non_empty(rep.item)
                if item is None:  # only the empty string
                    states[s].eps.append((_EPS, 0, t))
                    return
                rep, lo = Repeat(item, 0, hi), 0
            if hi is None:  # item{lo,} = item{lo,lo} item*
                mid = self.new_state(rid)
                self.repeat(Repeat(rep.item, lo, lo), s, mid, rid, name, depth)
                self.repeat(Repeat(rep.item, 0, None), mid, t, rid, name, depth)
                return
            callee = self.frame_rule(("repeat", rep), f"{name}{{{lo},{hi}}}", rep.item, (lo, hi))
            states[s].eps.append((CALL, callee, t))
            return
        cur = s
        for _ in range(lo):  # the mandatory copies
            nxt = self.new_state(rid)
            self.frag(rep.item, cur, nxt, rid, name, depth + 1)
            cur = nxt
        if hi is None:  # then item*: a loop on a fresh state
            loop = self.new_state(rid)
            states[cur].eps.append((_EPS, 0, loop))
            self.frag(rep.item, loop, loop, rid, name, depth + 1)
            states[loop].eps.append((_EPS, 0, t))
            return
        for _ in range(hi - lo):  # then (item (item ...)?)?
            states[cur].eps.append((_EPS, 0, t))
            nxt = self.new_state(rid)
            self.frag(rep.item, cur, nxt, rid, name, depth + 1)
            cur = nxt
        states[cur].eps.append((_EPS, 0, t))


def _left_factor(items: tuple[Expr, ...]) -> list[Expr]:
    """Alternatives that start with the same byte set share it: ``ab | ac`` becomes ``a (b | c)``.

    Without this a keyword list of thousands of words would be thousands of configurations
    after its first byte; with it the automaton follows one path per distinct prefix.
    """
    groups: dict[object, list[Expr]] = {}
    for item in items:
        if isinstance(item, Seq) and item.items and isinstance(item.items[0], Bytes):
            groups.setdefault(item.items[0], []).append(seq(*item.items[1:]))
        elif isinstance(item, Bytes):
            groups.setdefault(item, []).append(Seq(()))
        else:
            groups.setdefault(("other", len(groups)), []).append(item)
    out: list[Expr] = []
    for head, tails in groups.items():
        if isinstance(head, Bytes):
            out.append(seq(head, alt(*tails)) if len(tails) > 1 else seq(head, tails[0]))
        else:
            out.extend(tails)
    return out


def _nullable(e: Expr, nullable_rules: set[str]) -> bool:
    if isinstance(e, Bytes):
        return False
    if isinstance(e, Seq):
        return all(_nullable(x, nullable_rules) for x in e.items)
    if isinstance(e, Alt):
        return any(_nullable(x, nullable_rules) for x in e.items)
    if isinstance(e, Repeat):
        return e.min == 0 or _nullable(e.item, nullable_rules)
    return e.name in nullable_rules


def _nullable_rules(rules: dict[str, Expr]) -> set[str]:
    """Rules that match the empty string (a fixpoint over the references)."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, expr in rules.items():
            if name not in found and _nullable(expr, found):
                found.add(name)
                changed = True
    return found


def _recursive_rules(rules: dict[str, Expr]) -> set[str]:
    """Rules on a reference cycle (Tarjan's SCC, iterative): they must be frames."""
    refs: dict[str, list[str]] = {}
    for name, expr in rules.items():
        out: list[str] = []
        stack = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, Ref):
                if e.name in rules:
                    out.append(e.name)
            elif isinstance(e, (Seq, Alt)):
                stack.extend(e.items)
            elif isinstance(e, Repeat):
                stack.append(e.item)
        refs[name] = out
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    scc_stack: list[str] = []
    recursive: set[str] = set()
    for root in rules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                scc_stack.append(node)
                on_stack.add(node)
            succ = refs[node]
            if i < len(succ):
                work.append((node, i + 1))
                nxt = succ[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    x = scc_stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                if len(comp) > 1 or node in refs[node]:
                    recursive.update(comp)
    return recursive


def _eliminate_epsilon(states: list[_State]) -> None:
    """Give every state the byte edges, special edges and finality of its epsilon closure."""
    closures: list[list[int] | None] = [None] * len(states)
    for s in range(len(states)):
        if not any(k == _EPS for k, _, _ in states[s].eps):
            continue
        seen = {s}
        stack = [s]
        while stack:
            x = stack.pop()
            for kind, _, tgt in states[x].eps:
                if kind == _EPS and tgt not in seen:
                    seen.add(tgt)
                    stack.append(tgt)
        closures[s] = sorted(seen)
    for s, clo in enumerate(closures):
        if clo is None:
            continue
        st = states[s]
        byte_edges = {e for x in clo for e in states[x].bytes}
        special = {e for x in clo for e in states[x].eps if e[0] != _EPS}
        st.final = any(states[x].final for x in clo)
        st.bytes = sorted(byte_edges)
        st.eps = sorted(special)
    for st in states:
        st.eps = [e for e in st.eps if e[0] != _EPS]


def _check_left_recursion(low: _Lowering) -> None:
    """Refuse a rule that can call itself before reading a byte, naming the cycle."""
    states, n_rules = low.states, len(low.rule_names)
    nullable = [False] * n_rules

    def scan(rid: int) -> tuple[bool, set[int]]:
        """(reaches final without bytes, rules called without bytes) from rule ``rid``'s start."""
        seen, calls, stack, fin = {low.rule_start[rid]}, set(), [low.rule_start[rid]], False
        while stack:
            x = stack.pop()
            fin = fin or states[x].final
            for kind, arg, tgt in states[x].eps:
                nxt = []
                if kind == CALL:
                    calls.add(arg)
                    if nullable[arg]:
                        nxt.append(tgt)
                else:
                    nxt.append(tgt)
                for y in nxt:
                    if y not in seen:
                        seen.add(y)
                        stack.append(y)
        return fin, calls

    changed = True
    while changed:
        changed = False
        for rid in range(n_rules):
            if not nullable[rid] and scan(rid)[0]:
                nullable[rid] = changed = True
    graph = {rid: scan(rid)[1] for rid in range(n_rules)}
    color = [0] * n_rules
    for root in range(n_rules):
        if color[root]:
            continue
        path, work = [], [(root, iter(sorted(graph[root])))]
        color[root] = 1
        path.append(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                work.pop()
                path.pop()
            elif color[nxt] == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                names = " -> ".join(low.rule_names[r] for r in cycle)
                message = f"left recursion: {names} calls itself before reading a byte"
                raise GrammarError(message, rule=low.rule_names[nxt])
            elif color[nxt] == 0:
                color[nxt] = 1
                path.append(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))


def lower(
    rules: dict[str, Expr], root: str, *, whitespace_budget: int | None, warnings: list[str]
) -> CompiledGrammar:
    if root not in rules:
        raise GrammarError(f"the root rule {root!r} is not defined", rule=root)
    if whitespace_budget is not None and whitespace_budget < 0:
        raise GrammarError(f"whitespace budget {whitespace_budget} is negative", rule=root)
    low = _Lowering(rules, root)
    low.frame_rule(root, root, rules[root])
    _eliminate_epsilon(low.states)
    _check_left_recursion(low)
    return _emit(low, whitespace_budget, warnings)


def _emit(low: _Lowering, whitespace_budget: int | None, warnings: list[str]) -> CompiledGrammar:
    """Renumber the reachable states and pack them into the core's flat arrays."""
    states = low.states
    order: dict[int, int] = {}
    stack = [low.rule_start[0]]
    order[stack[0]] = 0
    while stack:
        x = stack.pop()
        nxt = [e[2] for e in states[x].bytes] + [e[2] for e in states[x].eps]
        nxt += [low.rule_start[e[1]] for e in states[x].eps if e[0] == CALL]
        for y in nxt:
            if y not in order:
                order[y] = len(order)
                stack.append(y)
    n = len(order)
    old = [0] * n
    for o, i in order.items():
        old[i] = o
    b_start = np.zeros(n + 1, np.int32)
    x_start = np.zeros(n + 1, np.int32)
    for i, o in enumerate(old):
        b_start[i + 1] = b_start[i] + len(states[o].bytes)
        x_start[i + 1] = x_start[i] + len(states[o].eps)
    byte_edges = [e for o in old for e in sorted(states[o].bytes)]
    special = [e for o in old for e in states[o].eps]
    arrays = {
        "b_start": b_start,
        "b_lo": np.array([e[0] for e in byte_edges], np.uint8),
        "b_hi": np.array([e[1] for e in byte_edges], np.uint8),
        "b_tgt": np.array([order[e[2]] for e in byte_edges], np.int32),
        "b_ws": np.array([e[3] for e in byte_edges], np.uint8),
        "x_start": x_start,
        "x_kind": np.array([e[0] for e in special], np.int32),
        "x_arg": np.array([e[1] for e in special], np.int32),
        "x_tgt": np.array([order[e[2]] for e in special], np.int32),
        "final": np.array([states[o].final for o in old], np.uint8),
        "state_rule": np.array([states[o].rule for o in old], np.int32),
        "rule_start": np.array([order.get(s, -1) for s in low.rule_start], np.int32),
        "rule_min": np.array([b[0] for b in low.rule_bounds], np.int32),
        "rule_max": np.array([b[1] for b in low.rule_bounds], np.int32),
    }
    budget = -1 if whitespace_budget is None else int(whitespace_budget)
    return CompiledGrammar(arrays, budget, list(low.rule_names), list(warnings))
