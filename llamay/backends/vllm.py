"""vLLM as a llamay backend: llamay's API shapes, tool calls and held-back streaming on vLLM's engine.

vLLM generates: its scheduler batches the requests, pages their KV caches and shares prompt
prefixes, and runs the model over as many GPUs and nodes as ``tensor_parallel_size`` and
``pipeline_parallel_size`` ask (several nodes through Ray, as vLLM sets it up). llamay's
logits processor (``llamay.integrations.vllm``) constrains each request inside vLLM's workers,
sent the request's constraint as ``extra_args``; ``llamay.serving.VllmRunner`` reads the tokens
back for the engine. This module holds what the engine needs of the model (tokenizer, template,
vocabulary) and vLLM's engine arguments; importing it imports vLLM.
"""

from __future__ import annotations

import os
from typing import Any

from transformers import AutoConfig, AutoTokenizer
from vllm.engine.arg_utils import AsyncEngineArgs

from ..errors import UsageError
from ..vocab import Vocabulary
from .base import Backend
from .hf_common import take_tokenizer

#: What the processor is loaded as in vLLM's workers (they import it by name).
PROCESSOR = "llamay.integrations.vllm:LlamayLogitsProcessor"

#: Engine arguments llamay sets itself, and the ``llamay serve`` flag that sets each (None: no flag).
SET_BY_LLAMAY = {"model": "--model", "max_num_seqs": "--parallel", "max_model_len": "--ctx-size",
                 "tensor_parallel_size": "--tensor-parallel-size", "pipeline_parallel_size": "--pipeline-parallel-size",
                 "enable_prefix_caching": "--no-cache-prompt", "logits_processors": None, "logprobs_mode": None,
                 "tokenizer": None, "revision": None, "tokenizer_revision": None, "trust_remote_code": None}


class VllmBackend(Backend):
    """A model served by vLLM's engine; ``VllmRunner`` runs its generations."""

    name = "vllm"

    def __init__(self, engine_args: AsyncEngineArgs, tokenizer: Any, vocab_size: int) -> None:
        self.engine_args = engine_args
        self.model_id = os.path.basename(os.path.normpath(str(engine_args.model)))
        self.vocab = Vocabulary.from_hf(tokenizer, size=max(vocab_size, len(tokenizer)))
        take_tokenizer(self, tokenizer)
        self.n_ctx = int(engine_args.max_model_len or 0)
        self.slots = int(engine_args.max_num_seqs or 1)

    def encode(self, text: str, *, special: bool) -> list[int]:
        return self._encode(text, special=special)


def load(model: str | os.PathLike[str] | None = None, *, slots: int = 8, n_ctx: int | None = None,
         tensor_parallel_size: int = 1, pipeline_parallel_size: int = 1, cache_prompt: bool = True,
         dtype: str = "auto", n_threads: int | None = None, **engine_args: Any) -> VllmBackend:
    """vLLM's engine on ``model`` (an HF folder or hub id; None: the embedded default as an HF folder).

    ``slots`` is vLLM's ``max_num_seqs``, ``n_ctx`` its ``max_model_len`` (None: the model's
    ``max_position_embeddings``), ``cache_prompt`` its prefix caching. Log probabilities are
    vLLM's processed ones (after the mask, penalties and temperature, as llamay's own backends
    report them). Other keyword arguments go to vLLM's ``AsyncEngineArgs`` as they are, but for
    those in ``SET_BY_LLAMAY`` (a ``UsageError`` names the flag to use). ``n_threads`` is
    refused: vLLM sets its own threads (``VLLM_CPU_OMP_THREADS_BIND`` on the CPU).
    """
    if n_threads is not None:
        raise UsageError("--threads does not apply to the vllm backend: vLLM binds its own threads "
                         "(VLLM_CPU_OMP_THREADS_BIND on the CPU)")
    clash = sorted(engine_args.keys() & SET_BY_LLAMAY.keys())
    if clash:
        flag = SET_BY_LLAMAY[clash[0]]
        raise UsageError(f"vLLM's {clash[0]} is llamay's to set: " + (f"use {flag}" if flag else
                         "llamay reads the tokenizer from --model and loads its own logits processor"))
    if model is None:
        from ..modelfiles.hf_folder import default_hf_folder

        model = default_hf_folder()
    model = str(model)
    config = AutoConfig.from_pretrained(model)
    n_ctx = n_ctx or int(getattr(config, "max_position_embeddings", 0) or 0) or None
    args = AsyncEngineArgs(model=model, max_num_seqs=slots, max_model_len=n_ctx, dtype=dtype,
                           enable_prefix_caching=cache_prompt,
                           tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
                           logits_processors=[PROCESSOR], logprobs_mode="processed_logprobs", **engine_args)
    tokenizer = AutoTokenizer.from_pretrained(model)
    return VllmBackend(args, tokenizer, config.vocab_size)
