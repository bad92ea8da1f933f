"""Reference semantics of the elementwise operators (docs/operators.md).

Arrays are numpy arrays holding the tensors' values; for these operators the
layout does not matter as long as all operands share it, and a per-channel
operand of add/mul is passed so that numpy broadcasting lines its channel axis
up with the other operand's (for NHWC memory: shape (C,)).
"""

from __future__ import annotations

import numpy as np

# add/mul are defined in torchmcu/ops/defs/elementwise.py; the stages import them from here
from torchmcu.ops.defs.elementwise import quantized_add, quantized_mul  # noqa: F401
from torchmcu.ops.intmath import check_activation as _check_activation  # noqa: F401
from torchmcu.ops.intmath import check_int as _check_int

_QRANGE = {np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (-32768, 32767)}


def _qrange(dtype: np.dtype) -> tuple[int, int]:
    try:
        return _QRANGE[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"quantized dtype must be int8 or int16, got {np.dtype(dtype)}") from None


def _check_qparams(scale: float, zero_point: int, quant_min: int, quant_max: int, dtype: np.dtype) -> None:
    """The per-tensor quantization parameters of quantize/dequantize, in dtype's range."""
    lo, hi = _qrange(dtype)
    _check_int("zero_point", zero_point, lo, hi)
    _check_int("quant_min", quant_min, lo, hi)
    _check_int("quant_max", quant_max, quant_min, hi)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be finite and > 0, got {scale}")


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
