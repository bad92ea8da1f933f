"""torch.cond lowered to ExecuTorch's control-flow instructions in the same instruction list.

The form is ExecuTorch's emitter's (exir/emit/_emitter.py, _emit_cond):
    JumpFalseCall(pred, -> false branch)
    <true branch>  MoveCall(true out -> result)  JumpFalseCall(Bool(False), -> end)
    <false branch> MoveCall(false out -> result)
    end:
The predicate is a Bool tensor computed on the device from an int8 tensor:
`x.mean() > c` / `x.sum() > c` (also >=, <, <=) becomes aten::sum.IntList_out (int8 -> int64, all
elements) and aten::<cmp>.Scalar_out against the integer threshold the comparison means in
the quantized domain (exact, no float on the device). ExecuTorch's runtime accepts a Bool
tensor as a jump condition (true when every element is true).

Memory: the branches are consecutive instruction ranges, so a buffer of one branch never
overlaps in lifetime with the other's and the planner lets them share bytes (the branches are
exclusive). Every value read after the cond lives across both ranges by construction. The two
branch outputs are merged into ONE buffer that also backs the result (live from the true
branch to the result's last use), so MoveCall - a value rebind in ExecuTorch's runtime, a copy
in the reference interpreter - gives the same bytes either way. Conservative: the result buffer
is reserved during the whole cond.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx

from torchmcu.lower.context import Ctx, _record
from torchmcu.lower.errors import LoweringError, unsupported
from torchmcu.lower.graph import qparams_of
from torchmcu.lower.kit import resolve_target
from torchmcu.lower.layout import as_contiguous, as_nhwc
from torchmcu.lower.requant import same_qparams
from torchmcu.lower.values import LValue
from torchmcu.ops import views
from torchmcu.ops.core import OpDef
from torchmcu.ops.defs.control import (
    ET_COPY_INDEX,
    PRIM_ADD,
    PRIM_EQ,
    PRIM_SUB,
    SELECT_COPY,
    SUM,
    SYM_SIZE,
)
from torchmcu.pte.program import JumpFalseCall, KernelCall, MoveCall, ScalarType
from torchmcu.quantize.qdq import is_dq, is_q

_aten = torch.ops.aten
COND = torch.ops.higher_order.cond
# the predicate parts, from their patterns (torchmcu/ops/defs/control.py)
_PARTS = views.cond_parts(resolve_target)
_REDUCE = {t: p.params["cond"] for t, p in _PARTS.items() if p.params["cond"] != "compare"}
_COMPARE = {t: p.emits[0] for t, p in _PARTS.items() if p.params["cond"] == "compare"}
_PREDICATE_FORM = ("a torch.cond predicate must be x.mean() or x.sum() of an int8 tensor compared "
                   "(>, >=, <, <=) with a constant")


def _feeds_cond(node: torch.fx.Node) -> bool:
    """The node is only used to compute torch.cond predicates."""
    for u in node.users:
        if u.op == "call_function" and u.target is COND and u.args[0] is node and node not in u.args[3]:
            continue
        if u.op == "call_function" and u.target in _COMPARE and _feeds_cond(u):
            continue
        return False
    return bool(node.users)


def emit_predicate_part(ctx: Ctx, node: torch.fx.Node) -> None:
    """mean/sum/comparisons: lowered by the cond that uses them as predicate (nothing here)."""
    if not _feeds_cond(node):
        raise unsupported(node, "float reductions and comparisons run only as a torch.cond "
                          "predicate (" + _PREDICATE_FORM + ")")


def emit_unsupported_control_flow(ctx: Ctx, node: torch.fx.Node) -> None:
    """while_loop, map, scan, ...: named, with the user's source line."""
    name = getattr(node.target, "__name__", str(node.target))
    raise unsupported(node, f"control flow '{name}' is not supported; only torch.cond (nested "
                      "too) and torch.map with tensor operands and outputs are lowered")


def _control(ctx: Ctx, ins: JumpFalseCall | MoveCall, node: torch.fx.Node, touch: list[int]) -> int:
    b = ctx.b
    index = len(b.instructions)
    b.instructions.append(ins)
    b.touch_values(touch, index)
    _record(ctx, node, type(ins).__name__, index)
    return index


