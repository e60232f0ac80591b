"""llamay's constraints inside the engines teams scale to, without patching them.

``vllm``: a logits processor for vLLM's V1 engine (``--logits-processors``). ``sglang``: a
grammar backend registered through SGLang's plugin entry point (``--grammar-backend llamay``).
Each imports its engine, so neither is imported by ``import llamay``.
"""
