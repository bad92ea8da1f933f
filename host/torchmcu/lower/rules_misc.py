"""Rules for the reshape-like ops that only re-view bytes (softmax and constant padding are
torchmcu/ops/defs/softmax.py's and pad.py's)."""

from __future__ import annotations

import torch
import torch.fx

from torchmcu.lower.context import Ctx, alias, bind_output, input_value
from torchmcu.lower.errors import unsupported
from torchmcu.lower.graph import shape_of
from torchmcu.lower.layout import as_contiguous
from torchmcu.lower.requant import output_quant, same_qparams
from torchmcu.quantize.qdq import is_q

_aten = torch.ops.aten

def emit_view(ctx: Ctx, node: torch.fx.Node) -> None:
    """flatten / view / reshape / squeeze / dropout: an alias of the same bytes."""
    x = input_value(ctx, node.args[0])
    out_shape = shape_of(node)
    if not any(is_q(u) for u in node.users):
        # PT2E puts no quantize between ops that share qparams (select -> reshape -> add)
        same = out_shape == x.sizes
        ctx.env[node] = x if same else alias(ctx, as_contiguous(ctx, x), out_shape, nhwc=False)
        return
    qs, act, qp = output_quant(ctx, node, allow_activation=False)
    if not same_qparams(x.scale, x.zero_point, qp):
        raise unsupported(node, "a reshape that changes qparams")
    if out_shape == x.sizes:
        out = x
    elif x.nhwc and not x.layout_free and len(out_shape) == 2 and out_shape[0] == x.sizes[0]:
        # flatten(1) of NHWC bytes: keep the bytes, remember their (h, w, c) order.
        out = alias(ctx, x, out_shape, nhwc=False, flatten_chw=tuple(x.sizes[1:]))
    else:
        out = alias(ctx, as_contiguous(ctx, x), out_shape, nhwc=False)
    bind_output(ctx, qs, act, out)
