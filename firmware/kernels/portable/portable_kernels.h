/* Entry points of the portable (non cortex_m::) operators ExecuTorch's Cortex-M programs contain. */
#ifndef TORCHMCU_KERNELS_PORTABLE_KERNELS_H
#define TORCHMCU_KERNELS_PORTABLE_KERNELS_H

#include <stddef.h>

#include "torchmcu/types.h"

tm_status tm_portable_clone_dim_order_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);

/* aten:: float32 operators of ExecuTorch's portable library (docs/operators.md, "Portable fp32
 * operators"). */
tm_status tm_portable_addmm_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_mm_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_convolution_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_add_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_mul_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_relu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_sigmoid_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_tanh_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_softmax_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_mean_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_view_copy_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_permute_copy_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_cat_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_native_layer_norm_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_gelu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);

/* Integer predicate kernels of torch.cond (predicate.c). */
tm_status tm_portable_sum_intlist_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_gt_scalar_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_ge_scalar_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_lt_scalar_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_le_scalar_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);

/* Loop kernels of torch.map (prim.c); the runtime runs them as loop instructions. */
tm_status tm_prim_sym_size_int(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_portable_select_copy_int_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_prim_et_copy_index_tensor(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_prim_add_scalar(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_prim_sub_scalar(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);
tm_status tm_prim_eq_scalar(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);

#endif
