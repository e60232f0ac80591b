"""A packed int32 bitmask applied to a torch tensor of scores, on whatever device holds them.

Shared by every torch-based consumer of llamay's masks: transformers' logits processor here,
and the vLLM and SGLang integrations. On the CPU the mask goes through llamay's own kernel on a
numpy view of the scores (no copy); elsewhere it is unpacked with torch ops on the scores' device.
"""

from __future__ import annotations

import numpy as np
import torch

from .._core.bitmask import apply_bitmask


def mask_scores(scores: torch.Tensor, mask: np.ndarray | torch.Tensor, size: int, bits: dict) -> None:
    """``scores[r, i] = -inf`` wherever bit ``i`` of row ``r`` of the int32 ``mask`` is clear.

    Columns from ``size`` on are refused in every row. ``mask`` is a numpy array or a torch
    tensor on any device; ``bits`` is the caller's dict in which the shift vector is kept per device.
    """
    if isinstance(mask, torch.Tensor) and mask.device.type == "cpu":
        mask = mask.numpy()
    if scores.shape[1] > size:
        scores[:, size:] = -float("inf")
    if scores.device.type == "cpu" and scores.dtype in (torch.float32, torch.float16) and scores.is_contiguous():
        view = scores.detach().numpy()
        if view.shape[1] == size:
            apply_bitmask(view, mask)
        else:
            for r in range(view.shape[0]):  # a row of a wider matrix is contiguous; a column slice is not
                apply_bitmask(view[r, :size], mask[r])
        return
    shifts = bits.get(scores.device)
    if shifts is None:
        shifts = bits[scores.device] = torch.arange(32, dtype=torch.int32, device=scores.device)
    words = (mask if isinstance(mask, torch.Tensor) else torch.from_numpy(mask)).to(scores.device, non_blocking=True)
    width = min(size, scores.shape[1])
    allowed = ((words.unsqueeze(-1) >> shifts) & 1).bool().reshape(mask.shape[0], -1)[:, :width]
    scores[:, :width].masked_fill_(~allowed, -float("inf"))
