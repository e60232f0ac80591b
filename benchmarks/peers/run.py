"""Peer harness: compile time, time to first mask and mask time per token, llamay against its peers.

    python -m benchmarks.peers.run --vocab llama3 [--subsets all] [--limit 100] [--runs 3] --out results.json

For the MaskBench schemas of ``../shared/testdata/jsonschemabench`` (a seeded sample stratified over
every subset, or those of ``--subsets``), every valid
instance is written compactly with its keys in declared order and tokenized canonically (the
model's own tokenizer). Then, for each engine in its own subprocess (one thread), one schema after
another: compile (timed), a fresh matcher and its first mask (time to first mask = compile +
matcher + first mask), then a walk of each instance's tokens, filling a mask before every token
and before EOS (each fill timed) and advancing on the token. A compile that takes over
``--compile-timeout`` seconds (10) kills the worker: the schema counts as failed and the worker
restarts at the next one. A crash is counted the same way.

Every mask is reduced (ids past the vocabulary and special tokens masked off, see
``_vocab.reference``) and hashed; a peer's hashes are compared, position by position, with those of
its llamay reference (open objects, or closed ones for engines without open objects). A few
disagreements per engine are then replayed in this process to list the token ids that differ,
decoded. With aligned settings every disagreement is a bug in someone.

Each engine runs ``--runs`` times (3), the engines in turn within a run; every time (compile, time to
first mask, each position's mask) is the median over the runs. Reported overall and per subset: mask
time over the positions every engine reached (each schema's first mask included), llamay's masks
that computed a position first seen apart from those its cache answered, and time to first mask over
the schemas every engine compiled, with the schemas some peer did not compile reported apart; then
llamay's ratios to the best peer per metric against the targets (mask mean and p99 at most 0.8x,
time to first mask at most 1.0x), and its time to first mask over every schema it compiled against
10 ms (p99) and 50 ms (max).

Output: a table on stdout, the JSON report (``--out``) and a PNG of the distributions (beside it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from . import ENGINES, PEERS, SINGLE_THREAD_ENV, Engine, unavailable
from ._data import MASKBENCH, REPO, all_subsets, select_schemas, valid_texts
from ._vocab import KINDS, decode_token, reference, tokenizer

WARMUP_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}}
WARMUP_TEXT = '{"name":"warm up","n":12}'


# --- worker (one engine, one subprocess) -----------------------------------------------


def emit(obj) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class MaskHasher:
    """Reduces a mask to the compared domain and hashes it (the same for every engine).

    Two hashes per mask: strict (every token with text, and the EOS) and lenient (tokens with
    whitespace at the end, or at the start on the first position, left out: see ``_vocab.reference``).
    """

    def __init__(self, kind: str):
        ref = reference(kind)
        self.words = ref["words"]
        self.strict = ref["domain"]
        self.lenient = (ref["domain_first_lenient"], ref["domain_lenient"])
        self.eos = ref["walk_eos"]

    def reduce(self, mask: np.ndarray, first: bool = False, lenient: bool = False) -> np.ndarray:
        flat = mask.reshape(-1).view(np.uint32)
        out = np.zeros(self.words, dtype=np.uint32)
        n = min(self.words, flat.size)
        out[:n] = flat[:n]
        out &= self.lenient[0 if first else 1] if lenient else self.strict
        return out

    def __call__(self, mask, first: bool) -> tuple[str, str]:
        strict = self.reduce(mask)
        lenient = strict & self.lenient[0 if first else 1]
        return (hashlib.blake2b(strict.tobytes(), digest_size=8).hexdigest(),
                hashlib.blake2b(lenient.tobytes(), digest_size=8).hexdigest())

    def allows(self, mask, token: int) -> bool:
        return bool((int(mask.reshape(-1).view(np.uint32)[token // 32]) >> (token % 32)) & 1)


def _timer(engine: Engine):
    timed = getattr(engine.mod, "timed_fill", None)
    if timed is not None:
        return timed
    fill = engine.mod.fill_mask
    clock = time.perf_counter

    def fill_timed(m, mask) -> float:
        t0 = clock()
        fill(m, mask)
        return clock() - t0

    return fill_timed


def walk(engine: Engine, m, mask, tokens, hasher: MaskHasher, fill, first_fill: tuple[float, bool] | None = None,
         cached=None) -> dict:
    """Fill before every token and before EOS; stop at the first token the engine rejects.

    ``cached()``, where the engine tells (``visits`` of its module), counts the positions its mask
    cache holds: a fill after which it grew computed a position first seen (``new``).
    """
    advance = engine.mod.advance
    clock = time.perf_counter
    fills, advances, hashes, lenient, new = [], [], [], [], []
    accepted = 0
    complete = False
    n = len(tokens)
    for p in range(n + 1):
        if p == 0 and first_fill is not None:
            fills.append(first_fill[0])
            new.append(first_fill[1])
        else:
            before = cached() if cached is not None else 0
            fills.append(fill(m, mask))
            new.append(cached is not None and cached() > before)
        strict, loose = hasher(mask, p == 0)
        hashes.append(strict)
        lenient.append(loose)
        if p == n:
            complete = True
            break
        t0 = clock()
        ok = advance(m, tokens[p])
        advances.append(clock() - t0)
        if not ok:
            break
        accepted += 1
    return {"fill": fills, "advance": advances, "hash": hashes, "lenient": lenient, "new": new, "accepted": accepted,
            "complete": complete, "eos": complete and hasher.allows(mask, hasher.eos)}


def worker(engine_name: str, job_path: str, start: int, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    kind = job["kind"]
    engine = Engine(engine_name, kind)
    if engine_name in ("xgrammar",):
        import torch

        torch.set_num_threads(1)
    hasher = MaskHasher(kind)
    mask = engine.allocate_mask()
    fill = _timer(engine)
    visits = getattr(engine.mod, "visits", None)
    warm = engine.compile(job["warmup"]["schema"])
    walk(engine, engine.matcher(warm), mask, job["warmup"]["tokens"], hasher, fill)
    emit({"ev": "ready"})
    timeout = job["compile_timeout"]
    clock = time.perf_counter
    for i in range(start, len(job["schemas"])):
        item = job["schemas"][i]
        emit({"ev": "compile", "i": i})
        try:
            t0 = clock()
            compiled = engine.compile(item["schema"])
            t1 = clock()
            m = engine.matcher(compiled)
            first = fill(m, mask)
            t2 = clock()
            cached = (lambda c=compiled: visits(c)) if visits is not None else None
            first_new = cached is not None and cached() > 0
        except Exception as exc:  # the engine refuses the schema
            emit({"ev": "done", "i": i, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            continue
        if t2 - t0 > timeout:
            emit({"ev": "done", "i": i, "ok": False, "error": f"timeout: {t2 - t0:.1f} s to first mask"})
            continue
        emit({"ev": "walk", "i": i})
        instances = []
        for j, tokens in enumerate(item["tokens"]):
            if j > 0:
                m = engine.matcher(compiled)
            instances.append(walk(engine, m, mask, tokens, hasher, fill, (first, first_new) if j == 0 else None,
                                  cached))
        emit({"ev": "done", "i": i, "ok": True, "compile": t1 - t0, "ttfm": t2 - t0, "instances": instances})
    emit({"ev": "end"})


# --- parent: one subprocess per engine, restarted past a timeout or a crash ------------------


class _Lines:
    def __init__(self, proc):
        self.proc, self.buf = proc, b""

    def next(self, deadline: float):
        """The next line, None at EOF, or TimeoutError."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line


