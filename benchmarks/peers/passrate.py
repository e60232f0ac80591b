"""MaskBench pass rate: llamay against llguidance and xgrammar, on the same schemas and instances.

    python -m benchmarks.peers.passrate [--subsets Github_easy,JME] [--limit 600] [--out passrate.json]

Every MaskBench schema with test instances (all subsets by
default; ``--limit`` draws a seeded sample spread over the subsets, as ``run.py`` does) is
compiled by each engine with aligned settings (open objects, unbounded whitespace, uncapped
numbers: see each engine's module), in one subprocess per engine that is killed and restarted past
``--compile-timeout`` or ``--check-timeout``, or a crash (``run.run_engine``). Then every test
instance, written compactly with its keys in the compiler's order (``_data.instance_text``), is
fed whole and the engine must end accepting. A schema **passes** when it compiles and every valid
instance is accepted and every invalid one rejected (``valid`` is jsonschema's verdict).

How each engine is fed (its module's ``accepts``): llamay and xgrammar take the bytes directly
(``accept_bytes`` then ``is_accepting``; ``accept_string`` then ``is_completed``); llguidance has
no byte input, so its own Llama 3 tokenizer splits the bytes (``tokenize_bytes``) and the tokens
are consumed, then ``is_accepting``. Every engine compiles with the Llama 3 vocabulary. A valid
instance an engine rejects is tried again in its own key order: ``order_only`` counts those then
accepted (the engine orders keys otherwise; still a failure).

Reported per subset and overall: pass rate over the schemas, compiled, refused by the engine,
timed out or crashed, valid instances rejected, invalid instances accepted. For llamay the latter
are split into accepted where the compile warned ("<keyword> not enforced at <pointer>") and
accepted with no warning (soundness bugs, all listed in the JSON), and its failing schemas are
grouped by refusal keyword and by ``meta.features``. Each engine's disagreements with jsonschema
are sampled as ``<schema id>#<test index>``. Output: tables on stdout, the JSON report (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from . import Engine, unavailable
from ._data import MASKBENCH, instance_text, load_subset, select_schemas
from .run import emit, run_engine, stats

ENGINES = ("llamay", "llguidance", "xgrammar")
SUBSETS = tuple(sorted(p.name.removesuffix(".jsonl.gz") for p in MASKBENCH.glob("*.jsonl.gz")))
COUNTS = (
    "schemas",
    "pass",
    "compiled",
    "refused",
    "timeout",
    "crash",
    "valid",
    "valid_rejected",
    "order_only",
    "invalid",
    "invalid_accepted",
    "invalid_accepted_warned",
    "invalid_accepted_unwarned",
)
WARMUP_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
WARMUP_TEXT = '{"name":"warm up"}'


# --- worker (one engine, one subprocess) -----------------------------------------------


def _accepts(accepts, compiled, text: str) -> bool:
    try:
        return bool(accepts(compiled, text.encode("utf-8", "surrogatepass")))
    except Exception:  # an engine that raises on an input rejects it
        return False


def worker(engine_name: str, job_path: str, start: int, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    engine = Engine(engine_name, job["kind"])
    accepts = engine.mod.accepts
    warnings = getattr(engine.mod, "warnings", lambda compiled: [])
    _accepts(accepts, engine.compile(WARMUP_SCHEMA), WARMUP_TEXT)
    emit({"ev": "ready"})
    for i in range(start, len(job["schemas"])):
        item = job["schemas"][i]
        emit({"ev": "compile", "i": i})
        t0 = time.perf_counter()
        try:
            compiled = engine.compile(item["schema"])
        except Exception as exc:  # the engine refuses the schema
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
            emit({"ev": "done", "i": i, "ok": False, "error": error, "keyword": getattr(exc, "keyword", None)})
            continue
        seconds = time.perf_counter() - t0
        if seconds > job["compile_timeout"]:
            emit({"ev": "done", "i": i, "ok": False, "error": f"timeout: {seconds:.1f} s to compile"})
            continue
        emit({"ev": "walk", "i": i})
        accepted = [_accepts(accepts, compiled, text) for text in item["texts"]]
        order_only = [
            j
            for j, (text, ok) in enumerate(zip(item["own_order"], accepted, strict=True))
            if text is not None and not ok and _accepts(accepts, compiled, text)
        ]
        result = {
            "compile": seconds,
            "warned": bool(warnings(compiled)),
            "accepted": accepted,
            "order_only": order_only,
        }
        emit({"ev": "done", "i": i, "ok": True, **result})
    emit({"ev": "end"})


# --- verdicts and figures --------------------------------------------------------------


def verdict(item: dict, r: dict) -> dict:
    """One engine's outcome on one schema: ``status`` pass, fail, refused, timeout or crash."""
    if not r.get("ok"):
        error = r.get("error", "crash: no result")
        status = error.split(":")[0] if error.startswith(("timeout", "crash")) else "refused"
        return {"status": status, "error": error, "keyword": r.get("keyword")}
    pairs = list(zip(item["valid"], r["accepted"], strict=True))
    valid_rejected = [j for j, (valid, ok) in enumerate(pairs) if valid and not ok]
    invalid_accepted = [j for j, (valid, ok) in enumerate(pairs) if ok and not valid]
    return {
        "status": "fail" if valid_rejected or invalid_accepted else "pass",
        "compile": r["compile"],
        "warned": r["warned"],
        "valid_rejected": valid_rejected,
        "order_only": r["order_only"],
        "invalid_accepted": invalid_accepted,
    }


