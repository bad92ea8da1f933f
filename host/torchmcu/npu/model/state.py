"""Register state: the last value each SET command wrote, read as typed fields."""

from __future__ import annotations

from dataclasses import dataclass

from torchmcu.npu.model.decode import Command

# Rounding modes of IFM/OFM_PRECISION (Vela's ethos_u55_regs.rounding).
ROUND_TFL, ROUND_TRUNCATE, ROUND_NATURAL = 0, 1, 2


class StateError(ValueError):
    """An operation whose registers were never set, or hold values we do not model.
    `offset`: the word offset of the operation, once the command loop knows it."""

    offset: int | None = None


class Registers:
    def __init__(self, u85: bool = False) -> None:
        self.values: dict[str, Command] = {}
        self.u85 = u85  # the Ethos-U85's register map (CONFIG.product 2)

    def set(self, cmd: Command) -> None:
        self.values[cmd.name] = cmd

    def _get(self, name: str) -> Command:
        if name not in self.values:
            raise StateError(f"{name} was never set")
        return self.values[name]

    def param(self, name: str, default: int | None = None) -> int:
        if default is not None and name not in self.values:
            return default
        return self._get(name).param

    def data(self, name: str) -> int:
        d = self._get(name).data
        assert d is not None
        return d

    def address(self, name: str) -> int:
        return self._get(name).address

    def signed_address(self, name: str) -> int:
        """Strides are 40-bit two's complement (Vela writes negative strides for reversals)."""
        a = self.address(name)
        return a - (1 << 40) if a >= 1 << 39 else a


@dataclass(frozen=True)
class Precision:
    bits: int
    signed: bool
    brick16: bool  # NHCWB16 layout
    scale_mode: int  # IFM: which operand the 32-bit scale applies to; OFM: 1 = global scale
    rounding: int
    chained: bool = False  # U85 activation_storage CHAINED: the chaining buffer, not memory

    @property
    def size(self) -> int:
        return self.bits // 8

    @property
    def range(self) -> tuple[int, int]:
        if self.signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1


def ifm_precision(p: int) -> Precision:
    """IFM/IFM2_PRECISION: precision 3:0 (bit 0 signed, 3:2 = 8/16/32-bit), format 7:6,
    scale_mode 9:8, round_mode 15:14."""
    return Precision(8 << ((p >> 2) & 3), bool(p & 1), (p >> 6) & 3 == 1, (p >> 8) & 3, p >> 14)


def ofm_precision(p: int) -> Precision:
    """OFM_PRECISION: precision 2:0 (bit 0 signed, 2:1 = 8/16/32-bit), format 7:6, scaling 8
    (1: OFM_SCALE for every channel, 0: the per-channel scale stream), rounding 15:14."""
    bits = {0: 8, 1: 16, 2: 32}.get((p >> 1) & 3)
    if bits is None:
        raise StateError(f"OFM_PRECISION 0x{p:04x}: unknown precision")
    return Precision(bits, bool(p & 1), (p >> 6) & 3 == 1, (p >> 8) & 1, p >> 14)


# Ethos-U85 fields (named by regor's --verbose-register-command-stream listing; the bit
# positions are read off its parameter values): IFM/IFM2/OFM_PRECISION keep the U55's
# activation_type (bit 0), activation_precision (3:2: 8/16/32/64-bit; the U55's OFM used 2:1)
# and activation_format (7:6), the OFM its scale_mode (bit 8: 1 global); activation_precision
# is bits 3:2 on the IFMs, 2:1 on the OFM (8/16/32-bit, as on the U55: B32 reads 0x8 on an IFM
# and 0x4 on the OFM); bits 15:14 are activation_storage (TILE2X2 0, TILE3X1 1, CHAINED 2,
# NONE 3); the OFM's bits 10:9 are activation_reverse (NONE 0, the only value modelled) and
# 13:11 activation_transpose (HWC 0, WHC 1, HCW 2, WCH 3, CHW 6, CWH 7, as the listing
# names them).
# The rounding moved to OFM_SCALE's parameter (bits 15:12, round_mode; shift 5:0).
U85_STORAGE_CHAINED = 2
# OFM_SCALE round_mode values as regor's listing names them: 0 DOUBLE_SYMMETRIC, 2 NATURAL.
U85_ROUND = {0: ROUND_TFL, 2: ROUND_NATURAL}


