import numpy as np
import numpy.typing as npt

def allocate_bitmask(vocab_size: int, batch: int = 0) -> npt.NDArray[np.int32]: ...
def apply_bitmask(logits: npt.NDArray[np.floating], bitmask: npt.NDArray[np.int32]) -> None:
    """In place; releases the GIL."""
