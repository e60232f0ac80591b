"""Llama 3.1 and 3.2: the bare object ``{"name": …, "parameters": …}``, results in the ``ipython`` role.

``<|python_tag|>`` (a control token) may open a call, as the family does for its built-in tools;
a turn that expects a tool result ends with ``<|eom_id|>``, an end-of-generation token. Detected
by the ``ipython`` header its templates write for tool results. One call per turn: the published
templates raise "This model only supports single tool-calls at once!" for an assistant turn
with more, so a second call could never be rendered back.
"""

from .dialect import Dialect

LLAMA3 = Dialect("llama3", detect=("<|start_header_id|>ipython<|end_header_id|>",), open="<|python_tag|>",
                 open_optional=True, arguments_key="parameters", parallel=False)
