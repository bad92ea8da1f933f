"""Scratch bytes each kernel needs: what the memory planner reserves for `scratch` arguments.

Mirrors the tm_<op>_scratch_bytes functions beside the C kernels: a definition's
scratch_bytes (the convolutions': torchmcu/ops/defs/conv.py), then the ops not defined there
yet. The scalar kernels need none and accept any scratch; the Helium (MVE) paths want these
sizes and fall back to the scalar path with less, so the planner reserves them for every
target (one .pte runs on host and device).
"""

from __future__ import annotations

from collections.abc import Callable

from torchmcu.ops import views
from torchmcu.ops.defs.conv import (  # noqa: F401 (the stages and tests read them here)
    CONV_MVE_COLUMNS,
    quantized_conv2d_scratch_bytes,
    quantized_depthwise_conv2d_scratch_bytes,
)


def quantized_avg_pool2d_scratch_bytes(input_nhwc: tuple[int, int, int, int]) -> int:
    del input_nhwc
    return 0


# Registry ops first; the others until their family is defined in torchmcu.ops (step 6).
_LEGACY_SCRATCH_BYTES: dict[str, Callable[..., int]] = {
    "cortex_m::quantized_avg_pool2d": quantized_avg_pool2d_scratch_bytes,
    "cortex_m::quantized_avg_pool2d_nhwc": quantized_avg_pool2d_scratch_bytes,
}
SCRATCH_BYTES: dict[str, Callable[..., int]] = {**views.scratch_bytes(), **_LEGACY_SCRATCH_BYTES}
