"""Weight and scale/bias streams: what the NPU's weight decoder hands the MAC units.

The weight stream is Vela's mlw-compressed values in the order the U55 traverses them; this
module undoes that order. The order, as the hardware consumes it (and Vela's encoder writes it):
OFM blocks of OFM_BLK_DEPTH channels; within one, IFM blocks (32 channels depth-first for 8-bit
IFMs, 16 for part-kernel-first or 16-bit IFMs, one micro-block for depthwise); within one,
sub-kernels of at most 8x8 (4x4... halved per dilation); within one, for depth-first:
OFM micro-blocks > kernel elements > IFM micro-blocks > OFM channel > IFM channel; for
part-kernel-first: IFM micro-blocks > OFM micro-blocks > kernel elements > OFM channel > IFM
channel. Kernel elements are padded to a multiple of 4 (depthwise, part-kernel 8-bit) or 2
(part-kernel 16-bit); missing channels and padded elements are zero in the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCALE_ENTRY_BYTES = 10  # bias (40-bit) | scale (32-bit) | shift (6-bit), little-endian


@dataclass(frozen=True)
class Geometry:
    ofm_depth: int
    ifm_depth: int  # 1 for depthwise
    kernel_h: int
    kernel_w: int
    dilation: tuple[int, int]  # (y, x)
    ofm_block_depth: int
    ifm_ublock_depth: int
    ofm_ublock_depth: int
    ifm_bits: int
    depthwise: bool
    part_kernel: bool
    # KERNEL_STRIDE's decomposition field: sub-kernels of at most 8x8 (Vela's SubKernelMax and
    # all it writes for U55), or 4x4; divided by the dilation.
    subkernel: int = 8


def _padded(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def stream_order(g: Geometry) -> tuple[np.ndarray, ...]:
    """(ofm, ky, kx, ifm, valid) index arrays, one entry per value of the decoded stream."""
    ifm_block_depth = 16 if g.part_kernel or g.ifm_bits == 16 else 32
    decomp_h = g.subkernel // g.dilation[0]
    decomp_w = g.subkernel // g.dilation[1]
    iu, ou = g.ifm_ublock_depth, g.ofm_ublock_depth
    parts: list[tuple[np.ndarray, ...]] = []
    for ofm_block in range(0, g.ofm_depth, g.ofm_block_depth):
        block_depth = min(g.ofm_block_depth, g.ofm_depth - ofm_block)
        for ifm_block in range(0, 1 if g.depthwise else g.ifm_depth, ifm_block_depth):
            if g.depthwise:
                ifm_depth_here = iu
            elif g.part_kernel:
                ifm_depth_here = min(ifm_block_depth, g.ifm_depth - ifm_block)
            else:
                ifm_depth_here = ifm_block_depth
            for sy in range(0, g.kernel_h, decomp_h):
                sub_h = min(g.kernel_h - sy, decomp_h)
                for sx in range(0, g.kernel_w, decomp_w):
                    sub_w = min(g.kernel_w - sx, decomp_w)
                    elements = sub_w * sub_h
                    if g.part_kernel:
                        elements = _padded(elements, 2 if g.ifm_bits == 16 else 4)
                    elif g.depthwise:
                        elements = _padded(elements, 4)
                    el = np.arange(elements)
                    ky, kx = el // sub_w, el % sub_w
                    ou_z = np.arange(ou)
                    iu_z = np.arange(1 if g.depthwise else iu)
                    ofm_u = np.arange(0, block_depth, ou)
                    if g.part_kernel:
                        ifm_u = np.arange(0, ifm_depth_here, iu)
                        # axes: ifm_u, ofm_u, element, ofm z, ifm z
                        grids = np.meshgrid(ifm_u, ofm_u, el, ou_z, iu_z, indexing="ij")
                        ifm_ub, ofm_ub, e, oz, iz = (a.ravel() for a in grids)
                    else:
                        ifm_u = np.arange(0, ifm_depth_here, iu)
                        # axes: ofm_u, element, ifm_u, ofm z, ifm z
                        grids = np.meshgrid(ofm_u, el, ifm_u, ou_z, iu_z, indexing="ij")
                        ofm_ub, e, ifm_ub, oz, iz = (a.ravel() for a in grids)
                    ifm = ifm_block + ifm_ub + iz
                    ofm = ofm_block + ofm_ub + oz
                    eky, ekx = ky[e], kx[e]
                    valid = (
                        (ifm < (1 if g.depthwise else g.ifm_depth))
                        & (ofm < ofm_block + block_depth)
                        & (eky < sub_h)
                    )
                    parts.append((ofm, sy + eky, sx + ekx, ifm, valid))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(5))


def unpack_weights(decoded: np.ndarray, g: Geometry) -> np.ndarray:
    """The decoded stream as an OHWI int array (depthwise: O = channel, I = 1)."""
    ofm, ky, kx, ifm, valid = stream_order(g)
    if len(decoded) < len(ofm):
        raise ValueError(f"weight stream holds {len(decoded)} values, the kernel needs {len(ofm)}")
    w = np.zeros((g.ofm_depth, g.kernel_h, g.kernel_w, 1 if g.depthwise else g.ifm_depth), np.int64)
    w[ofm[valid], ky[valid], kx[valid], ifm[valid]] = decoded[: len(ofm)][valid]
    return w


def decode_weights(stream: bytes) -> np.ndarray:
    """Vela's own decoder for the mlw-compressed stream."""
    from ethosu import mlw_codec

    return np.asarray(mlw_codec.decode(bytearray(stream)), dtype=np.int64)


@dataclass(frozen=True)
class ScaleBias:
    bias: np.ndarray  # int64, 40-bit signed
    scale: np.ndarray  # int64, 32-bit unsigned
    shift: np.ndarray  # int64, 6-bit


def decode_scale_bias(stream: bytes, channels: int) -> ScaleBias:
    """Per-channel entries of 10 bytes: bias 40-bit signed, scale 32-bit, shift 6-bit."""
    need = channels * SCALE_ENTRY_BYTES
    if len(stream) < need:
        raise ValueError(f"scale stream of {len(stream)} bytes, {channels} channels need {need}")
    raw = (
        np.frombuffer(stream[:need], np.uint8).reshape(channels, SCALE_ENTRY_BYTES).astype(np.int64)
    )
    bias = sum(raw[:, i] << (8 * i) for i in range(5))
    bias = np.where(bias >= 1 << 39, bias - (1 << 40), bias)
    scale = sum(raw[:, 5 + i] << (8 * i) for i in range(4))
    return ScaleBias(np.asarray(bias), np.asarray(scale), raw[:, 9] & 0x3F)
