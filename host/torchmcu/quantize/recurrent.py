"""Recurrent layers before quantization: decompose aten.lstm and aten.gru into per-step ops and
make the decomposition's tuple-producing ops single-tensor ops the quantizer and lowering know.

torch.export keeps nn.LSTM (nn.GRU) as one aten.lstm.input (aten.gru.input) node. Its own
decomposition (PyTorch's registered one) unrolls the sequence: one linear for the input projection of every step,
then per step a linear of the hidden state, an add, a split into the four gates, sigmoid /
tanh, mul and add. That decomposition produces unbind / split (tuple outputs read through
getitem), a one-element stack and a cat of the output sequence; annotating tuple outputs is awkward for PT2E, so they are
rewritten here as select / slice / unsqueeze, a select of one step from the concatenated
sequence reads that step, a zero initial state is folded away, and an
add whose operand differs from the output only by size-1 dimensions (the step's [1, 4H] input
projection against the [1, 1, 4H] hidden projection) gets an explicit reshape. A GRU step is
the same ops with three gates and h' = (h - n) * z + n (an int8 sub); its zero initial state
(linear(0) + b_hh does not fold: r * (W_hn h + b_hn)) stays an aten.zeros the lowering turns
into an int8 constant. Several layers and both directions are the same steps again; a
backward direction's flips and the output sequence's cat are data movement the lowering runs
in float32 (the fallback) where it has no int8 kernel for them.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx
from torch._decomp import get_decompositions

_aten = torch.ops.aten

RECURRENT_OPS = (_aten.lstm.input, _aten.gru.input)
# The ops whose tuple result is read through getitem, rewritten as one select / slice per item
# (a recurrent decomposition's, and torch.chunk / torch.split / unbind in model code)
_TUPLE_OPS = (
    _aten.unbind.int, _aten.split.Tensor, _aten.split_with_sizes.default, _aten.chunk.default
)


def decompose_recurrent(exported: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """exported with every aten.lstm node unrolled (unchanged when there is none)."""
    present = {n.target for n in exported.graph.nodes if n.op == "call_function"}
    targets = [t for t in RECURRENT_OPS if t in present]
    if not targets:
        return exported
    # the same functions as torch.export.default_decompositions()[t], without building that
    # whole table (about 0.1 s of a GRU model's export)
    return exported.run_decompositions(get_decompositions(targets))


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


def _split_bounds(node: torch.fx.Node, size: int) -> list[int]:
    """The items' start offsets, then the end, of a split / split_with_sizes / chunk of a
    tensor with `size` elements along dim (torch's rules: chunk is a split by ceil(size /
    chunks), the last piece shorter)."""
    if node.target == _aten.split_with_sizes.default:
        pieces = [int(s) for s in node.args[1]]  # type: ignore[union-attr]
    else:
        step = int(node.args[1])  # type: ignore[arg-type]
        if node.target == _aten.chunk.default:
            step = max(1, -(-size // step))
        pieces = [min(step, size - start) for start in range(0, max(size, 1), step)]
    bounds = [0]
    for p in pieces:
        bounds.append(bounds[-1] + p)
    return bounds


def _rewrite_getitems(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """unbind / split / split_with_sizes / chunk read through getitem -> one select / slice
    per item."""
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
            dim = int(node.args[2]) if len(node.args) > 2 else 0  # type: ignore[arg-type]
            dim %= rank
            bounds = _split_bounds(node, int(x.meta["val"].shape[dim]))
            new = _insert(graph, user, _aten.slice.Tensor, (x, dim, bounds[i], bounds[i + 1]), user)
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


_VIEWS = (_aten.select.int, _aten.slice.Tensor, _aten.unsqueeze.default, _aten.squeeze.dim,
          _aten.reshape.default, _aten.view.default)


def _fold_first_step(gm: torch.fx.GraphModule, add: torch.fx.Node, zero_linear: torch.fx.Node,
                     other: object) -> bool:
    """add(linear(0, W_hh, b_hh), select(linear(xs, W_ih, b_ih), 0, t)): the first step of a
    zero state adds only b_hh. Every step adds b_ih + b_hh, so b_hh moves into the input
    projection's bias (computed once for all steps) and the recurrent linears lose theirs;
    the add becomes a reshape of the step's projection. Needs b_ih used by the projection
    only and b_hh by the recurrent linears only (their weight is zero_linear's)."""
    if not (isinstance(other, torch.fx.Node) and other.target == _aten.select.int):
        return False
    proj = other.args[0]
    if not (isinstance(proj, torch.fx.Node) and proj.target == _aten.linear.default
            and len(proj.args) > 2 and len(zero_linear.args) > 2):
        return False
    b_in, w_hh, b_hh = proj.args[2], zero_linear.args[1], zero_linear.args[2]
    if not all(isinstance(n, torch.fx.Node) and n.op == "get_attr" for n in (b_in, w_hh, b_hh)):
        return False
    recurrent = list(b_hh.users)  # type: ignore[union-attr]
    if list(b_in.users) != [proj] or any(  # type: ignore[union-attr]
            u.target != _aten.linear.default or u.args[1] is not w_hh or u.args[2] is not b_hh
            for u in recurrent):
        return False
    bias = (_attr(gm, b_in) + _attr(gm, b_hh)).detach().clone()  # type: ignore[arg-type]
    name = f"_recurrent_bias_{proj.name}"
    gm.register_buffer(name, bias)
    graph = gm.graph
    with graph.inserting_before(proj):
        bias_node = graph.get_attr(name)
    bias_node.meta["val"] = torch.empty(bias.shape, dtype=bias.dtype, device="meta")
    proj.update_arg(2, bias_node)
    for u in recurrent:
        u.update_arg(2, None)
    out = _insert(graph, add, _aten.reshape.default, (other, list(add.meta["val"].shape)), add)
    add.replace_all_uses_with(out)
    graph.erase_node(add)
    return True


def _attr(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.Tensor:
    obj: object = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[return-value]


def _select_from_cat(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """select(transpose?(cat(steps, d)), ., t) picking one whole step (y[:, -1] of an LSTM's
    output sequence) -> a reshape of that step: the sequence is never concatenated."""
    src = node.args[0]
    if not isinstance(src, torch.fx.Node) or "val" not in src.meta:
        return
    rank = len(src.meta["val"].shape)
    dim = int(node.args[1]) % rank  # type: ignore[arg-type]
    if src.target == _aten.transpose.int:
        a, b = (int(v) % rank for v in src.args[1:3])  # type: ignore[arg-type]
        dim = b if dim == a else a if dim == b else dim
        src = src.args[0]  # type: ignore[assignment]
    if not isinstance(src, torch.fx.Node) or src.target != _aten.cat.default:
        return
    items = list(src.args[0])  # type: ignore[arg-type]
    cat_dim = (int(src.args[1]) if len(src.args) > 1 else 0) % rank  # type: ignore[arg-type]
    if cat_dim != dim or any(int(i.meta["val"].shape[dim]) != 1 for i in items):
        return
    item = items[int(node.args[2]) % len(items)]  # type: ignore[arg-type]
    new = _insert(graph, node, _aten.reshape.default, (item, list(node.meta["val"].shape)), node)
    node.replace_all_uses_with(new)
    graph.erase_node(node)


def _fold_zero_state(gm: torch.fx.GraphModule) -> None:
    """A state the model creates as zeros (`lstm(x)` without (h0, c0)) is folded away: mul by
    it is zero, add of it is the other operand, and the first step's hidden projection
    linear(0) = b_hh joins the input projection's bias (_fold_first_step). A zero that
    cannot be folded stays and the lowering reports the constant."""
    graph = gm.graph
    zero: set[torch.fx.Node] = set()
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        args = node.args
        if (node.target == _aten.zeros.default
                or (node.target in _VIEWS and args and args[0] in zero)
                or (node.target == _aten.mul.Tensor and any(a in zero for a in args[:2]))
                or (node.target == _aten.linear.default and args[0] in zero)):
            zero.add(node)
        elif node.target == _aten.add.Tensor and len(args) >= 2:
            z = [a for a in args[:2] if a in zero]
            if len(z) != 1:
                continue
            other = args[1] if args[0] is z[0] else args[0]
            if z[0].target == _aten.linear.default:
                _fold_first_step(gm, node, z[0], other)
            elif z[0].target == _aten.mul.Tensor and isinstance(other, torch.fx.Node) and \
                    list(other.meta["val"].shape) == list(node.meta["val"].shape):
                node.replace_all_uses_with(other)
                graph.erase_node(node)
    graph.eliminate_dead_code()


def simplify_recurrent(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Rewrite the tuple-producing ops of a recurrent decomposition (see module doc)."""
    graph = gm.graph
    if not any(n.target in _TUPLE_OPS for n in graph.nodes):
        return gm
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in _TUPLE_OPS:
            _rewrite_getitems(graph, node)
        elif node.target == _aten.stack.default and len(node.args[0]) == 1:  # type: ignore[arg-type]
            dim = int(node.args[1]) if len(node.args) > 1 else 0  # type: ignore[arg-type]
            new = _insert(graph, node, _aten.unsqueeze.default, (node.args[0][0], dim), node)  # type: ignore[index]
            node.replace_all_uses_with(new)
            graph.erase_node(node)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target == _aten.select.int:
            _select_from_cat(graph, node)
    _fold_zero_state(gm)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in (_aten.add.Tensor, _aten.mul.Tensor):
            _reshape_broadcast_operands(graph, node)
    graph.lint()
    gm.recompile()
    return gm
