"""Reference semantics of the elementwise operators (docs/operators.md), defined once in
torchmcu/ops/defs/elementwise.py (add, mul) and quantize.py (quantize/dequantize_per_tensor)
and re-exported here.

Arrays are numpy arrays holding the tensors' values; for these operators the
layout does not matter as long as all operands share it, and a per-channel
operand of add/mul is passed so that numpy broadcasting lines its channel axis
up with the other operand's (for NHWC memory: shape (C,)).
"""

from __future__ import annotations

from torchmcu.ops.defs.elementwise import quantized_add, quantized_mul
from torchmcu.ops.defs.quantize import dequantize_per_tensor, quantize_per_tensor
from torchmcu.ops.intmath import check_activation as _check_activation  # noqa: F401 (ops_linear_conv)
from torchmcu.ops.intmath import check_int as _check_int  # noqa: F401 (ops_linear_conv)

__all__ = [
    "dequantize_per_tensor",
    "quantize_per_tensor",
    "quantized_add",
    "quantized_mul",
]
