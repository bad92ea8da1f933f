"""Scratch bytes each kernel needs: what the memory planner reserves for `scratch` arguments.

Mirrors the tm_<op>_scratch_bytes functions beside the C kernels. The scalar
kernels need none and accept any scratch; the Helium (MVE) paths want these sizes
and fall back to the scalar path with less, so the planner reserves them for every
target (one .pte runs on host and device).
"""

from __future__ import annotations

from torchmcu.ops import views

CONV_MVE_COLUMNS = 4  # output pixels the MVE conv computes at once (quantized_conv2d.c)


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def quantized_conv2d_scratch_bytes(
    input_nhwc: tuple[int, int, int, int], weight_ohwi: tuple[int, int, int, int]
) -> int:
    """16 bytes alignment slack, int32 per-channel constants, interleaved and staging columns."""
    del input_nhwc
    cout, kh, kw, cin_g = weight_ohwi
    staging = 1 if kh * kw > 1 else 0  # im2col staging column (1x1 columns are copied directly)
    return 16 + 4 * _round_up(cout, 4) + (CONV_MVE_COLUMNS + staging) * _round_up(kh * kw * cin_g, 16)


def quantized_depthwise_conv2d_scratch_bytes(
    input_nhwc: tuple[int, int, int, int], weight_1hwc: tuple[int, int, int, int]
) -> int:
    del input_nhwc, weight_1hwc
    return 0


# Registry ops first (torchmcu/ops/defs: the pools); the others until their family moves.
_LEGACY_SCRATCH_BYTES = {
    "cortex_m::quantized_conv2d": quantized_conv2d_scratch_bytes,
    "cortex_m::quantized_conv2d_nhwc": quantized_conv2d_scratch_bytes,
    "cortex_m::quantized_depthwise_conv2d": quantized_depthwise_conv2d_scratch_bytes,
    "cortex_m::quantized_depthwise_conv2d_nhwc": quantized_depthwise_conv2d_scratch_bytes,
}
SCRATCH_BYTES = {**views.scratch_bytes(), **_LEGACY_SCRATCH_BYTES}
