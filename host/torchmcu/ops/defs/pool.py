"""cortex_m::quantized_avg_pool2d and quantized_max_pool2d, each with its _nhwc alias."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, Npu, nhwc_variant, op

_AVG_SCRATCH = "tm_quantized_avg_pool2d_scratch_bytes"

QUANTIZED_AVG_POOL2D = op(
    "cortex_m::quantized_avg_pool2d.out(Tensor input, int[] kernel_size, int[] stride,"
    " int[] padding, bool ceil_mode, int zero_point, int multiplier, int shift, Tensor scratch, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel(
        "tm_cortex_m_quantized_avg_pool2d_out",
        "cortex_m/quantized_avg_pool2d.c",
        scratch_c=_AVG_SCRATCH,
        table_index=9,
    ),
    npu=Npu(),
)

QUANTIZED_AVG_POOL2D_NHWC = nhwc_variant(
    QUANTIZED_AVG_POOL2D,
    Kernel(
        "tm_cortex_m_quantized_avg_pool2d_nhwc_out",
        "cortex_m/quantized_avg_pool2d.c",
        scratch_c=_AVG_SCRATCH,
        table_index=10,
    ),
)

QUANTIZED_MAX_POOL2D = op(
    "cortex_m::quantized_max_pool2d.out(Tensor input, int[] kernel_size, int[] stride,"
    " int[] padding, int[] dilation, bool ceil_mode, int input_zero_point, int output_zero_point,"
    " int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel(
        "tm_cortex_m_quantized_max_pool2d_out", "cortex_m/quantized_max_pool2d.c", table_index=11
    ),
    npu=Npu(),
)

QUANTIZED_MAX_POOL2D_NHWC = nhwc_variant(
    QUANTIZED_MAX_POOL2D,
    Kernel(
        "tm_cortex_m_quantized_max_pool2d_nhwc_out",
        "cortex_m/quantized_max_pool2d.c",
        table_index=12,
    ),
)
