"""torchmcu::quantized_layer_norm: int8 layer norm over the last dimension, in integer
arithmetic only (no float inside the kernel).

Defined here once: the argument check (the rules firmware/kernels/cortex_m/
quantized_layer_norm.c enforces, naming the same argument), the reference, the contract, and
the aten rule that emits it (aten::layer_norm.default over the last dim), which gets the
lowering Kit (torchmcu/lower/kit.py) as `k`. The fp32 rule of the same aten op is
portable_reduce.py's. No NPU lowering yet.

Per row of C values: D_i = C*x_i - sum(x) (exact, C times the deviation), V = sum D_i^2 =
C * (C * sum(x^2) - sum(x)^2), den = V * 2^10 + eps (eps = C^3 * eps_real / input_scale^2 in
Q10), so 2^5 * D_i / sqrt(den) = (x_i - mean) / sqrt(C * (var + eps_real)). The inverse square root is an
integer square root of den normalised to [2^60, 2^62) and one division; D_i / sqrt(den)
is carried in Q24, times an int32 weight (gamma * sqrt(C) / output_scale in Q(weight_shift))
plus the int32 bias (beta / output_scale in Q16).

An int16 input (a transformer's residual stream) drops the factor C from den (V/C = C^2 var,
so den stays below 2^62 for rows up to 1024): 2^5 * D_i / sqrt(den) is then the normalised
value itself, and the weight is gamma / output_scale.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, op, pattern
from torchmcu.ops.defs.linear import contiguous
from torchmcu.ops.intmath import INT8_MAX, INT8_MIN, INT32_MAX, INT32_MIN, check_int
from torchmcu.pte import program as pm

MAX_ROW = 4096  # V <= C^3 * 2^14 <= 2^50: den stays below 2^62 with eps <= 2^61
MAX_ROW16 = 1024  # int16 input: V / C <= C^2 * 2^30 <= 2^50 likewise
EPS_MAX = 1 << 61
WEIGHT_SHIFT_MAX = 22  # bias << (shift + 8) and yq * weight stay below 2^62
Y_BITS = 24  # D / sqrt(den) in Q24
BIAS_BITS = 16  # the bias in Q16 output units
EPS_BITS = 5  # den carries 2 * 5 fraction bits, so a small eps keeps its precision

CONTRACT = """\
- `input` int8 (last size C in [1, 4096]) or int16 (C in [1, 1024]), `out` int8, same
  sizes, both contiguous, rank 1..6;
  `weight`, `bias` int32 tensors of C items. `eps` in [1, 2^61], `weight_shift` G in
  [0, 22], `output_zero_point` an int8 zero point. The input zero point is not needed
  (a layer norm is shift-invariant).
- Per row `x` of C values, in exact integers: `D_i = C*x_i - sum(x)`,
  `den = (C*(C*sum(x^2) - sum(x)^2) << 10) + eps` (= 2^10 * sum D_i^2 + eps);
  for an int16 input `den = ((C*sum(x^2) - sum(x)^2) << 10) + eps` (the factor C dropped);
  `t = (62 - bitlength(den)) // 2`, `S = isqrt(den << 2t)`, `R = floor(2^62 / S)`;
  `y_i = rdiv(D_i * R, 33 - t)` (2^5 * D_i / sqrt(den) in Q24);
  `out_i = clamp(rdiv(y_i * weight_i + (bias_i << (G + 8)), 24 + G) + output_zero_point,
  -128, 127)`, where `rdiv(v, e)` divides by 2^e rounding half away from zero.
