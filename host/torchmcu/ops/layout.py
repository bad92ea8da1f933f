"""Memory-layout arithmetic the definitions share with the stages (reference/ops_layout.py
re-exports it)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from torchmcu.pte import program as pm


def _strides(sizes: Sequence[int], order: Sequence[int]) -> dict[int, int]:
    strides, step = {}, 1
    for d in reversed(order):
        strides[d] = step
        step *= sizes[d]
    return strides


def laid_out_as(sizes: Sequence[int], dim_order: Sequence[int], order: Sequence[int]) -> bool:
    """Bytes in `dim_order` equal bytes in `order` (dims of size 1 do not matter)."""
    a, b = _strides(sizes, dim_order), _strides(sizes, order)
    return all(a[d] == b[d] for d in range(len(sizes)) if sizes[d] > 1)


def disjoint(a: pm.Tensor, b: pm.Tensor) -> bool:
    """tm_tensors_disjoint on planned tensors: the same memory's byte ranges do not overlap
    (a constant or unplanned tensor never shares the arena)."""
    if a.nbytes == 0 or b.nbytes == 0 or a.allocation is None or b.allocation is None:
        return True
    if a.data_buffer_idx > 0 or b.data_buffer_idx > 0:
        return True
    if a.allocation.memory_id != b.allocation.memory_id:
        return True
    a0 = a.allocation.offset + a.storage_offset * pm.ELEMENT_SIZE[pm.ScalarType(a.scalar_type)]
    b0 = b.allocation.offset + b.storage_offset * pm.ELEMENT_SIZE[pm.ScalarType(b.scalar_type)]
    return a0 + a.nbytes <= b0 or b0 + b.nbytes <= a0


NHWC = (0, 2, 3, 1)  # the legacy activation layout: N,C,H,W sizes in N,H,W,C memory


def is_channels_last(sizes: Sequence[int], dim_order: Sequence[int]) -> bool:
    """ExecuTorch's test: 4-D with C == 1, or H == W == 1, or dim order 0,2,3,1."""
    if len(sizes) != 4:
        return False
    return sizes[1] == 1 or sizes[2] == sizes[3] == 1 or tuple(dim_order) == NHWC


def pad_dims(sizes: Sequence[int], dim_order: Sequence[int], channels_last: bool) -> tuple[int, ...]:
    """The dims pre/post_pad refer to: N,H,W,C if channels_last, else the sizes (rank kept).

    Raises ValueError when the bytes are not laid out that way (dims of size 1 ignored).
    """
    if channels_last:
        if len(sizes) != 4 or not laid_out_as(sizes, dim_order, NHWC):
            raise ValueError(f"pad: channels-last tensor sizes {list(sizes)} dim_order {list(dim_order)} "
                             "is not NHWC in memory")
        return tuple(int(sizes[d]) for d in NHWC)
    if not laid_out_as(sizes, dim_order, range(len(sizes))):
        raise ValueError(f"pad: tensor sizes {list(sizes)} dim_order {list(dim_order)} is not contiguous")
    return tuple(int(s) for s in sizes)


def same_layout(a: pm.Tensor, b: pm.Tensor) -> bool:
    """tm_same_layout: equal sizes, every element at the same offset (size-1 dims free)."""
    return list(a.sizes) == list(b.sizes) and laid_out_as(a.sizes, a.dim_order, b.dim_order)


def _channel_vector(t: pm.Tensor, channels: int) -> bool:
    return len(t.sizes) == 4 and t.sizes[1] == channels and math.prod(t.sizes) == channels


def broadcast_operand(t: pm.Tensor, out: pm.Tensor) -> bool:
    """An operand of the general broadcast to out: out's rank, each size out's or 1, its bytes
    in out's dim order (dims of size 1 free)."""
    if len(t.sizes) != len(out.sizes) or not t.sizes:
        return False
    if any(s not in (o, 1) for s, o in zip(t.sizes, out.sizes)):
        return False
    return laid_out_as(t.sizes, t.dim_order, out.dim_order)


GENERAL = (0, 0)  # binary_broadcast's answer for the general broadcast (no periods)