def _threshold(kind: str, reduce: str, c: float, v: LValue, numel: int) -> int:
    """Integer t so that `sum(q) <kind> t` equals `reduce(dequantize(q)) <kind> c`."""
    scale, zp = float(v.scale), int(v.zero_point)  # type: ignore[arg-type]
    per = numel if reduce == "mean" else 1
    real = numel * zp + per * c / scale  # scale > 0
    return math.floor(real) if kind in ("gt", "le") else math.ceil(real)


def _lower_predicate(ctx: Ctx, cond: torch.fx.Node) -> int:
    pred = cond.args[0]
    if not (isinstance(pred, torch.fx.Node) and pred.op == "call_function" and pred.target in _COMPARE):
        raise unsupported(cond, _PREDICATE_FORM)
    red = pred.args[0]
    c = pred.args[1]
    if not (isinstance(red, torch.fx.Node) and red.target in _REDUCE and isinstance(c, (int, float))
            and red.args[0] in ctx.env and len(red.args) == 1 and not red.kwargs):
        raise unsupported(pred, _PREDICATE_FORM)
    v = ctx.env[red.args[0]]
    if v.scalar_type != ScalarType.CHAR or v.scale is None or v.scale <= 0:
        raise unsupported(pred, _PREDICATE_FORM)
    numel = math.prod(v.sizes)
    compare = _COMPARE[pred.target]
    thr = _threshold(compare.schema.name, _REDUCE[red.target], float(c), v, numel)
    b = ctx.b
    total = b.planned(b.new_buffer(f"{pred.name}.sum", 8), ScalarType.LONG, [])
    flag = b.planned(b.new_buffer(f"{pred.name}.pred", 1), ScalarType.BOOL, [])
    _kernel(ctx, SUM, pred, self=v.vi, dim=b.none(), keepdim=b.bool_(False),
            dtype=b.int_(int(ScalarType.LONG)), out=total)
    _kernel(ctx, compare, pred, self=total, other=b.int_(thr), out=flag)
    return flag


def _kernel(ctx: Ctx, op: OpDef, node: torch.fx.Node, /, **named: int) -> int:
    """One KernelCall of a control op (torchmcu/ops/defs/control.py): `named` are value
    indices for its schema arguments in schema order, then, for a loop_scalar op, `returned`,
    the value it writes (evaluated as written, so value numbering follows the rule). The out
    of an "out"/"loop_select" op is passed twice, a loop op's arguments as the schema has them
    (ExecuTorch's emitter's form)."""
    names = [a.name for a in op.schema.args] + (["returned"] if op.call == "loop_scalar" else [])
    if list(named) != names:
        raise LoweringError(f"{op.key}: arguments {list(named)}, the schema's are {names}")
    args = list(named.values())
    if op.call in ("out", "loop_select"):
        args.append(args[-1])
    b = ctx.b
    index = len(b.instructions)
    b.instructions.append(KernelCall(b.operator(op.qualified, op.schema.overload), args))
    b.touch_values(args, index)
    _record(ctx, node, op.key, index)
    return index


def _lower_branch(ctx: Ctx, gm: torch.fx.GraphModule, operands: list[LValue],
                  cond: torch.fx.Node) -> tuple[list[LValue], list[torch.fx.Node]]:
    """Lower a branch body into ctx's builder; its int8 outputs and their FX nodes."""
    lower_call = ctx.lower_call
    assert lower_call is not None, "lower_graph sets the driver's call rule"
    sub = Ctx(gm, ctx.opts, b=ctx.b, report=ctx.report, sources=ctx.sources,
              lower_call=lower_call)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(operands):
        raise LoweringError(f"torch.cond branch {gm.__class__.__name__}: {len(placeholders)} inputs "
                            f"for {len(operands)} operands")
    outs: list[LValue] = []
    items: list[torch.fx.Node] = []
    for node in gm.graph.nodes:
        sub.current = node
        if node in sub.done:
            continue
        if node.op == "placeholder":
            v = operands[placeholders.index(node)]
            sub.env[node] = v
            for q in [u for u in node.users if is_q(u)]:
                if not same_qparams(v.scale, v.zero_point, qparams_of(gm, q)):
                    raise unsupported(q, "a torch.cond branch re-quantizes its operand")
                sub.env[q] = v
                sub.done.add(q)
        elif node.op == "call_function":
            lower_call(sub, node)
        elif node.op == "output":
            results = node.args[0]
            for item in results if isinstance(results, (tuple, list)) else [results]:
                src = item.args[0] if is_dq(item) else item
                if not isinstance(item, torch.fx.Node) or src not in sub.env:
                    raise unsupported(cond, "a torch.cond branch output that is not an int8 tensor "
                                      "(non-tensor or float outputs are not supported)")
                outs.append(sub.env[src])
                items.append(item)
        elif node.op != "get_attr":
            raise unsupported(node, f"graph node kind '{node.op}' in a torch.cond branch")
    return outs, items


