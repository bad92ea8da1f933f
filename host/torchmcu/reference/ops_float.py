"""float32 reference semantics of the portable aten:: operators (docs/operators.md, "Portable
fp32 operators"), defined once in torchmcu/ops/defs/portable_*.py and re-exported here. Each
function takes the schema's arguments in order, without the out tensors, and returns the
result(s) as logical (e.g. NCHW) arrays."""

from __future__ import annotations

from torchmcu.ops.defs.portable_copy import cat, flip, permute_copy, view_copy
from torchmcu.ops.defs.portable_elementwise import add, gelu, mul, relu, sigmoid, tanh
from torchmcu.ops.defs.portable_matmul import addmm, convolution, mm
from torchmcu.ops.defs.portable_reduce import _softmax, mean, native_layer_norm

__all__ = [
    "_softmax",
    "add",
    "addmm",
    "cat",
    "convolution",
    "flip",
    "gelu",
    "mean",
    "mm",
    "mul",
    "native_layer_norm",
    "permute_copy",
    "relu",
    "sigmoid",
    "tanh",
    "view_copy",
]
