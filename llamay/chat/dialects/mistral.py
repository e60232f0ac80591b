"""Mistral: ``[TOOL_CALLS]`` (a control token) and a JSON array of calls; ids of 9 alphanumerics."""

from .dialect import Dialect

MISTRAL = Dialect("mistral", detect=("[TOOL_CALLS]",), open="[TOOL_CALLS]", listed=True, short_ids=True)
