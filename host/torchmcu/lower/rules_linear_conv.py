"""Rules for the weighted ops: conv2d (regular and depthwise) and linear."""

from __future__ import annotations

import numpy as np
import torch
import torch.fx

from torchmcu.lower.context import (
    Ctx,
    alias,
    bind_output,
    call,
    input_value,
    kernel_scratch,
    new_int8,
)
from torchmcu.lower.errors import unsupported
from torchmcu.lower.graph import arg, attr_tensor, pair, quantized_constant, shape_of
from torchmcu.lower.layout import as_contiguous, as_nhwc
from torchmcu.lower.requant import activation_range, output_quant, per_channel_requant
from torchmcu.quantize.qdq import is_dq


def _bias_int32(ctx: Ctx, node: torch.fx.Node, bias_node: object, acc_scales: np.ndarray,
                cout: int) -> np.ndarray:
    """The bias as int32 at the accumulator scale (zeros when the op has none)."""
    if bias_node is None:
        return np.zeros(cout, dtype=np.int32)
    if is_dq(bias_node):
        qc = quantized_constant(ctx.gm, bias_node, "bias")
        if qc.values.dtype == np.int32 and np.allclose(
                np.broadcast_to(qc.scales, acc_scales.shape), acc_scales, rtol=1e-6, atol=0):
            return qc.values.reshape(-1).astype(np.int32)
        # A bias shared by several calls (an LSTM's recurrent linear at every step) is
        # quantized once, at the first call's scale: re-round it to this call's.
        real = (qc.values.astype(np.float64) - qc.zero_points) * qc.scales
    elif isinstance(bias_node, torch.fx.Node) and bias_node.op == "get_attr":
        real = attr_tensor(ctx.gm, bias_node).double().numpy()
    else:
        raise unsupported(node, "bias is not a constant")
    q = np.round(real.reshape(-1) / acc_scales)
    return np.clip(q, -(2**31), 2**31 - 1).astype(np.int32)


def _weights(ctx: Ctx, node: torch.fx.Node, w_node: object, cout: int):
    """(int8 weight values, one scale per output channel); rejects what the kernels can't run."""
    if not is_dq(w_node):
        raise unsupported(node, "its weight is not an int8 quantized constant")
    qc = quantized_constant(ctx.gm, w_node, "weight")
    if qc.values.dtype != np.int8:
        raise unsupported(node, f"weight dtype {qc.values.dtype} (int8 required)")
    if np.any(qc.zero_points != 0):
        raise unsupported(node, "asymmetric weights (weight zero point must be 0)")
    if qc.axis is not None and qc.axis != 0:
        raise unsupported(node, f"per-channel weight scales along axis {qc.axis}")
    scales = qc.scales if qc.scales.size == cout else np.full(cout, qc.scales[0])
    return qc.values, scales


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
    w, w_scales = _weights(ctx, node, node.args[1], cout)
    qs, act, qp = output_quant(ctx, node, allow_activation=True)
    act_min, act_max = activation_range(act, qp)
    in_scale, in_zp = float(x.scale), int(x.zero_point)  # type: ignore[arg-type]
    bias = _bias_int32(ctx, node, arg(node, 2, "bias", None), in_scale * w_scales, cout)
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


def emit_linear(ctx: Ctx, node: torch.fx.Node) -> None:
    x = input_value(ctx, node.args[0])
    out_shape = shape_of(node)
    cout = out_shape[-1]
    w, w_scales = _weights(ctx, node, node.args[1], cout)
    if x.flatten_chw is not None:
        # The input is an NHWC tensor flattened without a transpose: reorder the weight
        # columns from (c, h, w) to (h, w, c) instead of moving the activations.
        c, h, wd = x.flatten_chw
        w = np.ascontiguousarray(w.reshape(cout, c, h, wd).transpose(0, 2, 3, 1).reshape(cout, -1))
        x = x.with_(flatten_chw=None)
    elif x.nhwc and not x.layout_free:
        x = as_contiguous(ctx, x)
    qs, act, qp = output_quant(ctx, node, allow_activation=True)
    act_min, act_max = activation_range(act, qp)
    in_scale, in_zp = float(x.scale), int(x.zero_point)  # type: ignore[arg-type]
    bias = _bias_int32(ctx, node, arg(node, 2, "bias", None), in_scale * w_scales, cout)
    mults, shifts = per_channel_requant(in_scale, w_scales, qp.scale)
    if len(set(zip(mults, shifts))) == 1:
        mults, shifts = mults[:1], shifts[:1]
    out = new_int8(ctx, node.name, out_shape, qp, nhwc=False)
    x_in = alias(ctx, x, x.sizes, nhwc=False) if x.nhwc else x
    b = ctx.b
    if ctx.opts.linear_kernel_sum:
        ksum = (-in_zp) * w.astype(np.int64).sum(axis=1) + bias.astype(np.int64)
        bias_arg, ksum_arg = b.none(), b.constant(ksum.astype(np.int32).reshape(1, cout))
    else:
        bias_arg, ksum_arg = b.constant(bias), b.none()
    args = [
        x_in.vi, b.constant(np.ascontiguousarray(w)), bias_arg, ksum_arg, b.int_(-in_zp),
        b.int_(0), b.int_(qp.zero_point), b.int_list(mults), b.int_list(shifts),
        b.int_(act_max), b.int_(act_min),
    ]
    call(ctx, "cortex_m::quantized_linear", args, out.vi, node)
    bind_output(ctx, qs, act, out)
