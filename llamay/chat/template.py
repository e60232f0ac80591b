"""A model's own Jinja chat template, rendered in jinja2's immutable sandbox as HF renders it.

The template comes with the model file, and a GGUF's template once gave code execution
in a popular server: it runs in ``ImmutableSandboxedEnvironment`` (no underscore
attributes, no mutation of the messages, no file or OS access). The environment matches
transformers' ``apply_chat_template``: ``trim_blocks``/``lstrip_blocks``, loop controls,
``raise_exception``, ``strftime_now``, a ``tojson`` with ``ensure_ascii=False`` and
``indent``, and ``{% generation %}`` kept as a plain block. ``{% do %}`` is enabled too.
Every failure (syntax, a raised message, a sandbox refusal, a Python error inside the
template) is a ``TemplateError`` naming the template.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any

from jinja2 import TemplateSyntaxError, meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension, do, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import VocabularyError
from ..modelfiles.gguf import read_metadata, required_field
from .dialects import Dialect, detect
from .errors import TemplateError
from .escape import ControlTexts, split_parts
from .tools import adapt_messages, normalize_messages, normalize_tools

__all__ = ["DEFAULT_TEMPLATE", "ChatTemplate"]

#: ChatML, for models that ship no template (base models such as gemma-3-270m). BOS is left
#: to the tokenizer; ``<|im_end|>`` may be plain text to such a model, hence ``ChatTemplate.stop``.
DEFAULT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_DEFAULT_STOP = ("<|im_end|>",)

_TEMPLATE_KEY = "tokenizer.chat_template"
_BOS_KEY, _EOS_KEY, _TOKENS_KEY = "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.tokens"


class _Raised(Exception):
    """The template's own ``raise_exception(message)``: its refusal of the conversation."""


def _raise_exception(message: Any) -> None:
    raise _Raised(str(message))


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)  # local time, as HF's


class _GenerationTag(Extension):
    """HF's ``{% generation %}`` marks assistant spans for training masks; rendering keeps the body."""

    tags = frozenset({"generation"})

    def parse(self, parser: Any) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, refusing an unsafe attribute at once instead of rendering it as ``""``."""

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        raise SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe")


_ENV = _Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, loopcontrols, do])
_ENV.filters["tojson"] = _tojson
_ENV.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)


class ChatTemplate:
    """A chat template compiled once per model; ``render`` turns one request's messages into the prompt.

    ``is_default`` says the model shipped no template and ChatML stands in (log it);
    ``stop`` then holds ``<|im_end|>``, which ends a turn as text. ``renders_tools`` and
    ``renders_tool_calls`` say whether the template itself uses ``tools`` and messages'
    ``tool_calls``; where it does not, ``render`` writes them in the Hermes dialect.
    ``control_tokens`` are the texts the model's tokenizer reads as control tokens: where the
    client's text spells one, ``render_parts`` keeps it text (``llamay.chat.escape``).
    """

    def __init__(
        self,
        source: str | None,
        *,
        bos_token: str = "",
        eos_token: str = "",
        origin: str = "chat template",
        control_tokens: Iterable[str] = (),
        tool_dialect: Dialect | None = None,
    ) -> None:
        self.is_default = not source
        self.source = source or DEFAULT_TEMPLATE
        self.dialect = tool_dialect or detect(source)
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.origin = origin
        self.control = ControlTexts(control_tokens)
        self.stop = _DEFAULT_STOP if self.is_default else ()
        try:
            tree = _ENV.parse(self.source)
            self._template = _ENV.from_string(tree)  # unknown filters and tests are found here
        except TemplateSyntaxError as e:
            raise TemplateError(
                f"the chat template does not parse: {e.message} - at {origin}, line {e.lineno}"
            ) from None
        self.renders_tools = "tools" in meta.find_undeclared_variables(tree)
        self.renders_tool_calls = any(
            getattr(node, "attr", None) == "tool_calls" or getattr(node, "value", None) == "tool_calls"
            for node in tree.find_all((nodes.Getattr, nodes.Const))
        )

    @classmethod
    def from_gguf(cls, path: str | PathLike[str]) -> ChatTemplate:
        """The template in a GGUF's ``tokenizer.chat_template``, with its BOS and EOS token texts.

        A file without the key gets the default (``is_default``). Reads only metadata, the
        token texts included (0.1-0.3 s for 262k tokens).
        """
        path = Path(path)
        found = read_metadata(path, {_TEMPLATE_KEY, _BOS_KEY, _EOS_KEY, _TOKENS_KEY})
        source = required_field(found, _TEMPLATE_KEY, str, path) if _TEMPLATE_KEY in found else None
        bos, eos = (_token_text(found, key, path) for key in (_BOS_KEY, _EOS_KEY))
        return cls(source, bos_token=bos, eos_token=eos, origin=str(path))

    def render(
        self,
        messages: Iterable[Mapping[str, Any]],
        tools: Iterable[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        **context: Any,
    ) -> str:
        """The prompt text for OpenAI-style ``messages`` and ``tools``, special tokens written as text.

        ``context`` reaches the template as further variables (``enable_thinking=False``...).
        Raises ``MessageError`` for malformed messages or tools, ``TemplateError`` when the
        template fails on them.
        """
        parts = self.render_parts(messages, tools, add_generation_prompt=add_generation_prompt, **context)
        return "".join(text for text, _ in parts)

    def render_parts(
        self,
        messages: Iterable[Mapping[str, Any]],
        tools: Iterable[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        **context: Any,
    ) -> list[tuple[str, bool]]:
        """The prompt as ``(text, special)`` parts for ``Backend.tokenize``, joined they are ``render``'s text.

        ``special`` parts are the template's text, whose control-token text is read as tokens;
        the others are the client's text that spells a control token, each alone, to be read as
        text. A prompt whose messages and tools spell none is one part.
        """
        tools = normalize_tools(tools)
        keep_out = self.source + self.bos_token + self.eos_token
        (messages, tools), placeholders = self.control.escape((normalize_messages(messages), tools), keep_out)
        adapted = adapt_messages(
            messages,
            tools,
            renders_tools=self.renders_tools,
            renders_tool_calls=self.renders_tool_calls,
            dialect=self.dialect,
        )
        try:
            prompt = self._template.render(
                messages=adapted,
                tools=tools if tools and self.renders_tools else None,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                **context,
            )
        except _Raised as e:
            raise TemplateError(f"the chat template refused the conversation: {e} - at {self.origin}") from None
        except SecurityError as e:
            raise TemplateError(f"the sandbox refused what the chat template asked: {e} - at {self.origin}") from None
        except Exception as e:  # a template is a program: TypeError, UndefinedError, RecursionError ...
            raise TemplateError(f"the chat template failed: {type(e).__name__}: {e} - at {self.origin}") from None
        return split_parts(prompt, placeholders)

    def __repr__(self) -> str:
        return (
            f"ChatTemplate(origin={self.origin!r}, is_default={self.is_default},"
            f" renders_tools={self.renders_tools}, renders_tool_calls={self.renders_tool_calls})"
        )


def _token_text(found: Mapping[str, Any], key: str, path: Path) -> str:
    """The text of the token a metadata key names, ``""`` where the key is absent."""
    if key not in found:
        return ""
    i = required_field(found, key, int, path)
    tokens = required_field(found, _TOKENS_KEY, list, path)
    if not 0 <= i < len(tokens) or not isinstance(tokens[i], str):
        raise VocabularyError(f"{key} {i} is not one of the {len(tokens)} token ids - at {path}")
    return tokens[i]
