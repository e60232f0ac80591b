"""benchmarks.report turns pytest-benchmark's saved runs (made here by pytest-benchmark itself) into plots."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pytest_benchmark", reason="the bench extra (pytest-benchmark, matplotlib) is not installed")
pytest.importorskip("matplotlib", reason="the bench extra (pytest-benchmark, matplotlib) is not installed")

from benchmarks.report import report, saved_runs, series

TINY = '''
def test_sum(benchmark):
    benchmark.group = "tiny group"
    benchmark.extra_info["ratio_vs_peer"] = 1.25
    benchmark(sum, range(100))
'''


def test_each_group_and_ratio_gets_a_plot_with_a_point_per_saved_run(tmp_path):
    (tmp_path / "test_tiny.py").write_text(TINY)
    store = tmp_path / "store"
    for _ in range(2):
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_tiny.py",
                        "--benchmark-autosave", f"--benchmark-storage={store}", "--benchmark-min-rounds=3"],
                       cwd=tmp_path, check=True, capture_output=True)
    runs = saved_runs(store)
    assert len(runs) == 2
    labels, means, ratios = series(runs)
    assert len(labels) == 2
    assert list(means) == ["tiny group"]
    assert all(v is not None and v > 0 for v in means["tiny group"]["test_sum"])
    assert ratios["test_sum: ratio_vs_peer"] == [1.25, 1.25]
    written = report(store, tmp_path / "out")
    assert sorted(p.name for p in written) == ["ratio-test-sum-ratio-vs-peer.png", "tiny-group.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


def test_no_saved_run_says_how_to_make_one(tmp_path):
    with pytest.raises(SystemExit, match="--benchmark-autosave"):
        report(tmp_path, tmp_path / "out")
