"""Concurrent clients sending JSON-schema-constrained requests: ``llamay serve`` against llama.cpp's
``llama-server`` on the same GGUF, threads and slots, against ``llamay serve --parallel 1``, and against
itself sampling every token (``--no-jump-ahead``).

    python -m benchmarks.serving [--runs 5] [--threads 2] [--slots 4] [--max-tokens 64]
                                 [--llama-server PATH] [--backend llamacpp|mlx] [--clients 1,4,8]
                                 [--model GGUF]

``--model`` runs both servers on another GGUF (default the embedded SmolLM2, whose weights are
Q4_1); ``python -m benchmarks.requantize`` writes the embedded model in another type.

``--backend mlx`` compares mlx-lm's batch generator (``--parallel N``) with one generation at a
time on the SmolLM2 folder derived from the GGUF; ``llama-server`` runs only beside llamacpp.

Each client sends one request at the same moment; a round is 1, 4, then 8 clients, on each
server in turn, so that the machine's load falls on all alike, and every figure is the median
over ``--runs`` rounds. A request asks for a person record under a JSON schema
(``response_format`` ``json_schema``, which ``llama-server`` compiles to its own grammar), with a
prompt numbered by round and client, so that no request finds its whole prompt cached. Every
reply is parsed and validated; replies cut by ``max_tokens`` are counted apart.
Also measured: single-stream decode speed without a constraint (the two sides' ggml differ).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import jsonschema
from openai import OpenAI

from benchmarks.prompt_cache import start, start_llama_server

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"},
                         "hobbies": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age", "city", "hobbies"]}
CLIENTS = (1, 4, 8)


def one(client: OpenAI, prompt: str, max_tokens: int) -> dict:
    start_at = time.perf_counter()
    reply = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}})
    choice = reply.choices[0]
    try:
        jsonschema.validate(json.loads(choice.message.content), SCHEMA)
        valid = True
    except (ValueError, jsonschema.ValidationError):
        valid = False
    return {"seconds": time.perf_counter() - start_at, "tokens": reply.usage.completion_tokens, "valid": valid,
            "cut": choice.finish_reason == "length"}


def burst(client: OpenAI, n: int, run: int, max_tokens: int) -> dict:
    """``n`` clients at once: wall seconds, aggregate tokens/s, median latency, invalid and cut counts."""
    results: list[dict] = [{}] * n

    def go(i: int) -> None:
        results[i] = one(client, f"[{run}.{i}] Describe a person from city number {i} as JSON.", max_tokens)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    start_at = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start_at
    return {"wall": wall, "tps": sum(r["tokens"] for r in results) / wall,
            "latency": statistics.median(r["seconds"] for r in results),
            "invalid": sum(not r["valid"] for r in results), "cut": sum(r["cut"] for r in results)}


def decode_speed(client: OpenAI) -> float:
    """Tokens/s of one unconstrained stream, from its first token to its last."""
    stream = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
        max_tokens=200, temperature=0, stream=True)
    first, last, count = None, None, 0
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            count += 1
            last = time.perf_counter()
            first = first or last
    return (count - 1) / (last - first) if count > 1 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--llama-server", metavar="PATH", help="llama.cpp's llama-server binary, to run beside")
    ap.add_argument("--backend", choices=("llamacpp", "mlx"), default="llamacpp")
    ap.add_argument("--clients", default=",".join(map(str, CLIENTS)), help="client counts of a round, comma-separated")
    ap.add_argument("--model", metavar="GGUF", help="the model both servers load (default: the embedded SmolLM2)")
    args = ap.parse_args()
    clients = [int(n) for n in args.clients.split(",")]
    common = ("--threads", str(args.threads), "--backend", args.backend,
              *(("--model", args.model) if args.model else ()))
    servers = {f"llamay --parallel {args.slots}": start(*common, "--parallel", str(args.slots)),
               f"llamay --parallel {args.slots} --no-jump-ahead": start(*common, "--parallel", str(args.slots),
                                                                      "--no-jump-ahead"),
               "llamay --parallel 1": start(*common, "--parallel", "1")}
    if args.llama_server and args.backend == "llamacpp":
        servers[f"llama-server -np {args.slots}"] = start_llama_server(args.llama_server, args.threads, args.slots,
                                                                         model=args.model)
    rows: dict[tuple[str, int], list[dict]] = {}
    speeds: dict[str, list[float]] = {}
    try:
        for _, client in servers.values():  # warm up: first-time costs are not the steady state measured here
            burst(client, 2, -1, args.max_tokens)
        for run in range(args.runs):
            for n in clients:
                for name, (_, client) in servers.items():
                    rows.setdefault((name, n), []).append(burst(client, n, run, args.max_tokens))
            for name, (_, client) in servers.items():
                speeds.setdefault(name, []).append(decode_speed(client))
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait()
    print(f"median of {args.runs} interleaved rounds; {args.backend} backend; {args.threads} threads; "
          f"max_tokens {args.max_tokens}; model {args.model or 'embedded'}")
    print("| server | clients | wall s | tokens/s | median latency s | invalid | cut by max_tokens |")
    print("|---|---|---|---|---|---|---|")
    for (name, n), runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "tps", "latency")}
        bad, cut = sum(r["invalid"] for r in runs), sum(r["cut"] for r in runs)
        print(f"| {name} | {n} | {med['wall']:.2f} | {med['tps']:.1f} | {med['latency']:.2f} | "
              f"{bad} of {n * len(runs)} | {cut} |")
    print("\nsingle-stream decode, unconstrained, tokens/s (median):")
    for name, values in speeds.items():
        print(f"  {name}: {statistics.median(values):.1f}")


if __name__ == "__main__":
    main()
