"""Lower a converted PT2E GraphModule (q/dq around float ops) to a cortex_m Program.

The walk is over the graph in order. A compute op ("anchor": conv2d, linear,
add, pools, softmax, ...) has dequantized inputs and, possibly through one
fused ReLU/clamp, quantize nodes as its users: the anchor becomes one kernel
call whose output carries the quantize node's qparams. dequantize nodes are
transparent (they name the same int8 tensor). Activations flow NHWC; the
program boundaries convert layouts once with cortex_m::transpose.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx

from torchmcu.lower.builder import ProgramBuilder, nbytes_of
from torchmcu.lower.errors import LoweringError, describe_node, module_of, op_name, unsupported
from torchmcu.lower.errors import user_source_line
from torchmcu.lower.graph import (
    DQ_PER_CHANNEL,
    DQ_PER_TENSOR,
    QParams,
    arg,
    is_dq,
    is_q,
    pair,
    qparams_of,
    quantized_constant,
    shape_of,
)
from torchmcu.reference.quant import quantize_multiplier
from torchmcu.lower.report import LoweringReport, NodeReport
from torchmcu.lower.values import LValue
from torchmcu.pte.program import Program, ScalarType

_aten = torch.ops.aten

ACTIVATIONS = {
    _aten.relu.default,
    _aten.relu_.default,
    _aten.relu6.default,
    _aten.hardtanh.default,
    _aten.hardtanh_.default,
    _aten.clamp.default,
    _aten.clamp_.default,
}

SOFTMAX_INPUT_INTEGER_BITS = 5
INT8_MIN, INT8_MAX = -128, 127


@dataclass
class LoweringOptions:
    int8_io: bool = False
    linear_kernel_sum: bool = False  # pass kernel_sum (ExecuTorch MVE form) instead of bias
    method_name: str = "forward"


@dataclass
class _Ctx:
    gm: torch.fx.GraphModule
    opts: LoweringOptions
    b: ProgramBuilder = field(default_factory=ProgramBuilder)
    env: dict[torch.fx.Node, LValue] = field(default_factory=dict)
    done: set[torch.fx.Node] = field(default_factory=set)
    report: list[NodeReport] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    io_info: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"inputs": [], "outputs": []}
    )
    # per value index: cached NHWC / contiguous twins produced by a transpose
    twins: dict[tuple[int, str], LValue] = field(default_factory=dict)
    current: torch.fx.Node | None = None


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------
def _q8(value: float, qp: QParams) -> int:
    """Quantize one real number the way torch's quantize_per_tensor does (half to even)."""
    q = np.round(np.float32(value) / np.float32(qp.scale)) + qp.zero_point
    return int(np.clip(q, qp.quant_min, qp.quant_max))


def _record(ctx: _Ctx, node: torch.fx.Node | None, op: str, instr: int) -> None:
    ctx.report.append(
        NodeReport(
            instruction=instr,
            op=op,
            node=node.name if node is not None else "",
            target=op_name(node) if node is not None else "",
            module=module_of(node) if node is not None else "",
            source=user_source_line(node) if node is not None else "",
        )
    )


def _call(ctx: _Ctx, op: str, args: Sequence[int], out: int, node: torch.fx.Node | None) -> None:
    instr = ctx.b.call(op, args, out)
    _record(ctx, node if node is not None else ctx.current, op, instr)


def _new_int8(ctx: _Ctx, hint: str, sizes: Sequence[int], qp: QParams | None, nhwc: bool) -> LValue:
    sizes = list(sizes)
    key = ctx.b.new_buffer(hint, nbytes_of(ScalarType.CHAR, sizes))
    order = [0, 2, 3, 1] if nhwc else list(range(len(sizes)))
    vi = ctx.b.planned(key, ScalarType.CHAR, sizes, order)
    return LValue(
        vi, key, sizes, ScalarType.CHAR,
        qp.scale if qp else None, qp.zero_point if qp else None, nhwc=nhwc,
    )


def _alias(ctx: _Ctx, v: LValue, sizes: Sequence[int], nhwc: bool, **kw: Any) -> LValue:
    """Another view of v's bytes (no instruction)."""
    sizes = list(sizes)
    order = [0, 2, 3, 1] if nhwc else list(range(len(sizes)))
    vi = ctx.b.planned(v.buffer, v.scalar_type, sizes, order)
    return v.with_(vi=vi, sizes=sizes, nhwc=nhwc, flatten_chw=kw.get("flatten_chw"))


