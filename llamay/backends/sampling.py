"""Choosing the next token from (already masked) logits: penalties and bias, temperature, top-k, top-p, min-p.

Shared by every backend, so a seed and a setting mean the same thing everywhere. The order:
the constraint's mask (before this module), then ``logit_bias`` and the repetition penalties,
then the temperature, then top-k, top-p and min-p. Disallowed tokens carry -inf and never
survive: a bias or a penalty added to -inf leaves -inf, so neither can un-mask a token the
constraint refused. Greedy takes the arg-max of the penalized logits; sampling drops -inf
before the softmax.

The penalties follow their APIs: ``frequency_penalty`` and ``presence_penalty`` (OpenAI)
subtract, for each token already in the reply, its count times the first plus the second;
``repeat_penalty`` (llama.cpp, Ollama) divides a positive logit and multiplies a negative one
for each token among the last ``repeat_last_n`` of prompt and reply (-1: all of them).

Log probabilities (``token_logprob``) are those of the distribution sampled: the softmax of the
masked, penalized logits over the temperature, before top-k, top-p and min-p cut it (as
OpenAI's and llama-server's are). Greedy decoding has no temperature to divide by; its log
probabilities are taken at temperature 1, the distribution whose arg-max it takes. A token the
constraint refused has none: it never appears among the alternatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias) pairs
    logprobs: int | None = None  # None: none reported; k: the sampled token's, and the k likeliest alternatives

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    @property
    def adjusts(self) -> bool:
        """Whether ``adjust`` changes anything: a bias, or a penalty away from its neutral value."""
        return bool(self.logit_bias) or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0 or (
            self.repeat_penalty != 1.0 and self.repeat_last_n != 0)


def adjust(logits: np.ndarray, sampling: Sampling, prompt: Sequence[int], reply: Sequence[int]) -> None:
    """Apply ``logit_bias`` and the penalties to ``logits`` in place; ``reply`` is the tokens generated so far."""
    for token, bias in sampling.logit_bias:
        if token < logits.shape[0]:
            logits[token] += bias
    if sampling.repeat_penalty != 1.0 and sampling.repeat_last_n != 0:
        ids = np.unique(np.asarray(last_tokens(prompt, reply, sampling.repeat_last_n), dtype=np.int64))
        if ids.size:
            seen = logits[ids]
            logits[ids] = np.where(seen > 0, seen / sampling.repeat_penalty, seen * sampling.repeat_penalty)
    if (sampling.frequency_penalty or sampling.presence_penalty) and len(reply):
        ids, counts = np.unique(np.asarray(reply, dtype=np.int64), return_counts=True)
        logits[ids] -= (counts * sampling.frequency_penalty + sampling.presence_penalty).astype(logits.dtype)


def last_tokens(prompt: Sequence[int], reply: Sequence[int], n: int) -> list[int]:
    """The last ``n`` tokens of prompt and reply together (-1: all of them)."""
    if n < 0:
        return [*prompt, *reply]
    tail = list(reply[max(0, len(reply) - n):])
    need = n - len(tail)
    return [*prompt[max(0, len(prompt) - need):], *tail] if need > 0 else tail


@dataclass(frozen=True)
class TokenLogprob:
    """A sampled token's log probability; ``top``: the alternatives' (token id, log probability), likeliest first."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


def token_logprob(logits: np.ndarray, token: int, k: int, temperature: float) -> TokenLogprob:
    """``token``'s log probability under ``logits`` (masked and penalized) at ``temperature``, and the top ``k``."""
    scale = temperature if temperature > 0.0 else 1.0
    candidates = np.flatnonzero(logits > -np.inf)
    scores = logits[candidates].astype(np.float64) / scale
    peak = scores.max()
    log_total = peak + np.log(np.exp(scores - peak).sum())
    chosen = float(logits[token]) / scale - log_total
    top: tuple[tuple[int, float], ...] = ()
    if k > 0:
        k = min(k, candidates.size)
        best = np.argpartition(scores, -k)[-k:]
        best = best[np.lexsort((candidates[best], -scores[best]))]  # likeliest first, ties by id
        top = tuple((int(candidates[i]), float(scores[i] - log_total)) for i in best)
    return TokenLogprob(token, min(0.0, chosen), top)


def forced_logprob(token: int, sampling: Sampling) -> TokenLogprob | None:
    """A token the constraint forced (``llamay.jump_ahead``): log probability 0 and no alternative; None unasked."""
    if sampling.logprobs is None:
        return None
    return TokenLogprob(token, 0.0, ((token, 0.0),) if sampling.logprobs > 0 else ())


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
    if sampling.min_p > 0.0:
        keep = probs >= sampling.min_p * probs.max()
        candidates, probs = candidates[keep], probs[keep] / probs[keep].sum()
    return int(candidates[rng.choice(candidates.size, p=probs)])
