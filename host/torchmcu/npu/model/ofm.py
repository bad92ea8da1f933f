"""Writing an operation's result: scaled, offset, clamped as the registers say, into the OFM."""

from __future__ import annotations

import numpy as np

from torchmcu.npu.model.arith import LUT_FIRST, LUT_LAST, Ints, activation_range, output_stage
from torchmcu.npu.model.featuremap import FeatureMap
from torchmcu.npu.model.memory import SHRAM, Memory
from torchmcu.npu.model.state import Registers, StateError

# The activation LUT is the last 2 KB of SHRAM, eight 256-byte slots for 8-bit tables (Vela's
# shram_lut_address / shram_lut_slot_size).
LUT_BYTES, LUT_SLOT_BYTES = 2048, 256


def _lookup(mem: Memory, slot: int, values: np.ndarray, ofm: FeatureMap) -> np.ndarray:
    """Assumption: an 8-bit OFM's clamped value v (-128..127) reads entry v + 128 of the slot
    as a signed byte (the TOSA TABLE semantics for int8)."""
    if ofm.precision.bits != 8:
        raise StateError(f"LUT activation on a {ofm.precision.bits}-bit OFM is not modelled")
    shram = mem.region(SHRAM)
    start = shram.size - LUT_BYTES + slot * LUT_SLOT_BYTES
    table = shram[start : start + LUT_SLOT_BYTES].view(np.int8).astype(np.int64)
    return table[values - ofm.precision.range[0]]


def global_scale(regs: Registers) -> tuple[Ints, Ints]:
    """OFM_SCALE: the 32-bit scale in the payload, the shift in bits 5:0 of the parameter."""
    shift = regs.param("NPU_SET_OFM_SCALE") & 0x3F
    return np.int64(regs.data("NPU_SET_OFM_SCALE")), np.int64(shift)


def write_ofm(
    regs: Registers,
    mem: Memory,
    ofm: FeatureMap,
    acc: np.ndarray,
    scale: Ints,
    shift: Ints,
) -> None:
    prec = ofm.precision
    act = regs.param("NPU_SET_ACTIVATION", 0)
    if regs.u85:
        clamp, slot = _activation_u85(regs, act, ofm)
    else:
        lo, hi = regs.param("NPU_SET_ACTIVATION_MIN"), regs.param("NPU_SET_ACTIVATION_MAX")
        clamp = activation_range(act, lo, hi, prec)
        kind = act & 0xFFF
        slot = kind - LUT_FIRST if LUT_FIRST <= kind <= LUT_LAST else None
    out = output_stage(acc, scale, shift, prec.rounding, ofm.zero_point, clamp)
    if slot is not None:
        out = _lookup(mem, slot, out, ofm)
    ofm.write(mem, out)


# U85 ACTIVATION: activation_function 3:0 (LUT_NONE 0, LUT_S8_S8 4), table 7:5 (a 256-byte
# slot of the 2 KB LUT RAM, filled by an internal DMA), activation_clip_range 15:12 (B16 0:
# ACTIVATION_MIN/MAX within the OFM type; NONE 1: the OFM type's range only, an assumption).
U85_LUT_NONE, U85_LUT_S8_S8 = 0, 4


def _activation_u85(
    regs: Registers, act: int, ofm: FeatureMap
) -> tuple[tuple[int, int], int | None]:
    """(clamp range, LUT slot or None) of a U85 ACTIVATION."""
    prec = ofm.precision
    kind, table, clip = act & 0xF, (act >> 5) & 7, act >> 12
    if kind not in (U85_LUT_NONE, U85_LUT_S8_S8) or clip not in (0, 1):
        raise NotImplementedError(f"U85 ACTIVATION 0x{act:04x} is not modelled")
    plo, phi = prec.range
    if clip == 0 and prec.bits != 32:
        plo = max(plo, regs.param("NPU_SET_ACTIVATION_MIN"))
        phi = min(phi, regs.param("NPU_SET_ACTIVATION_MAX"))
    return (plo, phi), table if kind == U85_LUT_S8_S8 else None