def _scratch(ctx: _Ctx, hint: str, nbytes: int) -> int:
    key = ctx.b.new_buffer(f"{hint}.scratch", nbytes)
    return ctx.b.planned(key, ScalarType.BYTE, [nbytes])


def _transpose(ctx: _Ctx, v: LValue, src_sizes: list[int], perm: list[int], hint: str) -> LValue:
    """cortex_m::transpose of v viewed as contiguous src_sizes; returns the contiguous result."""
    src = _alias(ctx, v, src_sizes, nhwc=False)
    out_sizes = [src_sizes[p] for p in perm]
    key = ctx.b.new_buffer(hint, nbytes_of(v.scalar_type, out_sizes))
    out_vi = ctx.b.planned(key, v.scalar_type, out_sizes)
    _call(ctx, "cortex_m::transpose", [src.vi, ctx.b.int_list(perm)], out_vi, None)
    return v.with_(vi=out_vi, buffer=key, sizes=out_sizes, nhwc=False, flatten_chw=None)


def as_nhwc(ctx: _Ctx, v: LValue) -> LValue:
    """v as a legacy 4-D channels-last tensor, transposing once (cached) if needed."""
    if v.rank != 4:
        raise LoweringError(
            f"{describe_node(ctx.current) if ctx.current else ''}: expected a 4-D activation, "
            f"got sizes {v.sizes}"
        )
    if v.nhwc:
        return v
    if v.layout_free:
        return _alias(ctx, v, v.sizes, nhwc=True)
    cached = ctx.twins.get((v.vi, "nhwc"))
    if cached is not None:
        return cached
    n, c, h, w = v.sizes
    t = _transpose(ctx, v, [n, c, h, w], [0, 2, 3, 1], f"{v.buffer}.nhwc")
    out = _alias(ctx, t, [n, c, h, w], nhwc=True)
    ctx.twins[(v.vi, "nhwc")] = out
    return out


def as_contiguous(ctx: _Ctx, v: LValue) -> LValue:
    """v with PyTorch's contiguous memory order for its logical sizes."""
    if v.flatten_chw is not None:
        n = v.sizes[0]
        c, h, w = v.flatten_chw
        base = _alias(ctx, v, [n, c, h, w], nhwc=True)
        return _alias(ctx, as_contiguous(ctx, base), v.sizes, nhwc=False)
    if not v.nhwc:
        return v
    if v.layout_free:
        return _alias(ctx, v, v.sizes, nhwc=False)
    cached = ctx.twins.get((v.vi, "nchw"))
    if cached is not None:
        return cached
    n, c, h, w = v.sizes
    out = _transpose(ctx, v, [n, h, w, c], [0, 3, 1, 2], f"{v.buffer}.nchw")
    ctx.twins[(v.vi, "nchw")] = out
    return out


def _input(ctx: _Ctx, node: object) -> LValue:
    """The int8 value behind a (dequantized) input argument."""
    if isinstance(node, torch.fx.Node) and node in ctx.env:
        return ctx.env[node]
    if isinstance(node, torch.fx.Node) and node.op == "placeholder":
        raise unsupported(ctx.current, "a float program input is used directly by this op "
                          "(the op was not annotated for quantization)")  # type: ignore[arg-type]
    raise unsupported(ctx.current, f"its input {node} is not an int8 tensor (a float op feeds "
                      "it)")  # type: ignore[arg-type]


def _output_quant(ctx: _Ctx, node: torch.fx.Node, allow_activation: bool):
    """(quantize users, fused activation node or None) at the output of an anchor op."""
    act = None
    users = list(node.users)
    if allow_activation and len(users) == 1 and users[0].target in ACTIVATIONS:
        act = users[0]
        users = list(act.users)
    qs = [u for u in users if is_q(u)]
    if not users or len(qs) != len(users):
        raise unsupported(node, "its output is not quantized to int8 (an unannotated float op "
                          "uses it)")
    params = {qparams_of(ctx.gm, q) for q in qs}
    if len(params) != 1:
        raise LoweringError(f"{describe_node(node)}: output quantized with different qparams")
    return qs, act, params.pop()


