"""cortex_m::quantize_per_tensor / dequantize_per_tensor: the float <-> int8 boundaries.

Defined here once: the argument checks (the rules firmware/kernels/cortex_m/
quantize_per_tensor.c and dequantize_per_tensor.c enforce, naming the same argument), the
references and the contracts. The lowering emits them at the program's boundaries and around
float regions (lower/boundaries.py, lower/rules_float.py); they never run on the NPU
(`no_npu`), and the partitioner keeps the program's own input quantize and output dequantize
on the CPU (npu/partition.py reads these definitions).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from torchmcu.ops.core import Bound, KernelVariants, op
from torchmcu.ops.intmath import check_int
from torchmcu.ops.layout import same_layout, tensor_arg
from torchmcu.pte import program as pm

_FLOAT = "works on float tensors; no Ethos-U runs float"
# The quantized dtypes (the `dtype` argument) and their ranges
DTYPES = {pm.ScalarType.CHAR: np.int8, pm.ScalarType.SHORT: np.int16}
_QRANGE = {np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (-32768, 32767)}


# -- the numpy references (arrays in memory order: elementwise, any layout)
def _qrange(dtype: np.dtype) -> tuple[int, int]:
    try:
        return _QRANGE[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"quantized dtype must be int8 or int16, got {np.dtype(dtype)}") from None


def _check_qparams(scale: float, zero_point: int, quant_min: int, quant_max: int, dtype: np.dtype) -> None:
    """The per-tensor quantization parameters of quantize/dequantize, in dtype's range."""
    lo, hi = _qrange(dtype)
    check_int("zero_point", zero_point, lo, hi)
    check_int("quant_min", quant_min, lo, hi)
    check_int("quant_max", quant_max, quant_min, hi)
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


# -- the checks: the C kernels' TM_ARG_CHECKs in their order
def _tensor(b: Bound, name: str, scalar_type: int, what: str) -> pm.Tensor:
    t = tensor_arg(b.value(name), scalar_type)
    if t is None:
        raise b.reject(name, f"expected {what} tensor of rank 0..6")
    return t


def _scale(b: Bound, float32: bool) -> None:
    """A finite positive Double (quantize: also as a float32, which its kernel divides by)."""
    v = b.value("scale")
    ok = isinstance(v, pm.Double) and math.isfinite(v.value) and v.value > 0
    if ok and float32:
        single = float(np.float32(v.value))  # the kernel's (float)scale
        ok = math.isfinite(single) and single > 0
    if not ok:
        raise b.reject("scale", "expected a finite double > 0" + (", also as a float32" if float32 else ""))


def _dtype(b: Bound) -> int:
    return b.int_in("dtype", pm.ScalarType.CHAR, pm.ScalarType.SHORT)


def _qparams(b: Bound, dtype: int) -> None:
    """tm_qparams_args: zero_point, quant_min, quant_max <= ... within the dtype's range."""
    lo, hi = _qrange(DTYPES[pm.ScalarType(dtype)])  # type: ignore[arg-type]
    b.int_in("zero_point", lo, hi)
    quant_min = b.int_in("quant_min", lo, hi)
    b.int_in("quant_max", quant_min, hi)


def _out(b: Bound, x: pm.Tensor, scalar_type: int) -> None:
    out = tensor_arg(b.value("out"), scalar_type)
    if out is None or not same_layout(x, out):
        name = pm.ScalarType(scalar_type).name
        raise b.reject("out", f"expected a {name} tensor with the input's sizes and layout")


def check_quantize(b: Bound) -> None:
    """quantize_per_tensor.c's checks, in its order."""
    x = _tensor(b, "input", pm.ScalarType.FLOAT, "a float32")
    _scale(b, float32=True)
    dtype = _dtype(b)
    _qparams(b, dtype)
    _out(b, x, dtype)


def check_dequantize(b: Bound) -> None:
    """dequantize_per_tensor.c's checks, in its order (dtype first: it types the input)."""
    dtype = _dtype(b)
    x = _tensor(b, "input", dtype, f"a {pm.ScalarType(dtype).name}")
    _scale(b, float32=False)
    _qparams(b, dtype)
    _out(b, x, pm.ScalarType.FLOAT)


# -- variants: the kernels' Helium paths (TM_VARIANT_*): int8 or int16 data, or the scalar loop
# for a float factor tm_mve_float_safe_factor rejects (mve_float.h)
FLOAT_VARIANTS = ("int8", "int16", "scalar")


def _float_variants(b: Bound, factor: float) -> list[str]:
    if not 2.0**-126 <= factor <= 2.0**125:
        return ["scalar"]
    return ["int8" if b.int_in("dtype", 0, 127) == pm.ScalarType.CHAR else "int16"]


def quantize_variants(b: Bound) -> list[str]:
    """The factor is float32(1.0f / float32(scale)), as the kernel computes it."""
    return _float_variants(b, float(np.float32(1.0) / np.float32(b.scalar("scale"))))


def dequantize_variants(b: Bound) -> list[str]:
    return _float_variants(b, float(np.float32(b.scalar("scale"))))


def _reference(fn: Any) -> Any:
    def reference(b: Any) -> np.ndarray:
        """(b: the interpreter's Bound) -> the out's memory (the input's layout)."""
        return fn(b.physical("input"), b.scale, b.zero_point, b.quant_min, b.quant_max,
                  DTYPES[pm.ScalarType(b.dtype)])

    return reference


# The bodies of their docs/operators.md sections (hand-kept until step 8 generates them)
QUANTIZE_CONTRACT = """\
- `input` float32, any rank; `out` has `dtype` (int8; int16 also accepted), same sizes,
  memory-equivalent layout. Elementwise over memory.
- `scale` finite, > 0. `zero_point`, `quant_min <= quant_max` within the dtype's range.
- `inv = float32(1.0f / float32(scale))` (float32 division, as ExecuTorch's C++ kernel);
  `q = clamp(round_half_even(float32(x * inv)) + zero_point, quant_min, quant_max)`.
  `+-inf` clamp to the bounds; NaN gives `clamp(zero_point)`.
- Differs from torch's `quantized_decomposed` only in computing `inv` as
  `float32(1.0/scale)` (double division then cast); the two can differ by 1 ulp of `inv`."""
DEQUANTIZE_CONTRACT = """\
- `input` of `dtype` (int8 / int16); `out` float32, same sizes, memory-equivalent layout.
- `out = float32(q - zero_point) * float32(scale)` (one float32 rounding). `quant_min/max`
  are range-checked but not applied (as torch)."""

QUANTIZE = op(
    "cortex_m::quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,"
    " int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=_reference(quantize_per_tensor),
    check=check_quantize,
    variants=KernelVariants(FLOAT_VARIANTS, quantize_variants),
    no_npu=_FLOAT,
    contract=QUANTIZE_CONTRACT,
)

DEQUANTIZE = op(
    "cortex_m::dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,"
    " int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=_reference(dequantize_per_tensor),
    check=check_dequantize,
    variants=KernelVariants(FLOAT_VARIANTS, dequantize_variants),
    no_npu=_FLOAT,
    contract=DEQUANTIZE_CONTRACT,
)