- What the lowering passes: `eps = max(1, round(2^10 * C^3 * eps_real / input_scale^2))`,
  `weight_i = round(gamma_i * sqrt(C) / output_scale * 2^G)` with the largest G that keeps
  every weight in int32, `bias_i = round(beta_i / output_scale * 2^16)`; for an int16 input
  `eps = max(1, round(2^10 * C^2 * eps_real / input_scale^2))` and
  `weight_i = round(gamma_i / output_scale * 2^G)`. The result is
  within one output step of the float64 layer norm of the dequantized input."""


def _rdiv(v: np.ndarray, e: np.ndarray | int) -> np.ndarray:
    """v / 2^e rounded half away from zero (int64 in, e >= 1)."""
    v = np.asarray(v, dtype=np.int64)
    e = np.asarray(e, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    q = v >> e
    return q + ((v & mask) > (mask >> 1) + (v < 0))


def quantized_layer_norm(
    input: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    eps: int,
    weight_shift: int,
    output_zero_point: int,
) -> np.ndarray:
    """int8 or int16 [..., C] -> int8 [..., C] (the contract's integer algorithm)."""
    check_int("eps", eps, 1, EPS_MAX)
    check_int("weight_shift", weight_shift, 0, WEIGHT_SHIFT_MAX)
    check_int("output_zero_point", output_zero_point, INT8_MIN, INT8_MAX)
    x = np.asarray(input)
    c = x.shape[-1]
    wide = x.dtype == np.int16
    if not 1 <= c <= (MAX_ROW16 if wide else MAX_ROW):
        raise ValueError(f"layer norm row size {c} outside [1, {MAX_ROW16 if wide else MAX_ROW}]")
    rows = x.reshape(-1, c).astype(np.int64)
    g = np.asarray(weight, dtype=np.int64).reshape(-1)
    b = np.asarray(bias, dtype=np.int64).reshape(-1)
    s = rows.sum(axis=1)
    d = c * rows - s[:, None]
    var = c * (rows * rows).sum(axis=1) - s * s  # C^2 var
    den = ((var if wide else c * var) << (2 * EPS_BITS)) + eps
    shifts, recips = [], []
    for v in den.tolist():
        t = (62 - int(v).bit_length()) // 2
        shifts.append(t)
        recips.append((1 << 62) // math.isqrt(int(v) << (2 * t)))
    t_arr = np.array(shifts, dtype=np.int64)[:, None]
    y = _rdiv(d * np.array(recips, dtype=np.int64)[:, None], 38 - EPS_BITS - t_arr)
    acc = y * g + (b << (weight_shift + 8))
    out = _rdiv(acc, Y_BITS + weight_shift) + output_zero_point
    return np.clip(out, INT8_MIN, INT8_MAX).astype(np.int8).reshape(x.shape)


def check(b: Bound) -> None:
    """quantized_layer_norm.c's TM_ARG_CHECKs, in its order, on a bound call."""
    x = b.value("input")
    if not (
        (contiguous(x, pm.ScalarType.CHAR, 1, 6) and 1 <= x.sizes[-1] <= MAX_ROW)
        or (contiguous(x, pm.ScalarType.SHORT, 1, 6) and 1 <= x.sizes[-1] <= MAX_ROW16)
    ):
        raise b.reject(
            "input",
            f"expected a contiguous int8 tensor, last size in [1, {MAX_ROW}], or int16, in "
            f"[1, {MAX_ROW16}]",
        )
    c = x.sizes[-1]
    for name in ("weight", "bias"):
        t = b.value(name)
        if not (
            isinstance(t, pm.Tensor)
            and t.scalar_type == pm.ScalarType.INT
            and t.numel == c
            and 1 <= len(t.sizes) <= 6
        ):
            raise b.reject(name, f"expected an int32 tensor of {c} items")
    b.int_in("eps", 1, EPS_MAX)
    b.int_in("weight_shift", 0, WEIGHT_SHIFT_MAX)
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    out = b.value("out")
    rank = len(x.sizes)
    if not (contiguous(out, pm.ScalarType.CHAR, rank, rank) and list(out.sizes) == list(x.sizes)):
        raise b.reject("out", "expected a contiguous int8 tensor of the input's sizes")


def reference(b: Any) -> np.ndarray:
    return quantized_layer_norm(
        b.physical("input"), b.physical("weight"), b.physical("bias"), b.eps, b.weight_shift,
        b.output_zero_point,
    ).reshape(-1)  # fmt: skip


def macs(b: Bound) -> int:
    return 2 * b.tensor("out").numel


QUANTIZED_LAYER_NORM = op(
    "torchmcu::quantized_layer_norm.out(Tensor input, Tensor weight, Tensor bias, int eps,"
    " int weight_shift, int output_zero_point, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    macs=macs,
    no_npu="no TOSA lowering yet",
    contract=CONTRACT,
)


def layer_norm_params(
    gamma: np.ndarray,
    beta: np.ndarray,
    eps_real: float,
    in_scale: float,
    out_scale: float,
    int16_input: bool = False,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(weight int32, bias int32, eps, weight_shift) for the kernel, or ValueError."""
    c = gamma.size
    eff = np.asarray(gamma, dtype=np.float64) * (1.0 if int16_input else math.sqrt(c)) / out_scale
    peak = float(np.abs(eff).max()) if c else 0.0
    shift = WEIGHT_SHIFT_MAX
    while shift > 0 and peak * 2.0**shift > INT32_MAX:
        shift -= 1
    weight = np.round(eff * 2.0**shift)
    bias = np.round(np.asarray(beta, dtype=np.float64) / out_scale * 2.0**BIAS_BITS)
    if np.abs(weight).max() > INT32_MAX or bias.min() < INT32_MIN or bias.max() > INT32_MAX:
        raise ValueError("layer norm weight or bias too large for the output scale")
    factor = c**2 if int16_input else c**3
    eps = max(1, min(EPS_MAX, round(2.0 ** (2 * EPS_BITS) * factor * eps_real / in_scale**2)))
    return weight.astype(np.int32), bias.astype(np.int32), eps, shift


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_layer_norm(k: Any, node: Any) -> None:
    """aten::layer_norm.default over the last dim, int8 (or the int16 residual stream) in, int8
    out."""
    x = k.as_contiguous(k.input_value(k.aten_arg(node, "input")))
    shape = [int(s) for s in k.aten_arg(node, "normalized_shape")]
    if len(shape) != 1 or shape[0] != x.sizes[-1]:
        raise k.unsupported(node, f"layer norm over {shape} (only the last dimension)")
    c = shape[0]
    weight, bias = k.aten_arg(node, "weight"), k.aten_arg(node, "bias")
    gamma = np.ones(c) if weight is None else k.float_constant(weight).reshape(-1)
    beta = np.zeros(c) if bias is None else k.float_constant(bias).reshape(-1)
    qs, act, qp = k.output_quant(node, allow_activation=False)
    try:
        w, bq, eps, shift = layer_norm_params(
            gamma,
            beta,
            float(k.aten_arg(node, "eps", 1e-5)),
            float(x.scale),
            float(qp.scale),
            int16_input=x.scalar_type == pm.ScalarType.SHORT,
        )
    except ValueError as e:
        raise k.unsupported(node, str(e)) from None
    out = k.new_int8(node.name, x.sizes, qp, nhwc=False)
    k.call(
        QUANTIZED_LAYER_NORM,
        node,
        input=x.vi,
        weight=k.constant(w),
        bias=k.constant(bq),
        eps=k.int_(eps),
        weight_shift=k.int_(shift),
        output_zero_point=k.int_(qp.zero_point),
        out=out.vi,
    )
    k.bind_output(qs, act, out)


pattern(
    "aten::layer_norm.default",
    annotate=Annotate("binary", {"kind": "layer_norm"}),
    lower=lower_layer_norm,
    emits=(QUANTIZED_LAYER_NORM,),
)
