"""NPU_OP_CONV and NPU_OP_DEPTHWISE."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from torchmcu.npu.model import weights as wt
from torchmcu.npu.model import weights_u85 as u85
from torchmcu.npu.model.featuremap import FeatureMap, feature_map, ofm_shape
from torchmcu.npu.model.memory import Memory
from torchmcu.npu.model.ofm import global_scale, write_ofm
from torchmcu.npu.model.state import Registers, StateError, kernel
from torchmcu.npu.model.window import padded_ifm, padding, taps

# Micro-block depths of the Ethos-U55 MAC array (Vela's architecture_features ifm/ofm_ublock):
# 8 for every U55 configuration except U55-32, whose OFM micro-block is 4 deep.
UBLOCK_DEPTH = {32: (8, 4), 64: (8, 8), 128: (8, 8), 256: (8, 8), 512: (8, 8)}


def _core_streams(
    regs: Registers, mem: Memory, g: wt.Geometry, core: int
) -> tuple[np.ndarray, wt.ScaleBias]:
    """One core's weight and scale streams (core 1: WEIGHT1/SCALE1), for geometry g."""
    n = "1" if core else ""
    wbytes = mem.read_bytes(
        regs.param("NPU_SET_WEIGHT_REGION"),
        regs.address(f"NPU_SET_WEIGHT{n}_BASE"),
        regs.data(f"NPU_SET_WEIGHT{n}_LENGTH"),
        f"weight stream {core}" if core else "weight stream",
    )
    sbytes = mem.read_bytes(
        regs.param("NPU_SET_SCALE_REGION"),
        regs.address(f"NPU_SET_SCALE{n}_BASE"),
        regs.data(f"NPU_SET_SCALE{n}_LENGTH"),
        f"scale stream {core}" if core else "scale stream",
    )
    return _kernel(wbytes, g), wt.decode_scale_bias(sbytes, g.ofm_depth)


def _streams(
    regs: Registers, mem: Memory, g: wt.Geometry, cores: int
) -> tuple[np.ndarray, wt.ScaleBias]:
    """The whole kernel and scale/bias. With two cores (U65-512, PARALLEL_MODE 1) each core
    has its own streams, for every other OFM channel: core c computes channels c, c + 2, ...
    and its stream is encoded as a kernel of those channels with OFM blocks of
    ceil((OFM_BLK_DEPTH - c) / 2) (Vela's weight compressor's core deinterleave; checked
    against the TOSA reference and the CPU-only program by tests/test_npu_driver_model.py).
    Assumption: elementwise and pooling need no per-core state (they have no streams)."""
    if cores == 1:
        return _core_streams(regs, mem, g, 0)
    w = np.zeros((g.ofm_depth, g.kernel_h, g.kernel_w, g.ifm_depth), np.float64)
    bias, scale, shift = (np.zeros(g.ofm_depth, np.int64) for _ in range(3))
    for core in range(cores):
        depth = len(range(core, g.ofm_depth, cores))
        if depth == 0:
            continue
        block = (g.ofm_block_depth + cores - 1 - core) // cores
        cw, sb = _core_streams(
            regs, mem, dataclasses.replace(g, ofm_depth=depth, ofm_block_depth=block), core
        )
        w[core::cores], bias[core::cores] = cw, sb.bias
        scale[core::cores], shift[core::cores] = sb.scale, sb.shift
    return w, wt.ScaleBias(bias, scale, shift)


@functools.lru_cache(maxsize=512)
def _kernel(stream: bytes, g: wt.Geometry) -> np.ndarray:
    """OHWI weights as float64; the same stream bytes and geometry decode the same, so repeated
    runs of a program (the tests, the bench) decode each stream once."""
    w = wt.unpack_weights(wt.decode_weights(stream), g).astype(np.float64)
    w.flags.writeable = False  # shared between runs of the same stream
    return w


@functools.lru_cache(maxsize=512)
def _kernel_u85(streams: tuple[bytes, ...], g: u85.Geometry) -> np.ndarray:
    """OHWI float64 weights from the U85's weight streams (one per weight decoder)."""
    w = np.zeros((g.ofm_depth, g.kernel_h, g.kernel_w, g.ifm_depth), np.int64)
    for s, data in enumerate(streams):
        part = dataclasses.replace(g, streams=len(streams), stream=s)
        w += u85.unpack_weights(wt.decode_weights(data), part)
    w = w.astype(np.float64)
    w.flags.writeable = False
    return w


