"""The peer harness's sampling and arithmetic, on made-up subsets and results: no engine runs here."""

from __future__ import annotations

import gzip
import json

import pytest

from benchmarks.peers._data import all_subsets, select_schemas
from benchmarks.peers.run import absolute, merge_runs, ratios, summarize

SIZES = {"big": 50, "small": 2, "mid": 10}


@pytest.fixture()
def corpus_dir(tmp_path):
    for name, n in SIZES.items():
        with gzip.open(tmp_path / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            for i in range(n):
                f.write(json.dumps({"id": f"{name}-{i}", "subset": name, "schema": {}, "tests": []}) + "\n")
    return tmp_path


@pytest.mark.parametrize(("limit", "shares"), [
    (3, {"big": 1, "small": 1, "mid": 1}),
    (9, {"big": 4, "small": 2, "mid": 3}),  # small gives all it has; the rest goes to the others in turn
    (30, {"big": 18, "small": 2, "mid": 10}),
    (100, {"big": 50, "small": 2, "mid": 10}),
])
def test_the_sample_is_stratified_over_every_subset(corpus_dir, limit, shares):
    subsets = all_subsets(corpus_dir)
    assert subsets == sorted(SIZES)
    chosen = select_schemas(subsets, limit, seed=0, root=corpus_dir)
    got = {name: sum(r["subset"] == name for r in chosen) for name in subsets}
    assert got == shares
    assert len({r["id"] for r in chosen}) == len(chosen)


def test_the_sample_is_seeded(corpus_dir):
    subsets = all_subsets(corpus_dir)
    ids = [[r["id"] for r in select_schemas(subsets, 9, seed=s, root=corpus_dir)] for s in (0, 0, 1)]
    assert ids[0] == ids[1] != ids[2]


def result(ttfm: float, fills: list[float], new: list[bool] | None = None) -> dict:
    n = len(fills)
    return {"ok": True, "compile": ttfm / 2, "ttfm": ttfm,
            "instances": [{"fill": fills, "advance": [0.0] * (n - 1), "hash": [str(p) for p in range(n)],
                           "lenient": [str(p) for p in range(n)], "new": new or [False] * n, "accepted": n - 1,
                           "complete": True, "eos": True}]}


def test_runs_merge_to_their_medians_and_a_failure_in_any_run_stands():
    runs = [{0: result(1.0, [3.0, 1.0]), 1: result(5.0, [1.0])},
            {0: result(9.0, [1.0, 2.0]), 1: {"ok": False, "error": "timeout: over 10 s in compile"}},
            {0: result(2.0, [2.0, 9.0]), 1: result(5.0, [1.0])}]
    merged = merge_runs(runs)
    assert merged[0]["ttfm"] == 2.0 and merged[0]["compile"] == 1.0
    assert merged[0]["instances"][0]["fill"] == [2.0, 2.0]
    assert merged[1] == {"ok": False, "error": "timeout: over 10 s in compile"}


def test_first_visits_common_schemas_and_subsets_are_reported_apart():
    results = {0: result(0.001, [5e-6, 1e-6], [True, False]), 1: result(0.004, [9e-6, 2e-6], [True, True]),
               2: result(0.020, [1e-6])}
    common = {(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1)}
    e = summarize("llamay", results, 3, common, {0, 1}, ["a", "b", "b"])
    assert e["mask_us_first_visit"]["n"] == 3 and e["mask_us_cached"]["n"] == 1
    assert e["mask_us_cached"]["mean"] == pytest.approx(1.0)
    assert e["ttfm_ms_common"]["max"] == pytest.approx(4.0)
    assert e["ttfm_ms_not_common"]["n"] == 1 and e["ttfm_ms_not_common"]["max"] == pytest.approx(20.0)
    assert e["per_subset"]["a"]["compiled"] == 1 and e["per_subset"]["b"]["schemas"] == 2
    assert e["per_subset"]["b"]["ttfm_ms_common"]["n"] == 1
    assert e["per_subset"]["b"]["mask_us_common"]["n"] == 2


def test_ratios_and_absolute_targets_say_met_or_missed():
    def engine(mask_mean, mask_p99, ttfm_mean, ttfm_max):
        return {"mask_us_common": {"n": 1, "mean": mask_mean, "p99": mask_p99},
                "ttfm_ms_common": {"n": 1, "mean": ttfm_mean, "p99": ttfm_max, "max": ttfm_max},
                "ttfm_ms": {"n": 1, "mean": ttfm_mean, "p99": ttfm_max, "max": ttfm_max}}
    report = {"engines": {"llamay": engine(30.0, 500.0, 6.0, 60.0), "xgrammar": engine(40.0, 300.0, 900.0, 9000.0),
                          "llguidance": engine(90.0, 1300.0, 2.0, 9.0)}}
    r = ratios(report)
    assert r["mask mean"]["best"] == "xgrammar" and r["mask mean"]["met"] is True  # 0.75x
    assert r["mask p99"]["met"] is False
    assert r["first mask mean"]["best"] == "llguidance" and r["first mask mean"]["ratio"] == pytest.approx(3.0)
    assert absolute(report) == {"p99": {"llamay": 60.0, "target": 10.0, "met": False},
                                "max": {"llamay": 60.0, "target": 50.0, "met": False}}
