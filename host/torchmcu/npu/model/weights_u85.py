"""Ethos-U85 weight and scale streams (CONFIG.product 2).

Facts from Vela 5's U85 weight encoder (regor, ethos_u85_weight_encoder.cpp) and its
architecture table (ethos_u85.cpp); our own code. The weight stream (weight_format SWD) is
mlw-compressed like the U55's and decodes with Vela's `mlw_codec.decode`; only the order of the
values differs. From outer to inner:

- OFM blocks of OFM_BLK_DEPTH channels;
- IFM blocks, front to back in even OFM blocks and back to front in odd ones;
- sub-kernels of at most 8x8 (divided by the dilation), columns outer;
- IFM micro-blocks, then OFM micro-blocks;
- the sub-kernel's elements by stride phase (part-kernel-first and depthwise; depth-first
  takes stride 1), rows in alternating direction, padded with zeros to a multiple of 5
  (part-kernel 8-bit), 10 (part-kernel 16-bit or sparse, depthwise) or 1 (depth-first);
- IFM groups of 8 channels (16 sparse, 1 depthwise); OFM groups of 4; the OFM channel in the
  group; the IFM channel in the group. With several weight streams (512 to 2048 MACs: 2 or 4
  weight decoders), stream s holds the OFM groups s, s + streams, ... of each micro-block and
  its share of the padding; one scale stream holds every channel.

A 2:4 sparse stream (WEIGHT_FORMAT weight_sparsity) decodes the same way to every value, zeros
included (measured: ds_cnn's first convolution, 16x10x4x1, decodes to 50 padded kernel
elements x 16 IFM x 16 OFM values).

The IFM block depth is the architecture's, not a register: 16 part-kernel-first; 32 for a
128/256-MAC NPU with a 16-deep OFM micro-block (not sparse); 128 sparse 8-bit; else 64. The
OFM micro-block depth follows from ACC_FORMAT's microblock field and the MAC configuration.

Scale entries are 10 bytes per OFM channel: with 32-bit accumulators bias int32 (bytes 0-3),
scale 31-bit (4-7), shift 6-bit (8); with 48-bit accumulators bias int48 (0-5), scale 15-bit
(6-7), shift (8).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from torchmcu.npu.model.weights import SCALE_ENTRY_BYTES, ScaleBias

# ACC_FORMAT microblock (bits 10:8: U1X1 0, U1X2 1, U1X4 2, U2X2 3, U2X4 4, U4X4 5) -> OFM
# micro-block depth, per MAC configuration (Vela's U85 accelerator table).
UBLOCK_DEPTH = {
    128: {1: 8, 0: 16},
    256: {1: 16, 2: 8, 3: 8},
    512: {3: 16, 2: 16},
    1024: {3: 32, 2: 32, 4: 16},
    2048: {3: 64, 2: 64, 5: 16},
}
CORES = {128: 1, 256: 1, 512: 2, 1024: 4, 2048: 4}
SHRAM_BYTES = 2048  # the LUT RAM: the only internal memory a DMA may address (Vela's lutram)

DEPTH_FIRST, PART_KERNEL, DEPTHWISE = "depth-first", "part-kernel", "depthwise"


@dataclass(frozen=True)
class Geometry:
    ofm_depth: int
    ifm_depth: int  # 1 for depthwise
    kernel_h: int
    kernel_w: int
    stride: tuple[int, int]  # (y, x)
    dilation: tuple[int, int]
    ofm_block_depth: int
    ofm_ublock_depth: int
    ifm_bits: int
    traversal: str
    macs: int
    sparse: bool = False  # WEIGHT_FORMAT weight_sparsity 2:4 (bit 4)
    streams: int = 1  # weight streams (the weight decoders: CORES)
    stream: int = 0  # which of them


def ifm_block_depth(g: Geometry) -> int:
    if g.traversal == PART_KERNEL:
        return 16
    if g.macs in (128, 256) and g.ofm_ublock_depth == 16 and not g.sparse:
        return 32
    if g.sparse and g.ifm_bits == 8:
        return 128
    return 64


def _elements(sub_h: int, sub_w: int, stride: tuple[int, int]) -> list[tuple[int, int]]:
    """A sub-kernel's (y, x) in stream order: by stride phase, rows alternating direction."""
    out = []
    for py in range(stride[0]):
        kh = (sub_h + stride[0] - 1 - py) // stride[0]
        for px in range(stride[1]):
            kw = (sub_w + stride[1] - 1 - px) // stride[1]
            for ky in range(kh):
                for kx in range(kw):
                    x = kx if ky % 2 == 0 else kw - 1 - kx
                    out.append((py + ky * stride[0], px + x * stride[1]))
    return out


def _ifm_blocks(n: int, depth: int, ofm_blocks: int) -> list[list[int]]:
    """Per OFM block, its IFM block starts: forwards, then backwards, and so on."""
    starts = list(range(0, n, depth))
    return [starts if b % 2 == 0 else starts[::-1] for b in range(ofm_blocks)]


