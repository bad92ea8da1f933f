"""Feature maps in memory: region, up to four tiles, strides and layout, as the IFM, IFM2 and
OFM registers describe them, read and written as whole (height, width, depth) arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from torchmcu.npu.model.memory import Memory
from torchmcu.npu.model.state import (
    Precision,
    Registers,
    ifm_precision,
    ofm_precision,
    u85_precision,
    u85_rounding,
    u85_transpose,
)

BRICK = 16  # channels per brick in the NHCWB16 layout


@dataclass(frozen=True)
class FeatureMap:
    name: str  # "IFM", "IFM2" or "OFM"
    region: int
    bases: tuple[int, int, int, int]  # top-left, top-right, bottom-left, bottom-right tiles
    height0: int  # rows of tile 0 (tile 2 below it)
    height1: int  # rows of tile 1 (tile 3 below it)
    width0: int  # columns of tiles 0 and 2 (tiles 1 and 3 to their right)
    stride: tuple[int, int, int]  # bytes between rows, columns, 16-channel bricks
    precision: Precision
    zero_point: int
    transpose: tuple[int, int, int] = (0, 1, 2)  # U85 OFM: result axis per memory axis

    def offsets(self, h: int, w: int, c: int) -> np.ndarray:
        """Byte offset in the region of every element (y, x, ch), shape (h, w, c)."""
        y = np.arange(h)[:, None, None]
        x = np.arange(w)[None, :, None]
        ch = np.arange(c)[None, None, :]
        right = x >= self.width0
        bottom = np.where(right, y >= self.height1, y >= self.height0)
        tile = right.astype(np.int64) + 2 * bottom
        base = np.asarray(self.bases, np.int64)[tile]
        yy = y - np.where(bottom, np.where(right, self.height1, self.height0), 0)
        xx = x - np.where(right, self.width0, 0)
        sy, sx, sc = self.stride
        size = self.precision.size
        if self.precision.brick16:
            coff = (ch // BRICK) * sc + (ch % BRICK) * size
        else:
            coff = ch * size
        return base + yy * sy + xx * sx + coff

    def read(self, mem: Memory, h: int, w: int, c: int) -> np.ndarray:
        p = self.precision
        if p.chained:
            return mem.read_chain(h, w, c, self.name)
        return mem.read(self.region, self.offsets(h, w, c), p.size, p.signed, self.name)

    def write(self, mem: Memory, values: np.ndarray) -> None:
        values = np.transpose(values, self.transpose)
        h, w, c = values.shape
        if self.precision.chained:
            mem.chain = np.array(values, np.int64)
            return
        mem.write(self.region, self.offsets(h, w, c), self.precision.size, values, self.name)


def feature_map(regs: Registers, name: str) -> FeatureMap:
    """The IFM, IFM2 or OFM as its registers set it."""
    r = f"NPU_SET_{name}_"
    transpose = (0, 1, 2)
    if regs.u85:
        rounding = u85_rounding(regs.param("NPU_SET_OFM_SCALE", 0))
        precision = u85_precision(regs.param(r + "PRECISION"), name == "OFM", rounding)
        if name == "OFM":
            transpose = u85_transpose(regs.param(r + "PRECISION"))
    elif name == "OFM":
        precision = ofm_precision(regs.param(r + "PRECISION"))
    else:
        precision = ifm_precision(regs.param(r + "PRECISION"))
    if precision.chained:  # the chaining buffer: no memory registers are read
        return FeatureMap(
            name,
            -1,
            (0, 0, 0, 0),
            1,
            1,
            1,
            (0, 0, 0),
            precision,
            regs.param(r + "ZERO_POINT"),
            transpose,
        )
    return FeatureMap(
        name=name,
        region=regs.param(r + "REGION"),
        bases=(
            regs.address(r + "BASE0"),
            regs.address(r + "BASE1"),
            regs.address(r + "BASE2"),
            regs.address(r + "BASE3"),
        ),
        height0=regs.param(r + "HEIGHT0_M1") + 1,
        height1=regs.param(r + "HEIGHT1_M1") + 1,
        width0=regs.param(r + "WIDTH0_M1") + 1,
        stride=(
            regs.signed_address(r + "STRIDE_Y"),
            regs.signed_address(r + "STRIDE_X"),
            regs.signed_address(r + "STRIDE_C"),
        ),
        precision=precision,
        zero_point=regs.param(r + "ZERO_POINT"),
        transpose=transpose,
    )


def ofm_shape(regs: Registers) -> tuple[int, int, int]:
    return (
        regs.param("NPU_SET_OFM_HEIGHT_M1") + 1,
        regs.param("NPU_SET_OFM_WIDTH_M1") + 1,
        regs.param("NPU_SET_OFM_DEPTH_M1") + 1,
    )