def tally(items: list[dict], verdicts: list[dict]) -> dict:
    t = Counter(schemas=len(items))
    for item, v in zip(items, verdicts, strict=True):
        t[v["status"]] += 1
        if v["status"] in ("pass", "fail"):
            t["compiled"] += 1
            t["valid"] += sum(item["valid"])
            t["invalid"] += len(item["valid"]) - sum(item["valid"])
            t["valid_rejected"] += len(v["valid_rejected"])
            t["order_only"] += len(v["order_only"])
            t["invalid_accepted"] += len(v["invalid_accepted"])
            t["invalid_accepted_warned" if v["warned"] else "invalid_accepted_unwarned"] += len(v["invalid_accepted"])
    out = {k: t[k] for k in COUNTS}
    out["pass_rate"] = t["pass"] / t["schemas"] if t["schemas"] else 0.0
    out["compile_ms"] = stats([v["compile"] for v in verdicts if "compile" in v], 1e3)
    return out


def disagreements(items: list[dict], verdicts: list[dict], limit: int) -> dict:
    """Instances where the engine's verdict is not jsonschema's, one per schema first, ``limit`` of each kind."""
    out = {}
    for kind in ("valid_rejected", "invalid_accepted"):
        found = [(item, j) for item, v in zip(items, verdicts, strict=True) for j in v.get(kind, ())]
        firsts = list({item["id"]: (item, j) for item, j in reversed(found)}.values())[::-1]
        out[kind] = [_case(item, j) for item, j in firsts[:limit]]
    return out


def _case(item: dict, j: int) -> dict:
    case = {"case": f"{item['id']}#{j}", "text": item["texts"][j][:200]}
    if item["errors"][j]:
        case["jsonschema"] = _why(item["errors"][j])
    return case


def _why(error: str) -> str:
    """The keyword and schema location of jsonschema's message, which otherwise starts with the instance."""
    found = re.search(r"Failed validating '([^']+)' in (\S+?):", error)
    return f"{found[1]} at {found[2]}" if found else error[:200]


def by_feature(verdicts: list[dict], records: list[dict]) -> dict:
    """llamay's failing schemas, per ``meta.features`` tag: how they fail, out of how many with the tag."""
    table: dict[str, Counter] = defaultdict(Counter)
    for v, rec in zip(verdicts, records, strict=True):
        for feature in rec.get("meta", {}).get("features", []):
            row = table[feature]
            row["schemas"] += 1
            if v["status"] != "pass":
                row["failing"] += 1
                row[_failure(v)] += 1
    ranked = sorted(table.items(), key=lambda kv: (-kv[1]["failing"], kv[0]))
    return {k: dict(c) for k, c in ranked if c["failing"]}


def _failure(v: dict) -> str:
    if v["status"] != "fail":
        return v["status"]
    return "invalid_accepted" if v["invalid_accepted"] else "valid_rejected"


