"""The chat layer: a model's own template in a sandbox, tool-call dialects, and call parsing.

Re-exports only.
"""

from .calls import ToolCall
from .dialects import DIALECTS, CallStream, Dialect, detect, named, parse_tool_calls
from .errors import MessageError, TemplateError, ToolCallError
from .template import DEFAULT_TEMPLATE, ChatTemplate
from .tools import adapt_messages, hermes_system_block, normalize_messages, normalize_tools

__all__ = [
    "DEFAULT_TEMPLATE",
    "DIALECTS",
    "CallStream",
    "ChatTemplate",
    "Dialect",
    "MessageError",
    "TemplateError",
    "ToolCall",
    "ToolCallError",
    "adapt_messages",
    "detect",
    "hermes_system_block",
    "named",
    "normalize_messages",
    "normalize_tools",
    "parse_tool_calls",
]
