"""Rules for pooling: max_pool2d, avg_pool2d, and global average (adaptive_avg_pool2d, mean)."""

from __future__ import annotations

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
from torchmcu.lower.graph import QParams, arg, pair, shape_of
from torchmcu.lower.layout import as_nhwc
from torchmcu.lower.requant import activation_range, output_quant, same_qparams
from torchmcu.lower.values import LValue
from torchmcu.reference.quant import quantize_multiplier

_aten = torch.ops.aten


def _check_same_qparams(node: torch.fx.Node, x: LValue, qp: QParams) -> None:
    if not same_qparams(x.scale, x.zero_point, qp):
        raise unsupported(node, "pooling needs equal input and output qparams (annotate it with "
                          "torchmcu's quantizer)")


def _window(node: torch.fx.Node) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(kernel, stride, padding) of a max/avg pool node; stride defaults to the kernel."""
    kernel = pair(arg(node, 1, "kernel_size", None), (1, 1))
    stride = pair(arg(node, 2, "stride", None) or list(kernel), kernel)
    padding = pair(arg(node, 3, "padding", 0), (0, 0))
    return kernel, stride, padding


def emit_max_pool2d(ctx: Ctx, node: torch.fx.Node) -> None:
    x = as_nhwc(ctx, input_value(ctx, node.args[0]))
    kernel, stride, padding = _window(node)
    dilation = pair(arg(node, 4, "dilation", 1), (1, 1))
    ceil_mode = bool(arg(node, 5, "ceil_mode", False))
    if dilation != (1, 1) or ceil_mode:
        raise unsupported(node, "max pooling with dilation or ceil_mode")
    qs, act, qp = output_quant(ctx, node, allow_activation=True)
    _check_same_qparams(node, x, qp)
    act_min, act_max = activation_range(act, qp)
    out = new_int8(ctx, node.name, shape_of(node), qp, nhwc=True)
    b = ctx.b
    args = [
        x.vi, b.int_list(kernel), b.int_list(stride), b.int_list(padding), b.int_list(dilation),
        b.bool_(False), b.int_(qp.zero_point), b.int_(qp.zero_point), b.int_(act_min),
        b.int_(act_max),
    ]
    call(ctx, "cortex_m::quantized_max_pool2d", args, out.vi, node)
    bind_output(ctx, qs, act, out)


def _avg_pool(ctx: Ctx, node: torch.fx.Node, x: LValue, kernel: tuple[int, int],
              stride: tuple[int, int], padding: tuple[int, int], ceil_mode: bool,
              count_include_pad: bool, out_sizes: list[int], qp: QParams) -> LValue:
    """Emit the avg pool (after an explicit pad when padding counts) and return its output."""
    _check_same_qparams(node, x, qp)
    b = ctx.b
    if count_include_pad and padding != (0, 0):
        # Materialise the zero-point padding so the kernel's count excludes nothing.
        n, c, h, w = x.sizes
        padded = new_int8(ctx, f"{node.name}.pad", [n, c, h + 2 * padding[0], w + 2 * padding[1]],
                          qp, nhwc=True)
        pre = [0, padding[0], padding[1], 0]
        call(ctx, "cortex_m::pad", [x.vi, b.int_list(pre), b.int_list(pre),
                                     b.int_(qp.zero_point)], padded.vi, node)
        x, padding = padded, (0, 0)
    out = new_int8(ctx, node.name, out_sizes, qp, nhwc=True)
    m, s = quantize_multiplier(qp.scale)
    scratch = kernel_scratch(ctx, node.name, "quantized_avg_pool2d", x)
    args = [
        x.vi, b.int_list(kernel), b.int_list(stride), b.int_list(padding), b.bool_(ceil_mode),
        b.int_(qp.zero_point), b.int_(m), b.int_(s), scratch,
    ]
    call(ctx, "cortex_m::quantized_avg_pool2d", args, out.vi, node)
    return out


def emit_avg_pool2d(ctx: Ctx, node: torch.fx.Node) -> None:
    x = as_nhwc(ctx, input_value(ctx, node.args[0]))
    kernel, stride, padding = _window(node)
    ceil_mode = bool(arg(node, 4, "ceil_mode", False))
    count_include_pad = bool(arg(node, 5, "count_include_pad", True))
    if arg(node, 6, "divisor_override", None) is not None:
        raise unsupported(node, "divisor_override")
    if ceil_mode and count_include_pad and padding != (0, 0):
        raise unsupported(node, "ceil_mode with count_include_pad and padding")
    qs, act, qp = output_quant(ctx, node, allow_activation=False)
    out = _avg_pool(ctx, node, x, kernel, stride, padding, ceil_mode, count_include_pad,
                    shape_of(node), qp)
    bind_output(ctx, qs, act, out)


def emit_global_pool(ctx: Ctx, node: torch.fx.Node) -> None:
    """adaptive_avg_pool2d with an output size dividing the input, or mean over H and W."""
    x = as_nhwc(ctx, input_value(ctx, node.args[0]))
    n, c, h, w = x.sizes
    out_shape = shape_of(node)
    if node.target == _aten.adaptive_avg_pool2d.default:
        oh, ow = pair(node.args[1], (1, 1))
        if h % oh or w % ow:
            raise unsupported(node, f"adaptive pooling {h}x{w} -> {oh}x{ow} (sizes must divide)")
        kernel = (h // oh, w // ow)
        pool_sizes = [n, c, oh, ow]
    else:
        dims = sorted(int(d) % 4 for d in node.args[1])  # type: ignore[union-attr]
        if dims != [2, 3]:
            raise unsupported(node, f"mean over dims {node.args[1]} (only over H and W)")
        kernel = (h, w)
        pool_sizes = [n, c, 1, 1]
    qs, act, qp = output_quant(ctx, node, allow_activation=False)
    out = _avg_pool(ctx, node, x, kernel, kernel, (0, 0), False, False, pool_sizes, qp)
    if out_shape != pool_sizes:  # mean without keepdim: [N, C] is the same memory
        out = alias(ctx, out, out_shape, nhwc=False)
    bind_output(ctx, qs, act, out)