def _merge_buffers(ctx: Ctx, keep: str, gone: str) -> None:
    b = ctx.b
    if keep == gone:
        return
    kb, gb = b.buffers[keep], b.buffers.pop(gone)
    kb.nbytes = max(kb.nbytes, gb.nbytes)
    for index in (gb.first_use, gb.last_use):
        if index is not None:
            b.touch(keep, index)
    for vi, key in b.tensor_buffer.items():
        if key == gone:
            b.tensor_buffer[vi] = keep


def emit_cond(ctx: Ctx, node: torch.fx.Node) -> None:
    _, true_node, false_node, operand_nodes = node.args
    operands = []
    for a in operand_nodes:
        if not (isinstance(a, torch.fx.Node) and a in ctx.env):
            raise unsupported(node, f"torch.cond operand {a} is not an int8 tensor (quantize the "
                              "op that produces it, or pass tensors only)")
        operands.append(ctx.env[a])
    flag = _lower_predicate(ctx, node)
    b = ctx.b
    before = set(b.buffers)
    jump_to_false = _control(ctx, JumpFalseCall(flag, -1), node, [flag] + [v.vi for v in operands])
    t_outs, _ = _lower_branch(ctx, getattr(ctx.gm, str(true_node.target)), operands, node)
    results: list[LValue] = []
    for v in t_outs:
        if v.buffer in before:
            raise unsupported(node, "a torch.cond branch returns one of its operands unchanged")
        results.append(v.with_(vi=b.planned(v.buffer, v.scalar_type, v.sizes, v.dim_order)))
    for v, r in zip(t_outs, results):
        _control(ctx, MoveCall(v.vi, r.vi), node, [v.vi, r.vi])
    jump_to_end = _control(ctx, JumpFalseCall(b.bool_(False), -1), node, [])
    false_start = len(b.instructions)
    f_outs, f_items = _lower_branch(ctx, getattr(ctx.gm, str(false_node.target)), operands, node)
    for k, (v, r) in enumerate(zip(f_outs, results)):
        if v.buffer in before:
            raise unsupported(node, "a torch.cond branch returns one of its operands unchanged")
        if v.nhwc != r.nhwc and not v.layout_free:
            ctx.current = f_items[k]
            v = as_nhwc(ctx, v) if r.nhwc else as_contiguous(ctx, v)
        if v.sizes != r.sizes or v.scale != r.scale or v.zero_point != r.zero_point:
            raise LoweringError(f"torch.cond {node.name}: output {k} differs between the branches "
                                f"(sizes {r.sizes} / {v.sizes}, qparams ({r.scale}, {r.zero_point}) / "
                                f"({v.scale}, {v.zero_point}))")
        _merge_buffers(ctx, r.buffer, v.buffer)
        _control(ctx, MoveCall(v.vi, r.vi), node, [v.vi, r.vi])
    end = len(b.instructions)
    b.instructions[jump_to_false] = JumpFalseCall(flag, false_start)
    b.instructions[jump_to_end] = JumpFalseCall(b.instructions[jump_to_end].cond_value_index, end)
    # the result views the merged buffer: reserved over the whole cond (both branches)
    for r in results:
        b.touch(r.buffer, jump_to_false)
        b.touch(r.buffer, end - 1)
    _bind_results(ctx, node, results, "torch.cond")


def _bind_results(ctx: Ctx, node: torch.fx.Node, results: list[LValue], what: str) -> None:
    for g in node.users:
        if g.op != "call_function" or g.target is not operator.getitem:
            raise unsupported(g, f"a {what} result used other than by indexing")
        r = results[int(g.args[1])]
        ctx.env[g] = r
        ctx.done.add(g)
        for q in [u for u in g.users if is_q(u)]:
            if not same_qparams(r.scale, r.zero_point, qparams_of(ctx.gm, q)):
                raise unsupported(q, f"re-quantization of a {what} result")
            ctx.env[q] = r
            ctx.done.add(q)