def _activation_range(act: torch.fx.Node | None, qp: QParams) -> tuple[int, int]:
    """(activation_min, activation_max) for a fused ReLU/ReLU6/hardtanh/clamp."""
    lo, hi = qp.quant_min, qp.quant_max
    if act is None:
        return lo, hi
    t = act.target
    if t in (_aten.relu.default, _aten.relu_.default):
        bounds: tuple[float | None, float | None] = (0.0, None)
    elif t == _aten.relu6.default:
        bounds = (0.0, 6.0)
    elif t in (_aten.hardtanh.default, _aten.hardtanh_.default):
        bounds = (float(arg(act, 1, "min_val", -1.0)), float(arg(act, 2, "max_val", 1.0)))
    else:
        mn, mx = arg(act, 1, "min", None), arg(act, 2, "max", None)
        if isinstance(mn, torch.fx.Node) or isinstance(mx, torch.fx.Node):
            raise unsupported(act, "clamp bounds must be numbers")
        bounds = (None if mn is None else float(mn), None if mx is None else float(mx))  # type: ignore[arg-type]
    if bounds[0] is not None:
        lo = max(lo, _q8(bounds[0], qp))
    if bounds[1] is not None:
        hi = min(hi, _q8(bounds[1], qp))
    return lo, hi


def _bind_output(ctx: _Ctx, qs: list[torch.fx.Node], act: torch.fx.Node | None, out: LValue) -> None:
    for q in qs:
        ctx.env[q] = out
        ctx.done.add(q)
    if act is not None:
        ctx.done.add(act)


# ---------------------------------------------------------------------------------------------
# op emitters
# ---------------------------------------------------------------------------------------------
def _bias_int32(ctx: _Ctx, node: torch.fx.Node, bias_node: object, acc_scales: np.ndarray,
                cout: int) -> np.ndarray:
    if bias_node is None:
        return np.zeros(cout, dtype=np.int32)
    if is_dq(bias_node):
        qc = quantized_constant(ctx.gm, bias_node, "bias")
        if qc.values.dtype == np.int32:
            return qc.values.reshape(-1).astype(np.int32)
        real = (qc.values.astype(np.float64) - qc.zero_points) * qc.scales
    elif isinstance(bias_node, torch.fx.Node) and bias_node.op == "get_attr":
        from torchmcu.lower.graph import attr_tensor

        real = attr_tensor(ctx.gm, bias_node).double().numpy()
    else:
        raise unsupported(node, "bias is not a constant")
    q = np.round(real.reshape(-1) / acc_scales)
    return np.clip(q, -(2**31), 2**31 - 1).astype(np.int32)


def _weights(ctx: _Ctx, node: torch.fx.Node, w_node: object, cout: int):
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


def _requant_params(in_scale: float, w_scales: np.ndarray, out_scale: float):
    pairs = [quantize_multiplier(in_scale * float(ws) / out_scale) for ws in w_scales]
    return [m for m, _ in pairs], [s for _, s in pairs]


