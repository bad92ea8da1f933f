"""Limits of the Ethos-U NPUs that definitions' support rules share (npu/tosa/support.py
documents how they were measured)."""

from __future__ import annotations

from collections.abc import Sequence

STRIDE_LIMIT = {"u55": 3, "u65": 3}  # convolution and pooling strides (U85: none)


def stride_reason(
    kind: str, family: str, stride: Sequence[int], out_hw: Sequence[int]
) -> str | None:
    """Why a window op of `kind` ("convolution", "avg pool"...) with this stride cannot run on
    `family`, if it cannot: an axis whose output is 1 is lowered with stride 1."""
    limit = STRIDE_LIMIT.get(family)
    if limit is None:
        return None
    for s, o in zip(stride, out_hw):
        if s > limit and o > 1:
            return f"{kind} stride {s} exceeds {family.upper()}'s limit of {limit}"
    return None
