"""quantized_conv2d and quantized_depthwise_conv2d as TOSA CONV2D / DEPTHWISE_CONV2D (int32
accumulator) followed by the requantizing RESCALE (quantized_linear's: ops/defs/linear.py).

Our accumulator is sum((x + input_offset) * w) + bias; TOSA's is sum((x - input_zp) *
(w - weight_zp)) + bias, with padding taps contributing zero in both, so input_zp =
-input_offset.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from torchmcu.npu.tosa.graph import Args, Graph, Tensor, fit_window, pair

Read = Callable[[int], Tensor]


def _bias(a: Args, i: int, channels: int) -> np.ndarray:
    if a.is_none(i):
        return np.zeros(channels, dtype=np.int32)
    b = a.constant(i).reshape(-1).astype(np.int32)
    if b.size != channels:
        raise a.error(f"bias has {b.size} items, expected {channels}")
    return b


def _source(g: Graph, a: Args, read: Read) -> tuple[Tensor, tuple[int, int]]:
    """The NHWC input and extra (top, left) padding: a pad folded into this call is read
    through (its bottom/right amounts follow from the output size, see fit_window)."""
    folded = getattr(read, "folded_pad", None)
    fold = folded(0) if folded is not None else None
    if fold is not None:
        x, (top, _, left, _) = fold
        return x, (top, left)
    n, h, w, c = a.nhwc_shape(0)
    return g.reshape(read(0), (n, h, w, c)), (0, 0)


def _windowed_input(
    g: Graph,
    a: Args,
    x: Tensor,
    out_hw: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    padding: tuple[int, int],
    extra: tuple[int, int] = (0, 0),
) -> tuple[Tensor, list[int], tuple[int, int]]:
    """The input (cropped where needed), TOSA's [top, bottom, left, right] padding, and the
    stride to use."""
    n, h, w, c = x.shape
    # An axis with one output position reads one window: its stride does not matter.
    stride = (1 if out_hw[0] == 1 else stride[0], 1 if out_hw[1] == 1 else stride[1])
    top, left = padding[0] + extra[0], padding[1] + extra[1]
    pb, crop_h = fit_window(h, out_hw[0], kernel[0], stride[0], dilation[0], top)
    pr, crop_w = fit_window(w, out_hw[1], kernel[1], stride[1], dilation[1], left)
    if crop_h or crop_w:
        x = g.slice(x, [0, 0, 0, 0], [n, h - crop_h, w - crop_w, c])
    return x, [top, pb, left, pr], stride


def conv2d(g: Graph, a: Args, read: Read) -> Tensor:
    x, extra = _source(g, a, read)
    n, cin = x.shape[0], x.shape[3]
    weight = a.constant(1)  # OHWI
    cout, kh, kw, cin_w = weight.shape
    if cin_w != cin:
        raise a.error(
            f"grouped convolution (weight Cin {cin_w}, input C {cin}) has no TOSA lowering here"
        )
    _, oh, ow, _ = a.nhwc_shape(len(a.args) - 2)
    stride, padding, dilation = pair(a.scalar(3)), pair(a.scalar(4)), pair(a.scalar(5))
    x, pad, stride = _windowed_input(g, a, x, (oh, ow), (kh, kw), stride, dilation, padding, extra)
    acc = g.conv(
        "CONV2D", x, weight, _bias(a, 2, cout), -int(a.scalar(6)), (n, oh, ow, cout), pad, stride,
        dilation,
    )
    return g.requantize(
        acc, a.ints(8), a.ints(9), int(a.scalar(7)), int(a.scalar(10)), int(a.scalar(11))
    )


def depthwise_conv2d(g: Graph, a: Args, read: Read) -> Tensor:
    x, extra = _source(g, a, read)
    n, cin = x.shape[0], x.shape[3]
    weight = a.constant(1)  # [1, KH, KW, C*M]
    one, kh, kw, cout = weight.shape
    multiplier = int(a.scalar(6))
    if one != 1 or multiplier < 1 or cout != cin * multiplier:
        raise a.error(
            f"depthwise weight {list(weight.shape)} does not match C={cin} x multiplier {multiplier}"
        )
    _, oh, ow, _ = a.nhwc_shape(len(a.args) - 2)
    stride, padding, dilation = pair(a.scalar(3)), pair(a.scalar(4)), pair(a.scalar(5))
    x, pad, stride = _windowed_input(g, a, x, (oh, ow), (kh, kw), stride, dilation, padding, extra)
    # Output channel c*M + m reads input channel c: exactly TOSA's [KH, KW, C, M] order.
    tosa_weight = weight.reshape(kh, kw, cin, multiplier).astype(np.int8)
    acc = g.conv(
        "DEPTHWISE_CONV2D", x, tosa_weight, _bias(a, 2, cout), -int(a.scalar(7)), (n, oh, ow, cout),
        pad, stride, dilation,
    )
    return g.requantize(
        acc, a.ints(9), a.ints(10), int(a.scalar(8)), int(a.scalar(11)), int(a.scalar(12))
    )
