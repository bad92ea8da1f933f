"""cortex_m::quantized_conv2d and quantized_depthwise_conv2d, each with its _nhwc alias."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, Npu, nhwc_variant, op

_CONV_SCRATCH = "tm_quantized_conv2d_scratch_bytes"
_DEPTHWISE_SCRATCH = "tm_quantized_depthwise_conv2d_scratch_bytes"

QUANTIZED_CONV2D = op(
    "cortex_m::quantized_conv2d.out(Tensor input, Tensor weight, Tensor? bias, int[] stride,"
    " int[] padding, int[] dilation, int input_offset, int output_offset,"
    " Tensor requantize_multipliers, Tensor requantize_shifts, int activation_min,"
    " int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel(
        "tm_cortex_m_quantized_conv2d_out",
        "cortex_m/quantized_conv2d.c",
        scratch_c=_CONV_SCRATCH,
        table_index=5,
    ),
    npu=Npu(pad_fold="input_offset"),
)

QUANTIZED_CONV2D_NHWC = nhwc_variant(
    QUANTIZED_CONV2D,
    Kernel(
        "tm_cortex_m_quantized_conv2d_nhwc_out",
        "cortex_m/quantized_conv2d.c",
        scratch_c=_CONV_SCRATCH,
        table_index=6,
    ),
)

QUANTIZED_DEPTHWISE_CONV2D = op(
    "cortex_m::quantized_depthwise_conv2d.out(Tensor input, Tensor weight, Tensor? bias,"
    " int[] stride, int[] padding, int[] dilation, int depth_multiplier, int input_offset,"
    " int output_offset, Tensor requantize_multipliers, Tensor requantize_shifts,"
    " int activation_min, int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel(
        "tm_cortex_m_quantized_depthwise_conv2d_out",
        "cortex_m/quantized_depthwise_conv2d.c",
        scratch_c=_DEPTHWISE_SCRATCH,
        table_index=7,
    ),
    npu=Npu(pad_fold="input_offset"),
)

QUANTIZED_DEPTHWISE_CONV2D_NHWC = nhwc_variant(
    QUANTIZED_DEPTHWISE_CONV2D,
    Kernel(
        "tm_cortex_m_quantized_depthwise_conv2d_nhwc_out",
        "cortex_m/quantized_depthwise_conv2d.c",
        scratch_c=_DEPTHWISE_SCRATCH,
        table_index=8,
    ),
)