def emit_conv2d(ctx: _Ctx, node: torch.fx.Node) -> None:
    x = as_nhwc(ctx, _input(ctx, node.args[0]))
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
    n, cin, _, _ = x.sizes
    cout = out_shape[1]
    w, w_scales = _weights(ctx, node, node.args[1], cout)
    qs, act, qp = _output_quant(ctx, node, allow_activation=True)
    act_min, act_max = _activation_range(act, qp)
    in_scale, in_zp = float(x.scale), int(x.zero_point)  # type: ignore[arg-type]
    bias = _bias_int32(ctx, node, arg(node, 2, "bias", None), in_scale * w_scales, cout)
    mults, shifts = _requant_params(in_scale, w_scales, qp.scale)
    out = _new_int8(ctx, node.name, out_shape, qp, nhwc=True)
    b = ctx.b
    kh, kw = int(w.shape[2]), int(w.shape[3])
    depthwise = groups == cin and groups > 1 and w.shape[1] == 1 and cout % cin == 0
    if depthwise:
        w_packed = np.ascontiguousarray(w.transpose(1, 2, 3, 0))  # [1, KH, KW, Cout]
        scratch = _scratch(ctx, node.name, _scratch_bytes("quantized_depthwise_conv2d", _nhwc(x), tuple(w_packed.shape)))
        args = [
            x.vi, b.constant(w_packed), b.constant(bias), b.int_list(stride),
            b.int_list(padding), b.int_list(dilation), b.int_(cout // cin), b.int_(-in_zp),
            b.int_(qp.zero_point), b.constant(np.array(mults, dtype=np.int32)),
            b.constant(np.array(shifts, dtype=np.int32)), b.int_(act_min), b.int_(act_max),
            scratch,
        ]
        _call(ctx, "cortex_m::quantized_depthwise_conv2d", args, out.vi, node)
    else:
        w_packed = np.ascontiguousarray(w.transpose(0, 2, 3, 1))  # OHWI
        scratch = _scratch(ctx, node.name, _scratch_bytes("quantized_conv2d", _nhwc(x), tuple(w_packed.shape)))
        args = [
            x.vi, b.constant(w_packed), b.constant(bias), b.int_list(stride),
            b.int_list(padding), b.int_list(dilation), b.int_(-in_zp), b.int_(qp.zero_point),
            b.constant(np.array(mults, dtype=np.int32)),
            b.constant(np.array(shifts, dtype=np.int32)), b.int_(act_min), b.int_(act_max),
            scratch,
        ]
        _call(ctx, "cortex_m::quantized_conv2d", args, out.vi, node)
    _bind_output(ctx, qs, act, out)


def emit_linear(ctx: _Ctx, node: torch.fx.Node) -> None:
    x = _input(ctx, node.args[0])
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
    qs, act, qp = _output_quant(ctx, node, allow_activation=True)
    act_min, act_max = _activation_range(act, qp)
    in_scale, in_zp = float(x.scale), int(x.zero_point)  # type: ignore[arg-type]
    bias = _bias_int32(ctx, node, arg(node, 2, "bias", None), in_scale * w_scales, cout)
    mults, shifts = _requant_params(in_scale, w_scales, qp.scale)
    if len(set(zip(mults, shifts))) == 1:
        mults, shifts = mults[:1], shifts[:1]
    out = _new_int8(ctx, node.name, out_shape, qp, nhwc=False)
    x_in = _alias(ctx, x, x.sizes, nhwc=False) if x.nhwc else x
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
    _call(ctx, "cortex_m::quantized_linear", args, out.vi, node)
    _bind_output(ctx, qs, act, out)


def _binary_operands(ctx: _Ctx, node: torch.fx.Node) -> tuple[LValue, LValue, list[int], bool]:
    a, c = _input(ctx, node.args[0]), _input(ctx, node.args[1])
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


def emit_add(ctx: _Ctx, node: torch.fx.Node) -> None:
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        raise unsupported(node, f"alpha={alpha}")
    a, c, out_shape, nhwc = _binary_operands(ctx, node)
    qs, act, qp = _output_quant(ctx, node, allow_activation=True)
    act_min, act_max = _activation_range(act, qp)
    s1, s2 = float(a.scale), float(c.scale)  # type: ignore[arg-type]
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / (qp.scale * (1 << 20)))
    out = _new_int8(ctx, node.name, out_shape, qp, nhwc=nhwc)
    b = ctx.b
    args = [
        a.vi, b.int_(a.zero_point), b.int_(m1), b.int_(sh1),  # type: ignore[arg-type]
        c.vi, b.int_(c.zero_point), b.int_(m2), b.int_(sh2),  # type: ignore[arg-type]
        b.int_(qp.zero_point), b.int_(mo), b.int_(sho), b.int_(act_min), b.int_(act_max),
    ]
    _call(ctx, "cortex_m::quantized_add", args, out.vi, node)
    _bind_output(ctx, qs, act, out)


def emit_mul(ctx: _Ctx, node: torch.fx.Node) -> None:
    a, c, out_shape, nhwc = _binary_operands(ctx, node)
    qs, act, qp = _output_quant(ctx, node, allow_activation=False)
    mo, sho = quantize_multiplier(float(a.scale) * float(c.scale) / qp.scale)  # type: ignore[arg-type]
    out = _new_int8(ctx, node.name, out_shape, qp, nhwc=nhwc)
    b = ctx.b
    args = [
        a.vi, b.int_(a.zero_point), c.vi, b.int_(c.zero_point),  # type: ignore[arg-type]
        b.int_(qp.zero_point), b.int_(mo), b.int_(sho),
    ]
    _call(ctx, "cortex_m::quantized_mul", args, out.vi, node)
    _bind_output(ctx, qs, act, out)


def _same_qparams(node: torch.fx.Node, x: LValue, qp: QParams) -> None:
    if x.zero_point != qp.zero_point or not math.isclose(
        float(x.scale), qp.scale, rel_tol=1e-6  # type: ignore[arg-type]
    ):
        raise unsupported(node, "pooling needs equal input and output qparams (annotate it with "
                          "torchmcu's quantizer)")


