"""Reference semantics of cortex_m::softmax: CMSIS-NN's integer arm_softmax_s8.

The fixed-point algorithm (gemmlowp's): exponentials of the non-positive
differences to the row maximum in Q0.31 from a Q5.26 argument, summed in
Q12.19, one reciprocal by Newton-Raphson, outputs in units of 1/256 offset by
-128. Constants are Q0.31 values of exp(-2^k / 4) etc.; see the comments.
"""

from __future__ import annotations

import numpy as np

from torchmcu.reference.ops_elementwise import _check_int
from torchmcu.reference.quant import (
    INT32_MAX,
    INT32_MIN,
    rounding_divide_by_pow2,
    saturate_int32,
    saturating_left_shift,
    sat_rounding_doubling_high_mul as srdhm,
    wrap_int32,
)

ACCUM_BITS = 12  # the exponentials are summed in Q12.19
INPUT_INTEGER_BITS = 5  # the scaled differences are Q5.26
MAX_ROW_SIZE = 1 << (31 - 19)  # 4096 rows of exp(0) fill the Q12.19 sum


def _q31(x: float) -> int:
    return int(round(x * (1 << 31)))


# exp(-1/4 * 2^k) in Q0.31 for k = 0..6 (exp(-1/4), exp(-1/2), ..., exp(-16)).
_EXP_BARREL = (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)
_EXP_MINUS_EIGHTH = 1895147668  # exp(-1/8) in Q0.31
_ONE_THIRD = 715827883  # 1/3 in Q0.31
_NR_48_17 = 1515870810  # 48/17 in Q2.29
_NR_MINUS_32_17 = -1010580540  # -32/17 in Q2.29


def exp_on_negative_values(a: np.ndarray) -> np.ndarray:
    """exp(a) for a <= 0 given in Q5.26, result in Q0.31 (exp(0) saturates to INT32_MAX)."""
    a = np.asarray(a, dtype=np.int64)
    quarter = 1 << 24  # 1/4 in Q5.26
    a_mod_minus_quarter = (a & (quarter - 1)) - quarter  # in [-1/4, 0)
    remainder = a_mod_minus_quarter - a  # the multiple of 1/4 still to apply
    # Taylor series of exp around -1/8 on x = a_mod_minus_quarter + 1/8 (rescaled to Q0.31).
    x = (a_mod_minus_quarter << 5) + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pow2(x4, 2)
    poly = rounding_divide_by_pow2(srdhm(x4_over_4 + x3, _ONE_THIRD) + x2, 1)
    result = _EXP_MINUS_EIGHTH + srdhm(_EXP_MINUS_EIGHTH, x + poly)
    for k, factor in enumerate(_EXP_BARREL):
        apply = (remainder & (1 << (24 + k))) != 0
        result = np.where(apply, srdhm(result, factor), result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """1 / (1 + x) for x in [0, 1) given in Q0.31; result in Q0.31 (Newton-Raphson, 3 steps)."""
    a = np.asarray(a, dtype=np.int64)
    total = a + INT32_MAX
    half_denominator = np.where(total >= 0, (total + 1) // 2, -((-total + 1) // 2))  # rounds away
    x = _NR_48_17 + srdhm(half_denominator, _NR_MINUS_32_17)
    one_q29 = 1 << 29
    for _ in range(3):
        x = x + saturating_left_shift(srdhm(x, one_q29 - srdhm(half_denominator, x)), 2)
        x = saturate_int32(x)
    return saturating_left_shift(x, 1)


def _clz32(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.int64)
    bits = np.zeros_like(v)
    for shift in range(32):
        bits = np.where((v >> shift) & 1 == 1, shift + 1, bits)
    return 32 - bits


def softmax(
    input: np.ndarray,
    dim: int,
    input_zero_point: int,
    output_zero_point: int,
    input_multiplier: int,
    input_shift: int,
    diff_min: int,
) -> np.ndarray:
    """int8 softmax along `dim` (which must be the array's last axis), int8 output with scale 1/256, zp -128."""
    x = np.asarray(input)
    if x.dtype != np.int8:
        raise ValueError(f"softmax input must be int8, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("softmax input must have rank >= 1")
    if dim < -x.ndim or dim >= x.ndim or dim % x.ndim != x.ndim - 1:
        raise ValueError(f"softmax dim {dim} is not the last dimension of a rank-{x.ndim} tensor")
    _check_int("input_zero_point", input_zero_point, -128, 127)
    if output_zero_point != -128:
        raise ValueError(f"softmax output_zero_point must be -128, got {output_zero_point}")
    _check_int("input_multiplier", input_multiplier, 1, INT32_MAX)
    _check_int("input_shift", input_shift, 0, 31)
    _check_int("diff_min", diff_min, INT32_MIN, 0)
    if x.shape[-1] > MAX_ROW_SIZE or x.shape[-1] < 1:
        raise ValueError(f"softmax row size {x.shape[-1]} outside [1, {MAX_ROW_SIZE}]")

    v = x.astype(np.int64)
    diff = v - v.max(axis=-1, keepdims=True)
    live = diff >= diff_min
    scaled = srdhm(saturate_int32(diff << input_shift), input_multiplier)
    exps = exp_on_negative_values(np.where(live, scaled, 0))
    total = np.where(live, rounding_divide_by_pow2(exps, ACCUM_BITS), 0).sum(axis=-1, keepdims=True)
    headroom = _clz32(total)
    # total << headroom has its top bit set; minus 1.0 gives x in [0, 1) for 1/(1+x).
    normalised = wrap_int32((total << headroom) - (1 << 31))
    recip = one_over_one_plus_x_for_x_in_0_1(normalised)
    bits_over_unit = ACCUM_BITS - headroom + 23
    out = rounding_divide_by_pow2(srdhm(recip, exps), bits_over_unit) - 128
    out = np.where(live, np.clip(out, -128, 127), -128)
    return out.astype(np.int8)
