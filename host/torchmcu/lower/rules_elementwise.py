"""Rules for the binary elementwise ops: add and mul (equal shapes or a per-channel operand)."""

from __future__ import annotations

import math

import torch
import torch.fx

from torchmcu.lower.context import Ctx, bind_output, call, input_value, new_int8
from torchmcu.lower.errors import unsupported
from torchmcu.lower.graph import shape_of
from torchmcu.lower.layout import as_contiguous, as_nhwc
from torchmcu.lower.requant import activation_range, output_quant
from torchmcu.lower.values import LValue
from torchmcu.reference.quant import quantize_multiplier, single_rounding_multiplier


def _binary_operands(ctx: Ctx, node: torch.fx.Node) -> tuple[LValue, LValue, list[int], bool]:
    """Both operands in one common layout -> (a, c, output sizes, output is NHWC)."""
    a, c = input_value(ctx, node.args[0]), input_value(ctx, node.args[1])
    out_shape = shape_of(node)
    if a.sizes == c.sizes == out_shape:
        if a.rank == 4 and (a.nhwc or c.nhwc):
            a, c = as_nhwc(ctx, a), as_nhwc(ctx, c)
            return a, c, out_shape, True
        a, c = as_contiguous(ctx, a), as_contiguous(ctx, c)
        return a, c, out_shape, False
    if len(out_shape) == 4:
        small = c if c.sizes != out_shape else a
        big = a if small is c else c
        if big.sizes == out_shape and small.rank == 4 and small.sizes[1] == out_shape[1] and \
                math.prod(small.sizes) == out_shape[1]:
            return as_nhwc(ctx, a), as_nhwc(ctx, c), out_shape, True
    raise unsupported(node, f"broadcasting {a.sizes} with {c.sizes} (only equal shapes or a "
                      "per-channel [1,C,1,1] operand)")


def emit_add(ctx: Ctx, node: torch.fx.Node) -> None:
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        raise unsupported(node, f"alpha={alpha}")
    a, c, out_shape, nhwc = _binary_operands(ctx, node)
    qs, act, qp = output_quant(ctx, node, allow_activation=True)
    act_min, act_max = activation_range(act, qp)
    s1, s2 = float(a.scale), float(c.scale)  # type: ignore[arg-type]
    twice_max = 2.0 * max(s1, s2)
    # Operand rescales with shift 0 round once instead of twice, so each is one TOSA
    # RESCALE that Vela can fold into the NPU's add (docs/operators.md).
    m1, sh1 = single_rounding_multiplier(s1 / twice_max)
    m2, sh2 = single_rounding_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / (qp.scale * (1 << 20)))
    out = new_int8(ctx, node.name, out_shape, qp, nhwc=nhwc)
    b = ctx.b
    args = [
        a.vi, b.int_(a.zero_point), b.int_(m1), b.int_(sh1),  # type: ignore[arg-type]
        c.vi, b.int_(c.zero_point), b.int_(m2), b.int_(sh2),  # type: ignore[arg-type]
        b.int_(qp.zero_point), b.int_(mo), b.int_(sho), b.int_(act_min), b.int_(act_max),
    ]
    call(ctx, "cortex_m::quantized_add", args, out.vi, node)
    bind_output(ctx, qs, act, out)


def emit_mul(ctx: Ctx, node: torch.fx.Node) -> None:
    a, c, out_shape, nhwc = _binary_operands(ctx, node)
    qs, act, qp = output_quant(ctx, node, allow_activation=False)
    mo, sho = single_rounding_multiplier(float(a.scale) * float(c.scale) / qp.scale)  # type: ignore[arg-type]
    out = new_int8(ctx, node.name, out_shape, qp, nhwc=nhwc)
    b = ctx.b
    args = [
        a.vi, b.int_(a.zero_point), c.vi, b.int_(c.zero_point),  # type: ignore[arg-type]
        b.int_(qp.zero_point), b.int_(mo), b.int_(sho),
    ]
    call(ctx, "cortex_m::quantized_mul", args, out.vi, node)
    bind_output(ctx, qs, act, out)
