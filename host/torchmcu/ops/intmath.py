"""Integer quantization arithmetic: the single definition of requantization (and of the
TOSA RESCALE arithmetic it is compared with). reference/quant.py re-exports it.

Every C kernel, the TOSA lowering and the interpreter are checked against the
functions here (docs/operators.md, "requantize"). All arithmetic is done on
int64 numpy arrays (or Python ints), so nothing wraps silently.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT8_MIN = -128
INT8_MAX = 127
INT16_MIN = -(1 << 15)
INT16_MAX = (1 << 15) - 1


def quantize_multiplier(real: float) -> tuple[int, int]:
    """Splits a positive real scale into (Q31 multiplier, shift), the TFLite way.

    Returns (m, s) with m in [2^30, 2^31) and real ~= m * 2^(s - 31).
    Zero, or a scale so small that s < -31, gives (0, 0) (the product is 0
    anyway). ExecuTorch rounds the mantissa half-to-even, TFLite (and we)
    half away from zero; they can differ only when the mantissa has an exact
    half at bit 31.
    """
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"quantize_multiplier: scale must be finite and >= 0, got {real}")
    if real == 0.0:
        return 0, 0
    mantissa, exponent = math.frexp(real)
    q = math.floor(mantissa * (1 << 31) + 0.5)  # exact: mantissa has <= 53 bits
    if q == 1 << 31:
        q //= 2
        exponent += 1
    if exponent < -31:
        return 0, 0
    if exponent > 31:
        raise ValueError(f"quantize_multiplier: scale {real} needs a left shift > 31")
    return int(q), int(exponent)


# Below this scale a shift-0 multiplier has too few significant bits; the normalized
# (TFLite) form is more precise there (see single_rounding_multiplier).
SINGLE_ROUNDING_MIN_SCALE = 2.0**-12


def single_rounding_multiplier(real: float) -> tuple[int, int]:
    """(m, s) for `real` chosen so that `requantize` rounds once instead of twice.

    requantize rounds the high multiply to an integer and then divides by 2^-s with a
    second rounding. With the normalized form of quantize_multiplier a scale of about
    2^-7 leaves a first rounding at 1/128 of an output step, which moves values lying
    within ~0.004 steps of a .5 boundary to the wrong side: about 0.2% of every layer's
    outputs, compounding through depth. With s = 0 the high multiply rounds straight to
    the output grid, so the result is the exactly rounded value (ties towards +inf)
    up to the precision of m, which is >= 2^19 here: |error| <= 128 * 2^-20 steps.
    The kernels compute the same formula either way; only the choice of (m, s) changes.
    Scales >= 1 or below SINGLE_ROUNDING_MIN_SCALE keep the normalized form.
    """
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"single_rounding_multiplier: scale must be finite and >= 0, got {real}")
    if SINGLE_ROUNDING_MIN_SCALE <= real < 1.0:
        m = math.floor(real * (1 << 31) + 0.5)
        if m < (1 << 31):
            return int(m), 0
    return quantize_multiplier(real)


def saturate_int32(x: np.ndarray) -> np.ndarray:
    return np.clip(np.asarray(x, dtype=np.int64), INT32_MIN, INT32_MAX)


def doubling_high_mul_no_sat(v: np.ndarray, m: np.ndarray | int) -> np.ndarray:
    """(v * m + 2^30) >> 31 with an arithmetic (flooring) shift; v, m int32-ranged."""
    return (np.asarray(v, dtype=np.int64) * np.asarray(m, dtype=np.int64) + (1 << 30)) >> 31


def rounding_divide_by_pow2(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """x / 2^exponent rounded half away from zero (exponent >= 0; exact for any size)."""
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    q = x >> e
    threshold = (mask >> 1) + (q < 0)
    return q + (remainder > threshold)


def requantize(x: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int) -> np.ndarray:
    """CMSIS-NN requantization of int values by (multiplier, shift); broadcasts.

    The left-shifted value is saturated to int32 (CMSIS-NN wraps there; see
    docs/operators.md), the doubling high multiply rounds ties towards +inf,
    the final right shift rounds half away from zero.
    """
    shift = np.asarray(shift, dtype=np.int64)
    if np.any(shift < -31) or np.any(shift > 31):
        raise ValueError("requantize: shift must lie in [-31, 31]")
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    v = saturate_int32(saturate_int32(x) << left)
    p = doubling_high_mul_no_sat(v, multiplier)
    return rounding_divide_by_pow2(p, right)


def round_half_away(numerator: np.ndarray, denominator: np.ndarray | int) -> np.ndarray:
    """numerator / denominator (denominator > 0) rounded half away from zero, in integers."""
    n = np.asarray(numerator, dtype=np.int64)
    d = np.asarray(denominator, dtype=np.int64)
    half = d // 2
    mag = (np.abs(n) + half) // d
    return np.where(n > 0, mag, -mag)


# --- the saturating fixed-point helpers softmax uses (gemmlowp / CMSIS-NN) ---


def sat_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Saturating rounding doubling high multiply (VQRDMULH on int32 values).

    (a*b + nudge) / 2^31 truncated towards zero, with nudge = 2^30 if the
    operands have equal signs else 1 - 2^30; MIN*MIN saturates to MAX.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where((a < 0) ^ (b < 0), 1 - (1 << 30), 1 << 30)
    t = ab + nudge
    q = np.where(t >= 0, t >> 31, -((-t) >> 31))
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, q)


def saturating_left_shift(x: np.ndarray, exponent: int) -> np.ndarray:
    return saturate_int32(np.asarray(x, dtype=np.int64) << exponent)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's complement wrap to int32 range (for the few places fixed-point code relies on it)."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def tosa_double_round(value: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TOSA 1.0 apply_scale_32 with double rounding (the RESCALE arithmetic), int64."""
    v = np.asarray(value, dtype=np.int64)
    rounding = np.full(v.shape, 1 << (shift - 1), dtype=np.int64)
    if shift > 31:
        rounding = rounding + np.where(v >= 0, 1 << 30, -(1 << 30))
    return (v * multiplier + rounding) >> shift


def check_int(name: str, value: int, lo: int, hi: int) -> None:
    """ValueError unless lo <= value <= hi (the numpy references' argument rule)."""
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name}={value} outside [{lo}, {hi}]")


def check_activation(activation_min: int, activation_max: int) -> None:
    check_int("activation_min", activation_min, INT8_MIN, INT8_MAX)
    check_int("activation_max", activation_max, activation_min, INT8_MAX)
