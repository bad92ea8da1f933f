"""Quantizing the bodies of torch.cond and torch.map: PT2E does not look inside them.

torch.export captures torch.cond as torch.ops.higher_order.cond(pred, true_gm, false_gm,
operands) with both branch GraphModules as get_attr nodes; the parameters a branch uses are
lifted to the top level and passed as operands. prepare_pt2e/convert_pt2e (torchao 0.18) only
annotate the top-level graph, so the branches stay float. Here each branch is made a standalone
module (its weight operands become its own constants: removed from the cond's operands and
the branch's signature), then quantized with the same quantizer, calibrated on the operand
values the calibration samples produce at the cond (both branches see every sample; a map
body every slice), and its
boundary qparams are unified: a branch input gets the qparams of the operand the parent passes,
and every output gets one set of qparams in both branches (the parent's quantize of the result
if there is one, else the union of the branches' calibrated ranges).
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from torchmcu.quantize.qdq import is_dq_per_tensor, is_q

COND = torch.ops.higher_order.cond
MAP = torch.ops.higher_order.map_impl  # map_impl(body, [xs...], [extra operands...])

__all__ = ["COND", "convert_with_branches", "detach_branch_weights", "has_control_flow",
           "quantize_branches"]


def _conds(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """cond and map nodes (control flow with GraphModule bodies)."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in (COND, MAP)]


def _bodies(node: torch.fx.Node) -> tuple[torch.fx.Node, ...]:
    return tuple(node.args[1:3]) if node.target is COND else (node.args[0],)  # type: ignore[return-value]


def _operands(node: torch.fx.Node) -> list:
    """Operands in the order of the bodies' placeholders (map: the mapped tensors first)."""
    if node.target is COND:
        return list(node.args[3])  # type: ignore[arg-type]
    return [*node.args[1], *node.args[2]]  # type: ignore[misc]


def _drop_operands(node: torch.fx.Node, drop: list[int]) -> None:
    if node.target is COND:
        node.args = (*node.args[:3], tuple(a for i, a in enumerate(node.args[3]) if i not in drop))
        return
    n_mapped = len(node.args[1])  # type: ignore[arg-type]
    pos = [a for i, a in enumerate(node.args[2], n_mapped) if i not in drop]  # type: ignore[arg-type]
    node.args = (node.args[0], node.args[1], pos)


def _body_samples(node: torch.fx.Node, recorded: list[tuple]) -> list[tuple]:
    """Body inputs per recorded operand tuple: a map body sees every slice of dim 0."""
    if node.target is COND:
        return recorded
    n_mapped = len(node.args[1])  # type: ignore[arg-type]
    return [tuple(t[i] for t in ops[:n_mapped]) + tuple(ops[n_mapped:])
            for ops in recorded for i in range(ops[0].shape[0])]


def has_control_flow(gm: torch.fx.GraphModule) -> bool:
    return bool(_conds(gm))


def _submodule(gm: torch.fx.GraphModule, node: object) -> torch.fx.GraphModule:
    assert isinstance(node, torch.fx.Node) and node.op == "get_attr"
    return getattr(gm, str(node.target))


def _attr(gm: torch.fx.GraphModule, target: str) -> torch.Tensor:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def detach_branch_weights(gm: torch.fx.GraphModule) -> None:
    """Turn the constant operands of every cond (lifted parameters) into constants of the
    branch modules, recursively, and drop them from the operands and branch signatures."""
    for node in _conds(gm):
        operands = _operands(node)
        weights = [i for i, a in enumerate(operands) if isinstance(a, torch.fx.Node) and a.op == "get_attr"]
        for branch_node in _bodies(node):
            branch = _submodule(gm, branch_node)
            placeholders = [p for p in branch.graph.nodes if p.op == "placeholder"]
            for i in weights:
                name = f"_cf_const{i}"
                branch.register_buffer(name, _attr(gm, str(operands[i].target)).detach().clone())
                with branch.graph.inserting_before(placeholders[i]):
                    const = branch.graph.get_attr(name)
                const.meta = dict(placeholders[i].meta)
                placeholders[i].replace_all_uses_with(const)
                branch.graph.erase_node(placeholders[i])
            detach_branch_weights(branch)
            for n in [n for n in branch.graph.nodes if n.op == "get_attr" and not n.users]:
                branch.graph.erase_node(n)  # a weight only the nested branches use
            branch.graph.lint()
            branch.recompile()
        _drop_operands(node, weights)
        for i in weights:
            if not operands[i].users:
                gm.graph.erase_node(operands[i])
    gm.graph.lint()
    gm.recompile()


def _record_operands(gm: torch.fx.GraphModule, samples: list[tuple]) -> dict[str, list[tuple]]:
    """Per cond node name: the operand values of each sample (float, as the graph computes them)."""
    seen: dict[str, list[tuple]] = {n.name: [] for n in _conds(gm)}

    class _Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            if n.op == "call_function" and n.target in (COND, MAP):
                ops = self.map_nodes_to_values(tuple(_operands(n)), n)
                seen[n.name].append(tuple(t.detach().clone() for t in ops))
            return super().run_node(n)

    with torch.no_grad():
        for s in samples:
            _Recorder(gm).run(*s)
    return seen


def _set_qparams(q: torch.fx.Node, scale: float, zp: int) -> None:
    """Rewrite a quantize node and its dequantize users to (scale, zp)."""
    for n in [q, *[u for u in q.users if is_dq_per_tensor(u)]]:
        n.args = (n.args[0], scale, zp, *n.args[3:])


def _qp(node: torch.fx.Node) -> tuple[float, int]:
    return float(node.args[1]), int(node.args[2])  # type: ignore[arg-type]