def emit_max_pool2d(ctx: _Ctx, node: torch.fx.Node) -> None:
    x = as_nhwc(ctx, _input(ctx, node.args[0]))
    kernel = pair(arg(node, 1, "kernel_size", None), (1, 1))
    stride = pair(arg(node, 2, "stride", None) or list(kernel), kernel)
    padding = pair(arg(node, 3, "padding", 0), (0, 0))
    dilation = pair(arg(node, 4, "dilation", 1), (1, 1))
    ceil_mode = bool(arg(node, 5, "ceil_mode", False))
    if dilation != (1, 1) or ceil_mode:
        raise unsupported(node, "max pooling with dilation or ceil_mode")
    qs, act, qp = _output_quant(ctx, node, allow_activation=True)
    _same_qparams(node, x, qp)
    act_min, act_max = _activation_range(act, qp)
    out = _new_int8(ctx, node.name, shape_of(node), qp, nhwc=True)
    b = ctx.b
    args = [
        x.vi, b.int_list(kernel), b.int_list(stride), b.int_list(padding), b.int_list(dilation),
        b.bool_(False), b.int_(qp.zero_point), b.int_(qp.zero_point), b.int_(act_min),
        b.int_(act_max),
    ]
    _call(ctx, "cortex_m::quantized_max_pool2d", args, out.vi, node)
    _bind_output(ctx, qs, act, out)


def _avg_pool(ctx: _Ctx, node: torch.fx.Node, x: LValue, kernel: tuple[int, int],
              stride: tuple[int, int], padding: tuple[int, int], ceil_mode: bool,
              count_include_pad: bool, out_sizes: list[int], qs, qp: QParams) -> LValue:
    _same_qparams(node, x, qp)
    b = ctx.b
    if count_include_pad and padding != (0, 0):
        # Materialise the zero-point padding so the kernel's count excludes nothing.
        n, c, h, w = x.sizes
        padded = _new_int8(ctx, f"{node.name}.pad", [n, c, h + 2 * padding[0], w + 2 * padding[1]],
                           qp, nhwc=True)
        pre = [0, padding[0], padding[1], 0]
        _call(ctx, "cortex_m::pad", [x.vi, b.int_list(pre), b.int_list(pre),
                                      b.int_(qp.zero_point)], padded.vi, node)
        x, padding = padded, (0, 0)
    out = _new_int8(ctx, node.name, out_sizes, qp, nhwc=True)
    m, s = quantize_multiplier(qp.scale)
    scratch = _scratch(ctx, node.name, _scratch_bytes("quantized_avg_pool2d", _nhwc(x)))
    args = [
        x.vi, b.int_list(kernel), b.int_list(stride), b.int_list(padding), b.bool_(ceil_mode),
        b.int_(qp.zero_point), b.int_(m), b.int_(s), scratch,
    ]
    _call(ctx, "cortex_m::quantized_avg_pool2d", args, out.vi, node)
    return out


def emit_avg_pool2d(ctx: _Ctx, node: torch.fx.Node) -> None:
    x = as_nhwc(ctx, _input(ctx, node.args[0]))
    kernel = pair(arg(node, 1, "kernel_size", None), (1, 1))
    stride = pair(arg(node, 2, "stride", None) or list(kernel), kernel)
    padding = pair(arg(node, 3, "padding", 0), (0, 0))
    ceil_mode = bool(arg(node, 4, "ceil_mode", False))
    count_include_pad = bool(arg(node, 5, "count_include_pad", True))
    if arg(node, 6, "divisor_override", None) is not None:
        raise unsupported(node, "divisor_override")
    if ceil_mode and count_include_pad and padding != (0, 0):
        raise unsupported(node, "ceil_mode with count_include_pad and padding")
    qs, act, qp = _output_quant(ctx, node, allow_activation=False)
    out = _avg_pool(ctx, node, x, kernel, stride, padding, ceil_mode, count_include_pad,
                    shape_of(node), qs, qp)
    _bind_output(ctx, qs, act, out)


def emit_global_pool(ctx: _Ctx, node: torch.fx.Node) -> None:
    """adaptive_avg_pool2d with an output size dividing the input, or mean over H and W."""
    x = as_nhwc(ctx, _input(ctx, node.args[0]))
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
    qs, act, qp = _output_quant(ctx, node, allow_activation=False)
    out = _avg_pool(ctx, node, x, kernel, kernel, (0, 0), False, False, pool_sizes, qs, qp)
    if out_shape != pool_sizes:  # mean without keepdim: [N, C] is the same memory
        out = _alias(ctx, out, out_shape, nhwc=False)
    _bind_output(ctx, qs, act, out)