def emit_map(ctx: Ctx, node: torch.fx.Node) -> None:
    """torch.map as ExecuTorch's emitter's loop (exir/emit/_emitter.py, _emit_map):
        count = aten::sym_size.int(xs, 0)
      loop:
        aten::select_copy.int_out(xs, 0, i, slice)     <body(slice, *operands)>
        executorch_prim::et_copy_index.tensor(result, body_out, i)
        executorch_prim::add.Scalar(i, 1, i)   executorch_prim::eq.Scalar(i, count, done)
        JumpFalseCall(done, loop)
        executorch_prim::sub.Scalar(i, count, i)   (i back to 0 for the next run)
    Tensors crossing the loop are contiguous (a slice of dim 0 is then a contiguous block).
    Memory: every buffer the loop touches lives over the whole loop (conservative)."""
    body_node, mapped, extra = node.args
    if len(mapped) != 1:  # type: ignore[arg-type]
        raise unsupported(node, "torch.map over more than one tensor")
    vals = []
    for a in [*mapped, *extra]:  # type: ignore[misc]
        if not (isinstance(a, torch.fx.Node) and a in ctx.env):
            raise unsupported(node, f"torch.map operand {a} is not an int8 tensor")
        vals.append(ctx.env[a])
    b = ctx.b
    xs = as_contiguous(ctx, vals[0])
    from torchmcu.lower.context import new_int8
    from torchmcu.lower.graph import QParams

    qp = QParams(float(xs.scale), int(xs.zero_point), -128, 127)  # type: ignore[arg-type]
    piece = new_int8(ctx, f"{node.name}.slice", xs.sizes[1:], qp, nhwc=False)
    i, count, done = b.int_(0), b.int_(0), b.bool_(False)
    first = _kernel(ctx, SYM_SIZE, node, self=xs.vi, dim=b.int_(0), returned=count)
    start = len(b.instructions)
    _kernel(ctx, SELECT_COPY, node, self=xs.vi, dim=b.int_(0), index=i, out=piece.vi)
    outs, items = _lower_branch(ctx, getattr(ctx.gm, str(body_node.target)), [piece, *vals[1:]], node)
    if len(outs) != 1:
        raise unsupported(node, "a torch.map body with more than one output")
    ctx.current = items[0]
    out = as_contiguous(ctx, outs[0]) if outs[0].rank == 4 else outs[0]
    if out.nhwc:
        raise unsupported(node, "a torch.map body output that is not contiguous")
    oq = QParams(float(out.scale), int(out.zero_point), -128, 127)  # type: ignore[arg-type]
    result = new_int8(ctx, f"{node.name}.out", [xs.sizes[0], *out.sizes], oq, nhwc=False)
    _kernel(ctx, ET_COPY_INDEX, node, self=result.vi, copy_from=out.vi, index=i)
    _kernel(ctx, PRIM_ADD, node, a=i, b=b.int_(1), returned=i)
    _kernel(ctx, PRIM_EQ, node, a=i, b=count, returned=done)
    end = _control(ctx, JumpFalseCall(done, start), node, [])
    _kernel(ctx, PRIM_SUB, node, a=i, b=count, returned=i)
    for key, buf in b.buffers.items():
        if buf.first_use is not None and buf.first_use <= end and buf.last_use >= start:
            b.touch(key, first)
            b.touch(key, end)
    _bind_results(ctx, node, [result], "torch.map")


def is_control_source(node: torch.fx.Node) -> bool:
    """Kernel calls recorded for this node are emitted by a torch.cond/torch.map itself (its
    predicate, the loop's slice/count/copy ops), not by an op of a branch or loop body."""
    return node.op == "call_function" and (
        node.target in (COND, torch.ops.higher_order.map_impl) or node.target in _COMPARE)


def _unsupported_targets() -> list[object]:
    hops = torch.ops.higher_order
    return [getattr(hops, n) for n in ("while_loop", "scan", "associative_scan") if hasattr(hops, n)]


def check_control_flow(gm: torch.fx.GraphModule) -> None:
    """Before the walk: name an unsupported control-flow construct (rather than the first op
    around it that has no kernel)."""
    targets = set(_unsupported_targets())
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in targets:
            emit_unsupported_control_flow(None, node)  # type: ignore[arg-type]
        if node.op == "call_function" and node.target is torch.ops.higher_order.map_impl:
            continue


# target -> rule, merged into lowering.EMITTERS
CONTROL_FLOW_EMITTERS = {
    COND: emit_cond,
    torch.ops.higher_order.map_impl: emit_map,
    **{t: emit_predicate_part for t in (*_REDUCE, *_COMPARE)},
    **{t: emit_unsupported_control_flow for t in _unsupported_targets()},
}
