"""Lowering state and the emit helpers every operator rule shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx

from torchmcu.lower.builder import NHWC_DIM_ORDER, ProgramBuilder, nbytes_of
from torchmcu.lower.errors import module_of, op_name, unsupported, user_source_line
from torchmcu.lower.graph import QParams, quantized_constant
from torchmcu.lower.report import NodeReport
from torchmcu.lower.values import LValue
from torchmcu.pte.program import ScalarType, Tensor
from torchmcu.quantize.qdq import is_dq


@dataclass
class LoweringOptions:
    int8_io: bool = False
    linear_kernel_sum: bool = True  # kernel_sum (ExecuTorch's MVE form) where it fits int32, not bias
    method_name: str = "forward"
    # refuse every op without an int8 kernel (no float fallback) unless the float config keeps
    # it in float32
    strict: bool = False


@dataclass
class Ctx:
    """Everything one lowering run accumulates while walking the graph."""

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
    # per instruction index: the FX node it was lowered from (the partitioner reads its
    # annotation record to place the call on the NPU or the CPU)
    sources: list[torch.fx.Node | None] = field(default_factory=list)
    # the driver's rule for one call_function node, set by lower_graph: rules that lower a
    # body graph (torch.cond, torch.map) call it without importing the driver above them
    lower_call: Callable[[Ctx, torch.fx.Node], None] | None = None
    # the float fallback: int8-annotated nodes whose int8 rule refused them (and why), run in
    # float32 (lower_graph lowers again with them here)
    fallback: dict[torch.fx.Node, str] = field(default_factory=dict)
    # every node lowered in float32, in order, and why (float_nodes.float_reason)
    float_nodes: dict[torch.fx.Node, str] = field(default_factory=dict)


def _record(ctx: Ctx, node: torch.fx.Node | None, op: str, instr: int) -> None:
    assert instr == len(ctx.sources), "kernel calls are recorded in order"
    ctx.sources.append(node)
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


def call(ctx: Ctx, op: str, args: Sequence[int], out: int, node: torch.fx.Node | None) -> None:
    """Emit one kernel call and attribute it to node (or the node being lowered)."""
    instr = ctx.b.call(op, args, out)
    _record(ctx, node if node is not None else ctx.current, op, instr)


def call_multi_out(
    ctx: Ctx, op: str, args: Sequence[int], outs: Sequence[int], node: torch.fx.Node | None
) -> None:
    """Emit a multi-output op the way ExecuTorch writes it: args, the outs, then ONE TensorList
    value holding the outs (the returned tuple)."""
    from torchmcu.pte.program import KernelCall, TensorList

    b = ctx.b
    full = list(args) + list(outs) + [b.add(TensorList(list(outs)))]
    instr = len(b.instructions)
    b.instructions.append(KernelCall(b.operator(op), full))
    b.touch_values(full, instr)
    _record(ctx, node if node is not None else ctx.current, op, instr)


def _layout(nhwc: bool, rank: int) -> list[int] | None:
    """dim_order for builder.planned: legacy channels-last (3-D: [N, L, C] memory), or None
    for contiguous."""
    if not nhwc:
        return None
    return [0, 2, 1] if rank == 3 else NHWC_DIM_ORDER


def new_int8(ctx: Ctx, hint: str, sizes: Sequence[int], qp: QParams | None, nhwc: bool,
             scalar_type: ScalarType = ScalarType.CHAR) -> LValue:
    """A fresh planned int8 (or `scalar_type`: int16) tensor carrying qp."""
    sizes = list(sizes)
    key = ctx.b.new_buffer(hint, nbytes_of(scalar_type, sizes))
    vi = ctx.b.planned(key, scalar_type, sizes, _layout(nhwc, len(sizes)))
    return LValue(
        vi, key, sizes, scalar_type,
        qp.scale if qp else None, qp.zero_point if qp else None, nhwc=nhwc,
    )


def alias(ctx: Ctx, v: LValue, sizes: Sequence[int], nhwc: bool, **kw: Any) -> LValue:
    """Another view of v's bytes (no instruction); of a constant's too (buffer "")."""
    sizes = list(sizes)
    if not v.buffer:
        order = _layout(nhwc, len(sizes)) or list(range(len(sizes)))
        t = Tensor(v.scalar_type, sizes, order, data_buffer_idx=ctx.b.tensor(v.vi).data_buffer_idx)
        return v.with_(vi=ctx.b.add(t), sizes=sizes, nhwc=nhwc, flatten_chw=kw.get("flatten_chw"))
    vi = ctx.b.planned(v.buffer, v.scalar_type, sizes, _layout(nhwc, len(sizes)))
    return v.with_(vi=vi, sizes=sizes, nhwc=nhwc, flatten_chw=kw.get("flatten_chw"))


def scratch_buffer(ctx: Ctx, hint: str, nbytes: int) -> int:
    """A planned byte buffer of nbytes, the scratch of the call `hint` names."""
    key = ctx.b.new_buffer(f"{hint}.scratch", nbytes)
    return ctx.b.planned(key, ScalarType.BYTE, [nbytes])


def _int8_constant(ctx: Ctx, node: torch.fx.Node) -> LValue:
    """A per-tensor int8 constant as a value (cached in ctx.env)."""
    qc = quantized_constant(ctx.gm, node, "constant")
    if qc.values.dtype != np.int8 or qc.axis is not None:
        raise unsupported(ctx.current, f"its input {node} is a constant that is not per-tensor "
                          "int8")  # type: ignore[arg-type]
    values = np.ascontiguousarray(qc.values)
    value = LValue(ctx.b.constant(values), "", list(values.shape), ScalarType.CHAR,
                   float(qc.scales[0]), int(qc.zero_points[0]), nhwc=False)
    ctx.env[node] = value
    return value


INDEX_TYPES = (ScalarType.LONG, ScalarType.INT)


def input_value(ctx: Ctx, node: object) -> LValue:
    """The int8 value behind a (dequantized) input argument."""
    if isinstance(node, torch.fx.Node) and node in ctx.env:
        value = ctx.env[node]
        if value.scalar_type in INDEX_TYPES:  # an integer program input: only a gather reads it
            raise unsupported(ctx.current, f"its input {node} is an integer program input; "  # type: ignore[arg-type]
                              "only an embedding reads one")
        return value
    if is_dq(node) and isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "get_attr":
        # an int8 constant used as an activation (a class token, a position embedding)
        return _int8_constant(ctx, node)
    if isinstance(node, torch.fx.Node) and node.op == "placeholder":
        raise unsupported(ctx.current, "a float program input is used directly by this op "
                          "(the op was not annotated for quantization)")  # type: ignore[arg-type]
    raise unsupported(ctx.current, f"its input {node} is not an int8 tensor (a float op feeds "
                      "it)")  # type: ignore[arg-type]


def bind_output(ctx: Ctx, qs: list[torch.fx.Node], act: torch.fx.Node | None, out: LValue) -> None:
    """Make the anchor's quantize users (and fused activation) resolve to out."""
    for q in qs:
        ctx.env[q] = out
        ctx.done.add(q)
    if act is not None:
        ctx.done.add(act)


def index_value(ctx: Ctx, node: torch.fx.Node, arg: object, rows: int) -> int:
    """The integer indices `arg` of gather `node`: an int64/int32 program input (its value as
    it is) or a constant integer tensor (stored int32, every value checked in [0, rows))."""
    if isinstance(arg, torch.fx.Node) and arg in ctx.env:
        value = ctx.env[arg]
        if value.scalar_type not in INDEX_TYPES:
            raise unsupported(node, f"its indices {arg} are not an integer tensor")
        return value.vi
    if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
        from torchmcu.lower.graph import attr_tensor

        t = attr_tensor(ctx.gm, arg)
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise unsupported(node, f"its indices {arg} are a {t.dtype} constant, not integers")
        values = t.numpy().astype(np.int64)
        if values.size and (values.min() < 0 or values.max() >= rows):
            bad = values[(values < 0) | (values >= rows)].reshape(-1)[0]
            raise unsupported(node, f"its constant indices hold {int(bad)}, outside [0, {rows})")
        return ctx.b.constant(values.astype(np.int32))
    raise unsupported(node, f"its indices {arg} are computed by an op; an embedding reads a "
                      "program input or a constant")
