"""Writing an operation's result: scaled, offset, clamped as the registers say, into the OFM."""

from __future__ import annotations

import numpy as np

from torchmcu.npu.model.arith import activation_range, output_stage
from torchmcu.npu.model.featuremap import FeatureMap
from torchmcu.npu.model.memory import Memory
from torchmcu.npu.model.state import Registers


def global_scale(regs: Registers) -> tuple[np.ndarray, np.ndarray]:
    """OFM_SCALE: the 32-bit scale in the payload, the shift in bits 5:0 of the parameter."""
    shift = regs.param("NPU_SET_OFM_SCALE") & 0x3F
    return np.int64(regs.data("NPU_SET_OFM_SCALE")), np.int64(shift)


def write_ofm(
    regs: Registers,
    mem: Memory,
    ofm: FeatureMap,
    acc: np.ndarray,
    scale: np.ndarray,
    shift: np.ndarray,
) -> None:
    prec = ofm.precision
    clamp = activation_range(
        regs.param("NPU_SET_ACTIVATION", 0),
        regs.param("NPU_SET_ACTIVATION_MIN"),
        regs.param("NPU_SET_ACTIVATION_MAX"),
        prec,
    )
    ofm.write(mem, output_stage(acc, scale, shift, prec.rounding, ofm.zero_point, clamp))
