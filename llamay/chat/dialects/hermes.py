"""Hermes: each call between ``<tool_call>`` and ``</tool_call>`` (Qwen2.5, Hermes 2 and 3).

Also the dialect of templates that render no tools (SmolLM2, gemma-3): llamay then lists the
tools in a Hermes system block and writes calls and results as Hermes text (``chat.tools``).
Qwen2.5's vocabulary has both markers as single user-defined tokens (151657, 151658).
"""

from .dialect import Dialect

HERMES = Dialect("hermes", detect=("<tool_call>",), open="<tool_call>", close="</tool_call>",
                 instruction="For each function call, return a json object with function name and arguments"
                             " within <tool_call></tool_call> XML tags:")
