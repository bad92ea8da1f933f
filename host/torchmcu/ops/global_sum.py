"""The exact int32 sum over all positions of an NHWC activation, in the TOSA forms Vela runs
fastest. Two lowerings need it: an average pool whose window covers its whole input with an
even tap count (ops/defs/pool.py: the sum, then a dividing RESCALE) and a global mean with its
own output qparams, which is a depthwise convolution with equal weights spanning the input
(ops/defs/conv.py: the sum, then the convolution's requantization).

Any grouping of the positions gives the same sum, so the strips are the ones Vela runs fastest:
rows. U55 and U65 sum each row with a (1, W) DEPTHWISE_CONV2D, then REDUCE_SUM the rows
(ResNet8's 8x8x64 pool: 1,996 cycles; one 8x8 depthwise 6,052). U85 sums each row too, then
ADDs the rows pairwise (at most ADD_ROWS_MAX of them): a REDUCE_SUM across rows, a depthwise
down columns and a reshape of a tensor another op also reads (a MemoryCopy) are slow there.
A squeeze-excite mean's own U85 cycles (its input also read by a MUL), row ADDs / the former
columns of 4 / ExecuTorch's inexact AVG_POOL2D: 6x6x240 3,418 / 16,017 / 2,956; 24x24x16
1,160 / 7,331 / 3,008; 8x8x64 1,152 / 4,064 / 1,484. Rows longer than STRIP_MAX: TRANSPOSE of
the positions into channels and a 1x1 CONV2D.

Few positions (at most HALVES_MAX, each axis a power of two) are summed by halves instead: the
tensor's two halves along H ADDed, then along W, down to one position. The first ADD reads the
int8 tensor through a RESCALE to int32 (times the weight, less the zero point), which Vela
fuses into it; each partial sum that fits is stored as int16 (a RESCALE Vela fuses into the
ADD that makes it and one into each ADD that reads it), halving the traffic, and the last ADD
gives int32 for the caller's RESCALE, which Vela fuses too (on U55 only after an int16 input:
after an int32 one it is an op of its own). U85 halves the tensor itself; U55 and U65 halve it
for at most HALVES_FIRST_MAX positions and otherwise halve its row sums (their ADDs cost about
1.5 cycles per element, their depthwise row sums less per position). Vela 5.2.0 cycles of the
sum alone (ours / before / ExecuTorch's inexact AVG_POOL2D), squeeze-excite means with a MUL also
reading the input: U85 2x2x128 96 / 861 / 269, 2x2x1152 864 / 5,695 / 1,372, 4x4x672 2,520 /
4,352 / 3,208; U55 2x2x128 576 / 1,976 / 496, 2x2x1152 5,184 / 23,711 / 2,552, 4x4x672 9,760 /
15,220 / 6,056."""

from __future__ import annotations

from typing import Any

import numpy as np

from torchmcu.ops.intmath import INT16_MAX

# Longest axis a one-axis DEPTHWISE_CONV2D of the global sum spans (Vela's kernel limit is
# larger; beyond this the transposing form is used).
STRIP_MAX = 64
# Most rows whose sums the U85 form ADDs (one ADD per row; more are REDUCE_SUMmed).
ADD_ROWS_MAX = 32
# Most positions summed by ADDing halves; on U55/U65 of the tensor itself up to HALVES_FIRST_MAX,
# beyond that of its row sums.
HALVES_MAX = 16
HALVES_FIRST_MAX = 4
_NO_PAD = (0, 0, 0, 0)  # a TOSA window's padding: top, bottom, left, right


def global_sum(g: Any, x: Any, weight: int, input_zero_point: int) -> Any:
    """int32 [N, 1, 1, C]: weight * sum over all positions of (x - input_zero_point), for the
    int8 NHWC tensor x of the TOSA graph g."""
    n, h, w, c = x.shape
    # the largest |weight * (x - input_zero_point)| over int8 x: what one position adds
    bound = abs(weight) * max(abs(-128 - input_zero_point), abs(127 - input_zero_point))
    if weight > 0 and h * w <= HALVES_MAX and _power_of_two(h) and _power_of_two(w):
        if g.family == "u85" or h * w <= HALVES_FIRST_MAX:
            shift = 24  # weight << 24 < 2^31 for every int8 weight; the product is exact
            return _sum_halves(
                g, g.rescale(x, "INT32", [weight << shift], [shift], input_zero_point), bound
            )
        rows = _row_sums(g, x, weight, input_zero_point)
        return _sum_halves(g, rows, bound * w)
    if w <= STRIP_MAX:
        acc = _row_sums(g, x, weight, input_zero_point)
        if g.family == "u85" and h <= ADD_ROWS_MAX:
            rows = [g.slice(acc, [0, r, 0, 0], [n, 1, 1, c]) for r in range(h)]
            while len(rows) > 1:  # pairwise; int32 sums are exact in any order
                pairs = range(0, len(rows), 2)
                rows = [g.add(*rows[k : k + 2]) if k + 1 < len(rows) else rows[k] for k in pairs]
            return rows[0]
        return g.reduce_sum(acc, 1) if h > 1 else acc
    by_channel = g.transpose(g.reshape(x, (n, h * w, c)), [0, 2, 1])
    acc = g.conv(
        "CONV2D",
        g.reshape(by_channel, (n, c, 1, h * w)),
        np.full((1, 1, 1, h * w), weight, dtype=np.int8),
        np.zeros(1, dtype=np.int32),
        input_zero_point,
        (n, c, 1, 1),
        _NO_PAD,
        [1, 1],
        [1, 1],
    )
    return g.reshape(acc, (n, 1, 1, c))


def _row_sums(g: Any, x: Any, weight: int, input_zero_point: int) -> Any:
    """int32 [N, H, 1, C]: each row's weighted sum, a (1, W) DEPTHWISE_CONV2D."""
    n, h, w, c = x.shape
    weights = np.full((1, w, c, 1), weight, dtype=np.int8)
    zeros = np.zeros(c, dtype=np.int32)
    return g.conv(
        "DEPTHWISE_CONV2D",
        x,
        weights,
        zeros,
        input_zero_point,
        (n, h, 1, c),
        _NO_PAD,
        [1, 1],
        [1, 1],
    )


def _power_of_two(size: int) -> bool:
    return size & (size - 1) == 0


def _sum_halves(g: Any, t: Any, bound: int) -> Any:
    """int32 [N, 1, 1, C]: the sum over H and W of the int32 t (H, W powers of two, every element
    at most `bound` in magnitude) by ADDing its halves, H first; partial sums that fit are kept
    as int16."""
    for axis in (1, 2):
        while t.shape[axis] > 1:
            half = list(t.shape)
            half[axis] //= 2
            start = [0, 0, 0, 0]
            start[axis] = half[axis]
            t = g.add(*(_widened(g, g.slice(t, s, half)) for s in ([0, 0, 0, 0], start)))
            bound *= 2
            if t.shape[1] * t.shape[2] > 1 and bound <= INT16_MAX:  # more ADDs read it
                t = g.rescale(t, "INT16", [1 << 30], [30])
    return t


def _widened(g: Any, t: Any) -> Any:
    """An int16 partial sum as the int32 an ADD takes (int32 as it is)."""
    return g.rescale(t, "INT32", [1 << 30], [30]) if t.dtype == "INT16" else t
