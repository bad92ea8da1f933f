"""Place each lowered kernel call on the Ethos-U NPU or the Cortex-M, then delegate the NPU parts.

Placement is decided per FX node from the annotation record our quantizer left in
``node.meta["custom"]["torchmcu"]`` (never from dtypes): a quantized node whose kernel calls
the target's NPU can all run (npu_support) goes to the NPU, anything else stays on the CPU with
the reason. The program's float input quantize and output dequantize always stay on the CPU.
Connected NPU calls are grouped into subgraphs such that the program stays acyclic (no subgraph
both feeds and consumes a CPU call); each subgraph is carved into a sub-Program, lowered to
TOSA, compiled by Vela and replaced by one DelegateCall ``[inputs..., outputs..., scratch]``
to an "EthosUBackend" delegate whose blob is a program segment. The arena is planned again
afterwards, with each delegate's I/O and its Vela scratch region as planned tensors.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.fx

from torchmcu.lower.context import Ctx
from torchmcu.npu.config import NpuTarget
from torchmcu.ops import views
from torchmcu.ops.defs.quantize import DEQUANTIZE, QUANTIZE
from torchmcu.ops.core import bind
from torchmcu.pte import program as pm
from torchmcu.quantize.annotation import META_KEY, read_annotation
from torchmcu.quantize.qdq import is_dq, is_q

BACKEND_ID = "EthosUBackend"
# (name, overload) -> definition of the torch.cond/torch.map ops (torchmcu/ops/defs/control.py)
_CONTROL = views.control_ops()
# The ops whose definition counts their multiply-accumulates (instruction_macs)
_MACS = views.macs()


class PartitionError(ValueError):
    """The graph cannot be partitioned (e.g. a node lacks the quantizer's annotation record)."""


@dataclass
class Placement:
    """Where one FX node's kernel calls run, and why."""

    node: str
    target: str
    instructions: list[int]  # kernel-call indices of the CPU-lowered program
    ops: list[str]
    where: str  # "npu" | "cpu" | "float"
    reason: str
    subgraph: int | None = None
    macs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "target": self.target,
            "where": self.where,
            "subgraph": self.subgraph,
            "reason": self.reason,
            "ops": self.ops,
            "instructions": self.instructions,
            "macs": self.macs,
        }


@dataclass
class Subgraph:
    """One NPU delegate: the calls it replaced and what it became."""

    index: int
    instructions: list[int]
    subprogram: pm.Program
    inputs: list[int]  # main-program value indices, in delegate order
    outputs: list[int]
    tosa: Any  # tosa.lower.TosaGraph
    vela: Any  # vela.VelaResult


@dataclass
class NpuPartition:
    """The result of partitioning one lowered program for one NPU target."""

    target: NpuTarget
    placements: list[Placement]
    subgraphs: list[Subgraph] = field(default_factory=list)
    # The same graph lowered for the CPU only (planned): the integer reference an NPU program
    # must reproduce (bundle expected outputs come from it).
    cpu_program: pm.Program | None = None


# -- which node an instruction belongs to --------------------------------------------------


