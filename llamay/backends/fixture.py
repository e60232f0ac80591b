"""The fixture backend: a deterministic scripted "model" over a real vocabulary.

It is a supported stand-in for a model, public like the other backends: ``llamay serve
--model fixture`` serves it, and the tests use it to show, every time and without
weights, behaviours a real model shows only rarely (a greedy sampler whose best legal token
is a space, a model set on writing two tool calls in a row).

Its logits rank tokens in tiers: the longest token that continues ``script`` (text it is
set on writing) first, then EOS once the script is written, then the ``ScriptedScorer``'s
favourites (e.g. runs of spaces), then everything else. The tiers are millions apart, so no
sampling setting reorders them; ``scale`` brings them close (``1e-6``: 3, 2 and 1), so that a
penalty or a bias can. Under a constraint the mask removes
what the grammar refuses, so what comes out is exactly what the constraint makes of a model
that insists.
"""

from __future__ import annotations

import numpy as np

from ..modelfiles.shipped import default_model_path
from ..vocab import Vocabulary
from .base import SteppedBackend


class ScriptedScorer:
    """Picks, from a token mask, the allowed token made only of ``prefer`` bytes, longest first.

    Ties and the case where no such token is allowed go to the lowest allowed id, so every
    choice is deterministic. ``prefer=b" "`` is the space-loving model that shows why
    whitespace is budgeted. ``favourites`` (the liked ids, best first) is what
    ``FixtureBackend`` ranks its logits by; ``pick`` chooses straight from a bitmask.
    """

    def __init__(self, vocab: Vocabulary, prefer: bytes = b" ") -> None:
        self.size = vocab.size
        liked = [i for i in range(vocab.size) if _made_of(vocab.token_bytes(i), prefer)]
        # Favourites first: the longest run of preferred bytes, then the lowest id.
        self.favourites = np.array(sorted(liked, key=lambda i: (-len(vocab.token_bytes(i)), i)), np.int64)

    def pick(self, mask: np.ndarray) -> int | None:
        """The chosen token id, or ``None`` when the mask allows nothing."""
        allowed = np.unpackbits(mask.view(np.uint8), bitorder="little")[: self.size].astype(bool)
        if self.favourites.size:
            liked = self.favourites[allowed[self.favourites]]
            if liked.size:
                return int(liked[0])
        ids = np.flatnonzero(allowed)
        return int(ids[0]) if ids.size else None


def _made_of(piece: bytes, alphabet: bytes) -> bool:
    return bool(piece) and bool(alphabet) and all(b in alphabet for b in piece)


_SCRIPT, _EOS, _FAVOURITE = 3e6, 2e6, 1e6  # logit tiers: script, then EOS, then favourites


class FixtureBackend(SteppedBackend):
    name = "fixture"

    def __init__(self, vocab: Vocabulary, *, prefer: bytes = b" ", script: bytes = b"", model_id: str = "fixture",
                 scale: float = 1.0):
        self.vocab = vocab
        self.model_id = model_id
        self.script = script
        self._by_bytes: dict[bytes, int] = {}
        for i in range(vocab.size):
            self._by_bytes.setdefault(vocab.token_bytes(i), i)
        self._by_bytes.pop(b"", None)
        self._longest = max(map(len, self._by_bytes), default=1)
        base = np.full(vocab.size, -1.0, np.float32)
        favourites = ScriptedScorer(vocab, prefer).favourites
        base[favourites] = _FAVOURITE - np.arange(favourites.size, dtype=np.float32)
        self._base = base * np.float32(scale)
        self._scale = scale
        self._written = b""
        self._logits = base.copy()

    def encode(self, text: str, *, special: bool) -> list[int]:
        """Greedy longest match: the fixture needs some ids for the prompt, not a faithful tokenization.

        Control tokens are ``b""`` in a ``Vocabulary``, so no text matches one: ``special`` changes nothing.
        """
        data, out, pos = text.encode("utf-8"), [], 0
        while pos < len(data):
            for n in range(min(self._longest, len(data) - pos), 0, -1):
                tok = self._by_bytes.get(data[pos : pos + n])
                if tok is not None:
                    out.append(tok)
                    pos += n
                    break
            else:
                pos += 1  # a byte no token spells (a vocabulary without byte tokens)
        return out

    def begin(self, prompt: list[int]) -> None:
        self._written = b""

    def feed(self, token: int) -> None:
        self._written += self.vocab.token_bytes(token)

    def logits(self) -> np.ndarray:
        self._logits[:] = self._base
        rest = self.script[len(self._written):] if self.script.startswith(self._written) else b""
        if self.script and not rest and self._written:
            self._logits[list(self.vocab.eos_ids)] = _EOS * self._scale
        for n in range(min(self._longest, len(rest)), 0, -1):
            tok = self._by_bytes.get(rest[:n])
            if tok is not None:
                self._logits[tok] = (_SCRIPT + n) * self._scale
        return self._logits


def load(model=None, *, vocab: Vocabulary | None = None, **options) -> FixtureBackend:
    """``vocab`` defaults to the embedded model's (SmolLM2, 49,152 tokens); ``model`` names the fixture."""
    return FixtureBackend(vocab or Vocabulary.from_gguf(default_model_path()), model_id=model or "fixture", **options)
