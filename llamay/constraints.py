"""A request's constraint, compiled once per content: the one cache every entry point shares.

The engine (``Model.chat``/``complete``) and the integrations that run inside other engines
(vLLM's logits processor, SGLang's grammar backend) take a request's constraint fields to a
``CompiledGrammar`` through ``Constraints.pick``: at most one constraint, compiled within one
compile budget, and kept by content, so an agent that resends the same schema or tools every
turn compiles them once.
"""

from __future__ import annotations

import json as _json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from ._core.automaton import CompiledGrammar
from .chat.dialects import Dialect
from .chat.tool_grammar import compile_tool_calls
from .compile_budget import budget
from .errors import SchemaError, UsageError
from .grammars.gbnf import compile_gbnf
from .grammars.jsonschema.compiler import any_json, compile_json_schema
from .grammars.lexicon import compile_lexicon
from .options import DEFAULT, Limits, Tuning
from .vocab import Vocabulary

#: Compiled constraints kept, least recently used first out.
CACHE_SIZE = 64


class Constraints:
    """Compiled constraints for one vocabulary and tool dialect, kept by content; thread-safe.

    ``vocab`` spells the dialect's markers as tokens where they are one (``None``: as text,
    which is enough to find a refusal); ``limits`` and ``tuning`` are what every constraint
    compiles under.
    """

    def __init__(self, vocab: Vocabulary | None, dialect: Dialect, *, limits: Limits = DEFAULT.limits,
                 tuning: Tuning = DEFAULT.tuning, size: int = CACHE_SIZE) -> None:
        self.vocab = vocab
        self.dialect = dialect
        self.limits = limits
        self.tuning = tuning
        self.size = size
        self._compiled: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()

    def pick(self, schema: Any = None, grammar: str | None = None, lexicon: Any = None, json: bool | str = False,
             tools: list[dict] | None = None, mode: str = "none", name: str | None = None,
             parallel: bool | None = None) -> CompiledGrammar | None:
        """The request's one constraint (None: free text), compiled within the compile budget.

        ``tools`` (OpenAI's shape, normalized) under ``mode`` other than ``"none"`` is a
        constraint of its own, which ``schema`` or ``json`` may join; any other two are a
        ``UsageError``. A refusal raises ``SchemaError`` or ``GrammarError``.
        """
        chosen = [k for k, v in (("schema", schema), ("grammar", grammar), ("lexicon", lexicon)) if v is not None]
        chosen += ["json"] if json else []
        if tools and mode != "none" and chosen and chosen != ["schema"] and chosen != ["json"]:
            chosen.append("tools")
        if len(chosen) > 1:
            raise UsageError(f"one constraint at a time: {' and '.join(chosen)} were both given")
        with budget(self.limits.compile_seconds):
            return self._compile(schema, grammar, lexicon, json, tools, mode, name, parallel)

    def _compile(self, schema, grammar, lexicon, json_, tools, mode, name, parallel) -> CompiledGrammar | None:
        bounds = {"limits": self.limits, "tuning": self.tuning}
        others = schema is not None or grammar is not None or lexicon is not None or bool(json_)
        if tools and (mode != "none" or not others):  # under "none", free text in which no call opens
            specs = [{"name": t["function"]["name"], "parameters": t["function"].get("parameters", {})} for t in tools]
            document = {"schema": schema} if schema is not None else {"json": json_} if json_ else {}
            if document.get("json") not in (None, True, "object"):
                raise UsageError(f'json must be True (any JSON value) or "object", got {json_!r}')
            key = ("tools", self.dialect.name, mode, name, parallel, _canonical(specs), _canonical(document))
            return self._cached(key, lambda: compile_tool_calls(
                specs, mode, name=name, parallel=parallel, dialect=self.dialect, vocab=self.vocab,
                **document, **bounds))
        if schema is not None:
            return self._cached(("schema", _canonical(schema)), lambda: compile_json_schema(schema, **bounds))
        if grammar is not None:
            if not isinstance(grammar, str):
                raise UsageError("grammar must be GBNF text")
            return self._cached(("gbnf", grammar), lambda: compile_gbnf(grammar, **bounds))
        if lexicon is not None:
            words = None if lexicon is True else list(lexicon)
            return self._cached(("lexicon", _canonical(words)), lambda: compile_lexicon(words, limits=self.limits))
        if json_:
            if json_ not in (True, "object"):
                raise UsageError(f'json must be True (any JSON value) or "object", got {json_!r}')
            object_only = json_ == "object"
            return self._cached(("json", object_only), lambda: any_json(object_only=object_only, **bounds))
        return None

    def _cached(self, key: tuple, build: Callable[[], CompiledGrammar]) -> CompiledGrammar:
        with self._lock:
            hit = self._compiled.get(key)
            if hit is not None:
                self._compiled.move_to_end(key)
                return hit
        compiled = build()
        with self._lock:
            self._compiled[key] = compiled
            while len(self._compiled) > self.size:
                self._compiled.popitem(last=False)
        return compiled


def tool_mode(choice: Any, tools: list[dict]) -> tuple[str, str | None]:
    """OpenAI's ``tool_choice`` as (mode, tool name)."""
    if choice is None or choice == "auto":
        return "auto", None
    if choice in ("none", "required"):
        return choice, None
    if isinstance(choice, Mapping) and choice.get("type") == "function" and isinstance(choice.get("function"), Mapping):
        name = choice["function"].get("name")
        names = [t["function"]["name"] for t in tools]
        if name not in names:
            raise UsageError(f"tool_choice names {name!r}, which is not among the offered tools {names}")
        return "named", name
    raise UsageError(f'tool_choice must be "auto", "none", "required" or a named function, got {choice!r}')


def _canonical(value: Any) -> str:
    """A constraint's cache key; a value nested past what Python's serializer walks is refused here, as MAX_DEPTH."""
    try:
        return _json.dumps(value, sort_keys=False, separators=(",", ":"), ensure_ascii=False)
    except RecursionError:
        raise SchemaError("the constraint nests too deeply to read", keyword="MAX_DEPTH") from None