def _union(qps: list[tuple[float, int]]) -> tuple[float, int]:
    lo = min(min((-128 - z) * s for s, z in qps), 0.0)
    hi = max(max((127 - z) * s for s, z in qps), 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    zp = int(max(-128, min(127, round(-128 - lo / scale))))
    return scale, zp


def _output(gm: torch.fx.GraphModule, k: int) -> torch.fx.Node | None:
    results = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    items = list(results) if isinstance(results, (tuple, list)) else [results]
    return items[k] if isinstance(items[k], torch.fx.Node) else None


def _inner_cond(item: torch.fx.Node | None) -> tuple[torch.fx.Node, int] | None:
    """(cond node, output index) when item is getitem(cond, k)."""
    if item is not None and item.op == "call_function" and item.target is operator.getitem:
        src = item.args[0]
        if isinstance(src, torch.fx.Node) and src.op == "call_function" and src.target is COND:
            return src, int(item.args[1])  # type: ignore[arg-type]
    return None


def _output_qp(gm: torch.fx.GraphModule, k: int) -> tuple[float, int] | None:
    """The qparams a branch output carries (through nested conds), None if float."""
    item = _output(gm, k)
    q = item.args[0] if is_dq_per_tensor(item) else item  # type: ignore[union-attr]
    if is_q(q):
        return _qp(q)  # type: ignore[arg-type]
    inner = _inner_cond(item)
    return None if inner is None else _output_qp(_submodule(gm, inner[0].args[1]), inner[1])


def _force_output_qp(gm: torch.fx.GraphModule, k: int, target: tuple[float, int]) -> None:
    item = _output(gm, k)
    q = item.args[0] if is_dq_per_tensor(item) else item  # type: ignore[union-attr]
    if is_q(q):
        _set_qparams(q, *target)  # type: ignore[arg-type]
    elif (inner := _inner_cond(item)) is not None:
        for br in inner[0].args[1:3]:
            _force_output_qp(_submodule(gm, br), inner[1], target)
    gm.recompile()


def _operand_qps(node: torch.fx.Node, known: dict[torch.fx.Node, tuple[float, int]]) -> list:
    """Per operand of a cond: the qparams its int8 value has (dq'd, or a placeholder of known
    qparams), else None."""
    out = []
    for a in _operands(node):
        out.append(_qp(a) if is_dq_per_tensor(a) else known.get(a))  # type: ignore[arg-type]
    return out


def _unify_inputs(branches: list[torch.fx.GraphModule], qps: list) -> dict:
    """Each branch's input quantize takes the operand's qparams; returns, per branch, its
    placeholders' qparams for the nested conds."""
    known_per_branch = []
    for br in branches:
        known = {}
        placeholders = [p for p in br.graph.nodes if p.op == "placeholder"]
        for ph, qp in zip(placeholders, qps):
            if qp is None:
                continue
            known[ph] = qp
            for q in [u for u in ph.users if is_q(u)]:
                old = _qp(q)
                # views after the input share its observer (same qparams): they follow it
                for other in [n for n in br.graph.nodes if is_q(n) and _qp(n) == old]:
                    _set_qparams(other, *qp)
        br.recompile()
        known_per_branch.append(known)
    return known_per_branch


def _unify_outputs(node: torch.fx.Node, branches: list[torch.fx.GraphModule]) -> None:
    results = next(n for n in branches[0].graph.nodes if n.op == "output").args[0]
    for k in range(len(results) if isinstance(results, (tuple, list)) else 1):
        qps = [_output_qp(br, k) for br in branches]
        if any(qp is None for qp in qps):
            continue  # a float branch output: lowering names it
        parent_qs = [q for g in node.users if g.args[1] == k for q in g.users if is_q(q)]
        wanted = {_qp(q) for q in parent_qs}
        if len(branches) == 1 and len(wanted) != 1:
            continue  # one body (map): nothing to agree on
        target = wanted.pop() if len(wanted) == 1 else _union(qps)  # type: ignore[arg-type]
        for br in branches:
            _force_output_qp(br, k, target)


def convert_with_branches(prepared: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """convert_pt2e of a graph with conds, their branch modules kept as they are: convert
    rebuilds every GraphModule child and drops a nested cond's submodules on the way; the
    branches are quantized separately (quantize_branches) anyway."""
    saved = {}
    for node in _conds(prepared):
        for b in _bodies(node):
            saved[str(b.target)] = getattr(prepared, str(b.target))
            setattr(prepared, str(b.target), torch.nn.Module())
    out = convert_pt2e(prepared)
    for name, mod in saved.items():
        setattr(out, name, mod)
    return out


def quantize_branches(gm: torch.fx.GraphModule, quantizer: Any, samples: list[tuple],
                      known: dict[torch.fx.Node, tuple[float, int]] | None = None) -> None:
    """Quantize every cond branch of a converted graph in place (recursively for nested conds).
    samples: the inputs of `gm` the parent was calibrated with; known: qparams of gm's
    placeholders that carry int8 values (a branch's operands)."""
    conds = _conds(gm)
    if not conds:
        return
    recorded = _record_operands(gm, samples)
    for node in conds:
        converted = []
        samples_in = _body_samples(node, recorded[node.name])
        for branch_node in _bodies(node):
            prepared = prepare_pt2e(_submodule(gm, branch_node), quantizer)
            with torch.no_grad():
                for ops in samples_in:
                    prepared(*ops)
            out = convert_with_branches(prepared)
            setattr(gm, str(branch_node.target), out)
            converted.append(out)
        inner_known = _unify_inputs(converted, _operand_qps(node, known or {}))
        for out, kn in zip(converted, inner_known):
            quantize_branches(out, quantizer, samples_in, kn)
        _unify_outputs(node, converted)
