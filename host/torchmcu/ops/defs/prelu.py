"""torchmcu::quantized_prelu: int8 PReLU with one slope per channel (nn.PReLU(C), F.prelu).

Defined here once: the argument check (the rules firmware/kernels/cortex_m/quantized_prelu.c
enforces, naming the same argument), the reference, the contract, and the aten side: the
quantizer observes input and output (the slope stays a float constant), and the rule turns
the slope into per-channel requantization multipliers (it gets the lowering Kit as `k`).

Per element of channel c, d = input - input_zero_point:
    out = clamp(requantize(d, positive_multiplier, positive_shift) + output_zero_point)   d >= 0
    out = clamp(requantize(d, negative_multipliers[c], negative_shifts[c]) + output_zero_point)
with (positive_multiplier, positive_shift) for s_in / s_out and the negative pair for
s_in * slope[c] / s_out (a negative slope gives a negative multiplier). The channel is the
innermost dimension in memory: a rank-2 [N, C] contiguous tensor or a rank-4 NHWC activation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, op, pattern
from torchmcu.ops.defs.conv import per_channel
from torchmcu.ops.intmath import requantize, single_rounding_multiplier
from torchmcu.ops.layout import laid_out_as, same_layout
from torchmcu.pte import program as pm

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

CONTRACT = """\
- int8 PReLU, one slope per channel: with `d = input - input_zero_point`,
  `out = clamp(requantize(d, m, s) + output_zero_point, -128, 127)` where `(m, s)` is
  `(positive_multiplier, positive_shift)` for `d >= 0` and
  `(negative_multipliers[c], negative_shifts[c])` for `d < 0`, c the element's channel.
- `input` int8, rank 2 (`[N, C]`, contiguous) or rank 4 (NHWC memory): the channel is the
  innermost dimension in memory; `out` int8 with the input's sizes and layout; the two
  multiplier/shift tensors int32 with C elements, shifts in [-31, 31]; zero points in
  [-128, 127].
- torchmcu emits it for `aten::prelu` (nn.PReLU, F.prelu): the slope stays float and gives
  the negative multipliers, `s_in * slope[c] / s_out` (negative for a negative slope);
  the positive pair is `s_in / s_out`.
- Helium: four channels per step, both requantizations and a lane select."""


def _channels(x: pm.Tensor) -> int | None:
    """C when the channel (dim 1) is innermost in memory (rank 2 contiguous, rank 4 NHWC)."""
    if len(x.sizes) == 2 and laid_out_as(x.sizes, x.dim_order, (0, 1)):
        return int(x.sizes[1])
    if len(x.sizes) == 4 and laid_out_as(x.sizes, x.dim_order, (0, 2, 3, 1)):
        return int(x.sizes[1])
    return None


def check(b: Bound) -> None:
    """quantized_prelu.c's TM_ARG_CHECKs, in its order, on a bound call."""
    x = b.value("input")
    channels = _channels(x) if isinstance(x, pm.Tensor) else None
    if not (isinstance(x, pm.Tensor) and x.scalar_type == pm.ScalarType.CHAR and channels):
        raise b.reject("input", "expected an int8 [N, C] or NHWC tensor")
    b.int_in("input_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("positive_multiplier", INT32_MIN, INT32_MAX)
    b.int_in("positive_shift", -31, 31)
    per_channel(b, "negative_multipliers", channels)
    per_channel(b, "negative_shifts", channels, -31, 31)
    out = b.value("out")
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == pm.ScalarType.CHAR
        and list(out.sizes) == list(x.sizes)
        and same_layout(x, out)
    ):
        raise b.reject("out", "expected an int8 tensor with the input's sizes and layout")


def quantized_prelu(
    x: np.ndarray,
    input_zero_point: int,
    output_zero_point: int,
    positive: tuple[int, int],
    negative_multipliers: np.ndarray,
    negative_shifts: np.ndarray,
) -> np.ndarray:
    """The contract on memory-order int8 x whose last axis is the channel."""
    d = x.astype(np.int64) - input_zero_point
    channels = x.shape[-1]
    m = np.asarray(negative_multipliers, np.int64).reshape(channels)
    s = np.asarray(negative_shifts, np.int64).reshape(channels)
    pos = requantize(d, positive[0], positive[1])
    neg = requantize(d, np.broadcast_to(m, d.shape), np.broadcast_to(s, d.shape))
    y = np.where(d >= 0, pos, neg) + output_zero_point
    return np.clip(y, INT8_MIN, INT8_MAX).astype(np.int8)


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (the input's layout)."""
    x = b.physical("input")
    channels = int(b.tensor("input").sizes[1])
    phys = x.reshape(-1, channels)
    out = quantized_prelu(
        phys,
        b.input_zero_point,
        b.output_zero_point,
        (b.positive_multiplier, b.positive_shift),
        b.physical("negative_multipliers"),
        b.physical("negative_shifts"),
    )
    return out.reshape(x.shape)


QUANTIZED_PRELU = op(
    "torchmcu::quantized_prelu.out(Tensor input, int input_zero_point, int output_zero_point,"
    " int positive_multiplier, int positive_shift, Tensor negative_multipliers,"
    " Tensor negative_shifts, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    no_npu="TOSA has no PReLU; it stays on the Cortex-M",
    contract=CONTRACT,
)


def signed_multiplier(real: float) -> tuple[int, int]:
    """(m, s) for a real scale of either sign: a negative one negates the multiplier."""
    m, s = single_rounding_multiplier(abs(real))
    return (-m if real < 0 else m), s


def lower_prelu(k: Any, node: Any) -> None:
    """aten.prelu(self, weight): the slope (1 or C values) as per-channel multipliers."""
    x = k.input_value(node.args[0])
    if len(x.sizes) not in (2, 4):
        raise k.unsupported(node, f"prelu of a rank-{len(x.sizes)} tensor (rank 2 or 4 only)")
    if len(x.sizes) == 4 and not x.nhwc:
        x = k.as_nhwc(x)
    channels = int(x.sizes[1])
    if not k.is_node(node.args[1]):
        raise k.unsupported(node, "the prelu slope must be a constant tensor")
    slope = np.asarray(k.float_constant(node.args[1]), np.float64).reshape(-1)
    if slope.size not in (1, channels):
        raise k.unsupported(node, f"{slope.size} slopes for {channels} channels")
    slope = np.broadcast_to(slope, (channels,))
    qs, act, qp = k.output_quant(node, allow_activation=False)
    in_scale = float(x.scale)
    pos_m, pos_s = single_rounding_multiplier(in_scale / qp.scale)
    pairs = [signed_multiplier(in_scale * float(a) / qp.scale) for a in slope]
    out = k.new_int8(node.name, x.sizes, qp, nhwc=x.nhwc)
    k.call(
        QUANTIZED_PRELU,
        node,
        input=x.vi,
        input_zero_point=k.int_(int(x.zero_point)),
        output_zero_point=k.int_(qp.zero_point),
        positive_multiplier=k.int_(pos_m),
        positive_shift=k.int_(pos_s),
        negative_multipliers=k.constant(np.array([m for m, _ in pairs], np.int32)),
        negative_shifts=k.constant(np.array([s for _, s in pairs], np.int32)),
        out=out.vi,
    )
    k.bind_output(qs, act, out)


# Observed input and output like a table activation's; the slope (args[1]) is not annotated,
# so it stays a float constant the rule reads.
OBSERVED = Annotate("table", {"kind": "prelu", "fixed_qparams": None})
pattern("aten::prelu.default", annotate=OBSERVED, lower=lower_prelu, emits=(QUANTIZED_PRELU,))
