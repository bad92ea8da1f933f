"""Program boundaries: inputs (quantize in), outputs (dequantize out) and stray quantize nodes."""

from __future__ import annotations

import numpy as np
import torch
import torch.fx

from torchmcu.lower.builder import ProgramBuilder, nbytes_of
from torchmcu.lower.context import Ctx, call, input_value, new_int8
from torchmcu.lower.errors import LoweringError, unsupported
from torchmcu.lower.float_nodes import NO_INT8_KERNEL, is_float_node
from torchmcu.lower.graph import QParams, qparams_of, shape_of
from torchmcu.lower.layout import as_contiguous
from torchmcu.lower.requant import INT8_MAX, INT8_MIN, same_qparams
from torchmcu.lower.values import LValue
from torchmcu.ops.defs.quantize import DEQUANTIZE, QUANTIZE, quantize_per_tensor
from torchmcu.pte.program import ScalarType
from torchmcu.quantize.qdq import is_dq, is_q


def _qdq_args(b: ProgramBuilder, vi: int, qp: QParams) -> list[int]:
    """Arguments of cortex_m::quantize/dequantize_per_tensor on vi with int8 qparams qp."""
    return [vi, b.double(qp.scale), b.int_(qp.zero_point), b.int_(qp.quant_min),
            b.int_(qp.quant_max), b.int_(int(ScalarType.CHAR))]


qdq_args = _qdq_args  # the float32 rules insert the same calls at int8 <-> float boundaries


def _io_dtype(int8: bool) -> str:
    return "int8" if int8 else "float32"


def lower_placeholder(ctx: Ctx, node: torch.fx.Node) -> None:
    users = list(node.users)
    if not users:
        return
    if _integer_input(ctx, node):
        return
    non_q = [u for u in users if not is_q(u)]
    if non_q:
        if all(is_float_node(ctx, u) for u in non_q):  # read in float32 (any quantize users
            _float_input(ctx, node)                   # are lowered by lower_q from it)
            return
        raise unsupported(non_q[0], "it consumes a float program input (it was not quantized)")
    params = {qparams_of(ctx.gm, q) for q in users}
    if len(params) != 1:
        raise LoweringError(f"input '{node.name}' is quantized with different qparams by its users")
    qp = params.pop()
    sizes = shape_of(node)
    b = ctx.b
    if ctx.opts.int8_io:
        value = new_int8(ctx, node.name, sizes, qp, nhwc=False)
        ctx.inputs.append(value.vi)
    else:
        key = b.new_buffer(node.name, nbytes_of(ScalarType.FLOAT, sizes))
        fvi = b.planned(key, ScalarType.FLOAT, sizes)
        ctx.inputs.append(fvi)
        value = new_int8(ctx, f"{node.name}.q", sizes, qp, nhwc=False)
        call(ctx, QUANTIZE.qualified, _qdq_args(b, fvi, qp), value.vi, users[0])
    ctx.io_info["inputs"].append(
        {"name": node.name, "sizes": sizes, "scale": qp.scale, "zero_point": qp.zero_point,
         "dtype": _io_dtype(ctx.opts.int8_io)}
    )
    for q in users:
        ctx.env[q] = value
        ctx.done.add(q)


# integer program inputs (token ids): torch dtype -> (ScalarType, the report's dtype)
INTEGER_INPUTS = {torch.int64: (ScalarType.LONG, "int64"), torch.int32: (ScalarType.INT, "int32")}


def _integer_input(ctx: Ctx, node: torch.fx.Node) -> bool:
    """An int64/int32 program input (token ids) is passed as it is, never quantized: its
    value is bound to the placeholder for the ops that read integers (an embedding's
    indices). False for any other input."""
    val = node.meta.get("val")
    kind = INTEGER_INPUTS.get(getattr(val, "dtype", None))  # type: ignore[arg-type]
    if kind is None:
        return False
    scalar_type, dtype = kind
    sizes = shape_of(node)
    key = ctx.b.new_buffer(node.name, nbytes_of(scalar_type, sizes))
    vi = ctx.b.planned(key, scalar_type, sizes)
    ctx.inputs.append(vi)
    ctx.env[node] = LValue(vi, key, sizes, scalar_type)
    ctx.io_info["inputs"].append(
        {"name": node.name, "sizes": sizes, "scale": None, "zero_point": None, "dtype": dtype}
    )
    return True


def _float_input(ctx: Ctx, node: torch.fx.Node) -> None:
    """A float32 program input that float nodes read directly."""
    from torchmcu.lower.values import LValue

    sizes = shape_of(node)
    key = ctx.b.new_buffer(node.name, nbytes_of(ScalarType.FLOAT, sizes))
    vi = ctx.b.planned(key, ScalarType.FLOAT, sizes)
    ctx.inputs.append(vi)
    ctx.env[node] = LValue(vi, key, sizes, ScalarType.FLOAT)
    ctx.io_info["inputs"].append(
        {"name": node.name, "sizes": sizes, "scale": None, "zero_point": None, "dtype": "float32"}
    )


