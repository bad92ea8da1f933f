"""Reference semantics of the elementwise operators (docs/operators.md).

Arrays are numpy arrays holding the tensors' values; for these operators the
layout does not matter as long as all operands share it, and a per-channel
operand of add/mul is passed so that numpy broadcasting lines its channel axis
up with the other operand's (for NHWC memory: shape (C,)).
"""

from __future__ import annotations

import numpy as np

from torchmcu.reference.quant import INT8_MAX, INT8_MIN, requantize

ADD_INPUT_LEFT_SHIFT = 20  # CMSIS-NN's headroom shift for int8 add

_QRANGE = {np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (-32768, 32767)}


def _qrange(dtype: np.dtype) -> tuple[int, int]:
    try:
        return _QRANGE[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"quantized dtype must be int8 or int16, got {np.dtype(dtype)}") from None


def _check_int(name: str, value: int, lo: int, hi: int) -> None:
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name}={value} outside [{lo}, {hi}]")


def _check_qparams(scale: float, zero_point: int, quant_min: int, quant_max: int, dtype: np.dtype) -> None:
    """The per-tensor quantization parameters of quantize/dequantize, in dtype's range."""
    lo, hi = _qrange(dtype)
    _check_int("zero_point", zero_point, lo, hi)
    _check_int("quant_min", quant_min, lo, hi)
    _check_int("quant_max", quant_max, quant_min, hi)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be finite and > 0, got {scale}")


def _check_int8_zero_points(**zero_points: int) -> None:
    for name, zp in zero_points.items():
        _check_int(name, zp, INT8_MIN, INT8_MAX)


def quantize_per_tensor(
    input: np.ndarray,
    scale: float,
    zero_point: int,
    quant_min: int,
    quant_max: int,
    dtype: np.dtype,
) -> np.ndarray:
    """float32 -> int8/int16: clamp(round_half_even(x * float32(1/scale)) + zp, qmin, qmax)."""
    _check_qparams(scale, zero_point, quant_min, quant_max, dtype)
    x = np.asarray(input, dtype=np.float32)
    inv = np.float32(1.0) / np.float32(scale)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = x * inv  # one float32 rounding, as the kernel
    scaled = np.where(np.isnan(scaled), np.float32(0.0), scaled)
    # Clamp in float first so the int conversion below cannot overflow.
    scaled = np.clip(scaled, np.float32(-(1 << 24)), np.float32(1 << 24))
    q = np.rint(scaled).astype(np.int64) + int(zero_point)
    return np.clip(q, quant_min, quant_max).astype(dtype)


def dequantize_per_tensor(
    input: np.ndarray,
    scale: float,
    zero_point: int,
    quant_min: int,
    quant_max: int,
    dtype: np.dtype,
) -> np.ndarray:
    """int8/int16 -> float32: float32(q - zp) * float32(scale)."""
    _qrange(dtype)  # an unsupported dtype is reported before the input's dtype
    if np.asarray(input).dtype != np.dtype(dtype):
        raise ValueError(f"input dtype {np.asarray(input).dtype} differs from dtype {np.dtype(dtype)}")
    _check_qparams(scale, zero_point, quant_min, quant_max, dtype)
    centered = (np.asarray(input, dtype=np.int32) - np.int32(zero_point)).astype(np.float32)
    return centered * np.float32(scale)


def quantized_add(
    self: np.ndarray,
    self_zero_point: int,
    self_multiplier: int,
    self_shift: int,
    other: np.ndarray,
    other_zero_point: int,
    other_multiplier: int,
    other_shift: int,
    output_zero_point: int,
    output_multiplier: int,
    output_shift: int,
    activation_min: int,
    activation_max: int,
) -> np.ndarray:
    """CMSIS-NN int8 add: both operands rescaled to a common 2^20-headroom scale, summed, rescaled."""
    _check_int8_zero_points(self_zero_point=self_zero_point, other_zero_point=other_zero_point,
                            output_zero_point=output_zero_point)
    _check_activation(activation_min, activation_max)
    a = (np.asarray(self, dtype=np.int64) - self_zero_point) << ADD_INPUT_LEFT_SHIFT
    b = (np.asarray(other, dtype=np.int64) - other_zero_point) << ADD_INPUT_LEFT_SHIFT
    a = requantize(a, self_multiplier, self_shift)
    b = requantize(b, other_multiplier, other_shift)
    out = requantize(a + b, output_multiplier, output_shift) + output_zero_point
    return np.clip(out, activation_min, activation_max).astype(np.int8)


def quantized_mul(
    self: np.ndarray,
    self_zero_point: int,
    other: np.ndarray,
    other_zero_point: int,
    output_zero_point: int,
    output_multiplier: int,
    output_shift: int,
) -> np.ndarray:
    """CMSIS-NN int8 mul: product of zero-point-centred operands, one rescale."""
    _check_int8_zero_points(self_zero_point=self_zero_point, other_zero_point=other_zero_point,
                            output_zero_point=output_zero_point)
    prod = (np.asarray(self, dtype=np.int64) - self_zero_point) * (
        np.asarray(other, dtype=np.int64) - other_zero_point
    )
    out = requantize(prod, output_multiplier, output_shift) + output_zero_point
    return np.clip(out, INT8_MIN, INT8_MAX).astype(np.int8)


def _check_activation(activation_min: int, activation_max: int) -> None:
    _check_int("activation_min", activation_min, INT8_MIN, INT8_MAX)
    _check_int("activation_max", activation_max, activation_min, INT8_MAX)
