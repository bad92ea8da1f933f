"""Reference semantics of the table activation and the slice copy (the LSTM's operators).

cortex_m::quantized_activation(input, lut): out = lut[input + 128], elementwise on int8
(ExecuTorch's operators.py semantics). torchmcu::slice_copy(self, dim, start, end, step):
the logical slice self[..., start:end:step, ...] along dim, any element type (defined in
torchmcu/ops/defs/slice_copy.py, re-exported here).
"""

from __future__ import annotations

import numpy as np

from torchmcu.ops.defs.slice_copy import slice_copy  # noqa: F401 (defined once, in the registry)


def quantized_activation(x: np.ndarray, lut: np.ndarray) -> np.ndarray:
    table = np.asarray(lut).reshape(-1)
    if table.dtype != np.int8 or table.size != 256:
        raise ValueError(f"quantized_activation: lut must be 256 int8 entries, got {table.size} "
                         f"{table.dtype}")
    if x.dtype != np.int8:
        raise ValueError(f"quantized_activation: input must be int8, got {x.dtype}")
    return table[x.astype(np.int32) + 128]
