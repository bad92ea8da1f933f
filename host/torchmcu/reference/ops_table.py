"""Reference semantics of the table activation and the slice copy (the LSTM's operators).

cortex_m::quantized_activation(input, lut): out = lut[input + 128], elementwise on int8
(ExecuTorch's operators.py semantics). torchmcu::slice_copy(self, dim, start, end, step):
the logical slice self[..., start:end:step, ...] along dim, any element type.
"""

from __future__ import annotations

import numpy as np


def quantized_activation(x: np.ndarray, lut: np.ndarray) -> np.ndarray:
    table = np.asarray(lut).reshape(-1)
    if table.dtype != np.int8 or table.size != 256:
        raise ValueError(f"quantized_activation: lut must be 256 int8 entries, got {table.size} "
                         f"{table.dtype}")
    if x.dtype != np.int8:
        raise ValueError(f"quantized_activation: input must be int8, got {x.dtype}")
    return table[x.astype(np.int32) + 128]


def slice_copy(x: np.ndarray, dim: int, start: int, end: int, step: int) -> np.ndarray:
    if not 0 <= dim < x.ndim:
        raise ValueError(f"slice_copy: dim {dim} out of range for rank {x.ndim}")
    if step < 1 or not 0 <= start <= end <= x.shape[dim]:
        raise ValueError(f"slice_copy: start {start}, end {end}, step {step} invalid for size "
                         f"{x.shape[dim]}")
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, end, step)
    return np.ascontiguousarray(x[tuple(index)])
