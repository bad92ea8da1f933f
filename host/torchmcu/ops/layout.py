"""Memory-layout arithmetic the definitions share with the stages (reference/ops_layout.py
re-exports it)."""

from __future__ import annotations

from collections.abc import Sequence


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
