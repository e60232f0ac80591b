"""Time to first token of an agent's conversation, first sent, then resent with one more turn, then
resent unchanged: ``llamay serve`` with its prompt cache against ``--no-cache-prompt``, and
llama.cpp's own ``llama-server`` when given its binary.

    python -m benchmarks.prompt_cache [--turns 14] [--runs 5] [--threads 2] [--llama-server PATH]

The servers run side by side on the embedded SmolLM2, with 4 slots each (``llama-server`` with its
prompt cache on and the model's own template) and are asked in turn, run after run, so that the
machine's load falls on all alike; each figure is the median over ``--runs``. A
conversation is fresh per run (its first user message is numbered), so no run starts from what
the one before left in the cache. Times are to the first streamed content byte, through the
official ``openai`` client.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from openai import OpenAI

from llamay.modelfiles.shipped import default_model_path

ROOT = Path(__file__).resolve().parents[1]
FILLER = ("The deployment log for service {i} shows three restarts, each after a memory spike; the operator "
          "raised the limit to {m} MiB and asked for the next check in an hour. ")


def start(*flags: str) -> tuple[subprocess.Popen, OpenAI]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "llamay.cli", "serve", "--port", "0", *flags], cwd=ROOT,
                            env=env, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if found := re.search(r"on http://127\.0\.0\.1:(\d+)", line):
            return proc, OpenAI(base_url=f"http://127.0.0.1:{found[1]}/v1", api_key="none", max_retries=0)
    raise RuntimeError("llamay serve did not start")


def start_llama_server(binary: str, threads: int, slots: int = 4, port: int = 18431,
                       model: str | None = None) -> tuple[subprocess.Popen, OpenAI]:
    """``llama-server`` on ``model`` (default the embedded one): ``slots`` slots of 4,096 positions each, as
    ``llamay serve``'s."""
    proc = subprocess.Popen([binary, "-m", model or str(default_model_path()), "-t", str(threads),
                             "-c", str(4096 * slots), "-np", str(slots), "--jinja",
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                if reply.status == 200:
                    return proc, OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("llama-server did not start")


def conversation(run: int, turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "You are an operations assistant. Answer briefly."}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"[{run}] " + FILLER.format(i=t, m=512 + 64 * t) * 3})
        messages.append({"role": "assistant", "content": f"Noted: service {t} restarted three times."})
    return [*messages, {"role": "user", "content": "Which service restarted most?"}]


def first_token(client: OpenAI, messages: list[dict]) -> tuple[float, int]:
    """Seconds to the first content delta, and the prompt's tokens."""
    start = time.perf_counter()
    stream = client.chat.completions.create(model="default", messages=messages, max_tokens=8, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    ttft, prompt = None, 0
    for chunk in stream:
        if ttft is None and chunk.choices and chunk.choices[0].delta.content:
            ttft = time.perf_counter() - start
        if chunk.usage:
            prompt = chunk.usage.prompt_tokens
    return (ttft if ttft is not None else time.perf_counter() - start), prompt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=14)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-server", metavar="PATH", help="llama.cpp's llama-server binary, to run beside")
    args = ap.parse_args()
    servers = {"llamay": start("--threads", str(args.threads)),
               "llamay --no-cache-prompt": start("--threads", str(args.threads), "--no-cache-prompt")}
    if args.llama_server:
        servers["llama-server"] = start_llama_server(args.llama_server, args.threads)
    times: dict[tuple[str, str], list[float]] = {}
    tokens = {}
    try:
        for run in range(args.runs):
            messages = conversation(run, args.turns)
            longer = [*messages, {"role": "assistant", "content": "Service 0."},
                      {"role": "user", "content": "And which one needs the most memory now?"}]
            for name, (_, client) in servers.items():
                for step, sent in (("first", messages), ("one more turn", longer), ("resent unchanged", longer)):
                    seconds, tokens[(name, step)] = first_token(client, sent)
                    times.setdefault((name, step), []).append(seconds)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait()
    print(f"seconds to the first token, median of {args.runs}; prompt tokens as each server counts them")
    print(f"| request | {' | '.join(servers)} |")
    print("|---|" + "---|" * len(servers))
    for step in ("first", "one more turn", "resent unchanged"):
        row = " | ".join(f"{statistics.median(times[(name, step)]):.2f} ({tokens[(name, step)]})" for name in servers)
        print(f"| {step} | {row} |")


if __name__ == "__main__":
    main()
