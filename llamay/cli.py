"""The ``llamay`` command: ``llamay serve`` loads a model and serves the three HTTP APIs.

Progress and the per-request log go to stderr; stdout stays empty so a supervisor can
tell the two apart. Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 1 when the
model cannot be loaded or the port cannot be bound, 2 for bad arguments (argparse).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .api.app import DEFAULT_MAX_BODY, DEFAULT_QUEUE, App, read_lexicon
from .api.server import IDLE_TIMEOUT, MAX_CONNECTIONS, READ_TIMEOUT, serve
from .chat.dialects import DIALECTS

#: Slots ``llamay serve`` runs on llama.cpp, as ``llama-server``'s default of 4.
DEFAULT_PARALLEL = 4
#: Positions each slot holds.
DEFAULT_CTX_SIZE = 4096


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return args.run(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llamay", description="Tool calls and structured output that cannot be "
                                                                "malformed, served over the OpenAI, Anthropic and "
                                                                "Ollama APIs.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve a model over HTTP",
                                description="Serve one model over the OpenAI, Anthropic and Ollama HTTP APIs.")
    serve.add_argument("--backend", default="llamacpp", help="runtime: llamacpp (default), transformers, mlx, vllm")
    serve.add_argument("--model", help="model file or folder (default: the embedded SmolLM2-135M-Instruct)")
    serve.add_argument("--threads", type=_positive, metavar="N",
                       help="CPU threads for the backend (llamacpp: default the physical cores this process may "
                            "use, for one token and for prompts alike; transformers: torch's threads; mlx: ignored)")
    serve.add_argument("--ctx-size", type=_positive, metavar="N",
                       help="positions of context each slot holds, prompt and reply together (llamacpp backend: "
                            f"default {DEFAULT_CTX_SIZE}; per slot, so the KV cache holds --parallel times it, unlike"
                            " llama-server's -c, which its slots divide; vllm: its max_model_len, default the model's)")
    serve.add_argument("--gpu-layers", type=_gpu_layers, metavar="N",
                       help="layers offloaded to the GPU (llamacpp backend; default all where llama.cpp was built "
                            "with CUDA or Metal, else none; -1 means all)")
    serve.add_argument("--device", metavar="DEVICE",
                       help="torch device (transformers backend; default cuda, then mps, then cpu)")
    serve.add_argument("--parallel", type=_positive, metavar="N",
                       help=f"generations run at once (default {DEFAULT_PARALLEL}): llamacpp batches them into one "
                            "evaluation a step, each slot with a context of its own; mlx through mlx-lm's batch "
                            "generator; vllm: its max_num_seqs; transformers runs one at a time")
    serve.add_argument("--tensor-parallel-size", type=_positive, metavar="N",
                       help="GPUs each layer is split over (vllm backend: vLLM's own flag; default 1)")
    serve.add_argument("--pipeline-parallel-size", type=_positive, metavar="N",
                       help="stages the layers are split into, across GPUs or nodes (vllm backend: vLLM's own flag, "
                            "several nodes through Ray; default 1)")
    serve.add_argument("--vllm-arg", action="append", default=[], type=_engine_arg, metavar="NAME=VALUE",
                       help="one of vLLM's engine arguments (AsyncEngineArgs), the value read as JSON where it parses "
                            "as JSON, else as text; repeatable (e.g. --vllm-arg dtype=float32 "
                            "--vllm-arg enforce_eager=true)")
    serve.add_argument("--no-cache-prompt", dest="cache_prompt", action="store_false",
                       help="evaluate every prompt afresh (llamacpp and mlx backends): slower for a resent "
                            "conversation, but greedy output is then bit-for-bit reproducible; by default finished "
                            "generations' KV caches are kept and a request evaluates only what follows the longest "
                            "prefix it shares with one")
    serve.add_argument("--no-jump-ahead", dest="jump_ahead", action="store_false",
                       help="sample every token, even those a constraint forces (llamacpp, transformers, and mlx "
                            "with --parallel 1); by default a forced run (a property name, a tool's name) is "
                            "appended in one evaluation, as the model's tokenizer spells it, with log probability 0")
    serve.add_argument("--tool-dialect", choices=list(DIALECTS), metavar="NAME",
                       help=f"how the model writes tool calls: {', '.join(DIALECTS)} (default: detected from "
                            "its chat template, hermes where it names none)")
    serve.add_argument("--chat-template", metavar="FILE",
                       help="a Jinja chat template replacing the model's (a broken one, or one that renders no tools)")
    serve.add_argument("--alias", action="append", default=[], metavar="NAME",
                       help="another name the model answers to (repeatable); 'default' always does")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=11435, help="port to bind (default 11435; 0 picks a free one)")
    serve.add_argument("--api-key", default=os.environ.get("LLAMAY_API_KEY"),
                       help="require this key (Authorization: Bearer KEY or x-api-key: KEY); "
                            "default: $LLAMAY_API_KEY, or none")
    serve.add_argument("--lexicon", metavar="FILE",
                       help="word list for llamay_lexicon: true (one word a line, or a JSON array)")
    serve.add_argument("--max-body", type=_positive, default=DEFAULT_MAX_BODY, metavar="BYTES",
                       help=f"largest request body (default {DEFAULT_MAX_BODY})")
    serve.add_argument("--queue", type=_non_negative, default=DEFAULT_QUEUE, metavar="N",
                       help=f"requests that may wait while every slot generates (default {DEFAULT_QUEUE})")
    serve.add_argument("--read-timeout", type=_seconds, default=READ_TIMEOUT, metavar="SECONDS",
                       help="time a request's head and body may take from its first byte; then 408 "
                            f"(default {READ_TIMEOUT:g})")
    serve.add_argument("--idle-timeout", type=_seconds, default=IDLE_TIMEOUT, metavar="SECONDS",
                       help="time a keep-alive connection may wait for its next request before it is closed "
                            f"(default {IDLE_TIMEOUT:g})")
    serve.add_argument("--max-connections", type=_positive, default=MAX_CONNECTIONS, metavar="N",
                       help=f"open connections served at once; one more gets 503 (default {MAX_CONNECTIONS})")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(run=_serve)
    return parser


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from .engine import load

    lexicon = None
    if args.lexicon:
        try:
            lexicon = read_lexicon(args.lexicon)
        except (OSError, ValueError) as e:
            print(f"llamay: cannot read the lexicon: {e}", file=sys.stderr)
            return 1
        _progress(f"lexicon: {len(lexicon)} words from {args.lexicon}")
    _progress(f"loading {args.model or 'the default model (SmolLM2-135M-Instruct)'} on {args.backend} ...")
    started = time.monotonic()
    try:
        options = _backend_options(args)
        template = Path(args.chat_template).read_text(encoding="utf-8") if args.chat_template else None
        model = load(args.backend, args.model, tool_dialect=args.tool_dialect, chat_template=template, **options)
    except Exception as e:  # a missing runtime, file or package: say which, and stop
        print(f"llamay: cannot load the model: {e}", file=sys.stderr)
        return 1
    _progress(f"loaded {model.model_id} in {time.monotonic() - started:.1f}s; tool dialect {model.dialect.name}"
              f"{' (its markers are tokens)' if model.markers.ids else ''}")
    if args.backend == "llamacpp":
        backend = model.backend
        layers = "all" if backend.n_gpu_layers < 0 else backend.n_gpu_layers
        _progress(f"{backend.slots} slots of {backend.n_ctx} positions each (the model was trained on "
                  f"{backend.n_ctx_train}); threads: {backend.n_threads}; GPU layers: {layers}")
    elif args.backend == "vllm":
        args_ = model.backend.engine_args
        _progress(f"vLLM: up to {args_.max_num_seqs} sequences of {args_.max_model_len} positions; tensor parallel "
                  f"{args_.tensor_parallel_size}, pipeline parallel {args_.pipeline_parallel_size}; prefix cache "
                  f"{'on' if args_.enable_prefix_caching is not False else 'off'}")
    elif model.scheduler is not None:
        _progress(f"{model.backend.slots} generations at once through mlx-lm's batch generator; prompt cache "
                  f"{'on' if model.backend.cache_prompt else 'off'}")
    else:
        _progress(f"no prompt cache and one generation at a time on the {args.backend} backend")
    app = App(model, aliases=tuple(args.alias), api_key=args.api_key, lexicon=lexicon, max_body=args.max_body,
              queue=args.queue)

    def ready(server) -> None:
        names = ", ".join(app.names)
        key = "required" if app.api_key else "not required"
        _progress(f"serving {names} on http://{server.host}:{server.port} (API key {key}); Ctrl-C stops")

    try:
        asyncio.run(serve(app, args.host, args.port, on_ready=ready, read_timeout=args.read_timeout,
                          idle_timeout=args.idle_timeout, max_connections=args.max_connections))
    except OSError as e:
        print(f"llamay: cannot serve on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    _progress("stopped")
    return 0


def _progress(line: str) -> None:
    print(f"llamay: {line}", file=sys.stderr, flush=True)


def _backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The backend's load options from the flags; ValueError for a flag that backend does not take."""
    options: dict[str, Any] = {"n_threads": args.threads} if args.threads else {}
    options["jump_ahead"] = args.jump_ahead
    parallelism = {"--tensor-parallel-size": args.tensor_parallel_size,
                   "--pipeline-parallel-size": args.pipeline_parallel_size}
    if args.backend == "vllm":
        options.update(slots=args.parallel or DEFAULT_PARALLEL, n_ctx=args.ctx_size,
                       tensor_parallel_size=args.tensor_parallel_size or 1,
                       pipeline_parallel_size=args.pipeline_parallel_size or 1)
        options.update(dict(args.vllm_arg), cache_prompt=args.cache_prompt)
        refused = {"--gpu-layers": args.gpu_layers, "--device": args.device}
    elif args.backend == "llamacpp":
        options.update(cache_prompt=args.cache_prompt, slots=args.parallel or DEFAULT_PARALLEL,
                       n_ctx=args.ctx_size or DEFAULT_CTX_SIZE, n_gpu_layers=args.gpu_layers)
        refused = {"--device": args.device}
    elif args.backend == "mlx":
        options.update(cache_prompt=args.cache_prompt, slots=args.parallel or DEFAULT_PARALLEL)
        refused = {"--ctx-size": args.ctx_size, "--gpu-layers": args.gpu_layers, "--device": args.device}
    else:
        refused = {"--parallel": args.parallel if (args.parallel or 1) > 1 else None, "--ctx-size": args.ctx_size,
                   "--gpu-layers": args.gpu_layers}
        if args.backend == "transformers":
            options["device"] = args.device
        else:
            refused["--device"] = args.device
    if args.backend != "vllm":
        refused.update(parallelism, **{"--vllm-arg": args.vllm_arg or None})
    for flag, value in refused.items():
        if value is not None:
            raise ValueError(f"{flag} does not apply to the {args.backend} backend"
                             + ("; it runs one generation at a time" if flag == "--parallel" else ""))
    return options


def _engine_arg(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"must be NAME=VALUE with NAME one of vLLM's engine arguments, got {text!r}")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def _gpu_layers(text: str) -> int:
    value = int(text)
    if value < -1:
        raise argparse.ArgumentTypeError(f"must be -1 (all) or 0 or more, got {text}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


if __name__ == "__main__":
    sys.exit(main())
