"""Fixed-point encodings of real scale factors (TFLite / CMSIS-NN convention)."""

from __future__ import annotations

import math

Q31_ONE = 1 << 31


def quantize_multiplier(real: float) -> tuple[int, int]:
    """(multiplier, shift) with real ~= multiplier * 2**shift / 2**31.

    multiplier is a Q31 value in [2**30, 2**31); shift > 0 is a left shift and
    shift < 0 a right shift, as CMSIS-NN's arm_nn_requantize takes them.
    """
    if real < 0 or not math.isfinite(real):
        raise ValueError(f"quantize_multiplier: scale must be finite and >= 0, got {real}")
    if real == 0.0:
        return 0, 0
    mantissa, exponent = math.frexp(real)  # real = mantissa * 2**exponent, mantissa in [0.5, 1)
    q = round(mantissa * Q31_ONE)
    if q == Q31_ONE:  # rounding carried into the next power of two
        q //= 2
        exponent += 1
    if exponent < -31:  # too small to represent: the product rounds to zero anyway
        return 0, 0
    if exponent > 30:
        raise ValueError(f"quantize_multiplier: scale {real} is too large for a Q31 multiplier")
    return int(q), int(exponent)
