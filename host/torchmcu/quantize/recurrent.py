"""Recurrent layers before quantization: unroll aten.lstm and aten.gru into per-step ops and
make the tuple-producing ops single-tensor ops the quantizer and lowering know.

torch.export keeps nn.LSTM (nn.GRU) as one aten.lstm.input (aten.gru.input) node. unroll_recurrent
writes its per-step ops straight into the graph, in the order and form of PyTorch's registered
decomposition (the same ops, so the same program), without run_decompositions: re-tracing the
whole program through that decomposition cost a GRU keyword spotter about 1 s of its 2.5 s export.
Per layer and direction: one linear for the input projection of every step, then per step a
linear of the hidden state, an add, the gates as slices, sigmoid / tanh, mul and add; the steps'
outputs are concatenated into the output sequence. An LSTM with projections (proj_size) or a
training-mode dropout is left to torch's decomposition (decompose_recurrent). That
decomposition's tuple ops (unbind / split read through getitem, a one-element stack) and
torch.chunk / torch.split / unbind in model code are rewritten here as select / slice /
unsqueeze, a select of one step from the concatenated sequence reads that step, a zero initial
state is folded away, and an add whose operand differs from the output only by size-1
dimensions (the step's [1, 4H] input projection against the [1, 1, 4H] hidden projection) gets
an explicit reshape. A GRU step is the same ops with three gates and h' = (h - n) * z + n (an
int8 sub); its zero initial state (linear(0) + b_hh does not fold: r * (W_hn h + b_hn)) stays an
aten.zeros the lowering turns into an int8 constant. Several layers and both directions are the
same steps again; a backward direction's flips and the output sequence's cat are data movement
the lowering runs in float32 (the fallback) where it has no int8 kernel for them.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx
from torch._decomp import get_decompositions
from torch._subclasses.fake_tensor import FakeTensor

_aten = torch.ops.aten

RECURRENT_OPS = (_aten.lstm.input, _aten.gru.input)
# The ops whose tuple result is read through getitem, rewritten as one select / slice per item
# (a recurrent decomposition's, and torch.chunk / torch.split / unbind in model code)
_TUPLE_OPS = (
    _aten.unbind.int,
    _aten.split.Tensor,
    _aten.split_with_sizes.default,
    _aten.chunk.default,
)


def decompose_recurrent(exported: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """exported with torch's decomposition run for the recurrent nodes unroll_recurrent cannot
    write itself (an LSTM with projections, training-mode dropout); unchanged when there is
    none."""
    targets = sorted(
        {
            n.target
            for n in exported.graph.nodes
            if n.op == "call_function" and n.target in RECURRENT_OPS and not _unrollable(n)
        },
        key=str,
    )
    if not targets:
        return exported
    # the same functions as torch.export.default_decompositions()[t], without building that
    # whole table (about 0.1 s of a GRU model's export)
    return exported.run_decompositions(get_decompositions(targets))


def _unrollable(node: torch.fx.Node) -> bool:
    """A float32 aten.lstm.input / aten.gru.input without projections or training dropout."""
    x, hx, params, has_biases, layers, dropout, train, bidirectional = node.args[:8]
    per = (4 if has_biases else 2) * layers * (2 if bidirectional else 1)  # type: ignore[operator]
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    vals = [a.meta.get("val") for a in (x, *states) if isinstance(a, torch.fx.Node)]
    return (
        len(params) == per  # type: ignore[arg-type]
        and len(states) == (2 if node.target == _aten.lstm.input else 1)
        and len(vals) == len(states) + 1
        and all(v is not None and v.dtype == torch.float32 for v in vals)
        and len({int(v.shape[-1]) for v in vals[1:]}) == 1  # h and c alike: no proj_size
        and not (train and dropout)
    )


class _Steps:
    """Emits a recurrent node's per-step ops before it, in the order and form of torch's
    decomposition (torch/_decomp/decompositions.py: _rnn_helper, one_layer_rnn, gru_cell,
    one_layer_lstm, lstm_cell), their meta (value, source line, module) from the node."""

    def __init__(self, gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
        self.graph, self.node = gm.graph, node
        self.mode = node.args[0].meta["val"].fake_mode  # type: ignore[union-attr]

    def op(self, target: object, *args: object) -> torch.fx.Node:
        """A computing op (or cat / stack / transpose / flip): its value a FakeTensor, as
        torch's decomposition gives it (PT2E observes the output of such nodes only)."""
        new = _insert(self.graph, self.node, target, args, self.node, meta=False)
        with self.mode:
            new.meta["val"] = target(*_values(args, fake=True))  # type: ignore[operator]
        return new

    def view(self, target: object, *args: object) -> torch.fx.Node:
        """A select / slice of a step or gate: a meta value, as simplify_recurrent gives the
        decomposition's unbind / split items (no observer of their own: their input's)."""
        return _insert(self.graph, self.node, target, args, self.node)

    def linear(self, x: torch.fx.Node, w: object, b: object) -> torch.fx.Node:
        return (
            self.op(_aten.linear.default, x, w)
            if b is None
            else self.op(_aten.linear.default, x, w, b)
        )

    def gates(self, x: torch.fx.Node, n: int, dim: int) -> list[torch.fx.Node]:
        """x.chunk(n, dim) as slices (an equal split: n gates of the hidden size)."""
        size = int(x.meta["val"].shape[dim]) // n
        return [self.view(_aten.slice.Tensor, x, dim, k * size, (k + 1) * size) for k in range(n)]

    def gru_cell(
        self, inp: torch.fx.Node, h: torch.fx.Node, w_hh: object, b_hh: object
    ) -> torch.fx.Node:
        i_r, i_z, i_n = self.gates(inp, 3, 1)
        h_r, h_z, h_n = self.gates(self.linear(h, w_hh, b_hh), 3, 2)
        r = self.op(_aten.sigmoid.default, self.op(_aten.add.Tensor, h_r, i_r))
        z = self.op(_aten.sigmoid.default, self.op(_aten.add.Tensor, h_z, i_z))
        n = self.op(
            _aten.tanh.default, self.op(_aten.add.Tensor, i_n, self.op(_aten.mul.Tensor, h_n, r))
        )
        dz = self.op(_aten.mul.Tensor, self.op(_aten.sub.Tensor, h, n), z)
        return self.op(_aten.add.Tensor, dz, n)

    def lstm_cell(
        self, inp: torch.fx.Node, h: torch.fx.Node, c: torch.fx.Node, w_hh: object, b_hh: object
    ) -> tuple[torch.fx.Node, torch.fx.Node]:
        gates = self.op(_aten.add.Tensor, self.linear(h, w_hh, b_hh), inp)
        g_i, g_f, g_g, g_o = self.gates(gates, 4, 2)
        i = self.op(_aten.sigmoid.default, g_i)
        f = self.op(_aten.sigmoid.default, g_f)
        g = self.op(_aten.tanh.default, g_g)
        o = self.op(_aten.sigmoid.default, g_o)
        c = self.op(
            _aten.add.Tensor, self.op(_aten.mul.Tensor, f, c), self.op(_aten.mul.Tensor, i, g)
        )
        return self.op(_aten.mul.Tensor, o, self.op(_aten.tanh.default, c)), c

    def layer(
        self, seq: torch.fx.Node, state: list[torch.fx.Node], params: list[object], reverse: bool
    ) -> tuple[torch.fx.Node, list[torch.fx.Node]]:
        """One direction of one layer over seq [T, B, F]: ([T, B, H] outputs, final states)."""
        w_ih, w_hh = params[0], params[1]
        b_ih, b_hh = (params[2], params[3]) if len(params) == 4 else (None, None)
        lstm = len(state) == 2
        if lstm:
            state = [self.op(_aten.unsqueeze.default, s, 0) for s in state]
        proj = self.linear(seq, w_ih, b_ih)
        if reverse:
            proj = self.op(_aten.flip.default, proj, [0])
        if not lstm:
            state = [self.op(_aten.unsqueeze.default, state[0], 0)]
        steps = [self.view(_aten.select.int, proj, 0, t) for t in range(proj.meta["val"].shape[0])]
        outputs = []
        for x in steps:
            if lstm:
                state = list(self.lstm_cell(x, state[0], state[1], w_hh, b_hh))
            else:
                state = [self.gru_cell(x, state[0], w_hh, b_hh)]
            outputs.append(state[0])
        if reverse:
            outputs.reverse()
        out = self.op(_aten.cat.default, outputs)
        return out, [self.op(_aten.squeeze.dim, s, 0) for s in state]


