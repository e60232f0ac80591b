"""Choosing the next token from (already masked) logits: greedy, temperature, top-k, top-p.

Shared by every backend, so a seed means the same thing everywhere. Disallowed tokens
carry -inf and never survive: greedy takes the arg-max; sampling drops -inf before the
softmax.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)


def sample(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> int:
    if sampling.temperature <= 0.0:
        return int(np.argmax(logits))
    candidates = np.flatnonzero(logits > -np.inf)
    if candidates.size == 0:
        return int(np.argmax(logits))
    scores = logits[candidates].astype(np.float64)
    with np.errstate(over="ignore"):  # shifted first: a tiny temperature gives -inf, not inf - inf = NaN
        scores = (scores - scores.max()) / sampling.temperature
    if 0 < sampling.top_k < candidates.size:
        keep = np.argpartition(scores, -sampling.top_k)[-sampling.top_k :]
        candidates, scores = candidates[keep], scores[keep]
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    if sampling.top_p < 1.0:
        order = np.argsort(probs)[::-1]
        cut = int(np.searchsorted(np.cumsum(probs[order]), sampling.top_p)) + 1
        order = order[:cut]
        candidates, probs = candidates[order], probs[order] / probs[order].sum()
    return int(candidates[rng.choice(candidates.size, p=probs)])
