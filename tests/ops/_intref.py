"""Integer arithmetic on Python ints, spelled independently of torchmcu.ops.intmath, for the
per-op tests' "the reference is the formula" cases."""

from __future__ import annotations


def requantize_int(x: int, m: int, shift: int) -> int:
    """CMSIS-NN's arm_nn_requantize on Python ints: left shift, doubling high mul, rounding
    right shift (an independent spelling of ops.intmath.requantize)."""
    left, right = max(shift, 0), max(-shift, 0)
    v = x * (1 << left)
    prod = v * m
    nudge = (1 << 30) if prod >= 0 else 1 - (1 << 30)
    high = (prod + nudge) // (1 << 31) if prod + nudge >= 0 else -((-(prod + nudge)) // (1 << 31))
    if right == 0:
        return high
    mask = (1 << right) - 1
    remainder, threshold = high & mask, (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if remainder > threshold else 0)
