"""Output qparams, fused-activation ranges and requantization multipliers of an anchor op."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.fx

from torchmcu.lower.context import Ctx
from torchmcu.lower.errors import LoweringError, describe_node, unsupported
from torchmcu.lower.graph import QParams, named_arg, qparams_of
from torchmcu.ops import views
from torchmcu.quantize.qdq import is_q
from torchmcu.quantize.targets import resolve_target
from torchmcu.reference.quant import single_rounding_multiplier

# The ops the quantizer fuses into their producer's output range: target -> bounds(arg, node)
# (torchmcu/ops/defs/activations.py)
ACTIVATIONS = views.activation_bounds(resolve_target)

INT8_MIN, INT8_MAX = -128, 127


def q8(value: float, qp: QParams) -> int:
    """Quantize one real number the way torch's quantize_per_tensor does (half to even)."""
    q = np.round(np.float32(value) / np.float32(qp.scale)) + qp.zero_point
    return int(np.clip(q, qp.quant_min, qp.quant_max))


def same_qparams(scale: float | None, zero_point: int | None, qp: QParams) -> bool:
    """True when (scale, zero_point) match qp, i.e. the op can keep the int8 bytes as they are."""
    return zero_point == qp.zero_point and math.isclose(float(scale), qp.scale, rel_tol=1e-6)  # type: ignore[arg-type]


def output_quant(ctx: Ctx, node: torch.fx.Node, allow_activation: bool):
    """(quantize users, fused activation node or None, qparams) at the output of an anchor op."""
    act = None
    users = list(node.users)
    if allow_activation and len(users) == 1 and users[0].target in ACTIVATIONS:
        act = users[0]
        users = list(act.users)
    qs = [u for u in users if is_q(u)]
    if not users or len(qs) != len(users):
        raise unsupported(node, "its output is not quantized to int8 (an unannotated float op "
                          "uses it)")
    params = {qparams_of(ctx.gm, q) for q in qs}
    if len(params) != 1:
        raise LoweringError(f"{describe_node(node)}: output quantized with different qparams")
    return qs, act, params.pop()


def activation_range(act: torch.fx.Node | None, qp: QParams) -> tuple[int, int]:
    """(activation_min, activation_max) for a fused ReLU/ReLU6/hardtanh/clamp."""
    lo, hi = qp.quant_min, qp.quant_max
    if act is None:
        return lo, hi
    mn, mx = ACTIVATIONS[act.target](named_arg, act)
    if isinstance(mn, torch.fx.Node) or isinstance(mx, torch.fx.Node):
        raise unsupported(act, "clamp bounds must be numbers")
    bounds = (None if mn is None else float(mn), None if mx is None else float(mx))
    if bounds[0] is not None:
        lo = max(lo, q8(bounds[0], qp))
    if bounds[1] is not None:
        hi = min(hi, q8(bounds[1], qp))
    return lo, hi


def per_channel_requant(in_scale: float, w_scales: np.ndarray, out_scale: float):
    """(multipliers, shifts) taking each channel's int32 accumulator to the output scale."""
    pairs = [single_rounding_multiplier(in_scale * float(ws) / out_scale) for ws in w_scales]
    return [m for m, _ in pairs], [s for _, s in pairs]
