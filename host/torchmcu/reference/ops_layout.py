"""Reference semantics of cortex_m::pad and cortex_m::transpose.

pad works on the tensor's bytes viewed by its "pad dims" (pad_dims: ExecuTorch
1.5.1's rule, NHWC for a channels-last 4-D tensor, else the sizes): its pre/post
amounts are given per pad dim, right-aligned to 4-D. pad_tensor applies that
rule to a tensor given by bytes, sizes and dim order. transpose works on the
logical array (sizes order); the caller maps memory to logical order and back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from torchmcu.ops.defs.transpose import transpose  # noqa: F401 (defined once, in the registry)
from torchmcu.ops.layout import laid_out_as  # defined in ops; the stages import it from here
from torchmcu.reference.ops_elementwise import _check_int


def pad(input: np.ndarray, pre_pad: Sequence[int], post_pad: Sequence[int], pad_value: int) -> np.ndarray:
    """Pads a rank 1..4 int8 array given in memory order; pre/post have 4 items each."""
    x = np.asarray(input)
    if x.dtype != np.int8:
        raise ValueError(f"pad input must be int8, got {x.dtype}")
    if not 1 <= x.ndim <= 4:
        raise ValueError(f"pad input rank must be 1..4, got {x.ndim}")
    pre = [int(v) for v in pre_pad]
    post = [int(v) for v in post_pad]
    if len(pre) != 4 or len(post) != 4:
        raise ValueError("pre_pad and post_pad must have 4 items")
    if min(pre + post) < 0:
        raise ValueError("pad amounts must be >= 0")
    lead = 4 - x.ndim
    if any(pre[:lead]) or any(post[:lead]):
        raise ValueError(f"pad of a rank-{x.ndim} tensor must leave the first {lead} items 0")
    _check_int("pad_value", pad_value, -128, 127)
    widths = list(zip(pre[lead:], post[lead:]))
    return np.pad(x, widths, mode="constant", constant_values=np.int8(pad_value))


_NHWC = (0, 2, 3, 1)


def is_channels_last(sizes: Sequence[int], dim_order: Sequence[int]) -> bool:
    """ExecuTorch's test: 4-D with C == 1, or H == W == 1, or dim order 0,2,3,1."""
    if len(sizes) != 4:
        return False
    return sizes[1] == 1 or sizes[2] == sizes[3] == 1 or tuple(dim_order) == _NHWC


def pad_dims(sizes: Sequence[int], dim_order: Sequence[int], channels_last: bool) -> tuple[int, ...]:
    """The dims pre/post_pad refer to: N,H,W,C if channels_last, else the sizes (rank kept).

    Raises ValueError when the bytes are not laid out that way (dims of size 1 ignored).
    """
    if channels_last:
        if len(sizes) != 4 or not laid_out_as(sizes, dim_order, _NHWC):
            raise ValueError(f"pad: channels-last tensor sizes {list(sizes)} dim_order {list(dim_order)} "
                             "is not NHWC in memory")
        return tuple(int(sizes[d]) for d in _NHWC)
    if not laid_out_as(sizes, dim_order, range(len(sizes))):
        raise ValueError(f"pad: tensor sizes {list(sizes)} dim_order {list(dim_order)} is not contiguous")
    return tuple(int(s) for s in sizes)


def pad_tensor(
    memory: np.ndarray,
    in_sizes: Sequence[int],
    in_dim_order: Sequence[int],
    out_sizes: Sequence[int],
    out_dim_order: Sequence[int],
    pre_pad: Sequence[int],
    post_pad: Sequence[int],
    pad_value: int,
) -> np.ndarray:
    """cortex_m::pad.out on a tensor's bytes (any shape): returns the out tensor's bytes, flat.

    The input decides the convention (is_channels_last); the out tensor must have the
    padded pad dims in the same memory layout.
    """
    nhwc = is_channels_last(in_sizes, in_dim_order)
    dims = pad_dims(in_sizes, in_dim_order, nhwc)
    result = pad(np.asarray(memory).reshape(dims), pre_pad, post_pad, pad_value)
    if len(out_sizes) != len(in_sizes):
        raise ValueError(f"pad: out rank {len(out_sizes)} differs from input rank {len(in_sizes)}")
    out_dims = pad_dims(out_sizes, out_dim_order, nhwc)
    if out_dims != result.shape:
        raise ValueError(f"pad: out sizes {list(out_sizes)} dim_order {list(out_dim_order)} do not hold "
                         f"the padded dims {list(result.shape)}")
    return result.reshape(-1)
