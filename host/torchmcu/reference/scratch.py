"""Scratch bytes each kernel needs: what the memory planner reserves for `scratch` arguments.

Mirrors the tm_<op>_scratch_bytes functions beside the C kernels. The scalar
kernels need none; a future MVE path that needs scratch changes both places.
"""

from __future__ import annotations


def quantized_conv2d_scratch_bytes(
    input_nhwc: tuple[int, int, int, int], weight_ohwi: tuple[int, int, int, int]
) -> int:
    del input_nhwc, weight_ohwi
    return 0


def quantized_depthwise_conv2d_scratch_bytes(
    input_nhwc: tuple[int, int, int, int], weight_1hwc: tuple[int, int, int, int]
) -> int:
    del input_nhwc, weight_1hwc
    return 0


def quantized_avg_pool2d_scratch_bytes(input_nhwc: tuple[int, int, int, int]) -> int:
    del input_nhwc
    return 0


SCRATCH_BYTES = {
    "cortex_m::quantized_conv2d": quantized_conv2d_scratch_bytes,
    "cortex_m::quantized_conv2d_nhwc": quantized_conv2d_scratch_bytes,
    "cortex_m::quantized_depthwise_conv2d": quantized_depthwise_conv2d_scratch_bytes,
    "cortex_m::quantized_depthwise_conv2d_nhwc": quantized_depthwise_conv2d_scratch_bytes,
    "cortex_m::quantized_avg_pool2d": quantized_avg_pool2d_scratch_bytes,
    "cortex_m::quantized_avg_pool2d_nhwc": quantized_avg_pool2d_scratch_bytes,
}
