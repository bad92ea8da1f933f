"""Rule for the table activations: sigmoid and tanh as ExecuTorch's int8 LUT operator
cortex_m::quantized_activation(input, lut) -> out[i] = lut[input[i] + 128].

The table is computed here from the float function and the input/output qparams: entry
q + 128 holds clamp(round_half_away(f((q - zp_in) * s_in) / s_out) + zp_out, -128, 127), the
function evaluated in float64 (math.tanh, a sigmoid that never overflows exp). Half away
from zero is the convention ExecuTorch's own table builder uses, so the same qparams give
the same table in both flows.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.fx

from torchmcu.lower.context import Ctx, bind_output, call, input_value, new_int8
from torchmcu.lower.requant import output_quant

_aten = torch.ops.aten


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


TABLE_FUNCTIONS: dict[object, Callable[[float], float]] = {
    _aten.sigmoid.default: _sigmoid,
    _aten.tanh.default: math.tanh,
}


def _round_half_away(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def activation_lut(f: Callable[[float], float], in_scale: float, in_zp: int,
                   out_scale: float, out_zp: int) -> np.ndarray:
    """The 256-entry int8 table of f for these qparams (entry q + 128 for input q)."""
    lut = np.empty(256, dtype=np.int8)
    for q in range(-128, 128):
        y = f((q - in_zp) * in_scale) / out_scale
        lut[q + 128] = max(-128, min(127, _round_half_away(y) + out_zp))
    return lut


def emit_table_activation(ctx: Ctx, node: torch.fx.Node) -> None:
    x = input_value(ctx, node.args[0])
    qs, act, qp = output_quant(ctx, node, allow_activation=False)
    lut = activation_lut(TABLE_FUNCTIONS[node.target], float(x.scale), int(x.zero_point),  # type: ignore[arg-type]
                         qp.scale, qp.zero_point)
    out = new_int8(ctx, node.name, x.sizes, qp, nhwc=x.nhwc)
    call(ctx, "cortex_m::quantized_activation", [x.vi, ctx.b.constant(lut)], out.vi, node)
    bind_output(ctx, qs, act, out)
