"""Reference semantics of the table activation and the slice copy (the LSTM's operators),
defined once in torchmcu/ops/defs/activation_table.py and slice_copy.py, re-exported here.

cortex_m::quantized_activation(input, lut): out = lut[input + 128], elementwise on int8
(ExecuTorch's operators.py semantics). torchmcu::slice_copy(self, dim, start, end, step):
the logical slice self[..., start:end:step, ...] along dim, any element type.
"""

from __future__ import annotations

from torchmcu.ops.defs.activation_table import quantized_activation
from torchmcu.ops.defs.slice_copy import slice_copy

__all__ = ["quantized_activation", "slice_copy"]
