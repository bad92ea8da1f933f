"""The output stage: accumulator -> scaled -> OFM zero point -> clamp.

Assumptions (the TRM does not spell the arithmetic out; each is checked bit for bit against the
TOSA reference model by tests/test_npu_model.py):
- the scaled value is (acc * scale) >> shift with a 64-bit-wide product, scale an unsigned 32-bit
  number and shift 0..63;
- rounding TFL is TOSA's DOUBLE_ROUND (round half up, plus the +-2^30 pre-rounding when
  shift > 31), NATURAL adds 2^(shift-1) then shifts (round half towards +inf), TRUNCATE rounds
  towards zero;
- saturation happens once, after the OFM zero point is added: to ACTIVATION_MIN/MAX (Vela writes
  them in OFM units, zero point included) and then to the OFM precision's range.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np

from torchmcu.npu.model.state import ROUND_NATURAL, ROUND_TFL, ROUND_TRUNCATE, Precision

Ints: TypeAlias = "np.ndarray | np.int64"  # a per-channel array or one value for all
_INT64_SAFE = 1 << 62
LUT_FIRST, LUT_LAST = 16, 23  # ACTIVATION types that look up LUT slot type - 16
LUT_FIRST, LUT_LAST = 16, 23  # ACTIVATION types that look up LUT slot type - 16


def _product_fits(acc: np.ndarray, scale: Ints) -> bool:
    a = int(np.abs(acc).max(initial=0))
    s = int(np.abs(scale).max(initial=0))
    return a * s + (1 << 31) < _INT64_SAFE


def scale_round(acc: np.ndarray, scale: Ints, shift: Ints, rounding: int) -> np.ndarray:
    """round(acc * scale / 2^shift) in the given rounding mode; scale/shift broadcast."""
    acc = np.asarray(acc, np.int64)
    scale = np.asarray(scale, np.int64)
    shift = np.asarray(shift, np.int64)
    if not _product_fits(acc, scale):
        # Rare (40-bit accumulators): exact but slow Python integers.
        acc, scale, shift = (x.astype(object) for x in (acc, scale, shift))
    prod = acc * scale
    if rounding == ROUND_TRUNCATE:
        mag = np.abs(prod) >> shift
        return np.asarray(np.where(prod < 0, -mag, mag), np.int64)
    if rounding not in (ROUND_TFL, ROUND_NATURAL):
        raise ValueError(f"rounding mode {rounding} is reserved")
    half = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
    if rounding == ROUND_TFL:
        half = half + np.where(shift > 31, np.where(acc >= 0, 1 << 30, -(1 << 30)), 0)
    return np.asarray((prod + half) >> shift, np.int64)


def activation_range(act: int, lo: int, hi: int, ofm: Precision) -> tuple[int, int]:
    """ACTIVATION's clip range (bits 15:12) narrows the clamp (TANH/SIGMOID are not modelled;
    a LUT is applied after the clamp, see ofm.py).
    Assumption: a 32-bit OFM is not clamped to ACTIVATION_MIN/MAX (16-bit registers; Vela writes
    the int16 range for it)."""
    kind, clip = act & 0xFFF, act >> 12
    if kind != 0 and not LUT_FIRST <= kind <= LUT_LAST:
        raise NotImplementedError(f"activation function {kind} (TANH, SIGMOID) is not modelled")
    plo, phi = ofm.range
    if ofm.bits == 32:
        return plo, phi
    forced = {2: (0, 255), 3: (-128, 127), 5: (-32768, 32767)}.get(clip)
    if forced is not None:
        plo, phi = max(plo, forced[0]), min(phi, forced[1])
    return max(lo, plo), min(hi, phi)


def output_stage(
    acc: np.ndarray,
    scale: Ints,
    shift: Ints,
    rounding: int,
    zero_point: int,
    clamp: tuple[int, int],
) -> np.ndarray:
    v = scale_round(acc, scale, shift, rounding) + zero_point
    return np.clip(v, clamp[0], clamp[1])