def binary_broadcast(a: pm.Tensor, b: pm.Tensor, out: pm.Tensor) -> tuple[int, int] | str:
    """tm_binary_broadcast: (a's period, b's period) in out's elements (equal layouts, one
    operand a single element (period 1), or one operand a [1, C, 1, 1] channel vector of an
    NHWC out), GENERAL for the general broadcast (one rank, each operand's size out's or 1,
    out's size one of theirs, the operands' bytes in out's dim order), else the argument name
    at fault ("self", "other" or "out"), as the C kernels report it."""
    numel = math.prod(out.sizes)
    if same_layout(a, b):
        return (numel, numel) if same_layout(a, out) else "out"
    a_full, b_full = same_layout(a, out), same_layout(b, out)
    if a_full and math.prod(b.sizes) == 1:
        return numel, 1
    if b_full and math.prod(a.sizes) == 1:
        return 1, numel
    nhwc_out = len(out.sizes) == 4 and laid_out_as(out.sizes, out.dim_order, NHWC)
    channels = out.sizes[1] if len(out.sizes) == 4 else 0
    if nhwc_out and a_full and _channel_vector(b, channels):
        return numel, channels
    if nhwc_out and b_full and _channel_vector(a, channels):
        return channels, numel
    a_fits, b_fits = broadcast_operand(a, out), broadcast_operand(b, out)
    if a_fits and b_fits:
        ok = all(o in (x, y) for o, x, y in zip(out.sizes, a.sizes, b.sizes))
        return GENERAL if ok else "out"
    if not a_full and not b_full:
        return ("other" if a_fits else "self") if a_fits != b_fits else "out"
    return "other" if a_full else "self"


def broadcast_physical(x: np.ndarray, t: pm.Tensor, out: pm.Tensor) -> np.ndarray:
    """Operand t's memory `x` of a general broadcast as out's memory (numpy broadcasting of
    its sizes in out's dim order)."""
    order = list(out.dim_order)
    shaped = np.asarray(x).reshape([t.sizes[d] for d in order])
    return np.broadcast_to(shaped, [out.sizes[d] for d in order]).reshape(-1)


MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)


def tensor_arg(v: pm.EValue, scalar_type: int | None, min_rank: int = 0,
               max_rank: int = MAX_DIMS) -> pm.Tensor | None:
    """tm_tensor_arg: v as a tensor of `scalar_type` (None: any) with rank in [min_rank,
    max_rank], a valid dim order and no negative size; None otherwise."""
    if not isinstance(v, pm.Tensor) or (scalar_type is not None and v.scalar_type != scalar_type):
        return None
    rank = len(v.sizes)
    if not min_rank <= rank <= min(max_rank, MAX_DIMS) or sorted(v.dim_order) != list(range(rank)):
        return None
    return v if all(s >= 0 for s in v.sizes) else None


def activation_dims(v: pm.EValue, nhwc_sizes: bool) -> tuple[int, int, int, int] | None:
    """tm_activation_arg: (N, H, W, C) of a 4-D int8 activation with NHWC bytes (legacy
    [N, C, H, W] sizes, or [N, H, W, C] sizes for the _nhwc ops), else None."""
    t = tensor_arg(v, pm.ScalarType.CHAR, 4, 4)
    if t is None:
        return None
    if nhwc_sizes:
        if not laid_out_as(t.sizes, t.dim_order, range(4)):
            return None
        n, h, w, c = t.sizes
    else:
        if not laid_out_as(t.sizes, t.dim_order, NHWC):
            return None
        n, c, h, w = t.sizes
    return int(n), int(h), int(w), int(c)


def pair(values: Sequence[int] | int, name: str = "value") -> tuple[int, int]:
    """A 1- or 2-item int list (or an int) as (h, w)."""
    items = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    if len(items) == 1:
        return items[0], items[0]
    if len(items) != 2:
        raise ValueError(f"{name} must have 1 or 2 items, got {items}")
    return items[0], items[1]


def pool_output_size(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """torch's pooling output size (dilation 1), including its ceil_mode rule
    (tm_pool_out_size, which gives 0 where this is negative)."""
    span = size + 2 * pad - kernel
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def is_scratch(t: pm.EValue, needed: int) -> bool:
    """tm_scratch_arg: a 1-D byte (uint8 or int8) tensor of at least `needed` bytes."""
    return (
        isinstance(t, pm.Tensor)
        and len(t.sizes) == 1
        and t.scalar_type in (pm.ScalarType.BYTE, pm.ScalarType.CHAR)
        and t.nbytes >= needed
    )


def fit_window(
    size: int, out: int, kernel: int, stride: int, dilation: int, pad_before: int
) -> tuple[int, int]:
    """(pad_after, crop) so that TOSA's exact rule (size - crop) + pad_before + pad_after -
    dilation*(kernel-1) - 1 == (out - 1) * stride holds: rows past the last window are cropped
    instead of padded. Both are >= 0."""
    need = (out - 1) * stride + dilation * (kernel - 1) + 1 - size - pad_before
    return (need, 0) if need >= 0 else (0, -need)