def run_engine(engine: str, job_path: Path, n: int, log, args, worker: str = "benchmarks.peers.run"):
    """``(results per schema index, fatal error or None)``; fatal: the engine could not start.

    ``worker`` is the module run as ``python -m worker --worker engine --job path --start i``: it
    emits, one JSON line each, ``ready``, then per schema ``compile`` (with ``i``), ``walk`` and
    ``done`` (with ``i``), and ``end``; ``args`` holds the timeouts and ``cpu``.
    """
    env = {**os.environ, **SINGLE_THREAD_ENV, "PYTHONPATH": str(REPO)}
    results: dict[int, dict] = {}
    start = 0
    while start < n:
        cmd = [sys.executable, "-m", worker, "--worker", engine, "--job", str(job_path), "--start", str(start)]
        if args.cpu is not None:
            cmd += ["--cpu", str(args.cpu)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, cwd=REPO, env=env)
        lines = _Lines(proc)
        current, phase, ready = None, "start", False
        deadline = time.monotonic() + args.start_timeout
        try:
            while True:
                line = lines.next(deadline)
                if line is None:
                    break
                ev = json.loads(line)
                if ev["ev"] == "ready":
                    ready = True
                    deadline = time.monotonic() + 60
                elif ev["ev"] == "compile":
                    current, phase = ev["i"], "compile"
                    deadline = time.monotonic() + args.compile_timeout + 1
                elif ev["ev"] == "walk":
                    phase = "walk"
                    deadline = time.monotonic() + args.walk_timeout
                elif ev["ev"] == "done":
                    results[ev["i"]] = ev
                    current, phase = None, "between"
                    deadline = time.monotonic() + 60
                    if len(results) % 25 == 0:
                        print(f"  {engine}: {len(results)}/{n}", file=sys.stderr, flush=True)
                elif ev["ev"] == "end":
                    break
        except TimeoutError:
            proc.kill()
            proc.wait()
            if not ready:
                return results, f"{engine} did not start within {args.start_timeout} s"
            if current is not None:
                limit = args.compile_timeout if phase == "compile" else args.walk_timeout
                results[current] = {"ok": False, "error": f"timeout: over {limit} s in {phase}"}
                start = current + 1
                continue
            start = max(results, default=start - 1) + 1
            continue
        rc = proc.wait()
        if not ready:
            return results, f"{engine} failed to start (exit {rc}); see its log"
        if current is not None:
            results[current] = {"ok": False, "error": f"crash: worker exited {rc} during {phase}"}
            start = current + 1
        else:
            start = max(results, default=start - 1) + 1
            if start < n and rc != 0:
                results[start] = {"ok": False, "error": f"crash: worker exited {rc}"}
                start += 1
    return results, None


