"""Integer quantization arithmetic, defined once in torchmcu/ops/intmath.py (the operator
definitions use it; the stages import it from here)."""

from __future__ import annotations

from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    INT32_MIN,
    SINGLE_ROUNDING_MIN_SCALE,
    doubling_high_mul_no_sat,
    quantize_multiplier,
    requantize,
    round_half_away,
    rounding_divide_by_pow2,
    sat_rounding_doubling_high_mul,
    saturate_int32,
    saturating_left_shift,
    single_rounding_multiplier,
    wrap_int32,
)

__all__ = [
    "INT8_MAX",
    "INT8_MIN",
    "INT32_MAX",
    "INT32_MIN",
    "SINGLE_ROUNDING_MIN_SCALE",
    "doubling_high_mul_no_sat",
    "quantize_multiplier",
    "requantize",
    "round_half_away",
    "rounding_divide_by_pow2",
    "sat_rounding_doubling_high_mul",
    "saturate_int32",
    "saturating_left_shift",
    "single_rounding_multiplier",
    "wrap_int32",
]
