"""cortex_m::pad on the tensors' memory layout (TOSA tensors are the physical, dim-ordered
shapes of our tensors; cortex_m::transpose is torchmcu/ops/defs/transpose.py's)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from torchmcu.npu.tosa.graph import Args, Graph, Tensor, attr
from torchmcu.reference.ops_layout import is_channels_last, pad_dims

Read = Callable[[int], Tensor]


def pad(g: Graph, a: Args, read: Read) -> Tensor:
    t, out = a.tensor(0), a.tensor(len(a.args) - 2)
    nhwc = is_channels_last(t.sizes, t.dim_order)
    try:
        dims = pad_dims(t.sizes, t.dim_order, nhwc)
        out_dims = pad_dims(out.sizes, out.dim_order, nhwc)
    except ValueError as exc:
        raise a.error(str(exc)) from None
    pre, post = [int(v) for v in a.scalar(1)], [int(v) for v in a.scalar(2)]
    rank = len(dims)
    lead = 4 - rank
    if (
        len(pre) != 4
        or len(post) != 4
        or any(pre[:lead])
        or any(post[:lead])
        or min(pre + post) < 0
    ):
        raise a.error(f"pad amounts {pre} / {post} do not fit a rank-{rank} tensor")
    amounts = [v for p, q in zip(pre[lead:], post[lead:]) for v in (p, q)]
    x = g.reshape(read(0), dims)
    value = g.const(np.array([int(a.scalar(3))], dtype=np.int8), "INT8")
    padded = g.op("PAD", [x, g.shape_const(amounts), value], out_dims, "INT8", attr("PadAttribute"))
    expected = tuple(d + p + q for d, p, q in zip(dims, pre[lead:], post[lead:]))
    if expected != tuple(out_dims):
        raise a.error(f"out pad dims {list(out_dims)} differ from the padded dims {list(expected)}")
    return padded


# The consumers a pad folds into, with the argument index of their input_offset.
_PAD_CONSUMERS = {
    "cortex_m::quantized_conv2d": 6,
    "cortex_m::quantized_conv2d_nhwc": 6,
    "cortex_m::quantized_depthwise_conv2d": 7,
    "cortex_m::quantized_depthwise_conv2d_nhwc": 7,
}


def foldable_pad(pad_args: Args, consumer: Args) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) when a cortex_m::pad can become its consumer's padding:
    H/W-only padding of an NHWC tensor with the consumer's input zero point as the value
    (TOSA's convolution padding is that zero point), read by a convolution as its input."""
    if pad_args.op_name != "cortex_m::pad" or consumer.op_name not in _PAD_CONSUMERS:
        return None
    t = pad_args.tensor(0)
    if len(t.sizes) != 4 or not is_channels_last(t.sizes, t.dim_order):
        return None
    try:
        pad_dims(t.sizes, t.dim_order, True)
        pad_args.nhwc_shape(0)
    except ValueError:
        return None
    pre, post = [int(v) for v in pad_args.scalar(1)], [int(v) for v in pad_args.scalar(2)]
    if (
        len(pre) != 4
        or len(post) != 4
        or pre[0]
        or pre[3]
        or post[0]
        or post[3]
        or min(pre + post) < 0
    ):
        return None
    if int(pad_args.scalar(3)) != -int(consumer.scalar(_PAD_CONSUMERS[consumer.op_name])):
        return None
    return pre[1], post[1], pre[2], post[2]