# --- figures ---------------------------------------------------------------------------


def stats(values, scale: float) -> dict:
    if not values:
        return {"n": 0}
    a = np.asarray(values, dtype=np.float64) * scale
    return {"n": len(a), "mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def merge_runs(runs: list[dict]) -> dict:
    """One result per schema from several runs of an engine, each time the median over the runs.

    A schema counts as compiled where every run compiled it (else the first run's failure stands).
    Hashes, acceptance and first visits are the first run's (each run is a fresh process, so they
    are the same); compile, time to first mask, and each position's fill and advance times are
    medians over the runs.
    """
    merged = {}
    for i, first in runs[0].items():
        rs = [r.get(i, {"ok": False, "error": "crash: missing from a run"}) for r in runs]
        if not all(r.get("ok") for r in rs):
            merged[i] = next(r for r in rs if not r.get("ok"))
            continue
        out = {**first, "compile": statistics.median(r["compile"] for r in rs),
               "ttfm": statistics.median(r["ttfm"] for r in rs), "instances": []}
        for j, inst in enumerate(first["instances"]):
            same = [r["instances"][j] for r in rs]
            if any(len(x["fill"]) != len(inst["fill"]) for x in same):
                out["instances"].append(inst)  # a walk that went otherwise in another run: not comparable
                continue
            out["instances"].append({**inst, **{key: [statistics.median(x[key][p] for x in same)
                                                      for p in range(len(inst[key]))]
                                                for key in ("fill", "advance")}})
        merged[i] = out
    return merged


def positions(results: dict) -> dict:
    """(schema, instance, position) -> (fill seconds, hash, first visit)."""
    out = {}
    for i, r in results.items():
        if not r.get("ok"):
            continue
        for j, inst in enumerate(r["instances"]):
            new = inst.get("new") or [False] * len(inst["fill"])
            for p, (t, h, v) in enumerate(zip(inst["fill"], inst["hash"], new, strict=True)):
                out[(i, j, p)] = (t, h, v)
    return out


def summarize(engine: str, results: dict, n: int, common: set | None, common_schemas: set,
              subset_of: list[str]) -> dict:
    """An engine's figures: over everything it ran, over what every engine reached (``common``: positions;
    ``common_schemas``: schemas every engine compiled), per subset, and first visits apart where it tells them."""
    ok = {i: r for i, r in results.items() if r.get("ok")}
    fills = [t for r in ok.values() for inst in r["instances"] for t in inst["fill"]]
    advances = [t for r in ok.values() for inst in r["instances"] for t in inst["advance"]]
    instances = [inst for r in ok.values() for inst in r["instances"]]
    pos = positions(results)
    failures = Counter(r["error"].split(":")[0] for r in results.values() if not r.get("ok"))
    out = {
        "schemas": n,
        "compiled": len(ok),
        "failures": dict(failures),
        "compile_ms": stats([r["compile"] for r in ok.values()], 1e3),
        "ttfm_ms": stats([r["ttfm"] for r in ok.values()], 1e3),
        "ttfm_ms_common": stats([ok[i]["ttfm"] for i in common_schemas if i in ok], 1e3),
        "ttfm_ms_not_common": stats([r["ttfm"] for i, r in ok.items() if i not in common_schemas], 1e3),
        "mask_us": stats(fills, 1e6),
        "advance_us": stats(advances, 1e6),
        "instances": len(instances),
        "instances_accepted": sum(1 for inst in instances if inst["complete"] and inst["eos"]),
    }
    if common is None:
        return out
    out["mask_us_common"] = stats([pos[k][0] for k in common], 1e6)
    if any(pos[k][2] for k in common):
        out["mask_us_first_visit"] = stats([pos[k][0] for k in common if pos[k][2]], 1e6)
        out["mask_us_cached"] = stats([pos[k][0] for k in common if not pos[k][2]], 1e6)
    out["per_subset"] = {}
    for subset in sorted(set(subset_of)):
        mine = {i for i in range(n) if subset_of[i] == subset}
        out["per_subset"][subset] = {
            "schemas": len(mine), "compiled": len(mine & set(ok)),
            "ttfm_ms_common": stats([ok[i]["ttfm"] for i in mine & common_schemas], 1e3),
            "mask_us_common": stats([pos[k][0] for k in common if k[0] in mine], 1e6)}
    return out


def compare(peer: dict, ref: dict) -> tuple[dict, list]:
    """Masks compared and disagreeing (strict, lenient), and the first lenient disagreement of each instance."""
    compared = strict = lenient = 0
    firsts = []
    for i, r in peer.items():
        rr = ref.get(i)
        if not r.get("ok") or not rr or not rr.get("ok"):
            continue
        for j, (a, b) in enumerate(zip(r["instances"], rr["instances"], strict=True)):
            first = None
            n = min(len(a["hash"]), len(b["hash"]))
            for p in range(n):
                compared += 1
                strict += a["hash"][p] != b["hash"][p]
                if a["lenient"][p] != b["lenient"][p]:
                    lenient += 1
                    if first is None:
                        first = p
            if first is not None:
                firsts.append((i, j, first))
    return {"masks_compared": compared, "masks_disagree_strict": strict, "masks_disagree": lenient,
            "instances_disagree": len(firsts), "schemas_disagree": len({i for i, _, _ in firsts})}, firsts


def _show(b: bytes) -> str:
    return repr(b.decode("utf-8", "backslashreplace"))


def diagnose(kind: str, engines: dict, name: str, sample, job: dict, limit: int = 12) -> dict:
    """Replay one disagreement in this process: the token ids only one side allows (lenient domain), decoded."""
    i, j, p = sample
    item = job["schemas"][i]
    tokens = item["tokens"][j]
    hasher = MaskHasher(kind)
    masks = {}
    for side in (name, ENGINES[name].reference):
        eng = engines[side]
        m = eng.matcher(eng.compile(item["schema"]))
        mask = eng.allocate_mask()
        for tok in tokens[:p]:
            eng.fill_mask(m, mask)
            if not eng.advance(m, tok):
                break
        eng.fill_mask(m, mask)
        masks[side] = hasher.reduce(mask, first=p == 0, lenient=True)
    peer, ref = masks[name], masks[ENGINES[name].reference]

    def ids(words):
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        return [int(t) for t in np.flatnonzero(bits)]

    only_peer, only_ref = ids(peer & ~ref), ids(ref & ~peer)
    prefix = b"".join(decode_token(kind, t) for t in tokens[:p])
    nxt = decode_token(kind, tokens[p]) if p < len(tokens) else b"<EOS>"
    return {
        "schema_id": item["id"], "instance": j, "position": p, "of": len(tokens),
        "prefix_tail": _show(prefix[-80:]), "next_token": _show(nxt),
        "only_peer_count": len(only_peer), "only_reference_count": len(only_ref),
        "only_peer": [[t, _show(decode_token(kind, t))] for t in only_peer[:limit]],
        "only_reference": [[t, _show(decode_token(kind, t))] for t in only_ref[:limit]],
    }


# --- report ----------------------------------------------------------------------------


def _f(d: dict, key: str, digits: int = 1) -> str:
    return "-" if not d.get("n") else f"{d[key]:.{digits}f}"


def table(report: dict) -> str:
    head = (f"{'engine':<14} {'compiled':>9} | {'compile ms':>17} | {'first mask ms (mean/p50/p99/max)':>34} | "
            f"{'tokens':>6} | {'mask us (mean/p50/p99/max)':>30} | {'common us mean/p99':>18} | "
            f"{'accepted':>9} | {'disagree lenient/strict/of (ref)':>34}")
    rows = [head, "-" * len(head)]
    for name, e in report["engines"].items():
        if "error" in e:
            rows.append(f"{name:<14} {e['error']}")
            continue
        c, t, m, mc = e["compile_ms"], e["ttfm_ms"], e["mask_us"], e.get("mask_us_common", {})
        dis = e.get("disagreement")
        dis_s = "reference" if dis is None else (
            f"{dis['masks_disagree']}/{dis['masks_disagree_strict']}/{dis['masks_compared']} ({e['reference']})")
        rows.append(
            f"{name:<14} {e['compiled']:>4}/{e['schemas']:<4} | {_f(c, 'mean', 2):>8}/{_f(c, 'p99', 1):>8} | "
            f"{_f(t, 'mean', 2):>7}/{_f(t, 'p50', 2):>7}/{_f(t, 'p99', 1):>8}/{_f(t, 'max', 0):>7} | "
            f"{m.get('n', 0):>6} | {_f(m, 'mean'):>7}/{_f(m, 'p50'):>6}/{_f(m, 'p99'):>7}/{_f(m, 'max', 0):>7} | "
            f"{_f(mc, 'mean'):>8}/{_f(mc, 'p99'):>9} | {e['instances_accepted']:>4}/{e['instances']:<4} | {dis_s:>34}"
        )
    llamay = report["engines"].get("llamay", {})
    if "mask_us_first_visit" in llamay:
        fv, c = llamay["mask_us_first_visit"], llamay["mask_us_cached"]
        rows.append("")
        rows.append(f"llamay masks at common positions: first visits {fv['n']}, mean {fv['mean']:.1f} us, p99 "
                    f"{fv['p99']:.1f}, max {fv['max']:.0f}; cached {c.get('n', 0)}, mean {_f(c, 'mean')} us, "
                    f"p99 {_f(c, 'p99')}")
    if "ttfm_ms_not_common" in llamay and llamay["ttfm_ms_not_common"].get("n"):
        t = llamay["ttfm_ms_not_common"]
        rows.append(f"llamay first mask on the {t['n']} schemas some peer did not compile: mean {t['mean']:.2f} ms, "
                    f"p99 {t['p99']:.1f}, max {t['max']:.1f}")
    ratios = report.get("ratios")
    if ratios:
        rows.append("")
        rows.append("llamay / best peer (schemas every engine compiled; positions every engine reached): " + ", ".join(
            f"{k} {v['ratio']:.2f}x ({v['best']}"
            + (f"; target {v['target']}x {'met' if v['met'] else 'missed'})" if "target" in v else ")")
            for k, v in ratios.items()))
    for stat, v in report.get("absolute", {}).items():
        rows.append(f"llamay first mask {stat}, every schema it compiled: {v['llamay']:.1f} ms "
                    f"(target {v['target']:g} ms {'met' if v['met'] else 'missed'})")
    return "\n".join(rows)


#: The targets, as ratios to the best peer per metric (over what every engine reached) ...
RATIO_TARGETS = {"mask mean": 0.8, "mask p99": 0.8, "first mask mean": 1.0}
#: ... and in milliseconds, for llamay's time to first mask over every schema it compiled.
ABSOLUTE_TARGETS_MS = {"p99": 10.0, "max": 50.0}


def ratios(report: dict) -> dict:
    engines = {k: v for k, v in report["engines"].items() if "error" not in v and k != "llamay-closed"}
    if "llamay" not in engines:
        return {}
    out = {}
    metrics = [("mask mean", "mask_us_common", "mean"), ("mask p99", "mask_us_common", "p99"),
               ("first mask mean", "ttfm_ms_common", "mean"), ("first mask p99", "ttfm_ms_common", "p99"),
               ("first mask max", "ttfm_ms_common", "max")]
    for label, key, stat in metrics:
        peers = {k: v[key][stat] for k, v in engines.items() if k != "llamay" and v.get(key, {}).get("n")}
        mine = engines["llamay"].get(key, {})
        if peers and mine.get("n"):
            best = min(peers, key=peers.get)
            out[label] = {"llamay": mine[stat], "best": best, "best_value": peers[best],
                          "ratio": mine[stat] / peers[best]}
            if label in RATIO_TARGETS:
                out[label].update(target=RATIO_TARGETS[label], met=out[label]["ratio"] <= RATIO_TARGETS[label])
    return out


def absolute(report: dict) -> dict:
    """llamay's time to first mask over every schema it compiled, against the targets in milliseconds."""
    mine = report["engines"].get("llamay", {}).get("ttfm_ms", {})
    if not mine.get("n"):
        return {}
    return {stat: {"llamay": mine[stat], "target": limit, "met": mine[stat] <= limit}
            for stat, limit in ABSOLUTE_TARGETS_MS.items()}


def subset_table(report: dict) -> str:
    """Per subset: schemas compiled, time to first mask (schemas every engine compiled), mask time (positions every
    engine reached)."""
    head = (f"{'subset':<16} {'engine':<12} {'compiled':>9} | {'first mask ms mean/p99/max':>28} | "
            f"{'mask us mean/p99':>18}")
    rows = [head, "-" * len(head)]
    engines = {k: v for k, v in report["engines"].items() if "per_subset" in v}
    subsets = sorted({s for e in engines.values() for s in e["per_subset"]})
    for subset in subsets:
        for name, e in engines.items():
            d = e["per_subset"][subset]
            t, m = d["ttfm_ms_common"], d["mask_us_common"]
            rows.append(f"{subset:<16} {name:<12} {d['compiled']:>4}/{d['schemas']:<4} | "
                        f"{_f(t, 'mean', 2):>8}/{_f(t, 'p99', 1):>8}/{_f(t, 'max', 1):>8} | "
                        f"{_f(m, 'mean'):>8}/{_f(m, 'p99'):>8}")
    return "\n".join(rows)


def plot(path: Path, data: dict, ttfm: dict, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5))
    for name, times in data.items():
        if times:
            x = np.sort(np.asarray(times) * 1e6)
            a.plot(x, np.arange(1, len(x) + 1) / len(x), label=f"{name} (n={len(x)})")
    a.set_xscale("log")
    a.set_xlabel("mask time per token (µs, log)")
    a.set_ylabel("fraction of masks ≤ x")
    a.set_title("mask time per token, positions every engine reached")
    a.grid(True, which="both", alpha=0.3)
    a.legend()
    for name, times in ttfm.items():
        if times:
            x = np.sort(np.asarray(times) * 1e3)
            b.plot(x, np.arange(1, len(x) + 1) / len(x), label=f"{name} (n={len(x)})")
    b.set_xscale("log")
    b.set_xlabel("compile + first mask (ms, log)")
    b.set_ylabel("fraction of compiled schemas ≤ x")
    b.set_title("time to first mask")
    b.grid(True, which="both", alpha=0.3)
    b.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- main ------------------------------------------------------------------------------


