"""What the two Hugging Face runtimes (transformers, mlx-lm) share: prompt encoding and cache reuse."""

from __future__ import annotations

import copy
from typing import Any

from ..errors import UsageError


class Encoder:
    """A fast HF tokenizer's two readings of text: special tokens' text as those tokens, or as text.

    Text is read as text by a copy of the tokenizer's ``tokenizers`` backend whose
    ``encode_special_tokens`` is set once: transformers' ``split_special_tokens=True`` sets that
    flag on the shared tokenizer for the call, and a request encoding at the same time would
    read the other's setting. ``control_texts`` are the special added tokens' texts, the ones
    the flag concerns (non-special added tokens are read as tokens either way, as in llama.cpp).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.control_texts = frozenset(t.content for t in tokenizer.added_tokens_decoder.values() if t.special)
        self._as_text = copy.deepcopy(tokenizer.backend_tokenizer)
        self._as_text.encode_special_tokens = True

    def __call__(self, text: str, *, special: bool) -> list[int]:
        if special:
            return self.tokenizer.encode(text, add_special_tokens=False)
        return self._as_text.encode(text, add_special_tokens=False).ids


def take_tokenizer(backend: Any, tokenizer: Any) -> None:
    """Set a backend's template metadata and encoder from a fast HF tokenizer (transformers, mlx-lm, vLLM)."""
    template = getattr(tokenizer, "chat_template", None)
    backend.chat_template = template if isinstance(template, str) else None
    backend.bos_token = tokenizer.bos_token or ""
    backend.eos_token = tokenizer.eos_token or ""
    # whether the tokenizer puts BOS in front of plain text (llama) or not (SmolLM2, Qwen)
    backend.bos_id = bos = tokenizer.bos_token_id
    backend.add_bos = bos is not None and tokenizer.encode("a", add_special_tokens=True)[:1] == [bos]
    backend._encode = Encoder(tokenizer)
    backend.control_texts = backend._encode.control_texts


def extends(cached: list[int], prompt: list[int]) -> bool:
    """Whether a KV cache holding ``cached`` can be extended to ``prompt`` (a strict, non-empty prefix)."""
    return 0 < len(cached) < len(prompt) and prompt[: len(cached)] == cached


def tokens_budget(max_tokens: int | None) -> int | None:
    """A logits processor's budget, checked: the generation's token limit, or None for none."""
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise UsageError(f"the processor's token limit must be a positive integer or None, got {max_tokens!r}")
    return max_tokens


def tokens_left(budget: int | None, generated: int) -> int | None:
    """The ``tokens_left`` of the next mask; past the budget (a caller's limit larger than the processor's)
    the last token's."""
    return None if budget is None else max(1, budget - generated)