def _unroll(gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """Replace one recurrent node (and its getitems) with its per-step ops."""
    x, hx, params, has_biases, layers, _, _, bidirectional, batch_first = node.args
    emit = _Steps(gm, node)
    dirs = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    count = int(layers) * dirs  # type: ignore[call-overload]
    kinds = list(hx) if isinstance(hx, (list, tuple)) else [hx]  # (h0, c0) or h0
    # hx.unbind(0) (the LSTM: h0's, then c0's); states[k] = [h] or [h, c] of layer-direction k
    unbound = [[emit.view(_aten.select.int, s, 0, k) for k in range(count)] for s in kinds]
    states = [[u[k] for u in unbound] for k in range(count)]
    seq = emit.op(_aten.transpose.int, x, 0, 1) if batch_first else x
    finals: list[list[torch.fx.Node]] = []
    for layer in range(int(layers)):  # type: ignore[call-overload]
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            out, final = emit.layer(
                seq,
                states[k],
                list(params[k * per : (k + 1) * per]),  # type: ignore[index]
                reverse=d == 1,
            )
            outs.append(out)
            finals.append(final)
        seq = emit.op(_aten.cat.default, outs, 2) if bidirectional else outs[0]  # type: ignore[assignment]
    if batch_first:
        seq = emit.op(_aten.transpose.int, seq, 0, 1)  # type: ignore[arg-type]
    results = [seq] + [
        emit.op(_aten.stack.default, [f[j] for f in finals]) for j in range(len(kinds))
    ]
    for user in list(node.users):
        if user.op != "call_function" or user.target is not operator.getitem:
            raise AssertionError(f"{node.name}: read other than through getitem ({user.name})")
        user.replace_all_uses_with(results[int(user.args[1])])  # type: ignore[arg-type]
        gm.graph.erase_node(user)
    gm.graph.erase_node(node)


def unroll_recurrent(gm: torch.fx.GraphModule) -> bool:
    """Unroll every aten.lstm.input / aten.gru.input node of gm in place (see module doc);
    True if there was one."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in RECURRENT_OPS]
    for node in nodes:
        _unroll(gm, node)
    return bool(nodes)


def _values(args: object, *, fake: bool = False) -> object:
    """args with each node replaced by an empty tensor shaped like its value: on the meta
    device, or (fake, called under a FakeTensorMode) a FakeTensor (a node's own FakeTensor
    where it has one)."""
    if isinstance(args, torch.fx.Node):
        v = args.meta["val"]
        if fake:
            return v if isinstance(v, FakeTensor) else torch.empty(v.shape, dtype=v.dtype)
        return torch.empty(v.shape, dtype=v.dtype, device="meta")
    if isinstance(args, (list, tuple)):
        return type(args)(_values(a, fake=fake) for a in args)
    return args


def _meta_val(node: torch.fx.Node, target: object, args: tuple) -> None:
    """node.meta['val'] from running target on meta tensors shaped like the inputs."""
    node.meta["val"] = target(*_values(args))  # type: ignore[operator]


def _insert(
    graph: torch.fx.Graph,
    before: torch.fx.Node,
    target: object,
    args: tuple,
    like: torch.fx.Node,
    *,
    meta: bool = True,
) -> torch.fx.Node:
    with graph.inserting_before(before):
        new = graph.call_function(target, args)  # type: ignore[arg-type]
    new.meta.update(
        {
            k: v
            for k, v in like.meta.items()
            if k in ("stack_trace", "nn_module_stack", "source_fn_stack")
        }
    )
    if meta:
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
        if (
            shape != out
            and math.prod(shape) == math.prod(out)
            and [s for s in shape if s != 1] == [s for s in out if s != 1]
        ):
            new = _insert(graph, node, _aten.reshape.default, (a, out), a)
            node.update_arg(k, new)


_VIEWS = (
    _aten.select.int,
    _aten.slice.Tensor,
    _aten.unsqueeze.default,
    _aten.squeeze.dim,
    _aten.reshape.default,
    _aten.view.default,
)


def _fold_first_step(
    gm: torch.fx.GraphModule, add: torch.fx.Node, zero_linear: torch.fx.Node, other: object
) -> bool:
    """add(linear(0, W_hh, b_hh), select(linear(xs, W_ih, b_ih), 0, t)): the first step of a
    zero state adds only b_hh. Every step adds b_ih + b_hh, so b_hh moves into the input
    projection's bias (computed once for all steps) and the recurrent linears lose theirs;
    the add becomes a reshape of the step's projection. Needs b_ih used by the projection
    only and b_hh by the recurrent linears only (their weight is zero_linear's)."""
    if not (isinstance(other, torch.fx.Node) and other.target == _aten.select.int):
        return False
    proj = other.args[0]
    if not (
        isinstance(proj, torch.fx.Node)
        and proj.target == _aten.linear.default
        and len(proj.args) > 2
        and len(zero_linear.args) > 2
    ):
        return False
    b_in, w_hh, b_hh = proj.args[2], zero_linear.args[1], zero_linear.args[2]
    if not all(isinstance(n, torch.fx.Node) and n.op == "get_attr" for n in (b_in, w_hh, b_hh)):
        return False
    recurrent = list(b_hh.users)  # type: ignore[union-attr]
    if list(b_in.users) != [proj] or any(  # type: ignore[union-attr]
        u.target != _aten.linear.default or u.args[1] is not w_hh or u.args[2] is not b_hh
        for u in recurrent
    ):
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
        if (
            node.target == _aten.zeros.default
            or (node.target in _VIEWS and args and args[0] in zero)
            or (node.target == _aten.mul.Tensor and any(a in zero for a in args[:2]))
            or (node.target == _aten.linear.default and args[0] in zero)
        ):
            zero.add(node)
        elif node.target == _aten.add.Tensor and len(args) >= 2:
            z = [a for a in args[:2] if a in zero]
            if len(z) != 1:
                continue
            other = args[1] if args[0] is z[0] else args[0]
            if z[0].target == _aten.linear.default:
                _fold_first_step(gm, node, z[0], other)
            elif (
                z[0].target == _aten.mul.Tensor
                and isinstance(other, torch.fx.Node)
                and list(other.meta["val"].shape) == list(node.meta["val"].shape)
            ):
                node.replace_all_uses_with(other)
                graph.erase_node(node)
    graph.eliminate_dead_code()


def simplify_recurrent(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Unroll the recurrent nodes, rewrite the tuple-producing ops (see module doc)."""
    graph = gm.graph
    if not unroll_recurrent(gm) and not any(n.target in _TUPLE_OPS for n in graph.nodes):
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
