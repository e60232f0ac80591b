"""The mlx backend and its logits processor on SmolLM2 (mlx-lm on the HF folder derived from the GGUF).

MLX's CPU build on Linux is slow (its matmuls run at about 2 GFLOP/s here, so a prompt
costs as much per token as decoding): the tests keep prompts and outputs short.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("mlx", reason="the mlx backend needs mlx and mlx-lm: pip install 'mlx[cpu]' mlx-lm (Linux)")
try:
    import mlx.core as mx
except ImportError as e:  # plain `mlx` on Linux installs without libmlx
    pytest.skip(f"mlx does not import ({e}): pip install 'mlx[cpu]'", allow_module_level=True)
pytest.importorskip("mlx_lm", reason="the mlx backend needs mlx-lm: pip install mlx-lm")

import mlx_lm

from llamay import Matcher, UsageError, Vocabulary, allocate_bitmask
from llamay.backends import Sampling, load_backend
from llamay.backends.mlx import LlamayLogitsProcessor, apply_bitmask_mx
from llamay.errors import InternalError
from llamay.grammars.gbnf import compile_gbnf
from llamay.grammars.jsonschema.compiler import compile_json_schema
from llamay.modelfiles.shipped import ModelError
from tests.test_backends_agree import backend as shared_backend

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
CITIES = {"type": "object", "properties": {"cities": {"type": "array", "items": {"type": "string"}}},
          "required": ["cities"]}


@pytest.fixture
def mb(request):
    return shared_backend(request, "mlx")


def test_backend_reads_the_folder_with_its_template(mb):
    assert (mb.name, mb.model_id, mb.vocab.size, mb.n_ctx) == ("mlx", "smollm2-135m-instruct", 49152, 8192)
    assert "<|im_start|>assistant" in mb.chat_template and mb.eos_token == "<|im_end|>"
    assert set(mb.tokenizer.eos_token_ids) <= set(mb.vocab.eos_ids)


def test_incremental_cache_matches_a_full_forward(mb):
    ids = mb.tokenize("The quick brown fox jumps over the lazy dog")
    full = np.array(mb.model(mx.array([ids]))[0].astype(mx.float32))
    mb.begin(ids[:4])
    np.testing.assert_allclose(mb.logits(), full[3], atol=2e-4)
    for k in range(4, len(ids)):
        mb.feed(ids[k])
        np.testing.assert_allclose(mb.logits(), full[k], atol=2e-4)
    mb.begin(ids[:2])  # not an extension of the cache: starts afresh
    np.testing.assert_allclose(mb.logits(), full[1], atol=2e-4)


def test_generate_masks_through_the_shared_loop(mb):
    grammar = compile_gbnf('root ::= "Paris" | "Lyon" | "Nice"')
    prompt = mb.tokenize("<|im_start|>user\nName a French city.<|im_end|>\n<|im_start|>assistant\n")
    out = list(mb.generate(prompt, matcher=Matcher(grammar, mb.vocab), sampling=Sampling(), max_tokens=8))
    assert b"".join(mb.vocab.token_bytes(t) for t in out) in (b"Paris", b"Lyon", b"Nice")


def test_processor_in_mlx_lm_generate(mb):
    """Usable on its own: mlx-lm's generate with the processor writes a document of the schema."""
    prompt = mb.tokenizer.apply_chat_template([{"role": "user", "content": "Name a city, as JSON."}],
                                              add_generation_prompt=True)
    processor = LlamayLogitsProcessor(compile_json_schema(CITY), mb.tokenizer)
    text = mlx_lm.generate(mb.model, mb.tokenizer, prompt, max_tokens=16, logits_processors=[processor])
    assert set(json.loads(text)) == {"city"}, text
    assert processor.matcher.is_accepting()


def test_processor_with_the_token_limit_closes_the_document_within_it(mb):
    prompt = mb.tokenizer.apply_chat_template([{"role": "user", "content": "List forty cities of the world as JSON."}],
                                              add_generation_prompt=True)
    processor = LlamayLogitsProcessor(compile_json_schema(CITIES), mb.tokenizer, max_tokens=12)
    text = mlx_lm.generate(mb.model, mb.tokenizer, prompt, max_tokens=12, logits_processors=[processor])
    assert isinstance(json.loads(text)["cities"], list), text  # generate appends the last token after the last mask


def test_processor_with_a_sampler(mb):
    from mlx_lm.sample_utils import make_sampler

    mx.random.seed(0)
    prompt = mb.tokenizer.apply_chat_template([{"role": "user", "content": "Is the sky blue?"}],
                                              add_generation_prompt=True)
    processor = LlamayLogitsProcessor(compile_gbnf('root ::= ("yes" | "no") "."'), mb.vocab)
    text = mlx_lm.generate(mb.model, mb.tokenizer, prompt, max_tokens=6, sampler=make_sampler(temp=1.0),
                           logits_processors=[processor])
    assert re.fullmatch(r"(yes|no)\.", text), text


def test_processor_refuses_misuse_and_notices_a_refused_token():
    with pytest.raises(UsageError, match="CompiledGrammar"):
        LlamayLogitsProcessor("root ::= [a]", Vocabulary([b"a"], [0]))
    with pytest.raises(UsageError, match="token limit"):
        LlamayLogitsProcessor(compile_gbnf('root ::= "a"'), Vocabulary([b"a"], [0]), max_tokens=0)
    vocab = Vocabulary([b"a", b"b", b""], eos_ids=[2])
    processor = LlamayLogitsProcessor(compile_gbnf('root ::= "a"'), vocab)
    out = processor(mx.array([0]), mx.zeros((1, 3)))
    assert out.tolist() == [[0.0, -float("inf"), -float("inf")]]
    with pytest.raises(InternalError, match="token 1"):
        processor(mx.array([0, 1]), mx.zeros((1, 3)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("width", [70, 96])
def test_mx_mask_matches_the_reference(dtype, width):
    """mlx ops unpack the int32 words as llamay's kernel reads them; columns past the vocabulary are refused."""
    rng = np.random.default_rng(width)
    size = 70
    mask = rng.integers(-(2**31), 2**31, size=allocate_bitmask(size).shape).astype(np.int32)
    logits = mx.array(rng.standard_normal((1, width)).astype(np.float32)).astype(getattr(mx, dtype))
    expect = np.array(logits.astype(mx.float32))[0]
    expect[size:] = -np.inf
    for i in range(size):
        if not (int(mask[i // 32]) >> (i % 32)) & 1:
            expect[i] = -np.inf
    got = apply_bitmask_mx(logits, mask, size)
    assert got.shape == (1, width) and got.dtype == logits.dtype
    np.testing.assert_array_equal(np.array(got.astype(mx.float32))[0], expect)


def test_missing_or_gguf_model_is_a_model_error(tmp_path, smollm2_gguf):
    with pytest.raises(ModelError, match="no model folder"):
        load_backend("mlx", tmp_path)
    with pytest.raises(ModelError, match="not GGUF files"):
        load_backend("mlx", smollm2_gguf)
