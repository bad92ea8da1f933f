"""NPU_OP_POOL: max and average pooling (Vela also uses 1x1 max pools as strided copies)."""

from __future__ import annotations

import numpy as np

from torchmcu.npu.model.featuremap import feature_map, ofm_shape
from torchmcu.npu.model.memory import Memory
from torchmcu.npu.model.ofm import global_scale, write_ofm
from torchmcu.npu.model.state import Registers, kernel
from torchmcu.npu.model.window import padded_ifm, padding, taps

POOL_MAX, POOL_AVERAGE, POOL_REDUCE_SUM = 0, 1, 2
_PAD = np.iinfo(np.int64).min  # marks padding: never a maximum, never counted in an average


# U85 pooling modes beyond the U55's: SUM 3 (the window's sum, scaled: Vela's average pools),
# NONE 4, MIN 5 (not modelled).
POOL_SUM = 3


def _u85_average(acc: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The U85's AVERAGE divides the window's sum by itself (Vela writes OFM_SCALE 1, shift 0).
    Assumption (checked against the TOSA reference on mobilenet_v1_025's 3x3 average):
    the division is TOSA AVG_POOL2D's, sum * reciprocal(count) with the reciprocal as
    ((2^30 + 1) << k) // count and shift 30 + k (k = bits of count - 1), rounded half up;
    count is the window's non-padding elements."""
    count = np.maximum(count, 1)
    k = np.array([int(c - 1).bit_length() for c in count.ravel()], np.int64).reshape(count.shape)
    mult = (((1 << 30) + 1) << k) // count
    shift = 30 + k
    return (acc * mult + (np.int64(1) << (shift - 1))) >> shift


def pooling(regs: Registers, mem: Memory, mode: int) -> int:
    u85_average = regs.u85 and mode == POOL_AVERAGE
    if regs.u85 and mode in (POOL_SUM, POOL_AVERAGE):
        mode = POOL_AVERAGE  # the sum; SUM leaves the division to OFM_SCALE
    if mode not in (POOL_MAX, POOL_AVERAGE, POOL_REDUCE_SUM):
        raise NotImplementedError(f"pooling mode {mode}")
    if regs.param("NPU_SET_IFM_UPSCALE", 0):
        raise NotImplementedError("IFM upscaling (nearest/transpose resampling) is not modelled")
    ifm, ofm = feature_map(regs, "IFM"), feature_map(regs, "OFM")
    oh, ow, oc = ofm_shape(regs)
    k = kernel(regs)
    depth = regs.param("NPU_SET_IFM_DEPTH_M1") + 1 if mode == POOL_REDUCE_SUM else oc
    x = padded_ifm(mem, ifm, depth, k, oh, ow, padding(regs), _PAD)
    if mode == POOL_REDUCE_SUM:
        # Sums the IFM's channels into one (Vela's global averages: a depthwise sums the rows,
        # a byte transpose moves them to the channels, REDUCE_SUM adds them up).
        acc = np.zeros((oh, ow, 1), np.int64)
        for _, _, view in taps(x, k, oh, ow):
            acc += np.where(view != _PAD, view - ifm.zero_point, 0).sum(axis=2, keepdims=True)
    elif mode == POOL_MAX:
        acc = np.full((oh, ow, oc), _PAD, np.int64)
        for _, _, view in taps(x, k, oh, ow):
            acc = np.maximum(acc, view)
        acc = acc - ifm.zero_point
    else:
        # Assumption: AVERAGE sums the window and leaves the division to OFM_SCALE (Vela writes
        # 1/area into it: 1/125 for a 25x5 window); padding adds nothing (untested).
        acc = np.zeros((oh, ow, oc), np.int64)
        count = np.zeros((oh, ow, oc), np.int64)
        for _, _, view in taps(x, k, oh, ow):
            acc += np.where(view != _PAD, view - ifm.zero_point, 0)
            count += view != _PAD
        if u85_average:
            acc = _u85_average(acc, count)
    write_ofm(regs, mem, ofm, acc, *global_scale(regs))
    # MACs as Vela's nn_macs counts them: a 1x1 max/average pool is a copy (Vela's transposes
    # and reshapes), REDUCE_SUM adds up `depth` channels per output.
    # On the U85 Vela counts every pool, 1x1 ones too (its transposes and LUT activations).
    if mode != POOL_REDUCE_SUM and k.height * k.width == 1 and not regs.u85:
        return 0
    return oh * ow * (depth if mode == POOL_REDUCE_SUM else oc) * k.height * k.width
