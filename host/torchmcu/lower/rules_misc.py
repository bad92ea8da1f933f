"""Rules for softmax and the reshape-like ops that only re-view bytes (constant padding is
torchmcu/ops/defs/pad.py's)."""

from __future__ import annotations

import math

import torch
import torch.fx

from torchmcu.lower.context import Ctx, alias, bind_output, call, input_value, new_int8
from torchmcu.lower.errors import unsupported
from torchmcu.lower.graph import shape_of
from torchmcu.lower.layout import as_contiguous
from torchmcu.lower.requant import output_quant, same_qparams
from torchmcu.quantize.qdq import is_q
from torchmcu.reference.quant import quantize_multiplier

_aten = torch.ops.aten

SOFTMAX_INPUT_INTEGER_BITS = 5


def emit_softmax(ctx: Ctx, node: torch.fx.Node) -> None:
    x = input_value(ctx, node.args[0])
    dim = int(node.args[1]) % max(x.rank, 1)  # type: ignore[arg-type]
    if dim != x.rank - 1:
        raise unsupported(node, f"softmax over dim {node.args[1]} (only the last dimension)")
    x = as_contiguous(ctx, x)
    qs, act, qp = output_quant(ctx, node, allow_activation=False)
    if qp.zero_point != -128 or not math.isclose(qp.scale, 1.0 / 256.0, rel_tol=1e-9):
        raise unsupported(node, "softmax output qparams must be scale 1/256, zero point -128")
    real = min(float(x.scale) * (1 << (31 - SOFTMAX_INPUT_INTEGER_BITS)), float(2**31 - 1))  # type: ignore[arg-type]
    mult, shift = quantize_multiplier(real)
    diff_min = -math.floor(
        ((1 << SOFTMAX_INPUT_INTEGER_BITS) - 1)
        * math.ldexp(1.0, 31 - SOFTMAX_INPUT_INTEGER_BITS) / math.ldexp(1.0, shift)
    )
    out = new_int8(ctx, node.name, x.sizes, qp, nhwc=False)
    b = ctx.b
    args = [x.vi, b.int_(-1), b.int_(x.zero_point), b.int_(qp.zero_point), b.int_(mult),  # type: ignore[arg-type]
            b.int_(shift), b.int_(diff_min)]
    call(ctx, "cortex_m::softmax", args, out.vi, node)
    bind_output(ctx, qs, act, out)


def emit_view(ctx: Ctx, node: torch.fx.Node) -> None:
    """flatten / view / reshape / squeeze / dropout: an alias of the same bytes."""
    x = input_value(ctx, node.args[0])
    out_shape = shape_of(node)
    if not any(is_q(u) for u in node.users):
        # PT2E puts no quantize between ops that share qparams (select -> reshape -> add)
        same = out_shape == x.sizes
        ctx.env[node] = x if same else alias(ctx, as_contiguous(ctx, x), out_shape, nhwc=False)
        return
    qs, act, qp = output_quant(ctx, node, allow_activation=False)
    if not same_qparams(x.scale, x.zero_point, qp):
        raise unsupported(node, "a reshape that changes qparams")
    if out_shape == x.sizes:
        out = x
    elif x.nhwc and not x.layout_free and len(out_shape) == 2 and out_shape[0] == x.sizes[0]:
        # flatten(1) of NHWC bytes: keep the bytes, remember their (h, w, c) order.
        out = alias(ctx, x, out_shape, nhwc=False, flatten_chw=tuple(x.sizes[1:]))
    else:
        out = alias(ctx, as_contiguous(ctx, x), out_shape, nhwc=False)
    bind_output(ctx, qs, act, out)