def record_node(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose annotation record decides `node`: q/dq nodes (inserted by convert_pt2e,
    without records) stand for the op whose value they carry."""
    seen = 0
    while (is_q(node) or is_dq(node)) and seen < 64:
        src = node.args[0]
        if not isinstance(src, torch.fx.Node):
            break
        node, seen = src, seen + 1
    return node


def _op_name(plan: pm.ExecutionPlan, ins: pm.KernelCall) -> str:
    return plan.operators[ins.op_index].name


def _boundary_reason(op: str, source: torch.fx.Node | None) -> str | None:
    """The program's input quantize (a quantize of a graph input) and output dequantize (a
    dequantize the graph returns) stay on the CPU: told by the graph, not by dtypes."""
    if source is None:
        return None
    if op == QUANTIZE.qualified and is_q(source):
        src = source.args[0]
        if isinstance(src, torch.fx.Node) and src.op == "placeholder":
            return "program input quantize (float32 -> int8) runs on the CPU"
    returned = any(user.op == "output" for user in source.users)
    if op == DEQUANTIZE.qualified and is_dq(source) and returned:
        return "program output dequantize (int8 -> float32) runs on the CPU"
    return None


def _target_name(node: torch.fx.Node) -> str:
    t = node.target
    return str(getattr(t, "__name__", t)) if node.op == "call_function" else node.op


def instruction_macs(plan: pm.ExecutionPlan, ins: pm.KernelCall) -> int:
    """Multiply-accumulates of one kernel call (its definition's count; 0 for ops without)."""
    defined = _MACS.get(_op_name(plan, ins))
    if defined is None:
        return 0
    return defined.macs(bind(defined, plan.values, ins.args))  # type: ignore[misc]


def is_barrier(
    plan: pm.ExecutionPlan, ins: pm.Instruction, source: torch.fx.Node | None
) -> bool:
    """Control-flow instructions are fixed points of the schedule: jumps, moves, and the kernel
    calls a torch.cond/torch.map emits itself (its predicate, the loop counter, slice and copy
    ops). Only straight-line runs of ordinary kernel calls between them are regrouped."""
    from torchmcu.lower.rules_control import is_control_source

    if not isinstance(ins, pm.KernelCall):
        return True
    op = plan.operators[ins.op_index]
    definition = _CONTROL.get((op.name, op.overload))
    if definition is not None and definition.barrier:  # the loop counter and copy (prim ops)
        return True
    return source is not None and is_control_source(source)


def segments(plan: pm.ExecutionPlan, sources: Sequence[torch.fx.Node | None]) -> list[list[int]]:
    """The instruction list cut at every barrier and every jump destination: each barrier is a
    segment of its own, the rest are straight-line runs (one branch body or a stretch of the
    top level) inside which calls may be reordered and grouped."""
    instrs = plan.chains[0].instructions
    targets = {i.destination_instruction for i in instrs if isinstance(i, pm.JumpFalseCall)}
    result: list[list[int]] = []
    run: list[int] = []
    for i, ins in enumerate(instrs):
        if i in targets and run:
            result.append(run)
            run = []
        if is_barrier(plan, ins, sources[i] if i < len(sources) else None):
            if run:
                result.append(run)
                run = []
            result.append([i])
        else:
            run.append(i)
    if run:
        result.append(run)
    return result


def decide(
    ctx: Ctx,
    program: pm.Program,
    family: str,
    support: Callable[[pm.ExecutionPlan, int, str], str | None],
) -> tuple[list[Placement], dict[int, str]]:
    """Placement per FX node (in instruction order) and where each instruction runs."""
    plan = program.execution_plan[0]
    instrs = plan.chains[0].instructions
    by_node: dict[torch.fx.Node, Placement] = {}
    order: list[Placement] = []
    where: dict[int, str] = {}
    nodes: dict[int, torch.fx.Node] = {}
    control: dict[torch.fx.Node | None, Placement] = {}
    for i, ins in enumerate(instrs):
        source = ctx.sources[i] if i < len(ctx.sources) else None
        if is_barrier(plan, ins, source):
            op = _op_name(plan, ins) if isinstance(ins, pm.KernelCall) else type(ins).__name__
            if source not in control:
                name = source.name if source is not None else f"<instruction {i}>"
                control[source] = Placement(
                    name, _target_name(source) if source is not None else op, [], [], "cpu",
                    "control flow (torch.cond/torch.map: jumps, moves, loop and predicate "
                    "kernels) runs on the CPU",
                )
                order.append(control[source])
            control[source].instructions.append(i)
            control[source].ops.append(op)
            where[i] = "cpu"
            continue
        assert isinstance(ins, pm.KernelCall)
        op = _op_name(plan, ins)
        boundary = _boundary_reason(op, source)
        if boundary is not None:
            name = source.name if source is not None else f"<instruction {i}>"
            p = Placement(name, op, [i], [op], "cpu", boundary)
            order.append(p)
            where[i] = "cpu"
            continue
        if source is None:
            raise PartitionError(
                f"kernel call {i} ({op}) has no source node to decide its placement"
            )
        node = record_node(source)
        if node not in by_node:
            p = Placement(node.name, _target_name(node), [], [], "", "")
            by_node[node] = p
            nodes[id(p)] = node
            order.append(p)
        p = by_node[node]
        p.instructions.append(i)
        p.ops.append(op)
        p.macs += instruction_macs(plan, ins)
    for p in order:
        if p.where:
            continue
        node = nodes[id(p)]
        ann = read_annotation(node)
        if ann is None:
            raise PartitionError(
                f"node '{node.name}' ({p.target}) has no torchmcu annotation record "
                f"(node.meta['custom']['{META_KEY}']): the graph was not quantized by this "
                "torchmcu's quantizer (an older graph, or a pass dropped the record); quantize it "
                "again with torchmcu.quantize before partitioning for the NPU"
            )
        if not ann.quantized:
            p.where, p.reason = "float", "left in float by the quantizer (not quantized)"
        elif node in ctx.float_nodes:  # the float fallback (no int8 kernel for its arguments)
            p.where, p.reason = "float", f"in float32: {ctx.float_nodes[node]}"
        else:
            reasons = [(i, support(plan, i, family)) for i in p.instructions]
            bad = [(i, r) for i, r in reasons if r is not None]
            if bad:
                i, r = bad[0]
                p.where = "cpu"
                p.reason = f"{_op_name(plan, instrs[i])}: {r}"  # type: ignore[arg-type]
            else:
                p.where = "npu"
                p.reason = (
                    f"quantized ({ann.pattern or p.target}) and supported by Ethos-{family.upper()}"
                )
        for i in p.instructions:
            where[i] = "npu" if p.where == "npu" else "cpu"
    return order, where


def with_codeless_nodes(gm: torch.fx.GraphModule, placements: list[Placement]) -> list[Placement]:
    """All placements in graph order, plus the nodes that lowered to no kernel call (a ReLU or
    clamp fused into its producer, a flatten or view of its input's bytes): they run wherever
    their producer runs. q/dq nodes only carry values and are not listed."""
    by_name = {p.node: p for p in placements}
    result: list[Placement] = []
    for node in gm.graph.nodes:
        if node.name in by_name:
            result.append(by_name[node.name])
            continue
        if node.op != "call_function" or is_q(node) or is_dq(node):
            continue
        src = node.args[0] if node.args else None
        producer = record_node(src) if isinstance(src, torch.fx.Node) else None
        ann = read_annotation(node)
        if producer is None or producer.name not in by_name:
            what = producer.name if producer is not None else "nothing"
            result.append(
                Placement(
                    node.name, _target_name(node), [], [], "cpu", f"no kernel call (reads {what})"
                )
            )
            continue
        base = by_name[producer.name]
        if ann is not None and ann.role == "activation":
            reason = f"fused into {producer.name} (its output range)"
        else:
            reason = f"no kernel call (a view of {producer.name}'s bytes)"
        p = Placement(node.name, _target_name(node), [], [], base.where, reason, base.subgraph)
        by_name[node.name] = p
        result.append(p)
    return result


# -- dependencies, grouping, ordering --------------------------------------------------------


def dependencies(b: Any, instrs: Sequence[pm.KernelCall | pm.DelegateCall]) -> list[set[int]]:
    """preds[i]: instructions whose output (an arena buffer) instruction i reads. A kernel
    call's last argument is its out tensor or, for a multi-output op, the list of its outs;
    the tensors it reads include the items of a tensor list argument (aten::cat)."""
    writers: dict[str, list[int]] = {}
    for i, ins in enumerate(instrs):
        if isinstance(ins, pm.KernelCall):
            for vi in b.referenced_tensors(ins.args[-1:]):
                writers.setdefault(b.tensor_buffer[vi], []).append(i)
    preds: list[set[int]] = []
    for i, ins in enumerate(instrs):
        deps: set[int] = set()
        for vi in b.referenced_tensors(ins.args):
            deps.update(w for w in writers.get(b.tensor_buffer[vi], []) if w < i)
        preds.append(deps)
    return preds


def _acyclic(unit_of: Sequence[int], preds: Sequence[set[int]]) -> bool:
    edges: dict[int, set[int]] = {}
    for i, ps in enumerate(preds):
        for p in ps:
            if unit_of[p] != unit_of[i]:
                edges.setdefault(unit_of[p], set()).add(unit_of[i])
    state: dict[int, int] = {}
    for start in set(unit_of):
        if start in state:
            continue
        stack = [(start, iter(edges.get(start, ())))]
        state[start] = 1
        while stack:
            u, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[u] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return False
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(edges.get(nxt, ()))))
    return True


