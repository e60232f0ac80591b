"""The chat layer: a model's own template in a sandbox, Hermes tool prompts, and call parsing.

Re-exports only.
"""

from .calls import CALL_CLOSE, CALL_OPEN, ToolCall, ToolCallStream, parse_tool_calls
from .errors import MessageError, TemplateError, ToolCallError
from .template import DEFAULT_TEMPLATE, ChatTemplate
from .tools import adapt_messages, hermes_system_block, normalize_messages, normalize_tools

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "DEFAULT_TEMPLATE",
    "ChatTemplate",
    "MessageError",
    "TemplateError",
    "ToolCall",
    "ToolCallError",
    "ToolCallStream",
    "adapt_messages",
    "hermes_system_block",
    "normalize_messages",
    "normalize_tools",
    "parse_tool_calls",
]
