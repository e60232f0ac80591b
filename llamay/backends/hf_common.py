"""What the two Hugging Face runtimes (transformers, mlx-lm) share: prompt encoding and cache reuse."""

from __future__ import annotations

from typing import Any


def encode(tokenizer: Any, text: str, bos: bool) -> list[int]:
    """``text`` through an HF tokenizer, special-token text parsed as tokens, BOS first when ``bos``."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    return [tokenizer.bos_token_id, *ids] if bos else ids


def extends(cached: list[int], prompt: list[int]) -> bool:
    """Whether a KV cache holding ``cached`` can be extended to ``prompt`` (a strict, non-empty prefix)."""
    return 0 < len(cached) < len(prompt) and prompt[: len(cached)] == cached
