"""The rule for conv2d (regular and depthwise); linear's is its definition's (ops/defs/linear.py)."""

from __future__ import annotations

import numpy as np
import torch.fx

from torchmcu.lower.context import (
    Ctx,
    bind_output,
    call,
    input_value,
    kernel_scratch,
    new_int8,
)
from torchmcu.lower.errors import unsupported
from torchmcu.lower.graph import arg, bias_int32, int8_weights, pair, shape_of
from torchmcu.lower.layout import as_nhwc
from torchmcu.lower.requant import activation_range, output_quant, per_channel_requant


def emit_conv2d(ctx: Ctx, node: torch.fx.Node) -> None:
    x = as_nhwc(ctx, input_value(ctx, node.args[0]))
    stride = pair(arg(node, 3, "stride", [1, 1]), (1, 1))
    padding_arg = arg(node, 4, "padding", [0, 0])
    if isinstance(padding_arg, str):
        raise unsupported(node, f"padding='{padding_arg}' (give explicit padding)")
    padding = pair(padding_arg, (0, 0))
    dilation = pair(arg(node, 5, "dilation", [1, 1]), (1, 1))
    groups = int(arg(node, 6, "groups", 1))  # type: ignore[arg-type]
    out_shape = shape_of(node)
    if len(out_shape) != 4:
        raise unsupported(node, "only 2-D convolution on 4-D inputs")
    _, cin, _, _ = x.sizes
    cout = out_shape[1]
    w, w_scales = int8_weights(ctx.gm, node, node.args[1], cout)
    qs, act, qp = output_quant(ctx, node, allow_activation=True)
    act_min, act_max = activation_range(act, qp)
    in_scale, in_zp = float(x.scale), int(x.zero_point)  # type: ignore[arg-type]
    bias = bias_int32(ctx.gm, node, arg(node, 2, "bias", None), in_scale * w_scales, cout)
    mults, shifts = per_channel_requant(in_scale, w_scales, qp.scale)
    out = new_int8(ctx, node.name, out_shape, qp, nhwc=True)
    b = ctx.b
    depthwise = groups == cin and groups > 1 and w.shape[1] == 1 and cout % cin == 0
    if depthwise:
        op = "quantized_depthwise_conv2d"
        w_packed = np.ascontiguousarray(w.transpose(1, 2, 3, 0))  # [1, KH, KW, Cout]
    else:
        op = "quantized_conv2d"
        w_packed = np.ascontiguousarray(w.transpose(0, 2, 3, 1))  # OHWI
    scratch = kernel_scratch(ctx, node.name, op, x, tuple(w_packed.shape))
    # The builder numbers values in call order: keep the schema order while building.
    args = [x.vi, b.constant(w_packed), b.constant(bias), b.int_list(stride),
            b.int_list(padding), b.int_list(dilation)]
    if depthwise:
        args.append(b.int_(cout // cin))  # depth multiplier
    args += [
        b.int_(-in_zp), b.int_(qp.zero_point),
        b.constant(np.array(mults, dtype=np.int32)),
        b.constant(np.array(shifts, dtype=np.int32)), b.int_(act_min), b.int_(act_max),
        scratch,
    ]
    call(ctx, f"cortex_m::{op}", args, out.vi, node)
    bind_output(ctx, qs, act, out)