def emit_softmax(ctx: _Ctx, node: torch.fx.Node) -> None:
    x = _input(ctx, node.args[0])
    dim = int(node.args[1]) % max(x.rank, 1)  # type: ignore[arg-type]
    if dim != x.rank - 1:
        raise unsupported(node, f"softmax over dim {node.args[1]} (only the last dimension)")
    x = as_contiguous(ctx, x)
    qs, act, qp = _output_quant(ctx, node, allow_activation=False)
    if qp.zero_point != -128 or not math.isclose(qp.scale, 1.0 / 256.0, rel_tol=1e-9):
        raise unsupported(node, "softmax output qparams must be scale 1/256, zero point -128")
    real = min(float(x.scale) * (1 << (31 - SOFTMAX_INPUT_INTEGER_BITS)), float(2**31 - 1))  # type: ignore[arg-type]
    mult, shift = quantize_multiplier(real)
    diff_min = -int(
        math.floor(((1 << SOFTMAX_INPUT_INTEGER_BITS) - 1)
                   * math.ldexp(1.0, 31 - SOFTMAX_INPUT_INTEGER_BITS) / math.ldexp(1.0, shift))
    )
    out = _new_int8(ctx, node.name, x.sizes, qp, nhwc=False)
    b = ctx.b
    args = [x.vi, b.int_(-1), b.int_(x.zero_point), b.int_(qp.zero_point), b.int_(mult),  # type: ignore[arg-type]
            b.int_(shift), b.int_(diff_min)]
    _call(ctx, "cortex_m::softmax", args, out.vi, node)
    _bind_output(ctx, qs, act, out)


def emit_view(ctx: _Ctx, node: torch.fx.Node) -> None:
    """flatten / view / reshape / squeeze / dropout: an alias of the same bytes."""
    x = _input(ctx, node.args[0])
    out_shape = shape_of(node)
    qs, act, qp = _output_quant(ctx, node, allow_activation=False)
    if qp.zero_point != x.zero_point or not math.isclose(qp.scale, float(x.scale), rel_tol=1e-6):  # type: ignore[arg-type]
        raise unsupported(node, "a reshape that changes qparams")
    if out_shape == x.sizes:
        out = x
    elif x.nhwc and not x.layout_free and len(out_shape) == 2 and out_shape[0] == x.sizes[0]:
        # flatten(1) of NHWC bytes: keep the bytes, remember their (h, w, c) order.
        out = _alias(ctx, x, out_shape, nhwc=False, flatten_chw=tuple(x.sizes[1:]))
    else:
        out = _alias(ctx, as_contiguous(ctx, x), out_shape, nhwc=False)
    _bind_output(ctx, qs, act, out)


