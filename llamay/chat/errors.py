"""The chat layer's refusals: a template that cannot render, messages it cannot take, a call it cannot read."""

from __future__ import annotations

from ..errors import LlamayError

__all__ = ["MessageError", "TemplateError", "ToolCallError"]


class TemplateError(LlamayError):
    """A chat template that does not parse, raises, or reaches past the sandbox, naming the template."""


class MessageError(LlamayError):
    """A message or tool list that cannot be rendered, with the path of the offending field."""


class ToolCallError(LlamayError):
    """Generated text with a ``<tool_call>`` block that is not a call: the block is never returned as prose.

    The model wrote it, not the client, hence the 500 hint.
    """

    http_status = 500
