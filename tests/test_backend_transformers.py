"""The transformers backend and ``LlamayLogitsProcessor`` on SmolLM2 (the HF folder derived from the GGUF).

What only this runtime has: the KV cache through ``cache``/``past_key_values``, the
float32 numpy view of the logits, the standalone processor in ``model.generate`` (batch,
EOS padding, its two mask routes), the GGUF loader, and the exported folder's traps.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("torch", reason="the transformers backend needs torch: pip install torch==2.13.0 (CPU wheel)")
pytest.importorskip("transformers", reason="the transformers backend needs transformers: pip install transformers")

import torch

from llamay import UsageError, Vocabulary, allocate_bitmask, apply_bitmask
from llamay.backends import load_backend
from llamay.backends.torch_mask import mask_scores
from llamay.backends.transformers import LlamayLogitsProcessor
from llamay.errors import InternalError
from llamay.grammars.gbnf import compile_gbnf
from llamay.grammars.jsonschema.compiler import compile_json_schema
from llamay.modelfiles.hf_folder import MARKER, default_hf_folder
from llamay.modelfiles.shipped import ModelError
from tests.test_backends_agree import backend as shared_backend

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
CITIES = {"type": "object", "properties": {"cities": {"type": "array", "items": {"type": "string"}}},
          "required": ["cities"]}


@pytest.fixture
def tb(request):
    return shared_backend(request, "transformers")


@pytest.fixture(scope="module")
def folder():
    return default_hf_folder()


# --- the exported folder --------------------------------------------------------------------------


def test_exported_folder_has_what_every_reader_needs(folder):
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config  # it would make transformers refuse to save or re-quantize
    assert config["rope_theta"] == config["rope_parameters"]["rope_theta"] == 100000.0  # mlx-lm reads rope_theta
    tok = json.loads((folder / "tokenizer_config.json").read_text())
    assert "<|im_start|>assistant" in tok["chat_template"]
    assert (tok["eos_token"], tok["tokenizer_class"]) == ("<|im_end|>", "PreTrainedTokenizerFast")
    assert (folder / "tokenizer.json").is_file() and (folder / "model.safetensors").is_file()
    assert json.loads((folder / MARKER).read_text())["source"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert default_hf_folder() == folder  # cached: the second call exports nothing
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_gguf_loaded_directly_gives_the_folders_logits(tb, smollm2_gguf):
    """``gguf_file=`` dequantizes the same tensors the folder was written from."""
    direct = load_backend("transformers", smollm2_gguf)
    assert direct.model_id == "smollm2-135m-instruct.q4_1" and direct.vocab.eos_ids == tb.vocab.eos_ids
    ids = tb.tokenize("Once upon a time")
    tb.begin(ids)
    direct.begin(ids)
    np.testing.assert_allclose(direct.logits(), tb.logits(), rtol=0, atol=1e-4)


def test_missing_model_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="no model file"):
        load_backend("transformers", tmp_path / "nope.gguf")
    with pytest.raises(ModelError, match="could not load"):
        load_backend("transformers", tmp_path)


# --- the Backend primitives -----------------------------------------------------------------------


def test_logits_are_a_float32_view_the_mask_writes_into(tb):
    tb.begin(tb.tokenize("Hello"))
    logits = tb.logits()
    assert logits.dtype == np.float32 and logits.shape == (tb.vocab.size,) and logits.flags.c_contiguous
    mask = allocate_bitmask(tb.vocab.size)
    mask[:] = 0
    mask[0] = 1 << 5
    apply_bitmask(logits, mask)
    again = tb.logits()
    assert np.shares_memory(logits, again) and int(np.argmax(again)) == 5


def test_incremental_cache_matches_a_full_forward(tb):
    """begin + feed through the KV cache give the logits one forward pass over the whole text gives."""
    ids = tb.tokenize("The quick brown fox jumps over the lazy dog, and then")
    with torch.inference_mode():
        full = tb.model(torch.tensor([ids])).logits[0].float().numpy()
    tb.begin(ids[:5])
    np.testing.assert_allclose(tb.logits(), full[4], atol=2e-4)
    for k in range(5, len(ids)):
        tb.feed(ids[k])
        np.testing.assert_allclose(tb.logits(), full[k], atol=2e-4)
    # a prompt that extends what the cache holds reuses it; any other prompt starts afresh
    tb.begin(ids)
    np.testing.assert_allclose(tb.logits(), full[-1], atol=2e-4)
    tb.begin(ids[:3])
    np.testing.assert_allclose(tb.logits(), full[2], atol=2e-4)


def test_generate_masks_through_the_shared_loop(tb):
    from llamay import Matcher
    from llamay.backends import Sampling

    grammar = compile_gbnf('root ::= "Paris" | "Lyon" | "Nice"')
    prompt = tb.tokenize("<|im_start|>user\nName a French city.<|im_end|>\n<|im_start|>assistant\n")
    out = list(tb.generate(prompt, matcher=Matcher(grammar, tb.vocab), sampling=Sampling(), max_tokens=8))
    assert b"".join(tb.vocab.token_bytes(t) for t in out) in (b"Paris", b"Lyon", b"Nice")


# --- LlamayLogitsProcessor in model.generate --------------------------------------------------------


def chat_batch(tokenizer, questions):
    tokenizer.padding_side = "left"
    messages = [[{"role": "user", "content": q}] for q in questions]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", padding=True,
                                         return_dict=True)


def test_processor_constrains_a_batch_in_model_generate(tb):
    """Each row gets its own matcher; a row that ends first is padded and left alone."""
    enc = chat_batch(tb.tokenizer, ["Name a city, as JSON.", "Where is the Eiffel tower? Answer in JSON."])
    processor = LlamayLogitsProcessor(compile_json_schema(CITY), tb.vocab)
    out = tb.model.generate(**enc, max_new_tokens=24, do_sample=False, logits_processor=[processor])
    texts = tb.tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    for text, matcher in zip(texts, processor.matchers, strict=True):
        assert set(json.loads(text)) == {"city"}, text
        assert matcher.is_accepting()


def test_processor_with_the_token_limit_closes_the_document_within_it(tb):
    enc = chat_batch(tb.tokenizer, ["List forty cities of the world as JSON."])
    processor = LlamayLogitsProcessor(compile_json_schema(CITIES), tb.vocab, max_new_tokens=12)
    out = tb.model.generate(**enc, max_new_tokens=12, do_sample=False, logits_processor=[processor])
    text = tb.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert isinstance(json.loads(text)["cities"], list), text  # generate appends the last token after the last mask


def test_processor_takes_a_tokenizer_and_samples(tb):
    enc = chat_batch(tb.tokenizer, ["Is the sky blue?"])
    torch.manual_seed(0)
    grammar = compile_gbnf('root ::= ("yes" | "no") "."')
    out = tb.model.generate(**enc, max_new_tokens=8, do_sample=True, temperature=1.0,
                            logits_processor=[LlamayLogitsProcessor(grammar, tb.tokenizer)])
    text = tb.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert re.fullmatch(r"(yes|no)\.", text), text


def test_processor_refuses_misuse():
    with pytest.raises(UsageError, match="CompiledGrammar"):
        LlamayLogitsProcessor({"type": "object"}, Vocabulary([b"a"], [0]))
    with pytest.raises(UsageError, match="token limit"):
        LlamayLogitsProcessor(compile_gbnf('root ::= "a"'), Vocabulary([b"a"], [0]), max_new_tokens=0)


def test_processor_notices_a_token_it_refused():
    vocab = Vocabulary([b"a", b"b", b""], eos_ids=[2])
    processor = LlamayLogitsProcessor(compile_gbnf('root ::= "a"'), vocab)
    scores = torch.zeros((1, 3))
    processor(torch.tensor([[0]]), scores)
    assert scores.tolist() == [[0.0, -float("inf"), -float("inf")]]
    with pytest.raises(InternalError, match="token 1"):
        processor(torch.tensor([[0, 1]]), torch.zeros((1, 3)))


def reference_mask(scores: np.ndarray, mask: np.ndarray, size: int) -> np.ndarray:
    """``for i in range(V): if not bitmask[i // 32] >> (i % 32) & 1: logits[i] = -inf``, and -inf past ``size``."""
    out = scores.copy()
    out[:, size:] = -np.inf
    for r in range(out.shape[0]):
        for i in range(size):
            if not (int(mask[r, i // 32]) >> (i % 32)) & 1:
                out[r, i] = -np.inf
    return out


@pytest.mark.parametrize("as_tensor", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("width", [70, 96])
def test_both_mask_routes_agree(dtype, width, as_tensor):
    """The numpy-view route (contiguous CPU float32/16) and the torch-unpack route (any other scores) mask alike,
    from a numpy mask or a torch one (SGLang's).

    Columns past the vocabulary (a model's padded logits) are always refused.
    """
    rng = np.random.default_rng(width)
    size = 70
    mask = rng.integers(-(2**31), 2**31, size=(3, 3)).astype(np.int32)
    scores = torch.from_numpy(rng.standard_normal((3, width)).astype(np.float32)).to(dtype)
    expect = reference_mask(scores.float().numpy(), mask, size)
    given = torch.from_numpy(mask) if as_tensor else mask
    contiguous = scores.clone()
    mask_scores(contiguous, given, size, {})
    strided = scores.t().contiguous().t()  # the same values, column-major
    assert not strided.is_contiguous()
    mask_scores(strided, given, size, {})
    np.testing.assert_array_equal(contiguous.float().numpy(), expect)
    np.testing.assert_array_equal(strided.float().numpy(), expect)