def emit_pad(ctx: _Ctx, node: torch.fx.Node) -> None:
    """Constant padding (e.g. nn.ZeroPad2d) with the quantized pad value."""
    x = _input(ctx, node.args[0])
    pads = [int(p) for p in node.args[1]]  # type: ignore[union-attr]
    if node.target == _aten.pad.default:
        mode = arg(node, 2, "mode", "constant")
        if mode != "constant":
            raise unsupported(node, f"padding mode '{mode}' (only constant)")
        value = arg(node, 3, "value", None)
    else:
        value = arg(node, 2, "value", 0)
    value = 0.0 if value is None else float(value)  # type: ignore[arg-type]
    if len(pads) % 2 or len(pads) // 2 > x.rank or x.rank > 4 or min(pads) < 0:
        raise unsupported(node, f"padding {pads} of a rank-{x.rank} tensor")
    qs, act, qp = _output_quant(ctx, node, allow_activation=False)
    if qp.zero_point != x.zero_point or not math.isclose(qp.scale, float(x.scale), rel_tol=1e-6):  # type: ignore[arg-type]
        raise unsupported(node, "padding that changes qparams")
    logical_pre = [0] * x.rank
    logical_post = [0] * x.rank
    for i in range(len(pads) // 2):  # pairs run from the last dimension backwards
        logical_pre[x.rank - 1 - i] = pads[2 * i]
        logical_post[x.rank - 1 - i] = pads[2 * i + 1]
    if x.rank == 4:
        x = as_nhwc(ctx, x)
        order = [0, 2, 3, 1]  # physical (memory) order of the dims
        pre = [logical_pre[d] for d in order]
        post = [logical_post[d] for d in order]
    else:
        x = as_contiguous(ctx, x)
        pre = [0] * (4 - x.rank) + logical_pre
        post = [0] * (4 - x.rank) + logical_post
    out = _new_int8(ctx, node.name, shape_of(node), qp, nhwc=x.rank == 4)
    b = ctx.b
    args = [x.vi, b.int_list(pre), b.int_list(post), b.int_(_q8(value, qp))]
    _call(ctx, "cortex_m::pad", args, out.vi, node)
    _bind_output(ctx, qs, act, out)


EMITTERS: dict[Any, Callable[[_Ctx, torch.fx.Node], None]] = {
    _aten.conv2d.default: emit_conv2d,
    _aten.linear.default: emit_linear,
    _aten.add.Tensor: emit_add,
    _aten.add_.Tensor: emit_add,
    _aten.mul.Tensor: emit_mul,
    _aten.mul_.Tensor: emit_mul,
    _aten.max_pool2d.default: emit_max_pool2d,
    _aten.avg_pool2d.default: emit_avg_pool2d,
    _aten.adaptive_avg_pool2d.default: emit_global_pool,
    _aten.mean.dim: emit_global_pool,
    _aten.softmax.int: emit_softmax,
    _aten._softmax.default: emit_softmax,
    _aten.flatten.using_ints: emit_view,
    _aten.view.default: emit_view,
    _aten.reshape.default: emit_view,
    _aten._unsafe_view.default: emit_view,
    _aten.squeeze.dim: emit_view,
    _aten.squeeze.dims: emit_view,
    _aten.unsqueeze.default: emit_view,
    _aten.dropout.default: emit_view,
    _aten.clone.default: emit_view,
    _aten.contiguous.default: emit_view,
    _aten.pad.default: emit_pad,
    _aten.constant_pad_nd.default: emit_pad,
}


def _nhwc(v: LValue) -> tuple[int, int, int, int]:
    n, c, h, w = v.sizes
    return (n, h, w, c)


def _scratch_bytes(op: str, *shapes: tuple[int, ...]) -> int:
    """Scratch size from the kernels' contract (torchmcu.reference.scratch)."""
    from torchmcu.reference.scratch import SCRATCH_BYTES

    return int(SCRATCH_BYTES[f"cortex_m::{op}"](*shapes))


# ---------------------------------------------------------------------------------------------
# boundaries
# ---------------------------------------------------------------------------------------------
def _lower_placeholder(ctx: _Ctx, node: torch.fx.Node) -> None:
    users = list(node.users)
    if not users:
        return
    non_q = [u for u in users if not is_q(u)]
    if non_q:
        raise unsupported(non_q[0], "it consumes a float program input (it was not quantized)")
    params = {qparams_of(ctx.gm, q) for q in users}
    if len(params) != 1:
        raise LoweringError(f"input '{node.name}' is quantized with different qparams by its users")
    qp = params.pop()
    sizes = shape_of(node)
    b = ctx.b
    if ctx.opts.int8_io:
        value = _new_int8(ctx, node.name, sizes, qp, nhwc=False)
        ctx.inputs.append(value.vi)
    else:
        key = b.new_buffer(node.name, nbytes_of(ScalarType.FLOAT, sizes))
        fvi = b.planned(key, ScalarType.FLOAT, sizes)
        ctx.inputs.append(fvi)
        value = _new_int8(ctx, f"{node.name}.q", sizes, qp, nhwc=False)
        args = [fvi, b.double(qp.scale), b.int_(qp.zero_point), b.int_(qp.quant_min),
                b.int_(qp.quant_max), b.int_(int(ScalarType.CHAR))]
        _call(ctx, "cortex_m::quantize_per_tensor", args, value.vi, users[0])
    ctx.io_info["inputs"].append(
        {"name": node.name, "sizes": sizes, "scale": qp.scale, "zero_point": qp.zero_point,
         "dtype": "int8" if ctx.opts.int8_io else "float32"}
    )
    for q in users:
        ctx.env[q] = value
        ctx.done.add(q)


def _lower_output(ctx: _Ctx, node: torch.fx.Node) -> None:
    results = node.args[0]
    items = results if isinstance(results, (tuple, list)) else [results]
    b = ctx.b
    for item in items:
        if not isinstance(item, torch.fx.Node) or not (is_dq(item) or is_q(item)):
            raise unsupported(item if isinstance(item, torch.fx.Node) else node,
                              "a program output that is not a quantized tensor")
        src = item.args[0] if is_dq(item) else item
        v = _input(ctx, src)
        ctx.current = item
        v = as_contiguous(ctx, v)
        qp = QParams(float(v.scale), int(v.zero_point), INT8_MIN, INT8_MAX)  # type: ignore[arg-type]
        if ctx.opts.int8_io or is_q(item):
            out_vi = v.vi
        else:
            key = b.new_buffer(f"{item.name}.out", nbytes_of(ScalarType.FLOAT, v.sizes))
            out_vi = b.planned(key, ScalarType.FLOAT, v.sizes)
            args = [v.vi, b.double(qp.scale), b.int_(qp.zero_point), b.int_(INT8_MIN),
                    b.int_(INT8_MAX), b.int_(int(ScalarType.CHAR))]
            _call(ctx, "cortex_m::dequantize_per_tensor", args, out_vi, item)
        ctx.outputs.append(out_vi)
        ctx.io_info["outputs"].append(
            {"name": item.name, "sizes": list(v.sizes), "scale": qp.scale,
             "zero_point": qp.zero_point,
             "dtype": "int8" if (ctx.opts.int8_io or is_q(item)) else "float32"}
        )


def _lower_q(ctx: _Ctx, node: torch.fx.Node) -> None:
    """A quantize not consumed by an anchor: either a re-quantization of an int8 value or the
    output of an unsupported float op."""
    src = node.args[0]
    if is_dq(src) and src.args[0] in ctx.env:  # type: ignore[union-attr]
        v = ctx.env[src.args[0]]  # type: ignore[union-attr]
        qp = qparams_of(ctx.gm, node)
        if v.zero_point == qp.zero_point and math.isclose(float(v.scale), qp.scale, rel_tol=1e-6):  # type: ignore[arg-type]
            ctx.env[node] = v
            return
        raise unsupported(node, "re-quantization between two int8 qparams")
    if isinstance(src, torch.fx.Node) and src.op == "call_function":
        raise unsupported(src)
    raise unsupported(node, "quantize of a value that is not a program input or op output")


# ---------------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------------
def lower_to_program(
    gm: torch.fx.GraphModule,
    example_inputs: tuple[Any, ...] | None = None,
    *,
    int8_io: bool = False,
    linear_kernel_sum: bool = False,
    planner: Callable | None = None,
) -> tuple[Program, LoweringReport]:
    """Lower a convert_pt2e GraphModule to a memory-planned cortex_m Program.

    example_inputs is accepted for API symmetry (shapes come from the graph's metadata).
    int8_io: program inputs/outputs stay int8 (their qparams are in the report) instead of
    float32 with quantize/dequantize inside the program. planner defaults to
    torchmcu.plan.plan_memory.
    """
    del example_inputs
    from torchmcu.plan import BufferRequest, plan_memory

    ctx = _Ctx(gm, LoweringOptions(int8_io=int8_io, linear_kernel_sum=linear_kernel_sum))
    for node in gm.graph.nodes:
        ctx.current = node
        if node in ctx.done:
            continue
        if node.op == "placeholder":
            _lower_placeholder(ctx, node)
        elif node.op in ("get_attr",):
            continue
        elif node.op == "output":
            _lower_output(ctx, node)
        elif node.op == "call_function":
            if node.target in DQ_PER_TENSOR or node.target in DQ_PER_CHANNEL:
                src = node.args[0]
                if isinstance(src, torch.fx.Node) and src in ctx.env:
                    ctx.env[node] = ctx.env[src]
                continue
            if is_q(node):
                if node not in ctx.env:
                    _lower_q(ctx, node)
                continue
            emitter = EMITTERS.get(node.target)
            if emitter is None:
                if node.target in ACTIVATIONS:
                    raise unsupported(node, "a ReLU/clamp that does not follow a conv2d, linear, "
                                      "add or max pool cannot run on its own yet")
                raise unsupported(node)
            emitter(ctx, node)
        else:
            raise unsupported(node, f"graph node kind '{node.op}'")
    if not ctx.b.instructions:
        raise LoweringError("the model lowered to no kernel calls")
    program, plan = ctx.b.finish(ctx.inputs, ctx.outputs, planner or plan_memory, BufferRequest,
                                 name=ctx.opts.method_name)
    constant_bytes = sum(len(c) for c in program.constants)
    report = LoweringReport(
        nodes=ctx.report,
        arena_bytes=plan.arena_bytes,
        arena_lower_bound=plan.lower_bound,
        constant_bytes=constant_bytes,
        inputs=ctx.io_info["inputs"],
        outputs=ctx.io_info["outputs"],
    )
    return program, report