def u85_rounding(scale_param: int) -> int:
    """The rounding of an OFM_SCALE (or IFM_SCALE) parameter, as the U55's rounding codes.
    Assumption (tested against the TOSA reference by tests/test_npu_u85_model.py):
    DOUBLE_SYMMETRIC is the U55's TFL rounding (TOSA's DOUBLE_ROUND), NATURAL is half up."""
    mode = (scale_param >> 12) & 0xF
    if mode not in U85_ROUND:
        raise NotImplementedError(f"U85 round_mode {mode} is not modelled")
    return U85_ROUND[mode]


# activation_transpose -> for each OFM axis in memory (y, x, channel), the axis of the
# computed result (0 H, 1 W, 2 C) it takes: WCH writes the result's W as rows, C as columns.
U85_TRANSPOSE = {
    0: (0, 1, 2),  # HWC
    1: (1, 0, 2),  # WHC
    2: (0, 2, 1),  # HCW
    3: (1, 2, 0),  # WCH
    6: (2, 0, 1),  # CHW
    7: (2, 1, 0),  # CWH
}


def u85_transpose(p: int) -> tuple[int, int, int]:
    if (p >> 9) & 3 or (p >> 11) & 7 not in U85_TRANSPOSE:
        raise NotImplementedError(
            f"OFM_PRECISION 0x{p:04x}: this U85 output reverse/transpose is not modelled"
        )
    return U85_TRANSPOSE[(p >> 11) & 7]


def u85_precision(p: int, ofm: bool, rounding: int) -> Precision:
    bits = 8 << ((p >> 1) & 3 if ofm else (p >> 2) & 3)
    if bits == 64:
        raise NotImplementedError("64-bit activations are not modelled")
    return Precision(
        bits,
        bool(p & 1),
        (p >> 6) & 3 == 1,
        (p >> 8) & 1 if ofm else 0,
        rounding,
        p >> 14 == U85_STORAGE_CHAINED,
    )


@dataclass(frozen=True)
class Kernel:
    height: int
    width: int
    stride: tuple[int, int]  # (y, x)
    dilation: tuple[int, int]
    part_kernel: bool
    subkernel: int  # decomposition: weights come in sub-kernels of at most this size


def kernel(regs: Registers) -> Kernel:
    """KERNEL_HEIGHT/WIDTH_M1 hold the dilated extent - 1; KERNEL_STRIDE packs stride - 1 (low
    bits 0/1, extension bits 8:6 for x, 11:9 for y), part-kernel-first (bit 2), dilation - 1
    (bits 3/4) and the decomposition (bit 5: 0 = 8x8 sub-kernels, 1 = 4x4; the bit is our
    reading of regor's listing, which names the field between dilation and stride_x_msb)."""
    p = regs.param("NPU_SET_KERNEL_STRIDE")
    sx = ((p & 1) | (((p >> 6) & 7) << 1)) + 1
    sy = (((p >> 1) & 1) | (((p >> 9) & 7) << 1)) + 1
    dx, dy = ((p >> 3) & 1) + 1, ((p >> 4) & 1) + 1
    h = regs.param("NPU_SET_KERNEL_HEIGHT_M1") // dy + 1
    w = regs.param("NPU_SET_KERNEL_WIDTH_M1") // dx + 1
    return Kernel(h, w, (sy, sx), (dy, dx), bool(p & 4), 4 if p & 0x20 else 8)