def build_job(args) -> dict:
    tok = tokenizer(args.vocab)
    ref = reference(args.vocab)
    records = select_schemas(args.subsets, args.limit, args.seed, Path(args.data))
    schemas, dropped = [], 0
    for rec in records:
        texts, token_lists = [], []
        for text in valid_texts(rec)[: args.max_instances]:
            ids = tok(text)
            if b"".join(decode_token(args.vocab, t) for t in ids) != text.encode("utf-8"):
                dropped += 1  # the tokenizer does not round-trip this text (never seen so far)
                continue
            texts.append(text)
            token_lists.append(ids)
        schemas.append({"id": rec["id"], "subset": rec["subset"], "schema": rec["schema"], "texts": texts,
                        "tokens": token_lists})
    return {"kind": args.vocab, "compile_timeout": args.compile_timeout, "walk_eos": ref["walk_eos"],
            "warmup": {"schema": WARMUP_SCHEMA, "tokens": tok(WARMUP_TEXT)}, "schemas": schemas,
            "dropped_instances": dropped}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", choices=KINDS, default="llama3")
    ap.add_argument("--subsets", default="all", help="comma-separated, or all (every subset of --data)")
    ap.add_argument("--limit", type=int, default=100, help="schemas in all, stratified over the subsets")
    ap.add_argument("--runs", type=int, default=3, help="runs of each engine; each time is the median over them")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default=None, help=f"comma-separated, from {', '.join(ENGINES)}")
    ap.add_argument("--out", default="peers-results.json")
    ap.add_argument("--plot", default=None, help="PNG path (default: --out with .png)")
    ap.add_argument("--data", default=str(MASKBENCH))
    ap.add_argument("--max-instances", type=int, default=10)
    ap.add_argument("--compile-timeout", type=float, default=10.0)
    ap.add_argument("--walk-timeout", type=float, default=300.0)
    ap.add_argument("--start-timeout", type=float, default=600.0)
    ap.add_argument("--replay", type=int, default=30, help="disagreements replayed per engine (distinct schemas first)")
    ap.add_argument("--samples", type=int, default=8, help="distinct differences kept per engine")
    ap.add_argument("--cpu", type=int, default=None, help="pin every worker to this CPU")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.job, args.start, args.cpu)
        return 0

    if not Path(args.data).is_dir():
        print(f"skipped: {args.data} is absent (../shared/testdata is not beside this checkout)")
        return 0
    args.subsets = all_subsets(Path(args.data)) if args.subsets == "all" else [s for s in args.subsets.split(",") if s]
    wanted = args.engines.split(",") if args.engines else list(PEERS)
    engines, skipped = [], {}
    for name in wanted:
        why = unavailable(name)
        if why is None and args.vocab not in ENGINES[name].vocabs:
            why = f"does not run on the {args.vocab} vocabulary"
        if why:
            skipped[name] = why
        else:
            engines.append(name)
    refs = {ENGINES[name].reference for name in engines}
    run_list = list(dict.fromkeys(["llamay", *engines, *sorted(refs)]))

    t0 = time.time()
    job = build_job(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = len(job["schemas"])
    tokens = sum(len(t) + 1 for s in job["schemas"] for t in s["tokens"])
    print(f"{n} schemas, {sum(len(s['tokens']) for s in job['schemas'])} instances, {tokens} masks per engine "
          f"({args.vocab}); engines: {', '.join(run_list)}; skipped: {skipped or 'none'}", file=sys.stderr)

    results, fatal = {}, {}
    with tempfile.TemporaryDirectory(prefix="llamay-peers-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        runs: dict[str, list[dict]] = {name: [] for name in run_list}
        for run in range(args.runs):  # engines in turn within each run, so that the machine's load falls on all
            for name in run_list:
                if name in fatal:
                    continue
                log_path = out.with_name(f"{out.stem}.{name}.log")
                t = time.time()
                with open(log_path, "ab" if run else "wb") as log:
                    result, err = run_engine(name, job_path, n, log, args)
                runs[name].append(result)
                if err:
                    fatal[name] = err
                print(f"  {name} run {run + 1}: done in {time.time() - t:.0f} s{' - ' + err if err else ''}",
                      file=sys.stderr)
        results = {name: merge_runs(r) for name, r in runs.items() if r}

    compared = [k for k in run_list if k not in fatal and k != "llamay-closed"]
    reached = [set(positions(results[k])) for k in compared]
    common = set.intersection(*reached) if reached else set()
    compiled = [{i for i, r in results[k].items() if r.get("ok")} for k in compared]
    common_schemas = set.intersection(*compiled) if compiled else set()
    subset_of = [item["subset"] for item in job["schemas"]]
    report = {"config": {"vocab": args.vocab, "subsets": args.subsets, "limit": args.limit, "seed": args.seed,
                         "runs": args.runs, "compile_timeout_s": args.compile_timeout, "schemas": n,
                         "common_schemas": len(common_schemas),
                         "instances": sum(len(s["tokens"]) for s in job["schemas"]),
                         "dropped_instances": job["dropped_instances"], "common_positions": len(common),
                         "skipped": skipped},
              "engines": {}}
    probes = {}
    for name in run_list:
        if name in fatal:
            report["engines"][name] = {"error": fatal[name]}
            continue
        e = summarize(name, results[name], n, common if name != "llamay-closed" else None, common_schemas, subset_of)
        e["failed_schemas"] = [{"id": job["schemas"][i]["id"], "error": r["error"]}
                               for i, r in sorted(results[name].items()) if not r.get("ok")][:30]
        e["per_schema"] = [{"id": job["schemas"][i]["id"], "ok": bool(r.get("ok")),
                            "compile_ms": r.get("compile", 0) * 1e3, "ttfm_ms": r.get("ttfm", 0) * 1e3}
                           for i, r in sorted(results[name].items())]
        ref = ENGINES[name].reference
        e["reference"] = ref
        if ref != name and ref in results and ref not in fatal:
            e["disagreement"], firsts = compare(results[name], results[ref])
            seen, picked = set(), []
            for s in firsts:  # distinct schemas first
                if s[0] not in seen:
                    seen.add(s[0])
                    picked.append(s)
            probes[name] = picked[: args.replay]
        report["engines"][name] = e
    report["ratios"] = ratios(report)
    report["absolute"] = absolute(report)

    if probes:
        live = {}
        for name, picked in probes.items():
            if not picked:
                continue
            for side in (name, report["engines"][name]["reference"]):
                if side not in live:
                    live[side] = Engine(side, args.vocab)
            groups: dict[tuple, dict] = {}
            for s in picked:
                try:
                    d = diagnose(args.vocab, live, name, s, job)
                except Exception as exc:
                    d = {"schema_id": job["schemas"][s[0]]["id"], "position": s[2],
                         "error": f"{type(exc).__name__}: {exc}"}
                key = (tuple(t for t, _ in d.get("only_peer", [])), tuple(t for t, _ in d.get("only_reference", [])),
                       d.get("error"))
                if key in groups:
                    groups[key]["same_difference_seen"] += 1
                else:
                    groups[key] = {**d, "same_difference_seen": 1}
            report["engines"][name]["samples"] = list(groups.values())[: args.samples]
    report["elapsed_s"] = time.time() - t0
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    pos = {k: positions(results[k]) for k in run_list if k not in fatal}
    plot_path = Path(args.plot) if args.plot else out.with_suffix(".png")
    plot(plot_path, {k: [pos[k][q][0] for q in common] for k in pos if k != "llamay-closed"},
         {k: [r["ttfm"] for r in results[k].values() if r.get("ok")] for k in pos if k != "llamay-closed"},
         f"{args.vocab}: {n} MaskBench schemas ({', '.join(args.subsets)}), one thread")
    print(table(report))
    print()
    print(subset_table(report))
    print(f"\nreport: {out}  plot: {plot_path}  logs: {out.stem}.<engine>.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
