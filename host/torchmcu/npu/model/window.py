"""Kernel windows over the IFM: the padded IFM and the strided view of each kernel tap."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from torchmcu.npu.model.featuremap import FeatureMap
from torchmcu.npu.model.memory import Memory
from torchmcu.npu.model.state import Kernel, Registers, StateError


def padding(regs: Registers) -> tuple[int, int, int, int]:
    """(top, left, bottom, right)."""
    return tuple(  # type: ignore[return-value]
        regs.param(f"NPU_SET_IFM_PAD_{side}", 0) for side in ("TOP", "LEFT", "BOTTOM", "RIGHT")
    )


def ifm_extent(
    k: Kernel, out_h: int, out_w: int, pad: tuple[int, int, int, int]
) -> tuple[int, int]:
    """The U55 has no IFM width/height registers: the IFM spans what the OFM size, kernel,
    stride and padding reach, and the bottom/right padding says where it ends."""
    top, left, bottom, right = pad
    h = (out_h - 1) * k.stride[0] + (k.height - 1) * k.dilation[0] + 1 - top - bottom
    w = (out_w - 1) * k.stride[1] + (k.width - 1) * k.dilation[1] + 1 - left - right
    if h <= 0 or w <= 0:
        raise StateError(f"padding {pad} leaves no IFM for a {out_h}x{out_w} OFM")
    return h, w


def padded_ifm(
    mem: Memory,
    ifm: FeatureMap,
    depth: int,
    k: Kernel,
    out_h: int,
    out_w: int,
    pad: tuple[int, int, int, int],
    fill: int,
) -> np.ndarray:
    """IFM values (zero point not removed) with `fill` in the padding."""
    h, w = ifm_extent(k, out_h, out_w, pad)
    top, left, bottom, right = pad
    values = ifm.read(mem, h, w, depth)
    out = np.full((top + h + bottom, left + w + right, depth), fill, np.int64)
    out[top : top + h, left : left + w] = values
    return out


def taps(
    padded: np.ndarray, k: Kernel, out_h: int, out_w: int
) -> Iterator[tuple[int, int, np.ndarray]]:
    """(ky, kx, view of shape (out_h, out_w, depth)) for every kernel tap."""
    sy, sx = k.stride
    dy, dx = k.dilation
    for ky in range(k.height):
        for kx in range(k.width):
            y0, x0 = ky * dy, kx * dx
            yield (
                ky,
                kx,
                padded[y0 : y0 + (out_h - 1) * sy + 1 : sy, x0 : x0 + (out_w - 1) * sx + 1 : sx],
            )
