"""Where a model runs by default: threads by physical core, GPU layers by build, torch device by availability."""

from __future__ import annotations

import pytest

from llamay.backends.devices import ALL_LAYERS, gpu_layers, physical_cores, torch_device


def topology(tmp_path, siblings: dict[int, str]):
    for cpu, listed in siblings.items():
        folder = tmp_path / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(listed + "\n")
    return tmp_path


@pytest.mark.parametrize(("siblings", "cpus", "expected"), [
    ({0: "0", 1: "1"}, {0, 1}, 2),  # two cores, no hyperthreads
    ({0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"}, {0, 1, 2, 3}, 2),  # two cores, two threads each
    ({0: "0-1", 1: "0-1", 2: "2-3", 3: "2-3"}, {0, 1}, 1),  # pinned to one core's two threads
    ({0: "0", 1: "1"}, {0, 1, 5}, 3),  # a CPU without topology: every allowed CPU counts
])
def test_threads_default_to_the_physical_cores_this_process_may_use(tmp_path, siblings, cpus, expected):
    assert physical_cores(cpus, topology(tmp_path, siblings)) == expected


def test_this_machine_has_at_least_one_core():
    assert physical_cores() >= 1


@pytest.mark.parametrize(("requested", "offload", "expected"), [
    (None, True, ALL_LAYERS), (None, False, 0), (12, True, 12), (0, True, 0), (12, False, 12)])
def test_gpu_layers_default_to_all_where_llama_cpp_can_offload(requested, offload, expected):
    assert gpu_layers(requested, offload=offload) == expected


@pytest.mark.parametrize(("requested", "cuda", "mps", "expected"), [
    (None, True, True, "cuda"), (None, False, True, "mps"), (None, False, False, "cpu"),
    ("cpu", True, True, "cpu"), ("cuda:1", True, False, "cuda:1")])
def test_torch_device_prefers_cuda_then_mps_then_cpu(requested, cuda, mps, expected):
    assert torch_device(requested, cuda=cuda, mps=mps) == expected
