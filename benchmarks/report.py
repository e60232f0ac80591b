"""Regression dashboards: pytest-benchmark's saved runs as plots, one point per run, so that a step shows.

    python -m pytest benchmarks --benchmark-autosave     # each run adds a file under .benchmarks/
    python -m benchmarks.report [--storage .benchmarks] [--out .benchmarks/report]

Every benchmark group becomes one PNG: a line per benchmark in the group (an engine, a subset, a
setting), its mean time against the saved runs in date order, labelled with each run's commit.
Every ``extra_info`` figure whose name holds ``ratio`` (constrained over unconstrained, llamay
over a peer) gets a PNG of its own, the same way, with 1.0 drawn across. Runs come from every
machine under ``--storage``; ``--machine`` keeps one (pytest-benchmark's folder name for it).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a CI machine
import matplotlib.pyplot as plt


def saved_runs(storage: Path, machine: str | None = None) -> list[dict]:
    """pytest-benchmark's saved runs under ``storage``, oldest first."""
    runs = []
    for path in storage.glob("*/*.json"):
        if machine is not None and path.parent.name != machine:
            continue
        data = json.loads(path.read_text())
        if "benchmarks" in data and "datetime" in data:
            runs.append(data)
    return sorted(runs, key=lambda run: run["datetime"])


def series(runs: list[dict]) -> tuple[list[str], dict[str, dict[str, list[float | None]]], dict[str, list]]:
    """Run labels; mean seconds by group and benchmark; ratios by ``benchmark: key``; ``None`` where a run lacks one."""
    labels = [f"{run.get('commit_info', {}).get('id', '')[:7] or '?'}\n{run['datetime'][:10]}" for run in runs]
    means: dict[str, dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(lambda: [None] * len(runs)))
    ratios: dict[str, list[float | None]] = defaultdict(lambda: [None] * len(runs))
    for i, run in enumerate(runs):
        for bench in run["benchmarks"]:
            means[bench.get("group") or "(no group)"][bench["name"]][i] = bench["stats"]["mean"]
            for key, value in (bench.get("extra_info") or {}).items():
                if "ratio" in key and isinstance(value, int | float):
                    ratios[f"{bench['name']}: {key}"][i] = float(value)
    return labels, means, ratios


def plot(labels: list[str], lines: dict[str, list[float | None]], title: str, ylabel: str, path: Path,
         baseline: float | None = None) -> None:
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(labels) + 3), 4.5))
    xs = range(len(labels))
    for name, values in sorted(lines.items()):
        points = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        ax.plot([x for x, _ in points], [v for _, v in points], marker="o", label=name)
    if baseline is not None:
        ax.axhline(baseline, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(storage: Path, out: Path, machine: str | None = None) -> list[Path]:
    """Write the PNGs; returns their paths."""
    runs = saved_runs(storage, machine)
    if not runs:
        raise SystemExit(f"no saved runs under {storage}: run `python -m pytest benchmarks --benchmark-autosave` first")
    labels, means, ratios = series(runs)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for group, lines in means.items():
        path = out / f"{_slug(group)}.png"
        plot(labels, {k: [None if v is None else v * 1e3 for v in vs] for k, vs in lines.items()}, group,
             "mean ms", path)
        written.append(path)
    for name, values in ratios.items():
        path = out / f"ratio-{_slug(name)}.png"
        plot(labels, {name: values}, name, "ratio", path, baseline=1.0)
        written.append(path)
    return written


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:80]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--storage", type=Path, default=Path(".benchmarks"))
    ap.add_argument("--out", type=Path, default=Path(".benchmarks/report"))
    ap.add_argument("--machine", help="one machine's folder under --storage")
    args = ap.parse_args()
    for path in report(args.storage, args.out, args.machine):
        print(path)


if __name__ == "__main__":
    main()
