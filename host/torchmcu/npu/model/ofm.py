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
    clamp = activation_range(
        act,
        regs.param("NPU_SET_ACTIVATION_MIN"),
        regs.param("NPU_SET_ACTIVATION_MAX"),
        prec,
    )
    out = output_stage(acc, scale, shift, prec.rounding, ofm.zero_point, clamp)
    kind = act & 0xFFF
    if LUT_FIRST <= kind <= LUT_LAST:
        out = _lookup(mem, kind - LUT_FIRST, out, ofm)
    ofm.write(mem, out)
