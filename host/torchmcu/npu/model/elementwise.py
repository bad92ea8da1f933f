"""NPU_OP_ELEMENTWISE: binary ADD/SUB/MUL/MIN/MAX with a full, broadcast or scalar IFM2.

Assumptions (checked against the TOSA reference by tests/test_npu_model.py):
- operands are IFM - IFM_ZERO_POINT and IFM2 - IFM2_ZERO_POINT; IFM2_BROADCAST bit 6 swaps them
  (IFM2 op IFM), and OPA/OPB then name the first/second operand of the operation as computed;
- for ADD/SUB, IFM_PRECISION scale_mode 1 (2) scales operand A (B) by the 32-bit OPA_SCALE
  (shift in its parameter; Vela writes OPB_SCALE 0 then) with the OFM rounding mode, and the other operand
  is multiplied by 2^19 (8-bit IFMs; 2^14 for 16-bit, untested): Vela's advanced add scaling
  gives the scaled operand min/max * 2^20 / 2 and the OFM scale 2 * max / (ofm * 2^20), which
  is right only if the other operand is worth 2^19 (measured: exact on our adds, and
  2^18/2^20 are not); scale_mode 0 with both scales 1 (no input scaling) scales neither;
- the sum, difference or product is then scaled by OFM_SCALE like a convolution's accumulator.
"""

from __future__ import annotations

import numpy as np

from torchmcu.npu.model.arith import scale_round
from torchmcu.npu.model.featuremap import feature_map, ofm_shape
from torchmcu.npu.model.memory import Memory
from torchmcu.npu.model.ofm import global_scale, write_ofm
from torchmcu.npu.model.state import Registers, StateError, u85_rounding

MUL, ADD, SUB, MIN, MAX = 0, 1, 2, 3, 4
_BINARY = {MUL, ADD, SUB, MIN, MAX}


def ifm2_shape(regs: Registers, shape: tuple[int, int, int]) -> tuple[int, int, int] | None:
    """The IFM2 an elementwise operation reads for an OFM of `shape`: 1 along the axes
    IFM2_BROADCAST bits 0-2 (height, width, depth) broadcast; None for a scalar (bit 7)."""
    bc = regs.param("NPU_SET_IFM2_BROADCAST", 0)
    if regs.u85:
        # U85 broadcast_mode: H 1, W 2, C 4 (and their sums), SCALAR 8 (regor's listing)
        if bc & ~0xF or regs.param("NPU_SET_IFM_BROADCAST", 0):
            raise NotImplementedError(f"U85 broadcast 0x{bc:x} (or a broadcast IFM)")
        if bc & 8:
            return None
    elif bc & 0x80:
        return None
    h, w, c = shape
    return (1 if bc & 1 else h), (1 if bc & 2 else w), (1 if bc & 4 else c)


def _ifm2(regs: Registers, mem: Memory, shape: tuple[int, int, int]) -> np.ndarray:
    zp = regs.param("NPU_SET_IFM2_ZERO_POINT")
    read = ifm2_shape(regs, shape)
    if read is None:  # scalar: IFM2_SCALAR holds the value
        return np.full((1, 1, 1), regs.param("NPU_SET_IFM2_SCALAR") - zp, np.int64)
    return feature_map(regs, "IFM2").read(mem, *read) - zp


def _u85_operand(regs: Registers, name: str, v: np.ndarray) -> np.ndarray:
    """U85 ADD/SUB: each operand is scaled by its own IFM_SCALE / IFM2_SCALE (32-bit scale in
    the payload, shift 5:0 and round_mode 15:12 in the parameter; Vela writes 2^19 with shift 0
    for one of them, the U55's implicit factor). Assumption: rounded as OFM_SCALE rounds."""
    reg = f"NPU_SET_{name}_SCALE"
    p = regs.param(reg)
    rounding = u85_rounding(p)
    return scale_round(v, np.int64(regs.data(reg)), np.int64(p & 0x3F), rounding)


def elementwise(regs: Registers, mem: Memory, mode: int) -> int:
    if mode not in _BINARY:
        raise NotImplementedError(f"elementwise mode {mode} (unary and shift modes)")
    ifm, ofm = feature_map(regs, "IFM"), feature_map(regs, "OFM")
    shape = ofm_shape(regs)
    a = ifm.read(mem, *shape) - ifm.zero_point
    b = _ifm2(regs, mem, shape)
    prec = ofm.precision
    if regs.u85:
        if mode in (ADD, SUB):
            a, b = _u85_operand(regs, "IFM", a), _u85_operand(regs, "IFM2", b)
    elif regs.param("NPU_SET_IFM2_BROADCAST", 0) & 0x40:
        a, b = b, a
    if regs.u85:
        if mode in (ADD, SUB):
            acc = a + b if mode == ADD else a - b
        elif mode == MUL:
            acc = a * b
        else:
            acc = np.minimum(a, b) if mode == MIN else np.maximum(a, b)
    elif mode in (ADD, SUB):
        scale_mode = ifm.precision.scale_mode
        opa_scale, opb_scale = regs.data("NPU_SET_OPA_SCALE"), regs.data("NPU_SET_OPB_SCALE")
        opa_shift = regs.param("NPU_SET_OPA_SCALE") & 0x3F
        unscaled = 19 if ifm.precision.bits == 8 else 14
        if scale_mode == 1:
            a = scale_round(a, np.int64(opa_scale), np.int64(opa_shift), prec.rounding)
            b = b << unscaled
        elif scale_mode == 2:
            b = scale_round(b, np.int64(opa_scale), np.int64(opa_shift), prec.rounding)
            a = a << unscaled
        elif (opa_scale, opb_scale) != (1, 1):
            raise StateError(f"16-bit operand scales {opa_scale}, {opb_scale} are not modelled")
        acc = a + b if mode == ADD else a - b
    elif mode == MUL:
        acc = a * b
    else:
        acc = np.minimum(a, b) if mode == MIN else np.maximum(a, b)
    acc = np.broadcast_to(acc, shape)
    write_ofm(regs, mem, ofm, acc, *global_scale(regs))
    return 0
