"""The rule for transpose and the helpers it shares with select and slice (the ops an unrolled
LSTM reads its time steps and gates with; their rules are torchmcu/ops/defs/slice_copy.py's,
through lower/kit.py). A transpose that only moves size-1 dims is a view; any other transpose
is cortex_m::transpose. Qparams are shared with the input.
"""

from __future__ import annotations

import torch
import torch.fx

from torchmcu.lower.context import Ctx, alias, bind_output, call, input_value, new_int8
from torchmcu.lower.errors import unsupported
from torchmcu.lower.graph import shape_of
from torchmcu.lower.layout import as_contiguous
from torchmcu.lower.requant import output_quant, same_qparams
from torchmcu.lower.values import LValue
from torchmcu.quantize.qdq import is_q


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
