"""Rules for the nodes the quantizer left in float32: ExecuTorch's portable aten:: operators.

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

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.fx

from torchmcu.lower.boundaries import qdq_args
from torchmcu.lower.builder import nbytes_of
from torchmcu.lower.context import Ctx, alias, call, call_multi_out
from torchmcu.lower.errors import FLOAT_RULE_TARGETS, unsupported
from torchmcu.lower.graph import QParams, arg, attr_tensor, quantized_constant, shape_of
from torchmcu.lower.layout import as_contiguous
from torchmcu.lower.requant import INT8_MAX, INT8_MIN
from torchmcu.lower.values import LValue
from torchmcu.pte.program import ScalarType, String, TensorList
from torchmcu.quantize.qdq import is_dq

_aten = torch.ops.aten
FLOAT = ScalarType.FLOAT


# -- values ---------------------------------------------------------------------------------------


def new_float(ctx: Ctx, hint: str, sizes: Sequence[int]) -> LValue:
    sizes = list(sizes)
    key = ctx.b.new_buffer(hint, nbytes_of(FLOAT, sizes))
    return LValue(ctx.b.planned(key, FLOAT, sizes), key, sizes, FLOAT)


def _constant_array(ctx: Ctx, node: torch.fx.Node) -> np.ndarray:
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
        arr = _constant_array(ctx, node)  # type: ignore[arg-type]
        return LValue(ctx.b.constant(arr), "", list(arr.shape), FLOAT)
    if not isinstance(node, torch.fx.Node) or node not in ctx.env:
        raise unsupported(ctx.current, f"its input {node} is neither a value of the program nor "  # type: ignore[arg-type]
                          "a constant (a float program input is not supported yet)")
    v = ctx.env[node]
    if v.scalar_type == FLOAT:
        return v
    cached = ctx.twins.get((v.vi, "f32"))
    if cached is not None:
        return cached
    c = as_contiguous(ctx, v)
    qp = QParams(float(v.scale), int(v.zero_point), INT8_MIN, INT8_MAX)  # type: ignore[arg-type]
    out = new_float(ctx, f"{v.buffer}.f32", c.sizes)
    call(ctx, "cortex_m::dequantize_per_tensor", qdq_args(ctx.b, c.vi, qp), out.vi, None)
    ctx.twins[(v.vi, "f32")] = out
    return out


def _finish(ctx: Ctx, node: torch.fx.Node, op: str, args: list[int], hint: str | None = None) -> None:
    out = new_float(ctx, hint or node.name, shape_of(node))
    call(ctx, op, args, out.vi, node)
    ctx.env[node] = out


# -- rules ------------------------------------------------------------------------------------------


def emit_linear_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    """y = x W^T + b as addmm(b, x, W^T) (mm without bias); W^T stored as a [K, N] constant."""
    x = float_input(ctx, node.args[0])
    if x.rank != 2:
        raise unsupported(node, f"a float linear of a rank-{x.rank} input (only [batch, features])")
    w = _constant_array(ctx, node.args[1])  # type: ignore[arg-type]
    b = ctx.b
    wt = b.constant(np.ascontiguousarray(w.T))
    bias = arg(node, 2, "bias", None)
    if bias is None:
        _finish(ctx, node, "aten::mm", [x.vi, wt])
    else:
        bv = float_input(ctx, bias)
        _finish(ctx, node, "aten::addmm", [bv.vi, x.vi, wt, b.int_(1), b.int_(1)])


def emit_conv2d_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    x = float_input(ctx, node.args[0])
    w = float_input(ctx, node.args[1])
    bias = arg(node, 2, "bias", None)
    b = ctx.b
    bias_vi = b.none() if bias is None else float_input(ctx, bias).vi
    lists = [list(arg(node, i, name, d)) for i, name, d in  # type: ignore[call-overload]
             ((3, "stride", [1, 1]), (4, "padding", [0, 0]), (5, "dilation", [1, 1]))]
    if isinstance(arg(node, 4, "padding", [0, 0]), str):
        raise unsupported(node, "string padding of a float conv")
    groups = int(arg(node, 6, "groups", 1))  # type: ignore[arg-type]
    args = [x.vi, w.vi, bias_vi, *(b.int_list(v) for v in lists), b.bool_(False),
            b.int_list([0] * len(lists[0])), b.int_(groups)]
    _finish(ctx, node, "aten::convolution", args)


def _binary(op: str) -> Callable[[Ctx, torch.fx.Node], None]:
    def emit(ctx: Ctx, node: torch.fx.Node) -> None:
        a, c = node.args[0], node.args[1]
        if not isinstance(a, torch.fx.Node) or not isinstance(c, torch.fx.Node):
            raise unsupported(node, "a float tensor-scalar op (both operands must be tensors)")
        args = [float_input(ctx, a).vi, float_input(ctx, c).vi]
        if op == "aten::add":
            alpha = arg(node, 2, "alpha", 1)
            args.append(ctx.b.double(float(alpha)) if isinstance(alpha, float) else ctx.b.int_(int(alpha)))  # type: ignore[arg-type]
        _finish(ctx, node, op, args)
    return emit


def _unary(op: str) -> Callable[[Ctx, torch.fx.Node], None]:
    def emit(ctx: Ctx, node: torch.fx.Node) -> None:
        _finish(ctx, node, op, [float_input(ctx, node.args[0]).vi])
    return emit


def emit_gelu_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    x = float_input(ctx, node.args[0])
    approximate = str(arg(node, 1, "approximate", "none"))
    _finish(ctx, node, "aten::gelu", [x.vi, ctx.b.add(String(approximate))])


def emit_softmax_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    x = float_input(ctx, node.args[0])
    dim = int(node.args[1])  # type: ignore[arg-type]
    b = ctx.b
    _finish(ctx, node, "aten::_softmax", [x.vi, b.int_(dim), b.bool_(False)])


def emit_mean_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    x = float_input(ctx, node.args[0])
    b = ctx.b
    if node.target == _aten.adaptive_avg_pool2d.default:
        if [int(s) for s in node.args[1]] != [1, 1]:  # type: ignore[union-attr]
            raise unsupported(node, "a float adaptive average pool to other than 1x1")
        dims, keepdim = [2, 3], True
    else:
        dims = [int(d) for d in node.args[1]]  # type: ignore[union-attr]
        keepdim = bool(arg(node, 2, "keepdim", False))
    _finish(ctx, node, "aten::mean", [x.vi, b.int_list(dims), b.bool_(keepdim), b.none()])


def emit_view_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    """flatten/view/reshape/squeeze/dropout of a contiguous float tensor: the same bytes."""
    x = float_input(ctx, node.args[0])
    out_shape = shape_of(node)
    ctx.env[node] = x if out_shape == x.sizes else alias(ctx, x, out_shape, nhwc=False)


def emit_permute_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    x = float_input(ctx, node.args[0])
    dims = [int(d) for d in node.args[1]]  # type: ignore[union-attr]
    _finish(ctx, node, "aten::permute_copy", [x.vi, ctx.b.int_list(dims)])


def emit_cat_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    items = [float_input(ctx, t).vi for t in node.args[0]]  # type: ignore[union-attr]
    dim = int(arg(node, 1, "dim", 0))  # type: ignore[arg-type]
    b = ctx.b
    _finish(ctx, node, "aten::cat", [b.add(TensorList(items)), b.int_(dim)])


def emit_layer_norm_f32(ctx: Ctx, node: torch.fx.Node) -> None:
    """layer_norm -> native_layer_norm.out: three outs (y, mean, rstd) and their TensorList."""
    x = float_input(ctx, node.args[0])
    shape = [int(s) for s in node.args[1]]  # type: ignore[union-attr]
    weight, bias = arg(node, 2, "weight", None), arg(node, 3, "bias", None)
    eps = float(arg(node, 4, "eps", 1e-5))  # type: ignore[arg-type]
    b = ctx.b
    w_vi = b.none() if weight is None else float_input(ctx, weight).vi
    b_vi = b.none() if bias is None else float_input(ctx, bias).vi
    y = new_float(ctx, node.name, x.sizes)
    stat_sizes = x.sizes[: x.rank - len(shape)] + [1] * len(shape)
    mean = new_float(ctx, f"{node.name}.mean", stat_sizes)
    rstd = new_float(ctx, f"{node.name}.rstd", stat_sizes)
    args = [x.vi, b.int_list(shape), w_vi, b_vi, b.double(eps)]
    call_multi_out(ctx, "aten::native_layer_norm", args, [y.vi, mean.vi, rstd.vi], node)
    ctx.env[node] = y


_VIEWS = (
    _aten.flatten.using_ints, _aten.view.default, _aten.reshape.default, _aten._unsafe_view.default,
    _aten.squeeze.dim, _aten.squeeze.dims, _aten.unsqueeze.default, _aten.dropout.default,
    _aten.clone.default, _aten.contiguous.default,
)

# aten target -> rule emitting its portable fp32 call
FLOAT_EMITTERS: dict[Any, Callable[[Ctx, torch.fx.Node], None]] = {
    _aten.linear.default: emit_linear_f32,
    _aten.conv2d.default: emit_conv2d_f32,
    _aten.add.Tensor: _binary("aten::add"),
    _aten.add_.Tensor: _binary("aten::add"),
    _aten.mul.Tensor: _binary("aten::mul"),
    _aten.mul_.Tensor: _binary("aten::mul"),
    _aten.relu.default: _unary("aten::relu"),
    _aten.relu_.default: _unary("aten::relu"),
    _aten.sigmoid.default: _unary("aten::sigmoid"),
    _aten.tanh.default: _unary("aten::tanh"),
    _aten.gelu.default: emit_gelu_f32,
    _aten.softmax.int: emit_softmax_f32,
    _aten._softmax.default: emit_softmax_f32,
    _aten.mean.dim: emit_mean_f32,
    _aten.adaptive_avg_pool2d.default: emit_mean_f32,
    _aten.permute.default: emit_permute_f32,
    _aten.cat.default: emit_cat_f32,
    _aten.layer_norm.default: emit_layer_norm_f32,
    **{t: emit_view_f32 for t in _VIEWS},
}
FLOAT_RULE_TARGETS.update(FLOAT_EMITTERS)
