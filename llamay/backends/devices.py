"""Where a model runs by default: CPU threads, GPU layers, and the torch device.

Each default is a pure function of what the machine offers, so the choice is tested on a
machine that has no GPU, and the backends only ask the runtime what it offers.
"""

from __future__ import annotations

import os
from pathlib import Path

#: ``n_gpu_layers`` that llama.cpp reads as "every layer".
ALL_LAYERS = -1


def physical_cores(cpus: set[int] | None = None, topology: Path = Path("/sys/devices/system/cpu")) -> int:
    """Cores this process may run on, counting a core's hyperthreads once.

    llama.cpp's own default: its threads wait on each other at every operation, so two
    threads sharing a core slow the whole step. Where the topology cannot be read, every
    CPU the process may use counts.
    """
    cpus = set(os.sched_getaffinity(0)) if cpus is None else cpus
    cores = set()
    for cpu in cpus:
        try:
            cores.add((topology / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip())
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))


def gpu_layers(requested: int | None, *, offload: bool) -> int:
    """Layers to put on the GPU: ``requested``, else all of them where llama.cpp was built with a GPU, else none."""
    if requested is not None:
        return requested
    return ALL_LAYERS if offload else 0


def torch_device(requested: str | None, *, cuda: bool, mps: bool) -> str:
    """``requested``, else CUDA, then Apple's MPS, then the CPU."""
    if requested:
        return requested
    if cuda:
        return "cuda"
    return "mps" if mps else "cpu"
