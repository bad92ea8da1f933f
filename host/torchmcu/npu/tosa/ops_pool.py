"""quantized_avg_pool2d and quantized_max_pool2d in TOSA.

Average pool: CMSIS-NN divides the int32 window sum by the tap count rounding half away
from zero; TOSA's AVG_POOL2D rounds ties upwards. With an odd count there are no ties, and
AVG_POOL2D (zero points -128, so its accumulator is never negative) equals CMSIS-NN for
every possible window sum - checked exhaustively against TOSA's reciprocal_scale
arithmetic. With an even count the sum is taken by a DEPTHWISE_CONV2D with constant
weights w (acc = w * sum) and divided by one RESCALE (DOUBLE_ROUND) whose (multiplier,
shift) equals the half-away division for every sum, again checked exhaustively. Both need
the same count for every window (no padding, no partial ceil-mode window).

An even-count window covering the whole input (a global pool, 1x1 output) takes its sum
in two exact int32 steps that Vela runs far faster than a depthwise kernel spanning the
whole input: a DEPTHWISE_CONV2D summing strips of positions and a REDUCE_SUM of the strips
(see _global_sum_pool; very long rows: TRANSPOSE of the positions into channels and a 1x1
CONV2D), then the same exact RESCALE.

A window covering the whole (possibly cropped) input is lowered with stride 1: the
output is 1x1 either way, and Ethos-U55 accepts no pooling stride above 3.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from torchmcu.npu.tosa.graph import Args, Graph, Tensor, attr, fit_window, pair, ts
from torchmcu.ops.intmath import round_half_away, tosa_double_round
from torchmcu.reference.ops_pool import pool_output_size

Read = Callable[[int], Tensor]


@cache
def divisor(count: int) -> tuple[int, int, int]:
    """(weight, multiplier, tosa shift) with rescale(weight * s) == round_half_away(s / count)
    for every s in [-128 * count, 127 * count]."""
    sums = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    want = round_half_away(sums, count)
    for weight in (64, 127, 32, 16, 8, 4, 2, 1):
        for shift in range(62, 1, -1):
            multiplier = -(
                -(1 << shift) // (weight * count)
            )  # ceil: never rounds the quotient down
            if multiplier >= 1 << 31:
                continue
            if np.array_equal(tosa_double_round(sums * weight, multiplier, shift), want):
                return weight, multiplier, shift
            break  # the largest usable shift failed; smaller ones are no more precise
    raise ValueError(f"no exact RESCALE divides by {count}")


def tosa_avg_pool_divide(total_minus_zp: np.ndarray, count: int) -> np.ndarray:
    """TOSA 1.0 AVG_POOL2D's integer division of an accumulator by the tap count."""
    k = (count - 1).bit_length()
    multiplier = (((1 << 30) + 1) << k) // count
    return (np.asarray(total_minus_zp, dtype=np.int64) * multiplier + (1 << (29 + k))) >> (30 + k)


@cache
def avg_pool_is_exact(count: int) -> bool:
    """AVG_POOL2D with zero points -128 equals the half-away mean for every int8 window sum."""
    if count % 2 == 0:
        return False
    sums = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    got = tosa_avg_pool_divide(sums + 128 * count, count) - 128
    return bool(np.array_equal(got, round_half_away(sums, count)))


def _window_geometry(a: Args, padding_allowed: bool):
    kh, kw = pair(a.scalar(1))
    sh, sw = pair(a.scalar(2))
    ph, pw = pair(a.scalar(3))
    if not padding_allowed and (ph or pw):
        raise a.error(
            "average pool with padding divides border windows by fewer taps; no exact NPU lowering"
        )
    return (kh, kw), (sh, sw), (ph, pw)


def avg_pool2d(g: Graph, a: Args, read: Read) -> Tensor:
    n, h, w, c = a.nhwc_shape(0)
    _, oh, ow, _ = a.nhwc_shape(len(a.args) - 2)
    (kh, kw), (sh, sw), _ = _window_geometry(a, padding_allowed=False)
    # ceil_mode is fine as long as no window hangs over the edge
    if bool(a.scalar(4)) and ((oh - 1) * sh + kh > h or (ow - 1) * sw + kw > w):
        raise a.error("ceil-mode average pool has partial windows; no exact NPU lowering")
    if (pool_output_size(h, kh, sh, 0, False), pool_output_size(w, kw, sw, 0, False)) != (oh, ow):
        raise a.error(f"output {oh}x{ow} does not match the pooling geometry")
    x = g.reshape(read(0), (n, h, w, c))
    if oh == 1:
        sh = 1
    if ow == 1:
        sw = 1
    pb, crop_h = fit_window(h, oh, kh, sh, 1, 0)
    pr, crop_w = fit_window(w, ow, kw, sw, 1, 0)
    if pb or pr:
        raise a.error("average pool window past the input edge")
    if crop_h or crop_w:
        x = g.slice(x, [0, 0, 0, 0], [n, h - crop_h, w - crop_w, c])
    if avg_pool_is_exact(kh * kw):
        zp = g.scalar(-128, "INT8")
        return g.op(
            "AVG_POOL2D",
            [x, zp, g.scalar(-128, "INT8")],
            (n, oh, ow, c),
            "INT8",
            attr("AvgPool2dAttribute", [kh, kw], [sh, sw], [0, 0, 0, 0], ts().DType.INT32),
        )
    weight, multiplier, shift = divisor(kh * kw)
    if oh == 1 and ow == 1:
        return _global_sum_pool(g, x, weight, multiplier, shift)
    ones = np.full((kh, kw, c, 1), weight, dtype=np.int8)
    acc = g.op(
        "DEPTHWISE_CONV2D",
        [
            x,
            g.const(ones, "INT8"),
            g.const(np.zeros(c, dtype=np.int32), "INT32"),
            g.scalar(0, "INT8"),
            g.scalar(0, "INT8"),
        ],
        (n, oh, ow, c),
        "INT32",
        attr("DepthwiseConv2dAttribute", [0, 0, 0, 0], [sh, sw], [1, 1], False, ts().DType.INT32),
    )
    return g.rescale(acc, "INT8", [multiplier], [shift])