def group(where: dict[int, str], preds: Sequence[set[int]]) -> list[list[int]]:
    """Connected NPU instructions as subgraphs; a merge that would make a subgraph both feed and
    consume a CPU call (a cycle between units) is not made."""
    n = len(preds)
    unit_of = list(range(n))  # CPU instructions are their own units; NPU ones get group ids

    def members(u: int) -> list[int]:
        return [i for i in range(n) if unit_of[i] == u]

    def try_merge(units: set[int], i: int) -> bool:
        saved = list(unit_of)
        target = min(units | {unit_of[i]})
        for j in range(n):
            if unit_of[j] in units or j == i:
                unit_of[j] = target
        if _acyclic(unit_of, preds):
            return True
        unit_of[:] = saved
        return False

    for i in range(n):
        if where.get(i) != "npu":
            continue
        pred_units = {unit_of[p] for p in preds[i] if where.get(p) == "npu"}
        if pred_units and not try_merge(pred_units, i):
            for u in sorted(pred_units):
                if try_merge({u}, i):
                    break
    # Siblings: NPU units joined by an edge (either way) that could still merge.
    changed = True
    while changed:
        changed = False
        npu_units = sorted({unit_of[i] for i in range(n) if where.get(i) == "npu"})
        for a in npu_units:
            for b in npu_units:
                if a >= b or not any(unit_of[i] == a for i in range(n)):
                    continue
                linked = any(
                    unit_of[p] in (a, b) and unit_of[i] in (a, b) and unit_of[p] != unit_of[i]
                    for i in range(n)
                    for p in preds[i]
                )
                if linked and try_merge({a, b}, members(b)[0]):
                    changed = True
    groups: dict[int, list[int]] = {}
    for i in range(n):
        if where.get(i) == "npu":
            groups.setdefault(unit_of[i], []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def schedule(
    n: int, groups: Sequence[Sequence[int]], preds: Sequence[set[int]]
) -> list[tuple[str, int]]:
    """Topological order of CPU instructions ("cpu", i) and subgraphs ("npu", k), each as early
    in the original order as its inputs allow."""
    unit: dict[int, tuple[str, int]] = {i: ("cpu", i) for i in range(n)}
    first: dict[tuple[str, int], int] = {}
    for k, g in enumerate(groups):
        for i in g:
            unit[i] = ("npu", k)
    for i in range(n):
        first[unit[i]] = min(first.get(unit[i], i), i)
    succ: dict[tuple[str, int], set[tuple[str, int]]] = {u: set() for u in first}
    indeg: dict[tuple[str, int], int] = {u: 0 for u in first}
    for i, ps in enumerate(preds):
        for p in ps:
            a, b = unit[p], unit[i]
            if a != b and b not in succ[a]:
                succ[a].add(b)
                indeg[b] += 1
    ready = [(first[u], u) for u in first if indeg[u] == 0]
    heapq.heapify(ready)
    out: list[tuple[str, int]] = []
    while ready:
        _, u = heapq.heappop(ready)
        out.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(ready, (first[v], v))
    if len(out) != len(first):
        raise PartitionError("internal: the partitioned program has a cycle between subgraphs")
    return out


# -- cleaning the rewritten program ----------------------------------------------------------


def compact_values(program: pm.Program) -> pm.Program:
    """Drop values no instruction, list or method I/O refers to (the delegated calls' weights
    and intermediates), renumbering the rest, then drop unreferenced constants."""
    from torchmcu.pte.writer import prune_unused

    plan = program.execution_plan[0]
    keep: set[int] = set(plan.inputs) | set(plan.outputs)
    for chain in plan.chains:
        keep |= set(chain.inputs) | set(chain.outputs)
        for ins in chain.instructions:
            if isinstance(ins, (pm.KernelCall, pm.DelegateCall)):
                keep |= set(ins.args)
            elif isinstance(ins, pm.MoveCall):
                keep |= {ins.move_from, ins.move_to}
            elif isinstance(ins, pm.JumpFalseCall):
                keep.add(ins.cond_value_index)
    for vi in list(keep):
        v = plan.values[vi]
        if isinstance(v, (pm.IntList, pm.TensorList)):
            keep |= set(v.items)
        elif isinstance(v, pm.OptionalTensorList):
            keep |= {x for x in v.items if x >= 0}
    order = sorted(keep)
    remap = {old: new for new, old in enumerate(order)}

    def r(xs: Sequence[int]) -> list[int]:
        return [remap[x] for x in xs]

    values: list[pm.EValue] = []
    for old in order:
        v = plan.values[old]
        if isinstance(v, pm.IntList):
            v = pm.IntList(r(v.items))
        elif isinstance(v, pm.TensorList):
            v = pm.TensorList(r(v.items))
        elif isinstance(v, pm.OptionalTensorList):
            v = pm.OptionalTensorList([remap[x] if x >= 0 else -1 for x in v.items])
        values.append(v)
    chains = []
    for chain in plan.chains:
        instrs: list[pm.Instruction] = []
        for ins in chain.instructions:
            if isinstance(ins, pm.KernelCall):
                instrs.append(pm.KernelCall(ins.op_index, r(ins.args)))
            elif isinstance(ins, pm.DelegateCall):
                instrs.append(pm.DelegateCall(ins.delegate_index, r(ins.args)))
            elif isinstance(ins, pm.MoveCall):
                instrs.append(pm.MoveCall(remap[ins.move_from], remap[ins.move_to]))
            elif isinstance(ins, pm.JumpFalseCall):
                instrs.append(pm.JumpFalseCall(remap[ins.cond_value_index],
                                               ins.destination_instruction))
            else:
                instrs.append(ins)
        chains.append(pm.Chain(r(chain.inputs), r(chain.outputs), instrs))
    used_ops = sorted(
        {i.op_index for c in chains for i in c.instructions if isinstance(i, pm.KernelCall)}
    )
    op_map = {old: new for new, old in enumerate(used_ops)}
    for c in chains:
        for k, ins in enumerate(c.instructions):
            if isinstance(ins, pm.KernelCall):
                c.instructions[k] = pm.KernelCall(op_map[ins.op_index], ins.args)
    new_plan = pm.ExecutionPlan(
        name=plan.name,
        values=values,
        inputs=r(plan.inputs),
        outputs=r(plan.outputs),
        chains=chains,
        operators=[plan.operators[i] for i in used_ops],
        delegates=list(plan.delegates),
        non_const_buffer_sizes=list(plan.non_const_buffer_sizes),
    )
    return prune_unused(
        pm.Program(
            [new_plan],
            constants=program.constants,
            segments_data=program.segments_data,
            version=program.version,
        )
    )


def _final_node_reports(
    ctx: Ctx, order: Sequence[tuple[str, int]], groups: Sequence[Sequence[int]]
) -> list[Any]:
    """The lowering report's per-instruction entries for the partitioned program: a kept kernel
    call keeps its entry (new index), a DelegateCall lists the nodes it runs."""
    from torchmcu.lower.report import NodeReport

    result = []
    for new_index, (kind, i) in enumerate(order):
        if kind == "cpu":
            result.append(dataclasses.replace(ctx.report[i], instruction=new_index))
            continue
        names = list(dict.fromkeys(ctx.report[j].node for j in groups[i]))
        result.append(
            NodeReport(
                instruction=new_index,
                op=f"delegate:{BACKEND_ID}",
                node=f"npu_subgraph{i}",
                target=BACKEND_ID,
                module="",
                source=f"{len(groups[i])} kernel calls of {', '.join(names)}",
            )
        )
    return result


# -- the driver ---------------------------------------------------------------------------


def partition(
    ctx: Ctx,
    target: NpuTarget,
    planner: Callable | None = None,
) -> tuple[pm.Program, Any, NpuPartition]:
    """Partition a lowered (unplanned) graph for `target`: returns the final Program (with
    DelegateCalls, re-planned, unreferenced values and constants dropped), the lowering report
    of its arena, and the placement decisions with each subgraph's sub-Program, TOSA graph and
    Vela result."""
    from torchmcu.lower.lowering import finish_lowering
    from torchmcu.npu.subprogram import carve
    from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support
    from torchmcu.npu.vela import compile_tosa

    cpu_ctx = dataclasses.replace(ctx, b=copy.deepcopy(ctx.b))  # the graph itself is shared
    cpu_program, _ = finish_lowering(cpu_ctx, planner)
    placements, where = decide(ctx, cpu_program, target.family, npu_support)
    instrs = list(ctx.b.instructions)
    cpu_plan = cpu_program.execution_plan[0]
    runs = segments(cpu_plan, ctx.sources)
    # Per straight-line run: dependencies, groups and schedule in the run's own numbering.
    groups: list[list[int]] = []
    run_orders: list[list[tuple[str, int]]] = []
    for run in runs:
        if len(run) == 1 and is_barrier(cpu_plan, instrs[run[0]], ctx.sources[run[0]]):
            run_orders.append([("cpu", run[0])])
            continue
        local = [instrs[i] for i in run]
        preds = dependencies(ctx.b, local)
        local_groups = group({k: where[i] for k, i in enumerate(run)}, preds)
        base = len(groups)
        groups.extend([[run[k] for k in g] for g in local_groups])
        run_orders.append([
            ("cpu", run[k]) if kind == "cpu" else ("npu", base + k)
            for kind, k in schedule(len(run), local_groups, preds)
        ])
    order = [u for o in run_orders for u in o]
    for k, g in enumerate(groups):
        for i in g:
            for p in placements:
                if i in p.instructions:
                    p.subgraph = k

    placements = with_codeless_nodes(ctx.gm, placements)
    result = NpuPartition(target=target, placements=placements, cpu_program=cpu_program)
    delegate_calls: list[pm.DelegateCall] = []
    for k, g in enumerate(groups):
        carved = carve(cpu_program, g)
        graph = lower_to_tosa(carved.program, family=target.family)
        vela = compile_tosa(graph.flatbuffer, target, name=f"delegate{k}")
        key = ctx.b.new_buffer(f"npu{k}.scratch", int(vela.scratch_size))
        scratch = ctx.b.planned(key, pm.ScalarType.BYTE, [int(vela.scratch_size)])
        inputs, outputs = list(carved.inputs), list(carved.outputs)
        delegate_calls.append(ctx.b.delegate(BACKEND_ID, vela.blob, [*inputs, *outputs, scratch]))
        result.subgraphs.append(Subgraph(k, list(g), carved.program, inputs, outputs, graph, vela))
    # old instruction index -> its new index (a delegated call: its DelegateCall's)
    new_index: dict[int, int] = {}
    for n, (kind, i) in enumerate(order):
        for old in [i] if kind == "cpu" else groups[i]:
            new_index[old] = n
    new_index[len(instrs)] = len(order)  # a jump may end the method
    start_of = {run[0]: min(new_index[i] for i in run) for run in runs}
    start_of[len(instrs)] = len(order)
    rebuilt: list[Any] = []
    for kind, i in order:
        ins = instrs[i] if kind == "cpu" else delegate_calls[i]
        if isinstance(ins, pm.JumpFalseCall):  # destinations start a run: its new first index
            ins = pm.JumpFalseCall(ins.cond_value_index, start_of[ins.destination_instruction])
        rebuilt.append(ins)
    ctx.b.instructions = rebuilt
    ctx.report = _final_node_reports(ctx, order, groups)
    ctx.sources = [ctx.sources[i] if kind == "cpu" else None for kind, i in order]
    old_life = {k: (b.first_use, b.last_use) for k, b in ctx.b.buffers.items()}
    ctx.b.recompute_uses()
    # Control-flow lifetimes (a cond's result reserved over both branches, buffers a loop
    # touches live over the whole loop) were set at lowering: carried over to the new indices.
    for key, (first, last) in old_life.items():
        buf = ctx.b.buffers[key]
        if buf.first_use is None or first is None or last is None:
            continue
        ctx.b.touch(key, new_index[first])
        ctx.b.touch(key, new_index[last])
    program, report = finish_lowering(ctx, planner)
    program = compact_values(program)
    return program, report, result