def summarize(name: str, items: list[dict], records: list[dict], results: dict, samples: int, population: dict) -> dict:
    """``population``: schemas with tests per subset in the corpus, to weight a sample's subsets back."""
    verdicts = [verdict(item, results.get(i, {})) for i, item in enumerate(items)]
    subsets = defaultdict(list)
    for i, item in enumerate(items):
        subsets[item["subset"]].append(i)
    per = {s: tally([items[i] for i in ix], [verdicts[i] for i in ix]) for s, ix in sorted(subsets.items())}
    overall = tally(items, verdicts)
    overall["pass_rate_weighted"] = sum(t["pass_rate"] * population[s] for s, t in per.items()) / sum(
        population[s] for s in per
    )
    out = {
        "overall": overall,
        "subsets": per,
        "refused_by": dict(Counter(_refusal(v) for v in verdicts if v["status"] == "refused").most_common()),
        "disagreements": disagreements(items, verdicts, samples),
        "per_schema": {item["id"]: v["status"] for item, v in zip(items, verdicts, strict=True)},
    }
    if name == "llamay":
        out["failing_by_feature"] = by_feature(verdicts, records)
        out["soundness_bugs"] = [
            _case(item, j)
            for item, v in zip(items, verdicts, strict=True)
            if v["status"] == "fail" and not v["warned"]
            for j in v["invalid_accepted"]
        ]
    return out


def _refusal(v: dict) -> str:
    """The keyword llamay names, else the start of the engine's message."""
    return v["keyword"] or v["error"].split("\n")[0][:80]


# --- tables ----------------------------------------------------------------------------


def _pct(t: dict) -> str:
    return f"{100 * t['pass_rate']:5.1f}% {t['pass']:>4}"


def tables(report: dict, top: int = 25) -> str:
    engines = {k: v for k, v in report["engines"].items() if "error" not in v}
    subsets = sorted({s for e in engines.values() for s in e["subsets"]})
    rows = [f"{'pass rate (passed)':<18} {'schemas':>7} | " + " | ".join(f"{k:>11}" for k in engines)]
    rows.append("-" * len(rows[0]))
    for s in [*subsets, "overall"]:
        ts = {k: (e["overall"] if s == "overall" else e["subsets"][s]) for k, e in engines.items()}
        n = next(iter(ts.values()))["schemas"]
        rows.append(f"{s:<18} {n:>7} | " + " | ".join(f"{_pct(t):>11}" for t in ts.values()))
    if report["config"]["limit"] is not None:
        rows.append(
            f"{'overall, weighted':<18} {'corpus':>7} | "
            + " | ".join(f"{100 * e['overall']['pass_rate_weighted']:5.1f}%     " for e in engines.values())
        )

    head = (
        f"\n{'subset':<18} {'engine':<11} {'pass':>5} {'compiled':>8} {'refused':>7} {'t/o+crash':>9} | "
        f"{'valid rej (order) / of':>24} | {'invalid acc (warned/unwarned) / of':>34}"
    )
    rows += [head, "-" * len(head)]
    for s in [*subsets, "overall"]:
        for k, e in engines.items():
            t = e["overall"] if s == "overall" else e["subsets"][s]
            warned = f"({t['invalid_accepted_warned']}/{t['invalid_accepted_unwarned']})"
            rows.append(
                f"{s:<18} {k:<11} {t['pass']:>5} {t['compiled']:>8} {t['refused']:>7} "
                f"{t['timeout'] + t['crash']:>9} | {t['valid_rejected']:>7} ({t['order_only']:>4}) / "
                f"{t['valid']:<6} | {t['invalid_accepted']:>6} {warned:>13} / {t['invalid']:<6}"
            )
    for k, e in report["engines"].items():
        if "error" in e:
            rows.append(f"{k}: {e['error']}")

    llamay = engines.get("llamay")
    if llamay:
        rows.append(f"\nllamay refusals by keyword: {_counts(llamay['refused_by'], top)}")
        rows.append(
            f"\n{'llamay failing by feature':<30} {'failing':>7} / {'with it':<7} {'refused':>7} "
            f"{'valid rej':>9} {'invalid acc':>11} {'t/o+crash':>9}"
        )
        for feature, c in list(llamay["failing_by_feature"].items())[:top]:
            rows.append(
                f"{feature:<30} {c['failing']:>7} / {c['schemas']:<7} {c.get('refused', 0):>7} "
                f"{c.get('valid_rejected', 0):>9} {c.get('invalid_accepted', 0):>11} "
                f"{c.get('timeout', 0) + c.get('crash', 0):>9}"
            )
        bugs = llamay["soundness_bugs"]
        rows.append(
            f"\nllamay invalid instances accepted with no warning: {len(bugs)}"
            + "".join(f"\n  {b['case']}" for b in bugs[:10])
        )
    for k, e in engines.items():
        if k != "llamay":
            rows.append(f"\n{k} refusals: {_counts(e['refused_by'], 8)}")
        for kind, cases in e["disagreements"].items():
            if cases:
                rows.append(f"{k} {kind.replace('_', ' ')}: " + ", ".join(c["case"] for c in cases))
    return "\n".join(rows)