def _streams_u85(
    regs: Registers, mem: Memory, depthwise: bool, ic: int, oc: int, macs: int, ifm_bits: int
) -> tuple[np.ndarray, wt.ScaleBias]:
    """The U85's weight streams (weights_u85.py) and its scale entries."""
    fmt = regs.param("NPU_SET_WEIGHT_FORMAT", 0)
    if fmt & ~0x10:  # weight_format 0 (SWD), weight_sparsity bit 4 (2:4 sparse)
        raise NotImplementedError(
            f"WEIGHT_FORMAT 0x{fmt:x}: fast (FWD) U85 weights are not modelled"
        )
    acc = regs.param("NPU_SET_ACC_FORMAT")
    if acc & 0xFF:  # acc_format 1:0 (I32 0), acc_input/acc_output (RESET, ENABLE: 0)
        raise NotImplementedError(f"ACC_FORMAT 0x{acc:04x}: only I32, RESET, ENABLE are modelled")
    ublock = u85.UBLOCK_DEPTH[macs].get((acc >> 8) & 7)
    if ublock is None:
        raise StateError(f"ACC_FORMAT 0x{acc:04x}: no such micro-block on a {macs}-MAC U85")
    k = kernel(regs)
    if k.subkernel != 8:
        raise NotImplementedError("U85 4x4 kernel decomposition is not modelled")
    traversal = (
        u85.DEPTHWISE if depthwise else (u85.PART_KERNEL if k.part_kernel else u85.DEPTH_FIRST)
    )
    g = u85.Geometry(
        ofm_depth=oc,
        ifm_depth=1 if depthwise else ic,
        kernel_h=k.height,
        kernel_w=k.width,
        stride=k.stride,
        dilation=k.dilation,
        ofm_block_depth=regs.param("NPU_SET_OFM_BLK_DEPTH_M1") + 1,
        ofm_ublock_depth=ublock,
        ifm_bits=ifm_bits,
        traversal=traversal,
        macs=macs,
        sparse=bool(fmt & 0x10),
    )
    region = regs.param("NPU_SET_WEIGHT_REGION")
    streams = tuple(
        mem.read_bytes(
            region,
            regs.address(f"NPU_SET_WEIGHT{n}_BASE"),
            regs.data(f"NPU_SET_WEIGHT{n}_LENGTH"),
            f"weight stream {n}" if n else "weight stream",
        )
        for n in ("", "1", "2", "3")[: u85.CORES[macs]]
    )
    sbytes = mem.read_bytes(
        regs.param("NPU_SET_SCALE_REGION"),
        regs.address("NPU_SET_SCALE_BASE"),
        regs.data("NPU_SET_SCALE_LENGTH"),
        "scale stream",
    )
    return _kernel_u85(streams, g), u85.decode_scale_bias(sbytes, oc)


def convolution(regs: Registers, mem: Memory, depthwise: bool, macs_per_cc: int) -> int:
    """Run one (depthwise) convolution; returns the MACs it executed."""
    ifm, ofm = feature_map(regs, "IFM"), feature_map(regs, "OFM")
    if regs.param("NPU_SET_IFM_UPSCALE", 0):
        raise NotImplementedError("IFM upscaling (nearest/transpose resampling) is not modelled")
    oc = ofm_shape(regs)[2]
    ic = regs.param("NPU_SET_IFM_DEPTH_M1") + 1
    if depthwise and ic != oc:
        raise StateError(f"depthwise with IFM depth {ic} and OFM depth {oc}")
    if regs.u85:
        w, sb = _streams_u85(regs, mem, depthwise, ic, oc, macs_per_cc, ifm.precision.bits)
        dense = _accumulate(regs, mem, depthwise, ifm, ofm, w, sb)
        # 2:4 sparse weights: the MAC array skips the zero half (Vela's nn_macs counts half)
        return dense // 2 if regs.param("NPU_SET_WEIGHT_FORMAT", 0) & 0x10 else dense
    parallel = regs.param("NPU_SET_PARALLEL_MODE", 0)  # cores - 1 (U65-512: 1)
    if parallel > 1:
        raise StateError(f"PARALLEL_MODE {parallel}: the Ethos-U65 has at most two cores")
    k = kernel(regs)
    iu, ou = UBLOCK_DEPTH[macs_per_cc]
    g = wt.Geometry(
        ofm_depth=oc,
        ifm_depth=1 if depthwise else ic,
        kernel_h=k.height,
        kernel_w=k.width,
        dilation=k.dilation,
        ofm_block_depth=regs.param("NPU_SET_OFM_BLK_DEPTH_M1") + 1,
        ifm_ublock_depth=iu,
        ofm_ublock_depth=ou,
        ifm_bits=ifm.precision.bits,
        depthwise=depthwise,
        part_kernel=k.part_kernel,
        subkernel=k.subkernel,
    )
    w, sb = _streams(regs, mem, g, parallel + 1)
    return _accumulate(regs, mem, depthwise, ifm, ofm, w, sb)


def _accumulate(
    regs: Registers,
    mem: Memory,
    depthwise: bool,
    ifm: FeatureMap,
    ofm: FeatureMap,
    w: np.ndarray,
    sb: wt.ScaleBias,
) -> int:
    """The convolution itself, from the decoded OHWI kernel and scale entries."""
    oh, ow, oc = ofm_shape(regs)
    ic = regs.param("NPU_SET_IFM_DEPTH_M1") + 1
    k = kernel(regs)
    x = padded_ifm(mem, ifm, ic, k, oh, ow, padding(regs), ifm.zero_point) - ifm.zero_point
    # float64 is exact here (|acc| < 2^53 for 8/16-bit IFMs and 9-bit weights) and uses BLAS.
    xf, wf = x.astype(np.float64), w
    acc = np.zeros((oh, ow, oc), np.float64)
    for ky, kx, view in taps(xf, k, oh, ow):
        if depthwise:
            acc += view * wf[:, ky, kx, 0]
        else:
            acc += view @ wf[:, ky, kx, :].T
    total = acc.astype(np.int64) + sb.bias
    # global scale: OFM_SCALE for every channel, else the per-channel stream
    scale, shift = global_scale(regs) if ofm.precision.scale_mode else (sb.scale, sb.shift)
    write_ofm(regs, mem, ofm, total, scale, shift)
    return oh * ow * oc * k.height * k.width * (1 if depthwise else ic)
