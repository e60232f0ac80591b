"""vLLM's OpenAI server, run from its own virtual environment (``ci/setup-vllm``), on the SmolLM2
folder llamay derives from the embedded GGUF: what the vLLM integration's tests and benchmark start.

The environment is ``LLAMAY_VLLM_VENV`` (default ``.venv-vllm`` in the checkout). vLLM runs on the
CPU here, in float32 (its default would cast to bfloat16 and change the greedy answers), eagerly
(no torch.compile warm-up), on its older model runner, the one that loads V1 logits processors.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from openai import OpenAI

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("LLAMAY_VLLM_VENV", ROOT / ".venv-vllm"))
PYTHON = VENV / "bin" / "python"
#: Written by ci/setup-vllm once vLLM and llamay's processor import in the environment.
READY = VENV / "llamay-ready"
PROCESSOR = "llamay.integrations.vllm:LlamayLogitsProcessor"
ENV = {"VLLM_USE_V2_MODEL_RUNNER": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}


def free_port() -> int:
    """A loopback port nothing listens on now (vLLM's server takes no port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_vllm(model: Path, port: int, *flags: str, log: Path | None = None) -> tuple[subprocess.Popen, OpenAI]:
    """``vllm serve`` (as ``python -m``: the vllm-cpu distribution's script cannot find itself) on loopback."""
    out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 (the server outlives this call)
    proc = subprocess.Popen(
        [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name",
         "smollm2", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
         "--max-model-len", "2048", *flags],
        env={**os.environ, **ENV}, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                if reply.status == 200:
                    return proc, OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0,
                                        timeout=300)
        except OSError:
            time.sleep(1)
    proc.kill()
    raise RuntimeError(f"vLLM's server did not start (exit {proc.poll()}){f'; see {log}' if log else ''}")


def start_llamay(model: Path, *flags: str, log: Path) -> tuple[subprocess.Popen, str]:
    """``llamay serve --backend vllm`` from vLLM's environment on a free loopback port; returns the process and
    its base URL. vLLM's engine runs as it does under ``start_vllm``."""
    out = open(log, "w")  # noqa: SIM115 (the server outlives this call)
    proc = subprocess.Popen(
        [str(PYTHON), "-m", "llamay.cli", "serve", "--backend", "vllm", "--model", str(model), "--port", "0",
         "--ctx-size", "2048", "--vllm-arg", "dtype=float32", "--vllm-arg", "enforce_eager=true", *flags],
        cwd=ROOT, env={**os.environ, **ENV}, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if found := re.search(r"on http://127\.0\.0\.1:(\d+)", log.read_text()):
            return proc, f"http://127.0.0.1:{found[1]}"
        time.sleep(1)
    proc.kill()
    raise RuntimeError(f"llamay serve --backend vllm did not start (exit {proc.poll()}); see {log}")
