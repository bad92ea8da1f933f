"""Folding a cortex_m::pad into the convolution that reads it (TOSA tensors are the physical,
dim-ordered shapes of our tensors; pad's and transpose's lowerings are their definitions')."""

from __future__ import annotations

from torchmcu.npu.tosa.graph import Args
from torchmcu.ops import views
from torchmcu.ops.defs.pad import PAD
from torchmcu.ops.layout import is_channels_last, pad_dims

A = PAD.schema.A

# The consumers a pad folds into, with the argument index of their input_offset (npu.pad_fold).
_PAD_CONSUMERS = views.pad_folds()


def foldable_pad(pad_args: Args, consumer: Args) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) when a cortex_m::pad can become its consumer's padding:
    H/W-only padding of an NHWC tensor with the consumer's input zero point as the value
    (TOSA's convolution padding is that zero point), read by a convolution as its input."""
    if pad_args.op_name != PAD.qualified or consumer.op_name not in _PAD_CONSUMERS:
        return None
    t = pad_args.tensor(A.input)
    if len(t.sizes) != 4 or not is_channels_last(t.sizes, t.dim_order):
        return None
    try:
        pad_dims(t.sizes, t.dim_order, True)
        pad_args.nhwc_shape(A.input)
    except ValueError:
        return None
    pre = [int(v) for v in pad_args.scalar(A.pre_pad)]
    post = [int(v) for v in pad_args.scalar(A.post_pad)]
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
    if int(pad_args.scalar(A.pad_value)) != -int(consumer.scalar(_PAD_CONSUMERS[consumer.op_name])):
        return None
    return pre[1], post[1], pre[2], post[2]