@functools.lru_cache(maxsize=256)
def stream_order(g: Geometry) -> tuple[np.ndarray, ...]:
    """(ofm, ky, kx, ifm, valid) index arrays, one entry per value of the decoded stream."""
    dw = g.traversal == DEPTHWISE
    ib_depth = ifm_block_depth(g)
    sixteen = g.ifm_bits == 16
    if g.traversal == PART_KERNEL:
        rnd = 10 if sixteen or g.sparse else 5
        iu, stride = (8 if sixteen and not g.sparse else ib_depth), g.stride
    elif dw:
        rnd, iu, stride = 10, 1, g.stride
    else:
        rnd, iu, stride = 1, ib_depth, (1, 1)
    dw_pad = 0 if (not sixteen and g.macs <= 256) else (2 if g.macs <= 512 else 6)
    ou = g.ofm_ublock_depth
    n_ifm = 1 if dw else g.ifm_depth
    step = 1 if dw else (16 if g.sparse else 8)
    # one kernel element's values: IFM groups of `step` > OFM groups of 4 > OFM > IFM
    # with several streams, stream s holds the OFM groups of 4 starting s * 4, every streams * 4
    groups = np.arange(4 * g.stream, ou, 4 * g.streams)
    grid = np.meshgrid(np.arange(0, iu, step), groups, np.arange(4), np.arange(step), indexing="ij")
    t_ofm = (grid[1] + grid[2]).ravel()
    t_ifm = (grid[0] + grid[3]).ravel()
    # elements: (output position, ofm base, y, x, ifm base); the rest of the stream is zeros
    elements: list[tuple[int, int, int, int, int]] = []
    at = 0
    ofm_blocks = range(0, g.ofm_depth, g.ofm_block_depth)
    for ob, ifm_blocks in zip(ofm_blocks, _ifm_blocks(n_ifm, ib_depth, len(ofm_blocks))):
        ob_depth = min(g.ofm_block_depth, g.ofm_depth - ob)
        for z in ifm_blocks:
            ib_clipped = 1 if dw else min(ib_depth, g.ifm_depth - z)
            for sx in range(0, g.kernel_w, 8 // g.dilation[1]):
                sub_w = min(g.kernel_w - sx, 8 // g.dilation[1])
                for sy in range(0, g.kernel_h, 8 // g.dilation[0]):
                    sub_h = min(g.kernel_h - sy, 8 // g.dilation[0])
                    els = _elements(sub_h, sub_w, stride)
                    padded = -(-len(els) // rnd) * rnd
                    for iuo in range(0, ib_clipped, iu):
                        for ouo in range(0, ob_depth, ou):
                            for n, (y, x) in enumerate(els):
                                elements.append((at, ob + ouo, sy + y, sx + x, z + iuo))
                                at += len(t_ofm)
                                if dw and (padded - n - 1) % rnd == 0:
                                    at += dw_pad * ou // g.streams
                            if padded > len(els):
                                pad = padded - len(els) + (dw_pad if dw else 0)
                                at += pad * iu * ou // g.streams
    e = np.array(elements, np.int64).reshape(-1, 5)
    where = (e[:, :1] + np.arange(len(t_ofm))).ravel()
    ofm = np.full(at, -1, np.int64)
    ky, kx, ifm = (np.zeros(at, np.int64) for _ in range(3))
    ofm[where] = (e[:, 1:2] + t_ofm).ravel()
    ifm[where] = (e[:, 4:5] + t_ifm).ravel()
    ky[where] = np.repeat(e[:, 2], len(t_ofm))
    kx[where] = np.repeat(e[:, 3], len(t_ofm))
    valid = (ofm >= 0) & (ofm < g.ofm_depth) & (ifm < n_ifm)
    return ofm, ky, kx, ifm, valid


def unpack_weights(decoded: np.ndarray, g: Geometry) -> np.ndarray:
    """The decoded stream as an OHWI int array (depthwise: O = channel, I = 1)."""
    ofm, ky, kx, ifm, valid = stream_order(g)
    if len(decoded) < len(ofm):
        raise ValueError(f"weight stream holds {len(decoded)} values, the kernel needs {len(ofm)}")
    w = np.zeros(
        (g.ofm_depth, g.kernel_h, g.kernel_w, 1 if g.traversal == DEPTHWISE else g.ifm_depth),
        np.int64,
    )
    w[ofm[valid], ky[valid], kx[valid], ifm[valid]] = decoded[: len(ofm)][valid]
    return w


def decode_scale_bias(stream: bytes, channels: int, acc48: bool = False) -> ScaleBias:
    need = channels * SCALE_ENTRY_BYTES
    if len(stream) < need:
        raise ValueError(f"scale stream of {len(stream)} bytes, {channels} channels need {need}")
    raw = (
        np.frombuffer(stream[:need], np.uint8).reshape(channels, SCALE_ENTRY_BYTES).astype(np.int64)
    )
    nbias = 6 if acc48 else 4
    bias = sum(raw[:, i] << (8 * i) for i in range(nbias))
    bias = np.where(bias >= 1 << (8 * nbias - 1), bias - (1 << (8 * nbias)), bias)
    scale = sum(raw[:, nbias + i] << (8 * i) for i in range(8 - nbias))
    return ScaleBias(np.asarray(bias), np.asarray(scale), raw[:, 8] & 0x3F)
