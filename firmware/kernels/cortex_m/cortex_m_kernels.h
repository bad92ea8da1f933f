/* Entry points of the cortex_m kernels (one operator per .c file), for the registries. */
#ifndef TORCHMCU_KERNELS_CORTEX_M_KERNELS_H
#define TORCHMCU_KERNELS_CORTEX_M_KERNELS_H

#include <stddef.h>

#include "torchmcu/types.h"

#define TM_DECLARE_KERNEL(name) tm_status name(tm_kernel_context *ctx, tm_value *const *args, size_t nargs)

TM_DECLARE_KERNEL(tm_cortex_m_quantize_per_tensor_out);
TM_DECLARE_KERNEL(tm_cortex_m_dequantize_per_tensor_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_add_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_mul_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_linear_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_conv2d_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_conv2d_nhwc_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_depthwise_conv2d_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_depthwise_conv2d_nhwc_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_avg_pool2d_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_avg_pool2d_nhwc_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_max_pool2d_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_max_pool2d_nhwc_out);
TM_DECLARE_KERNEL(tm_cortex_m_softmax_out);
TM_DECLARE_KERNEL(tm_cortex_m_pad_out);
TM_DECLARE_KERNEL(tm_cortex_m_transpose_out);
TM_DECLARE_KERNEL(tm_cortex_m_quantized_activation_out);
TM_DECLARE_KERNEL(tm_torchmcu_slice_copy_out); /* torchmcu::slice_copy.out */

/* Scratch bytes the kernels need for their `scratch` argument (0 for the
 * scalar paths); mirrored by torchmcu.reference.scratch. */
size_t tm_quantized_conv2d_scratch_bytes(const int32_t input_nhwc[4], const int32_t weight_ohwi[4]);
size_t tm_quantized_depthwise_conv2d_scratch_bytes(const int32_t input_nhwc[4], const int32_t weight_1hwc[4]);
size_t tm_quantized_avg_pool2d_scratch_bytes(const int32_t input_nhwc[4]);

#endif /* TORCHMCU_KERNELS_CORTEX_M_KERNELS_H */
