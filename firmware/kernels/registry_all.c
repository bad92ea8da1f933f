/* Registry holding every kernel of the tree (development builds without a selective-build yaml). */
#include "cortex_m/cortex_m_kernels.h"
#include "torchmcu/types.h"

static const tm_kernel_entry kAllKernels[] = {
    {"cortex_m::quantize_per_tensor", "out", tm_cortex_m_quantize_per_tensor_out},
    {"cortex_m::dequantize_per_tensor", "out", tm_cortex_m_dequantize_per_tensor_out},
    {"cortex_m::quantized_add", "out", tm_cortex_m_quantized_add_out},
    {"cortex_m::quantized_mul", "out", tm_cortex_m_quantized_mul_out},
    {"cortex_m::quantized_linear", "out", tm_cortex_m_quantized_linear_out},
    {"cortex_m::quantized_conv2d", "out", tm_cortex_m_quantized_conv2d_out},
    {"cortex_m::quantized_conv2d_nhwc", "out", tm_cortex_m_quantized_conv2d_nhwc_out},
    {"cortex_m::quantized_depthwise_conv2d", "out", tm_cortex_m_quantized_depthwise_conv2d_out},
    {"cortex_m::quantized_depthwise_conv2d_nhwc", "out", tm_cortex_m_quantized_depthwise_conv2d_nhwc_out},
    {"cortex_m::quantized_avg_pool2d", "out", tm_cortex_m_quantized_avg_pool2d_out},
    {"cortex_m::quantized_avg_pool2d_nhwc", "out", tm_cortex_m_quantized_avg_pool2d_nhwc_out},
    {"cortex_m::quantized_max_pool2d", "out", tm_cortex_m_quantized_max_pool2d_out},
    {"cortex_m::quantized_max_pool2d_nhwc", "out", tm_cortex_m_quantized_max_pool2d_nhwc_out},
    {"cortex_m::softmax", "out", tm_cortex_m_softmax_out},
    {"cortex_m::pad", "out", tm_cortex_m_pad_out},
    {"cortex_m::transpose", "out", tm_cortex_m_transpose_out},
};

const tm_kernel_registry tm_all_kernels = {kAllKernels, sizeof(kAllKernels) / sizeof(kAllKernels[0])};
