"""aten::zeros, ones, full and their *_like forms: tensors of one value, such as a recurrent
layer's initial state (`nn.GRU(x)` without h0). No kernel: the rule binds a float32 constant,
and a quantize of it (an int8 consumer's input) becomes an int8 constant filled with the
quantized value (the zero point for zeros), folded at export (lower/boundaries.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from torchmcu.ops.core import pattern

_VALUES = {"zeros": 0.0, "ones": 1.0, "zeros_like": 0.0, "ones_like": 1.0}


def fill_value(node: Any) -> float:
    """The value of a fill node: 0, 1 or full's fill_value (args[1] of full and full_like)."""
    name = str(node.target).split(".")[-2] if "." in str(node.target) else str(node.target)
    if name in _VALUES:
        return _VALUES[name]
    return float(node.args[1])


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_fill(k: Any, node: Any) -> None:
    val = node.meta.get("val")
    dtype = str(getattr(val, "dtype", "torch.float32"))
    if dtype != "torch.float32":
        raise k.unsupported(node, f"a constant of {dtype.removeprefix('torch.')} (float32 only)")
    value = fill_value(node)
    k.bind(node, k.constant_value(np.full(k.shape_of(node), value, np.float32)))


pattern(
    "aten::zeros.default",
    "aten::ones.default",
    "aten::full.default",
    "aten::zeros_like.default",
    "aten::ones_like.default",
    "aten::full_like.default",
    lower=lower_fill,
)
