"""Rules for select, slice and transpose (the ops an unrolled LSTM reads its time steps
and gates with). A slice that keeps the whole tensor, a select of a size-1 dim and a
transpose that only moves size-1 dims are views; any other slice copies its part with
torchmcu::slice_copy.out(Tensor self, int dim, int start, int end, int step, *, Tensor out)
(the argument list of ExecuTorch's portable aten::slice_copy.Tensor_out, start/end already
normalised to 0 <= start <= end <= size; ExecuTorch has no cortex_m slice and our programs
use the .out overload throughout), any other transpose is cortex_m::transpose. Qparams are shared with the input.
"""

from __future__ import annotations

import torch
import torch.fx

from torchmcu.lower.context import Ctx, alias, bind_output, call, input_value, new_int8
from torchmcu.lower.errors import unsupported
from torchmcu.lower.graph import arg, shape_of
from torchmcu.lower.layout import as_contiguous
from torchmcu.lower.requant import output_quant, same_qparams
from torchmcu.lower.values import LValue
from torchmcu.quantize.qdq import is_q

SLICE_OP = "torchmcu::slice_copy"


def _shared_input(ctx: Ctx, node: torch.fx.Node, what: str):
    """(input, quantize users, None, qparams or None). PT2E leaves no quantize between two
    ops that share qparams (e.g. select -> unsqueeze): then the output keeps the input's."""
    x = input_value(ctx, node.args[0])
    if not any(is_q(u) for u in node.users):
        return (as_contiguous(ctx, x) if x.nhwc else x), [], None, None
    qs, act, qp = output_quant(ctx, node, allow_activation=False)
    if not same_qparams(x.scale, x.zero_point, qp):
        raise unsupported(node, f"a {what} that changes qparams")
    return (as_contiguous(ctx, x) if x.nhwc else x), qs, act, qp


def _bind(ctx: Ctx, node: torch.fx.Node, qs: list, act, out: LValue) -> None:
    if qs:
        bind_output(ctx, qs, act, out)
    else:
        ctx.env[node] = out


def _slice_copy(ctx: Ctx, node: torch.fx.Node, x: LValue, dim: int, start: int, end: int,
                step: int) -> LValue:
    sizes = list(x.sizes)
    sizes[dim] = max(0, (end - start + step - 1) // step)
    out = new_int8(ctx, node.name, sizes, None, nhwc=False).with_(
        scale=x.scale, zero_point=x.zero_point)
    b = ctx.b
    args = [x.vi, b.int_(dim), b.int_(start), b.int_(end), b.int_(step)]
    call(ctx, SLICE_OP, args, out.vi, node)
    return out


def emit_slice(ctx: Ctx, node: torch.fx.Node) -> None:
    x, qs, act, _ = _shared_input(ctx, node, "slice")
    rank = x.rank
    dim = int(arg(node, 1, "dim", 0)) % rank  # type: ignore[arg-type]
    size = x.sizes[dim]
    start = arg(node, 2, "start", None)
    end = arg(node, 3, "end", None)
    step = int(arg(node, 4, "step", 1))  # type: ignore[arg-type]
    start = 0 if start is None else int(start)  # type: ignore[arg-type]
    end = size if end is None else int(end)  # type: ignore[arg-type]
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, start), size)
    if step < 1:
        raise unsupported(node, f"slice step {step}")
    if start == 0 and end == size and step == 1:
        out = x
    else:
        out = _slice_copy(ctx, node, x, dim, start, end, step)
    if out.sizes != shape_of(node):
        raise unsupported(node, f"slice result {out.sizes} differs from {shape_of(node)}")
    _bind(ctx, node, qs, act, out)


def emit_select(ctx: Ctx, node: torch.fx.Node) -> None:
    x, qs, act, _ = _shared_input(ctx, node, "select")
    dim = int(node.args[1]) % x.rank  # type: ignore[arg-type]
    index = int(node.args[2]) % x.sizes[dim]  # type: ignore[arg-type]
    part = x if x.sizes[dim] == 1 else _slice_copy(ctx, node, x, dim, index, index + 1, 1)
    _bind(ctx, node, qs, act, alias(ctx, part, shape_of(node), nhwc=False))


def emit_transpose(ctx: Ctx, node: torch.fx.Node) -> None:
    x, qs, act, _ = _shared_input(ctx, node, "transpose")
    d0, d1 = int(node.args[1]) % x.rank, int(node.args[2]) % x.rank  # type: ignore[arg-type]
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    out_shape = shape_of(node)
    moved = [p for p in perm if x.sizes[p] > 1]
    if moved == sorted(moved):  # only size-1 dims move: same bytes
        out = alias(ctx, x, out_shape, nhwc=False)
    else:
        out = new_int8(ctx, node.name, out_shape, None, nhwc=False).with_(
            scale=x.scale, zero_point=x.zero_point)
        call(ctx, "cortex_m::transpose", [x.vi, ctx.b.int_list(perm)], out.vi, node)
    _bind(ctx, node, qs, act, out)
