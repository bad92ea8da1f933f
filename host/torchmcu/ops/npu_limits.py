"""What Vela 5.2 takes per Ethos-U family, as the definitions' NPU support rules need it
(npu/tosa/support.py re-exports it; its docstring says how the limits were measured)."""

from __future__ import annotations

from collections.abc import Sequence

FAMILIES = ("u55", "u65", "u85")
STRIDE_LIMIT = {"u55": 3, "u65": 3}  # convolution and pooling strides (U85: none)
POOL_KERNEL_Y_MAX = 256
POOL_KERNEL_AREA_MAX = 65536
DIM_MAX = 65536


def stride_reason(
    kind: str, family: str, stride: Sequence[int], out_hw: Sequence[int]
) -> str | None:
    """Why a window op of `kind` with `stride` cannot run on `family`, None if it can: an axis
    whose output is 1 is lowered with stride 1, so only the others count."""
    limit = STRIDE_LIMIT.get(family)
    if limit is None:
        return None
    for s, o in zip(stride, out_hw):
        if s > limit and o > 1:
            return f"{kind} stride {s} exceeds {family.upper()}'s limit of {limit}"
    return None