def lower_output(ctx: Ctx, node: torch.fx.Node) -> None:
    results = node.args[0]
    items = results if isinstance(results, (tuple, list)) else [results]
    b = ctx.b
    for item in items:
        if isinstance(item, torch.fx.Node) and item in ctx.env and \
                ctx.env[item].scalar_type == ScalarType.FLOAT:  # a float op's result
            ctx.outputs.append(ctx.env[item].vi)
            ctx.io_info["outputs"].append({"name": item.name, "sizes": list(ctx.env[item].sizes),
                                           "scale": None, "zero_point": None, "dtype": "float32"})
            continue
        if not isinstance(item, torch.fx.Node) or not (is_dq(item) or is_q(item) or item in ctx.env):
            raise unsupported(item if isinstance(item, torch.fx.Node) else node,
                              "a program output that is not a quantized tensor")
        src = item.args[0] if is_dq(item) else item
        v = input_value(ctx, src)
        ctx.current = item
        v = as_contiguous(ctx, v)
        qp = QParams(float(v.scale), int(v.zero_point), INT8_MIN, INT8_MAX)  # type: ignore[arg-type]
        int8_out = ctx.opts.int8_io or is_q(item)
        if int8_out:
            out_vi = v.vi
        else:
            key = b.new_buffer(f"{item.name}.out", nbytes_of(ScalarType.FLOAT, v.sizes))
            out_vi = b.planned(key, ScalarType.FLOAT, v.sizes)
            call(ctx, DEQUANTIZE.qualified, _qdq_args(b, v.vi, qp), out_vi, item)
        ctx.outputs.append(out_vi)
        ctx.io_info["outputs"].append(
            {"name": item.name, "sizes": list(v.sizes), "scale": qp.scale,
             "zero_point": qp.zero_point, "dtype": _io_dtype(int8_out)}
        )


def _int8_constant(ctx: Ctx, v: LValue, qp: QParams) -> LValue:
    """The int8 constant of float32 constant v under qp (as the quantize kernel rounds). A
    4-D one holding one value is the same bytes in NHWC: it is declared so, and an int8 rule
    reads it without a transpose."""
    t = ctx.b.tensor(v.vi)
    values = np.frombuffer(ctx.b.constants[t.data_buffer_idx], np.float32).reshape(v.sizes)
    q = quantize_per_tensor(values, qp.scale, qp.zero_point, INT8_MIN, INT8_MAX, np.int8)
    vi = ctx.b.constant(q)
    nhwc = len(v.sizes) == 4 and q.size > 0 and bool((q == q.flat[0]).all())
    if nhwc:
        ctx.b.tensor(vi).dim_order = [0, 2, 3, 1]
    return LValue(vi, "", list(v.sizes), ScalarType.CHAR, qp.scale, qp.zero_point, nhwc=nhwc)


REQUANTIZATION = "re-quantization between two int8 qparams, through float32"


def dequantized(ctx: Ctx, v: LValue) -> LValue:
    """The float32 contiguous twin of int8 value v (made contiguous on the int8 side first:
    a byte per element to move), computed once per value."""
    cached = ctx.twins.get((v.vi, "f32"))
    if cached is not None:
        return cached
    c = as_contiguous(ctx, v)
    qp = QParams(float(v.scale), int(v.zero_point), INT8_MIN, INT8_MAX)  # type: ignore[arg-type]
    key = ctx.b.new_buffer(f"{v.buffer}.f32", nbytes_of(ScalarType.FLOAT, c.sizes))
    out = LValue(ctx.b.planned(key, ScalarType.FLOAT, c.sizes), key, list(c.sizes), ScalarType.FLOAT)
    call(ctx, DEQUANTIZE.qualified, _qdq_args(ctx.b, c.vi, qp), out.vi, None)
    ctx.twins[(v.vi, "f32")] = out
    return out


def lower_q(ctx: Ctx, node: torch.fx.Node) -> None:
    """A quantize not consumed by an anchor: either a re-quantization of an int8 value or the
    output of an unsupported float op."""
    src = node.args[0]
    if isinstance(src, torch.fx.Node) and src in ctx.env and \
            ctx.env[src].scalar_type == ScalarType.FLOAT:  # float -> int8 boundary
        v = ctx.env[src]
        qp = qparams_of(ctx.gm, node)
        if not v.buffer:  # a float32 constant (aten::zeros ...): quantized here, once
            ctx.env[node] = _int8_constant(ctx, v, qp)
            return
        out = new_int8(ctx, node.name, v.sizes, qp, nhwc=False)
        call(ctx, QUANTIZE.qualified, _qdq_args(ctx.b, v.vi, qp), out.vi, node)
        ctx.env[node] = out
        return
    if is_dq(src) and src.args[0] in ctx.env:  # type: ignore[union-attr]
        v = ctx.env[src.args[0]]  # type: ignore[union-attr]
        qp = qparams_of(ctx.gm, node)
        if same_qparams(v.scale, v.zero_point, qp):
            ctx.env[node] = v
            return
        if ctx.opts.strict:
            raise unsupported(node, "re-quantization between two int8 qparams")
        # the float fallback: dequantize, then quantize with the new qparams (what the
        # fake-quantized model computes); reported among the float ops
        ctx.float_nodes[node] = f"{NO_INT8_KERNEL}: {REQUANTIZATION}"
        f = dequantized(ctx, v)
        out = new_int8(ctx, node.name, f.sizes, qp, nhwc=False)
        call(ctx, QUANTIZE.qualified, _qdq_args(ctx.b, f.vi, qp), out.vi, node)
        ctx.env[node] = out
        return
    if isinstance(src, torch.fx.Node) and src.op == "call_function":
        raise unsupported(src)
    raise unsupported(node, "quantize of a value that is not a program input or op output")
