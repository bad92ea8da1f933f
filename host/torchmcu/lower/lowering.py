"""Lower a converted PT2E GraphModule (q/dq around float ops) to a cortex_m Program.

The walk is over the graph in order. A compute op ("anchor": conv2d, linear,
add, pools, softmax, ...) has dequantized inputs and, possibly through one
fused ReLU/clamp, quantize nodes as its users: the anchor becomes one kernel
call whose output carries the quantize node's qparams. dequantize nodes are
transparent (they name the same int8 tensor). Activations flow NHWC; the
program boundaries convert layouts once with cortex_m::transpose.

This module is the driver and the dispatch table; the rules live in rules_*.py,
layout conversions in layout.py, qparam derivation in requant.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from torchmcu.lower.boundaries import lower_output, lower_placeholder, lower_q
from torchmcu.lower.call_check import check_calls
from torchmcu.lower.context import Ctx, LoweringOptions
from torchmcu.lower.errors import (
    LoweringError,
    UnsupportedOpError,
    module_of,
    op_name,
    unsupported,
    user_source_line,
)
from torchmcu.lower.float_nodes import (
    NO_INT8_KERNEL,
    float_reason,
    is_float_node,
    warn_float_fallbacks,
)
from torchmcu.lower.kit import float_rule, pattern_rule, resolve_target
from torchmcu.lower.report import LoweringReport
from torchmcu.lower.requant import ACTIVATIONS
from torchmcu.lower.rules_control import CONTROL_FLOW_EMITTERS, check_control_flow
from torchmcu.ops import views
from torchmcu.plan.check import PlanError
from torchmcu.pte.program import Program
from torchmcu.quantize.annotation import read_annotation
from torchmcu.quantize.qdq import DQ_PER_CHANNEL, DQ_PER_TENSOR, is_q

__all__ = ["EMITTERS", "LoweringOptions", "finish_lowering", "lower_graph", "lower_to_program"]

_aten = torch.ops.aten

# aten target -> rule emitting its kernel call(s): the registry's patterns, then the
# torch.cond/torch.map lowering (a stage concern: it emits the control definitions' calls)
EMITTERS: dict[Any, Callable[[Ctx, torch.fx.Node], None]] = {
    **views.emitters(resolve_target, pattern_rule),
    **CONTROL_FLOW_EMITTERS,
}
# aten target -> rule emitting its portable fp32 call, for a node left in float32 (the
# patterns' lower_float, beside the portable definitions: torchmcu/ops/defs/portable_*.py)
FLOAT_EMITTERS: dict[Any, Callable[[Ctx, torch.fx.Node], None]] = views.float_emitters(
    resolve_target, float_rule
)


def _lower_call(ctx: Ctx, node: torch.fx.Node) -> None:
    """A call_function node: dequantize (transparent), quantize, or an anchor op."""
    if node.target in DQ_PER_TENSOR or node.target in DQ_PER_CHANNEL:
        src = node.args[0]
        if isinstance(src, torch.fx.Node) and src in ctx.env:
            ctx.env[node] = ctx.env[src]
        return
    if is_q(node):
        if node not in ctx.env:
            lower_q(ctx, node)
        return
    if node.target in FLOAT_EMITTERS and is_float_node(ctx, node):
        reason = float_reason(ctx, node)
        if ctx.opts.strict and reason == NO_INT8_KERNEL:  # the fallback is off
            raise unsupported(node)
        ctx.float_nodes[node] = reason
        FLOAT_EMITTERS[node.target](ctx, node)  # left in float32 by the quantizer
        return
    emitter = EMITTERS.get(node.target)
    # without a record, a node the int8 rules cannot take may have been kept in float32
    unrecorded = node.target in FLOAT_EMITTERS and read_annotation(node) is None
    if emitter is None:
        if unrecorded:
            raise _unrecorded(node, None)
        if node.target in ACTIVATIONS:
            raise unsupported(node, "a ReLU/clamp that does not follow a conv2d, linear, "
                              "add or max pool cannot run on its own yet")
        raise unsupported(node)
    try:
        emitter(ctx, node)
    except UnsupportedOpError as refused:
        if unrecorded:
            raise _unrecorded(node, refused) from refused
        raise


def _unrecorded(node: torch.fx.Node, refused: UnsupportedOpError | None) -> UnsupportedOpError:
    """The error for an op that has no annotation record and no int8 form that takes it."""
    why = ""
    if refused is not None:
        detail = f" ({refused.why})" if refused.why else ""
        why = f"its int8 rule refused it{detail} and "
    return unsupported(node, f"{why}it has no torchmcu annotation record (node.meta['custom']"
                       "['torchmcu']), so whether it was kept in float32 is unknown; quantize "
                       "the model again with torchmcu.quantize")


def _skip(ctx: Ctx, node: torch.fx.Node) -> None:
    """get_attr: constants are read by the rules that use them."""


# fx node kind -> handler
_NODE_KINDS: dict[str, Callable[[Ctx, torch.fx.Node], None]] = {
    "placeholder": lower_placeholder,
    "get_attr": _skip,
    "output": lower_output,
    "call_function": _lower_call,
}


def lower_graph(
    gm: torch.fx.GraphModule,
    *,
    int8_io: bool = False,
    linear_kernel_sum: bool = True,
    strict: bool = False,
) -> Ctx:
    """Walk the graph into kernel calls (not yet memory-planned): the lowering state, whose
    builder the NPU partitioner rewrites before planning. ctx.sources[i] is the FX node that
    instruction i came from.

    The float fallback: an op without an int8 kernel runs its portable fp32 kernel, with a
    dequantize before it and a quantize after it, and export warns once per operator
    (FloatFallbackWarning, naming its source lines). That is an op no int8 pattern annotates,
    or one whose int8 rule refuses its configuration (softmax over dim 0): the graph is then
    lowered again with that node in float32. strict=True refuses both instead, naming the op
    and its line; the nodes the float config keeps in float32 run there either way."""
    opts = LoweringOptions(int8_io=int8_io, linear_kernel_sum=linear_kernel_sum, strict=strict)
    check_control_flow(gm)  # while_loop/map/scan: named before any op around them
    fallback: dict[torch.fx.Node, str] = {}
    while True:
        try:
            ctx = _lower_nodes(gm, opts, fallback)
            break
        except UnsupportedOpError as e:
            node = e.node
            if (strict or node is None or node in fallback or node.target not in FLOAT_EMITTERS
                    or read_annotation(node) is None):  # no record: not our quantizer's graph
                raise
            fallback = {**fallback, node: e.why}  # its portable fp32 kernel instead
    warn_float_fallbacks(ctx)
    return ctx


def _lower_nodes(
    gm: torch.fx.GraphModule, opts: LoweringOptions, fallback: dict[torch.fx.Node, str]
) -> Ctx:
    ctx = Ctx(gm, opts, lower_call=_lower_call, fallback=fallback)
    for node in gm.graph.nodes:
        ctx.current = node
        if node in ctx.done:
            continue
        handler = _NODE_KINDS.get(node.op)
        if handler is None:
            raise unsupported(node, f"graph node kind '{node.op}'")
        handler(ctx, node)
    if not ctx.b.instructions:
        raise LoweringError("the model lowered to no kernel calls")
    return ctx


def finish_lowering(
    ctx: Ctx, planner: Callable | None = None
) -> tuple[Program, LoweringReport]:
    """Plan the arena of a lowered graph and return the Program with its report."""
    from torchmcu.plan import BufferRequest, plan_memory

    try:
        program, plan = ctx.b.finish(
            ctx.inputs, ctx.outputs, planner or plan_memory, BufferRequest,
            name=ctx.opts.method_name,
        )
    except PlanError as e:  # name the model node behind the instruction too
        entry = ctx.report[e.instruction] if e.instruction is not None else None
        if entry is None or not entry.node:
            raise
        where = f" at {entry.source}" if entry.source else ""
        raise PlanError(
            f"{e}; instruction {e.instruction} was lowered from node {entry.node} "
            f"({entry.target}){where}",
            e.instruction,
        ) from None
    check_calls(program, ctx.report)  # a rule's bad argument stops here, not at the runtime
    constant_bytes = sum(len(c) for c in program.constants)
    report = LoweringReport(
        nodes=ctx.report,
        arena_bytes=plan.arena_bytes,
        arena_lower_bound=plan.lower_bound,
        constant_bytes=constant_bytes,
        inputs=ctx.io_info["inputs"],
        outputs=ctx.io_info["outputs"],
        float_ops=[
            {"node": n.name, "target": op_name(n), "reason": reason, "module": module_of(n),
             "source": user_source_line(n)}
            for n, reason in ctx.float_nodes.items()
        ],
    )
    return program, report


def lower_to_program(
    gm: torch.fx.GraphModule,
    example_inputs: tuple[Any, ...] | None = None,
    *,
    int8_io: bool = False,
    linear_kernel_sum: bool = True,
    planner: Callable | None = None,
    strict: bool = False,
) -> tuple[Program, LoweringReport]:
    """Lower a convert_pt2e GraphModule to a memory-planned cortex_m Program.

    example_inputs is accepted for API symmetry (shapes come from the graph's metadata).
    int8_io: program inputs/outputs stay int8 (their qparams are in the report) instead of
    float32 with quantize/dequantize inside the program. planner defaults to
    torchmcu.plan.plan_memory. strict: no float fallback (lower_graph).
    """
    del example_inputs
    ctx = lower_graph(gm, int8_io=int8_io, linear_kernel_sum=linear_kernel_sum, strict=strict)
    return finish_lowering(ctx, planner)