def _counts(counts: dict, n: int) -> str:
    return ", ".join(f"{k} {v}" for k, v in list(counts.items())[:n]) or "none"


# --- main ------------------------------------------------------------------------------


def build_job(records: list[dict], args) -> dict:
    items = []
    for rec in records:
        schema, tests = rec["schema"], rec["tests"]
        texts = [instance_text(t["data"], schema) for t in tests]
        own = [instance_text(t["data"]) if t["valid"] else None for t in tests]
        items.append(
            {
                "id": rec["id"],
                "subset": rec["subset"],
                "schema": schema,
                "texts": texts,
                "own_order": [o if o != text else None for o, text in zip(own, texts, strict=True)],
                "valid": [t["valid"] for t in tests],
                "errors": [t.get("python_error") or t.get("rust_error") for t in tests],
            }
        )
    return {"kind": "llama3", "compile_timeout": args.compile_timeout, "schemas": items}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subsets", default=",".join(SUBSETS))
    ap.add_argument("--limit", type=int, default=None, help="schemas in all (seeded sample), default every one")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--out", default="passrate.json")
    ap.add_argument("--data", default=str(MASKBENCH))
    ap.add_argument("--compile-timeout", type=float, default=10.0)
    ap.add_argument("--check-timeout", dest="walk_timeout", type=float, default=60.0)
    ap.add_argument("--start-timeout", type=float, default=600.0)
    ap.add_argument("--samples", type=int, default=8, help="disagreements with jsonschema listed per engine and kind")
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

    t0 = time.time()
    subsets = [s for s in args.subsets.split(",") if s]
    records = select_schemas(subsets, args.limit, args.seed, Path(args.data), keep=lambda r: bool(r["tests"]))
    job = build_job(records, args)
    items = job["schemas"]
    n = len(items)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    instances = sum(len(item["texts"]) for item in items)
    population = {s: sum(1 for r in load_subset(s, Path(args.data)) if r["tests"]) for s in subsets}
    print(f"{n} schemas with tests, {instances} instances; engines: {args.engines}", file=sys.stderr)
    report = {
        "config": {
            "subsets": subsets,
            "limit": args.limit,
            "seed": args.seed,
            "schemas": n,
            "instances": instances,
            "compile_timeout_s": args.compile_timeout,
            "check_timeout_s": args.walk_timeout,
            "population": population,
        },
        "engines": {},
    }
    with tempfile.TemporaryDirectory(prefix="llamay-passrate-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        for name in args.engines.split(","):
            why = unavailable(name)
            if why:
                report["engines"][name] = {"error": why}
                continue
            t = time.time()
            with open(out.with_name(f"{out.stem}.{name}.log"), "wb") as log:
                results, fatal = run_engine(name, job_path, n, log, args, worker="benchmarks.peers.passrate")
            print(f"  {name}: done in {time.time() - t:.0f} s{' - ' + fatal if fatal else ''}", file=sys.stderr)
            report["engines"][name] = (
                {"error": fatal} if fatal else summarize(name, items, records, results, args.samples, population)
            )
            report["engines"][name]["seconds"] = time.time() - t
    report["elapsed_s"] = time.time() - t0
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    print(tables(report))
    print(f"\nreport: {out}  logs: {out.stem}.<engine>.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
