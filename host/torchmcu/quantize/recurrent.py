"""Recurrent layers before quantization: decompose aten.lstm into per-step ops and make the
decomposition's tuple-producing ops single-tensor ops the quantizer and lowering know.

torch.export keeps nn.LSTM as one aten.lstm.input node. Its own decomposition (PyTorch's
registered one) unrolls the sequence: one linear for the input projection of every step,
then per step a linear of the hidden state, an add, a split into the four gates, sigmoid /
tanh, mul and add. That decomposition produces unbind / split (tuple outputs read through
getitem) and a one-element stack; annotating tuple outputs is awkward for PT2E, so they are
rewritten here as select / slice / unsqueeze, and an add whose operand differs from the
output only by size-1 dimensions (the step's [1, 4H] input projection against the
[1, 1, 4H] hidden projection) gets an explicit reshape. Only LSTM is handled now.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx

_aten = torch.ops.aten

RECURRENT_OPS = (_aten.lstm.input,)


def decompose_recurrent(exported: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """exported with every aten.lstm node unrolled (unchanged when there is none)."""
    present = {n.target for n in exported.graph.nodes if n.op == "call_function"}
    targets = [t for t in RECURRENT_OPS if t in present]
    if not targets:
        return exported
    table = torch.export.default_decompositions()
    return exported.run_decompositions({t: table[t] for t in targets})


def _meta_val(node: torch.fx.Node, target: object, args: tuple) -> None:
    """node.meta['val'] from running target on meta tensors shaped like the inputs."""

    def meta(a: object) -> object:
        if isinstance(a, torch.fx.Node):
            v = a.meta["val"]
            return torch.empty(v.shape, dtype=v.dtype, device="meta")
        if isinstance(a, (list, tuple)):
            return type(a)(meta(x) for x in a)
        return a

    node.meta["val"] = target(*meta(args))  # type: ignore[operator]


def _insert(graph: torch.fx.Graph, before: torch.fx.Node, target: object, args: tuple,
            like: torch.fx.Node) -> torch.fx.Node:
    with graph.inserting_before(before):
        new = graph.call_function(target, args)  # type: ignore[arg-type]
    new.meta.update({k: v for k, v in like.meta.items() if k in ("stack_trace", "nn_module_stack",
                                                               "source_fn_stack")})
    _meta_val(new, target, args)
    return new


def _rewrite_getitems(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """unbind / split read through getitem -> one select / slice per item."""
    x = node.args[0]
    assert isinstance(x, torch.fx.Node)
    rank = len(x.meta["val"].shape)
    for user in list(node.users):
        if user.op != "call_function" or user.target is not operator.getitem:
            continue
        i = int(user.args[1])  # type: ignore[arg-type]
        if node.target == _aten.unbind.int:
            dim = int(node.args[1]) if len(node.args) > 1 else 0  # type: ignore[arg-type]
            new = _insert(graph, user, _aten.select.int, (x, dim % rank, i), user)
        else:
            size = int(node.args[1])  # type: ignore[arg-type]
            dim = (int(node.args[2]) if len(node.args) > 2 else 0) % rank  # type: ignore[arg-type]
            end = min((i + 1) * size, int(x.meta["val"].shape[dim]))
            new = _insert(graph, user, _aten.slice.Tensor, (x, dim, i * size, end), user)
        user.replace_all_uses_with(new)
        graph.erase_node(user)
    if not node.users:
        graph.erase_node(node)


def _reshape_broadcast_operands(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """add/mul operand whose shape differs from the output only by size-1 dims -> reshape."""
    out = list(node.meta["val"].shape)
    for k, a in enumerate(node.args[:2]):
        if not isinstance(a, torch.fx.Node) or "val" not in a.meta:
            continue
        shape = list(a.meta["val"].shape)
        if shape != out and math.prod(shape) == math.prod(out) and \
                [s for s in shape if s != 1] == [s for s in out if s != 1]:
            new = _insert(graph, node, _aten.reshape.default, (a, out), a)
            node.update_arg(k, new)


def simplify_recurrent(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Rewrite the tuple-producing ops of a recurrent decomposition (see module doc)."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in (_aten.unbind.int, _aten.split.Tensor):
            _rewrite_getitems(graph, node)
        elif node.target == _aten.stack.default and len(node.args[0]) == 1:  # type: ignore[arg-type]
            dim = int(node.args[1]) if len(node.args) > 1 else 0  # type: ignore[arg-type]
            new = _insert(graph, node, _aten.unsqueeze.default, (node.args[0][0], dim), node)  # type: ignore[index]
            node.replace_all_uses_with(new)
            graph.erase_node(node)
        elif node.target in (_aten.add.Tensor, _aten.mul.Tensor):
            _reshape_broadcast_operands(graph, node)
    graph.lint()
    gm.recompile()
    return gm
