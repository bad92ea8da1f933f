"""cortex_m::pad and cortex_m::transpose on the tensors' memory layout (TOSA tensors are
the physical, dim-ordered shapes of our tensors)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from torchmcu.npu.tosa.graph import Args, Graph, Tensor, attr, physical_shape
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


def transpose_perm(a: Args) -> list[int]:
    """The permutation of physical axes that cortex_m::transpose performs on memory."""
    t, out = a.tensor(0), a.tensor(len(a.args) - 2)
    rank = len(t.sizes)
    perm = [int(p) % rank for p in a.scalar(1)]
    if sorted(perm) != list(range(rank)) or len(out.sizes) != rank:
        raise a.error(f"perm {a.scalar(1)} is not a permutation of a rank-{rank} tensor")
    inverse_in = [0] * rank
    for axis, d in enumerate(t.dim_order):
        inverse_in[d] = axis
    # out physical axis k holds logical out dim out.dim_order[k] = logical input dim
    # perm[out.dim_order[k]], stored at input physical axis inverse_in[...].
    return [inverse_in[perm[d]] for d in out.dim_order]


def transpose(g: Graph, a: Args, read: Read) -> Tensor:
    x = read(0)
    perm = transpose_perm(a)
    shape = tuple(x.shape[p] for p in perm)
    if physical_shape(a.tensor(len(a.args) - 2)) != shape:
        raise a.error(f"transposed shape {list(shape)} does not fit the out tensor")
    moved = [p for p in perm if x.shape[p] > 1]
    if moved == sorted(moved):  # only size-1 axes move: the bytes stay where they are
        return g.reshape(x, shape)
    if g.family == "u55":
        # Vela 5.2 splits a rank-4 TRANSPOSE into two passes on Ethos-U55 but runs the same
        # move as one when it is expressed with the fewest axes (NCHW -> NHWC of ResNet8's
        # input: 2 x 1,152 cycles -> 1,152). U65 and U85 are slower that way (measured), so
        # they keep the tensor's own rank.
        in_shape, merged = collapsed_transpose(x.shape, perm)
        if len(merged) < len(perm):
            moved_x = g.reshape(x, in_shape)
            out_shape = tuple(in_shape[p] for p in merged)
            t = g.op("TRANSPOSE", [moved_x], out_shape, x.dtype, attr("TransposeAttribute", merged))
            return g.reshape(t, shape)
    return g.op("TRANSPOSE", [x], shape, x.dtype, attr("TransposeAttribute", perm))


def collapsed_transpose(
    shape: tuple[int, ...], perm: list[int]
) -> tuple[tuple[int, ...], list[int]]:
    """The same byte move with size-1 axes dropped and input axes that stay adjacent and in
    order merged: (input shape, permutation) of the smallest rank (at least 2)."""
    kept = [p for p in perm if shape[p] > 1]
    groups: list[list[int]] = []  # runs of consecutive input axes, in output order
    for p in kept:
        if (
            groups
            and p > groups[-1][-1]
            and all(shape[q] == 1 for q in range(groups[-1][-1] + 1, p))
        ):
            groups[-1].append(p)  # the next input axis, or only size-1 axes lie between
        else:
            groups.append([p])
    order = sorted(range(len(groups)), key=lambda k: groups[k][0])  # input order of the runs
    sizes = [int(np.prod([shape[q] for q in grp])) for grp in groups]
    in_shape = tuple(sizes[k] for k in order)
    merged = [order.index(k) for k in range(len(groups))]
    while len(in_shape) < 2:
        in_shape, merged = (1, *in_shape), [0] + [m + 1 for m in merged]
    return in_shape, merged
