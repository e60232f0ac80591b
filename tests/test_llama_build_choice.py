"""``ci/llama-cmake-args``: which llama.cpp build ``ci/install`` asks for, on the machine it runs on.

The real script runs under a PATH whose ``uname``, ``nvcc`` and ``nvidia-smi`` are small
scripts standing in for the machine: there is no GPU here, so the GPU branches are reached
the only way they can be.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "ci" / "llama-cmake-args"
CPU = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
LINUX = {"uname": 'case "$1" in -s) echo Linux;; -m) echo x86_64;; esac'}
MAC = {"uname": 'case "$1" in -s) echo Darwin;; -m) echo arm64;; esac'}
NVCC = {"nvcc": "echo cuda"}
GPU = {"nvidia-smi": 'echo "GPU 0: NVIDIA H100 (UUID: GPU-0)"'}
NO_GPU = {"nvidia-smi": "echo 'No devices were found'; exit 6"}


@pytest.mark.parametrize(("machine", "override", "expected"), [
    (LINUX, None, CPU),
    (LINUX | NVCC, None, CPU),  # a toolkit without a GPU
    (LINUX | NVCC | NO_GPU, None, CPU),
    (LINUX | GPU, None, CPU),  # a GPU without the toolkit to build for it
    (LINUX | NVCC | GPU, None, "-DGGML_CUDA=ON"),
    (MAC, None, "-DGGML_METAL=ON"),
    (LINUX | NVCC | GPU, "-DGGML_VULKAN=ON", "-DGGML_VULKAN=ON"),
    (MAC, "", ""),  # set but empty: llama.cpp's own defaults
], ids=["cpu", "toolkit-only", "toolkit-no-device", "gpu-no-toolkit", "cuda", "metal", "override", "empty-override"])
def test_install_builds_llama_cpp_for_the_machine(tmp_path, machine, override, expected):
    for name, body in machine.items():
        tool = tmp_path / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    (tmp_path / "grep").symlink_to(shutil.which("grep"))  # the one other tool the script runs
    env = {"PATH": str(tmp_path)}  # nothing of the real machine's: its own nvcc or GPU cannot leak in
    if override is not None:
        env["LLAMAY_CMAKE_ARGS"] = override
    bash = next(p for p in ("/bin/bash", "/usr/bin/bash") if os.path.exists(p))
    out = subprocess.run([bash, str(SCRIPT)], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected
