"""The exact int32 sum over all positions of an NHWC activation, in the TOSA forms Vela runs
fastest. Two lowerings need it: an average pool whose window covers its whole input with an
even tap count (ops/defs/pool.py: the sum, then a dividing RESCALE) and a global mean with its
own output qparams, which is a depthwise convolution with equal weights spanning the input
(ops/defs/conv.py: the sum, then the convolution's requantization).

Any grouping of the positions gives the same sum, so the strips are the ones Vela runs
fastest (measured on ResNet8's 8x8x64 pool): U85 reads the positions as 4 rows and sums
columns of 4 (1,172 cycles; 8x8 columns 1,900, MATMUL 3,796, one 8x8 depthwise 5,490;
ExecuTorch's inexact AVG_POOL2D 1,480), U55 and U65 sum each row (1,996 cycles; one 8x8
depthwise 6,052): a DEPTHWISE_CONV2D over the strips, then a REDUCE_SUM of the strip sums.
Rows longer than STRIP_MAX: TRANSPOSE of the positions into channels and a 1x1 CONV2D."""

from __future__ import annotations

from typing import Any

import numpy as np

# Longest axis a one-axis DEPTHWISE_CONV2D of the global sum spans (Vela's kernel limit is
# larger; beyond this the transposing form is used).
STRIP_MAX = 64
_NO_PAD = (0, 0, 0, 0)  # a TOSA window's padding: top, bottom, left, right


def global_sum(g: Any, x: Any, weight: int, input_zero_point: int) -> Any:
    """int32 [N, 1, 1, C]: weight * sum over all positions of (x - input_zero_point), for the
    int8 NHWC tensor x of the TOSA graph g."""
    n, h, w, c = x.shape
    if g.family == "u85":
        rows = 4 if (h * w) % 4 == 0 else 2 if (h * w) % 2 == 0 else 1
        grid, kernel, axis = (rows, h * w // rows), (rows, 1), 2
    else:
        grid, kernel, axis = (h, w), (1, w), 1
    if max(kernel) <= STRIP_MAX:
        strips_shape = (n, 1, grid[1], c) if axis == 2 else (n, grid[0], 1, c)
        acc = g.conv(
            "DEPTHWISE_CONV2D",
            g.reshape(x, (n, *grid, c)),
            np.full((*kernel, c, 1), weight, dtype=np.int8),
            np.zeros(c, dtype=np.int32),
            input_zero_point,
            strips_shape,
            _NO_PAD,
            [1, 1],
            [1, 1],
        )
        return acc if acc.shape == (n, 1, 1, c) else g.reduce_sum(acc, axis)
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
