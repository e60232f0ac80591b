"""Granite 3: ``<|tool_call|>`` (a control token) and a JSON array of calls."""

from .dialect import Dialect

GRANITE = Dialect("granite", detect=("<|tool_call|>",), open="<|tool_call|>", listed=True)
