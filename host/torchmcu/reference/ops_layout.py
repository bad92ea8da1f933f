"""Reference semantics of cortex_m::pad and cortex_m::transpose.

pad works on the physical (memory-order) array: its pre/post amounts are given
per memory dimension, right-aligned to 4-D. transpose works on the logical
array (sizes order); the caller maps memory to logical order and back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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


def transpose(input: np.ndarray, perm: Sequence[int]) -> np.ndarray:
    """out = input.permute(perm) (logical arrays; any dtype)."""
    x = np.asarray(input)
    rank = x.ndim
    items = [int(p) for p in perm]
    if len(items) != rank or any(p < -rank or p >= rank for p in items):
        raise ValueError(f"perm {items} is not a permutation of a rank-{rank} tensor's dims")
    items = [p % rank for p in items]
    if sorted(items) != list(range(rank)):
        raise ValueError(f"perm {items} is not a permutation")
    return np.ascontiguousarray(np.transpose(x, items))
