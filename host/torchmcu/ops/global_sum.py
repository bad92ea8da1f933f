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
the positions into channels and a 1x1 CONV2D."""

from __future__ import annotations

from typing import Any

import numpy as np

# Longest axis a one-axis DEPTHWISE_CONV2D of the global sum spans (Vela's kernel limit is
# larger; beyond this the transposing form is used).
STRIP_MAX = 64
# Most rows whose sums the U85 form ADDs (one ADD per row; more are REDUCE_SUMmed).
ADD_ROWS_MAX = 32
_NO_PAD = (0, 0, 0, 0)  # a TOSA window's padding: top, bottom, left, right


def global_sum(g: Any, x: Any, weight: int, input_zero_point: int) -> Any:
    """int32 [N, 1, 1, C]: weight * sum over all positions of (x - input_zero_point), for the
    int8 NHWC tensor x of the TOSA graph g."""
    n, h, w, c = x.shape
    if w <= STRIP_MAX:
        acc = g.conv(
            "DEPTHWISE_CONV2D",
            x,
            np.full((1, w, c, 1), weight, dtype=np.int8),
            np.zeros(c, dtype=np.int32),
            input_zero_point,
            (n, h, 1, c),
            _NO_PAD,
            [1, 1],
            [1, 1],
        )
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
