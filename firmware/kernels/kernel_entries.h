/* Entry points of every kernel (the registry's Kernel.symbol), for the kernel registry and the
 * kernels' own translation units, then the scratch-size functions of the kernels with a scratch
 * argument. Hand-written helpers stay in cortex_m/cortex_m_kernels.h and
 * portable/portable_kernels.h, which include this.
 *
 * Generated from host/torchmcu/ops/defs by `python -m torchmcu.ops.generate`: do not edit.
 */
#ifndef TM_KERNEL_ENTRIES_H
#define TM_KERNEL_ENTRIES_H

#include <stddef.h>
#include <stdint.h>

#include "torchmcu/types.h"

#define TM_DECLARE_KERNEL(name) tm_status name(tm_kernel_context *ctx, tm_value *const *args, size_t nargs)

TM_DECLARE_KERNEL(tm_cortex_m_quantize_per_tensor_out); /* cortex_m::quantize_per_tensor.out */
TM_DECLARE_KERNEL(tm_cortex_m_dequantize_per_tensor_out); /* cortex_m::dequantize_per_tensor.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_add_out); /* cortex_m::quantized_add.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_mul_out); /* cortex_m::quantized_mul.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_linear_out); /* cortex_m::quantized_linear.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_conv2d_out); /* cortex_m::quantized_conv2d.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_conv2d_nhwc_out); /* cortex_m::quantized_conv2d_nhwc.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_depthwise_conv2d_out); /* cortex_m::quantized_depthwise_conv2d.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_depthwise_conv2d_nhwc_out); /* cortex_m::quantized_depthwise_conv2d_nhwc.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_avg_pool2d_out); /* cortex_m::quantized_avg_pool2d.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_avg_pool2d_nhwc_out); /* cortex_m::quantized_avg_pool2d_nhwc.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_max_pool2d_out); /* cortex_m::quantized_max_pool2d.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_max_pool2d_nhwc_out); /* cortex_m::quantized_max_pool2d_nhwc.out */
TM_DECLARE_KERNEL(tm_cortex_m_softmax_out); /* cortex_m::softmax.out */
TM_DECLARE_KERNEL(tm_cortex_m_pad_out); /* cortex_m::pad.out */
TM_DECLARE_KERNEL(tm_cortex_m_transpose_out); /* cortex_m::transpose.out */
TM_DECLARE_KERNEL(tm_cortex_m_quantized_activation_out); /* cortex_m::quantized_activation.out */
TM_DECLARE_KERNEL(tm_torchmcu_slice_copy_out); /* torchmcu::slice_copy.out */
TM_DECLARE_KERNEL(tm_portable_clone_dim_order_out); /* dim_order_ops::_clone_dim_order.out */
TM_DECLARE_KERNEL(tm_portable_addmm_out); /* aten::addmm.out */
TM_DECLARE_KERNEL(tm_portable_mm_out); /* aten::mm.out */
TM_DECLARE_KERNEL(tm_portable_convolution_out); /* aten::convolution.out */
TM_DECLARE_KERNEL(tm_portable_add_out); /* aten::add.out */
TM_DECLARE_KERNEL(tm_portable_mul_out); /* aten::mul.out */
TM_DECLARE_KERNEL(tm_portable_relu_out); /* aten::relu.out */
TM_DECLARE_KERNEL(tm_portable_sigmoid_out); /* aten::sigmoid.out */
TM_DECLARE_KERNEL(tm_portable_tanh_out); /* aten::tanh.out */
TM_DECLARE_KERNEL(tm_portable_softmax_out); /* aten::_softmax.out */
TM_DECLARE_KERNEL(tm_portable_mean_out); /* aten::mean.out */
TM_DECLARE_KERNEL(tm_portable_view_copy_out); /* aten::view_copy.out */
TM_DECLARE_KERNEL(tm_portable_permute_copy_out); /* aten::permute_copy.out */
TM_DECLARE_KERNEL(tm_portable_cat_out); /* aten::cat.out */
TM_DECLARE_KERNEL(tm_portable_sum_intlist_out); /* aten::sum.IntList_out */
TM_DECLARE_KERNEL(tm_portable_gt_scalar_out); /* aten::gt.Scalar_out */
TM_DECLARE_KERNEL(tm_portable_ge_scalar_out); /* aten::ge.Scalar_out */
TM_DECLARE_KERNEL(tm_portable_lt_scalar_out); /* aten::lt.Scalar_out */
TM_DECLARE_KERNEL(tm_portable_le_scalar_out); /* aten::le.Scalar_out */
TM_DECLARE_KERNEL(tm_prim_sym_size_int); /* aten::sym_size.int */
TM_DECLARE_KERNEL(tm_portable_select_copy_int_out); /* aten::select_copy.int_out */
TM_DECLARE_KERNEL(tm_prim_et_copy_index_tensor); /* executorch_prim::et_copy_index.tensor */
TM_DECLARE_KERNEL(tm_prim_add_scalar); /* executorch_prim::add.Scalar */
TM_DECLARE_KERNEL(tm_prim_sub_scalar); /* executorch_prim::sub.Scalar */
TM_DECLARE_KERNEL(tm_prim_eq_scalar); /* executorch_prim::eq.Scalar */
TM_DECLARE_KERNEL(tm_portable_native_layer_norm_out); /* aten::native_layer_norm.out */
TM_DECLARE_KERNEL(tm_portable_gelu_out); /* aten::gelu.out */

/* Bytes a kernel's `scratch` argument must hold (0 for the scalar paths); mirrored by
 * torchmcu.reference.scratch. */
size_t tm_quantized_conv2d_scratch_bytes(const int32_t input_nhwc[4], const int32_t weight_ohwi[4]);
size_t tm_quantized_depthwise_conv2d_scratch_bytes(const int32_t input_nhwc[4], const int32_t weight_1hwc[4]);
size_t tm_quantized_avg_pool2d_scratch_bytes(const int32_t input_nhwc[4]);

#endif
