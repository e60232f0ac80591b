"""llamay as an SGLang grammar backend: ``--grammar-backend llamay``, no patch to SGLang.

Installing llamay registers it: SGLang loads the ``sglang.srt.plugins`` entry point
``llamay = llamay.integrations.sglang:register`` in each of its processes, which adds ``llamay``
to the flag's choices and to SGLang's grammar-backend registry. Requests then constrain as with
any grammar backend: ``response_format`` ``json_schema`` compiles as llamay's JSON Schema
(``json_object`` arrives as the schema ``{"type": "object"}``; the native API's ``$$ANY$$`` is any
JSON value), ``ebnf`` as GBNF (llama.cpp's syntax, which xgrammar's EBNF shares). A refused
schema or grammar fails the request with llamay's message, naming the keyword and its JSON
Pointer, or the rule, line and column.

Not covered: a bare ``regex`` (llamay compiles regexes only as a JSON Schema ``pattern``, inside a
JSON string) and ``structural_tag``; both fail the request saying so. SGLang does not tell a
grammar the request's ``max_tokens``, so documents are not closed within the budget here. The
jump-forward hooks are not implemented (SGLang 0.5 no longer calls them).
"""

from __future__ import annotations

import json
from typing import Any

import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    InvalidGrammarObject,
    register_grammar_backend,
)

from .._core.automaton import CompiledGrammar
from .._core.matcher import Matcher
from ..backends.torch_mask import mask_scores
from ..chat.dialects import detect
from ..constraints import Constraints
from ..errors import LlamayError
from ..vocab import Vocabulary
from .row import Row

NAME = "llamay"
REGEX_REFUSED = ("llamay compiles a regex only as a JSON Schema pattern, inside a JSON string: send "
                 '{"type": "string", "pattern": ...} as a json_schema, or choose another grammar backend')
STRUCTURAL_TAG_REFUSED = "llamay's grammar backend does not compile structural tags"
#: The shift vector ``mask_scores`` keeps per device (``apply_vocab_mask`` is a static method).
_BITS: dict = {}


class LlamayGrammar(BaseGrammarObject):
    """One request's constraint: a matcher over the model's vocabulary."""

    def __init__(self, grammar: CompiledGrammar, vocab: Vocabulary, stops: tuple[int, ...]) -> None:
        super().__init__()
        self.grammar, self.vocab = grammar, vocab
        self.row = Row(Matcher(grammar, vocab), stops, None)

    def accept_token(self, token: int) -> None:
        """Take the token; ``ValueError`` (SGLang then aborts the request) where the constraint refuses it."""
        self.row.accept([token])
        if self.row.broken:
            raise ValueError(f"token {token} is not allowed by llamay's constraint here")

    def rollback(self, k: int) -> None:
        self.row.rollback(k)

    def is_terminated(self) -> bool:
        return self.row.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        self.row.fill(vocab_mask.numpy(), idx)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        mask_scores(logits, vocab_mask, logits.shape[1], _BITS)

    def copy(self) -> LlamayGrammar:
        """A fresh request on the same compiled grammar (SGLang caches one object per grammar and copies it)."""
        return LlamayGrammar(self.grammar, self.vocab, self.row.stops)


class LlamayGrammarBackend(BaseGrammarBackend):
    """Compiles requests' schemas and grammars for one model, through llamay's cache of compiled constraints."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> None:
        super().__init__()
        # SGLang stops on the model's own end tokens and hands them to accept_token: the matcher takes them as EOS
        self.vocab = Vocabulary.from_hf(tokenizer, size=max(vocab_size, len(tokenizer))).with_eos(eos_token_ids or ())
        self.stops = tuple(sorted(set(eos_token_ids or ())))
        self.constraints = Constraints(self.vocab, detect(getattr(tokenizer, "chat_template", None)))

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        if key_string == "$$ANY$$":
            return self._compile(json=True)
        try:
            schema = json.loads(key_string)
        except ValueError as e:
            return InvalidGrammarObject(f"the JSON schema is not valid JSON: {e}")
        return self._compile(schema=schema)

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        return self._compile(grammar=key_string)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return InvalidGrammarObject(REGEX_REFUSED)

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return InvalidGrammarObject(STRUCTURAL_TAG_REFUSED)

    def _compile(self, **fields: Any) -> BaseGrammarObject:
        try:
            grammar = self.constraints.pick(**fields)
        except LlamayError as e:
            return InvalidGrammarObject(str(e))
        assert grammar is not None  # every dispatch passes one constraint
        return LlamayGrammar(grammar, self.vocab, self.stops)


def create(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> LlamayGrammarBackend:
    """SGLang's grammar-backend factory, as its registry calls it."""
    return LlamayGrammarBackend(tokenizer, vocab_size, eos_token_ids)


def register() -> None:
    """The plugin entry point: ``llamay`` among ``--grammar-backend``'s choices and in the backend registry."""
    from sglang.srt.server_args import add_grammar_backend_choices

    add_grammar_backend_choices([NAME])
    register_grammar_backend(NAME, create)
