"""The float32 values of the nodes the quantizer left in float: what the fp32 rules (a Pattern's
`lower_float`, defined in torchmcu.ops.defs.portable_*) get through the Kit.

A node runs in float when its annotation record says quantized=False (or when it reads a float
value directly, e.g. the ReLU after a conv forced to float). Float tensors are contiguous in
PyTorch's logical order (NCHW for 4-D). At an int8 -> float boundary the int8 value is made
contiguous first (cortex_m::transpose of int8 bytes, once per value, cached) and then
dequantized; the way back is a quantize to a contiguous int8 tensor that the next int8 rule
transposes to NHWC if it needs to. Moving the layout on the int8 side moves 1 byte per element
instead of 4 (permute_copy of float32) and its scratch buffer is a quarter the size. Weights of
float ops are stored as float32 constants (a dequantized weight is dequantized here, once).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.fx

from torchmcu.lower.boundaries import dequantized
from torchmcu.lower.builder import nbytes_of
from torchmcu.lower.context import Ctx
from torchmcu.lower.errors import unsupported
from torchmcu.lower.graph import attr_tensor, quantized_constant
from torchmcu.lower.values import LValue
from torchmcu.pte.program import ScalarType
from torchmcu.quantize.qdq import is_dq

FLOAT = ScalarType.FLOAT


def new_float(ctx: Ctx, hint: str, sizes: Sequence[int]) -> LValue:
    sizes = list(sizes)
    key = ctx.b.new_buffer(hint, nbytes_of(FLOAT, sizes))
    return LValue(ctx.b.planned(key, FLOAT, sizes), key, sizes, FLOAT)


def constant_array(ctx: Ctx, node: torch.fx.Node) -> np.ndarray:
    """A float32 weight: a plain constant, or a quantized one dequantized here."""
    if node.op == "get_attr":
        return attr_tensor(ctx.gm, node).to(torch.float32).numpy()
    qc = quantized_constant(ctx.gm, node, "constant of a float op")
    values = qc.values.astype(np.float64)
    if qc.axis is None:
        out = (values - qc.zero_points[0]) * qc.scales[0]
    else:
        shape = [1] * values.ndim
        shape[qc.axis] = -1
        out = (values - qc.zero_points.reshape(shape)) * qc.scales.reshape(shape)
    return out.astype(np.float32)


def _is_constant(node: object) -> bool:
    return isinstance(node, torch.fx.Node) and (
        node.op == "get_attr" or (is_dq(node) and node.args[0].op == "get_attr")  # type: ignore[union-attr]
    )


def float_input(ctx: Ctx, node: object) -> LValue:
    """The float32 contiguous value of an argument: dequantizing an int8 one (cached)."""
    if _is_constant(node):
        arr = constant_array(ctx, node)  # type: ignore[arg-type]
        return LValue(ctx.b.constant(arr), "", list(arr.shape), FLOAT)
    if not isinstance(node, torch.fx.Node) or node not in ctx.env:
        raise unsupported(
            ctx.current,
            f"its input {node} is neither a value of the program nor "  # type: ignore[arg-type]
            "a constant (a float program input is not supported yet)",
        )
    v = ctx.env[node]
    return v if v.scalar_type == FLOAT else dequantized(ctx, v)