# Longest axis a one-axis DEPTHWISE_CONV2D of the global sum spans (Vela's kernel limit is
# larger; beyond this the transposing forms below are used).
STRIP_MAX = 64


def _global_sum_pool(g: Graph, x: Tensor, weight: int, multiplier: int, shift: int) -> Tensor:
    """Mean over all positions of NHWC x: the exact int32 sum (times weight), then the
    dividing RESCALE. The sum is a DEPTHWISE_CONV2D over strips of positions (exact int32
    strip sums) and a REDUCE_SUM of the strips. Any grouping of the positions gives the same
    sum, so the strips are the ones Vela runs fastest (measured on ResNet8's 8x8x64 pool):
    U85 reads the positions as 4 rows and sums columns of 4 (1,172 cycles; 8x8 columns
    1,900, MATMUL 3,796, one 8x8 depthwise 5,490; ExecuTorch's inexact AVG_POOL2D 1,480),
    U55 and U65 sum each row (1,996 cycles; one 8x8 depthwise 6,052). Rows longer than
    STRIP_MAX: TRANSPOSE + 1x1 CONV2D."""
    n, h, w, c = x.shape
    if g.family == "u85":
        rows = 4 if (h * w) % 4 == 0 else 2 if (h * w) % 2 == 0 else 1
        grid, kernel, axis = (rows, h * w // rows), (rows, 1), 2
    else:
        grid, kernel, axis = (h, w), (1, w), 1
    if max(kernel) <= STRIP_MAX:
        strips_shape = (n, 1, grid[1], c) if axis == 2 else (n, grid[0], 1, c)
        acc = g.op(
            "DEPTHWISE_CONV2D",
            [
                g.reshape(x, (n, *grid, c)),
                g.const(np.full((*kernel, c, 1), weight, dtype=np.int8), "INT8"),
                g.const(np.zeros(c, dtype=np.int32), "INT32"),
                g.scalar(0, "INT8"),
                g.scalar(0, "INT8"),
            ],
            strips_shape,
            "INT32",
            attr("DepthwiseConv2dAttribute", [0, 0, 0, 0], [1, 1], [1, 1], False, ts().DType.INT32),
        )
        if acc.shape != (n, 1, 1, c):
            acc = g.op("REDUCE_SUM", [acc], (n, 1, 1, c), "INT32", attr("ReduceSumAttribute", axis))
        return g.rescale(acc, "INT8", [multiplier], [shift])
    positions = g.reshape(x, (n, h * w, c))
    by_channel = g.op(
        "TRANSPOSE", [positions], (n, c, h * w), "INT8", attr("TransposeAttribute", [0, 2, 1])
    )
    acc = g.op(
        "CONV2D",
        [
            g.reshape(by_channel, (n, c, 1, h * w)),
            g.const(np.full((1, 1, 1, h * w), weight, dtype=np.int8), "INT8"),
            g.const(np.zeros(1, dtype=np.int32), "INT32"),
            g.scalar(0, "INT8"),
            g.scalar(0, "INT8"),
        ],
        (n, c, 1, 1),
        "INT32",
        attr("Conv2dAttribute", [0, 0, 0, 0], [1, 1], [1, 1], False, ts().DType.INT32),
    )
    mean = g.rescale(acc, "INT8", [multiplier], [shift])
    return g.reshape(mean, (n, 1, 1, c))


def max_pool2d(g: Graph, a: Args, read: Read) -> Tensor:
    n, h, w, c = a.nhwc_shape(0)
    _, oh, ow, _ = a.nhwc_shape(len(a.args) - 2)
    (kh, kw), (sh, sw), (ph, pw) = _window_geometry(a, padding_allowed=True)
    if pair(a.scalar(4)) != (1, 1) or bool(a.scalar(5)):
        raise a.error("max pool with dilation or ceil_mode")
    if int(a.scalar(6)) != int(a.scalar(7)):
        raise a.error("max pool with different input and output zero points")
    x = g.reshape(read(0), (n, h, w, c))
    if oh == 1 and ph == 0:
        sh = 1
    if ow == 1 and pw == 0:
        sw = 1
    pb, crop_h = fit_window(h, oh, kh, sh, 1, ph)
    pr, crop_w = fit_window(w, ow, kw, sw, 1, pw)
    if crop_h or crop_w:
        x = g.slice(x, [0, 0, 0, 0], [n, h - crop_h, w - crop_w, c])
    out = g.op(
        "MAX_POOL2D",
        [x],
        (n, oh, ow, c),
        "INT8",
        attr(
            "MaxPool2dAttribute",
            [kh, kw],
            [sh, sw],
            [ph, pb, pw, pr],
            ts().NanPropagationMode.PROPAGATE,
        ),
    )
    return g.clamp(out, int(a.scalar(8)), int(a.scalar(9)))
