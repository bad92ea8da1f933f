/*
 * dim_order_ops::_clone_dim_order.out - ExecuTorch's portable copy of a tensor into another
 * dim order (same logical values; ExecuTorch's Cortex-M flow inserts it e.g. before a flatten
 * of an NHWC activation). Schema: (Tensor self, *, bool non_blocking=False,
 * int[]? dim_order=None, Tensor(a!) out). Any element size; both tensors are addressed
 * through their own dim orders; a given dim_order must be out's.
 */
#include <string.h>

#include "cortex_m/kernel_args.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_CLONE_DIM_ORDER, x)

/* Element stride of each logical dim of t. */
static void logical_strides(const tm_tensor *t, int64_t strides[TM_MAX_DIMS]) {
  int64_t step = 1;
  for (int k = (int)t->dim - 1; k >= 0; --k) {
    strides[t->dim_order[k]] = step;
    step *= t->sizes[t->dim_order[k]];
  }
}

tm_status tm_portable_clone_dim_order_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_CLONE_DIM_ORDER));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(SELF), -1, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_element_size(in->scalar_type) != 0, A(SELF));
  bool non_blocking = false;
  TM_ARG_CHECK(ctx, tm_bool_arg(args, A(NON_BLOCKING), &non_blocking), A(NON_BLOCKING));
  tm_tensor *out = tm_tensor_arg(args, A(OUT), in->scalar_type, in->dim, in->dim);
  bool out_ok = out != NULL && tm_tensors_disjoint(in, out); /* element copies: no overlap */
  for (uint8_t k = 0; out_ok && k < in->dim; ++k) {
    out_ok = out->sizes[k] == in->sizes[k];
  }
  TM_ARG_CHECK(ctx, out_ok, A(OUT));
  if (!tm_is_none(args, A(DIM_ORDER))) {
    const int64_t *items = NULL;
    uint32_t len = 0;
    TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(DIM_ORDER), in->dim, in->dim, &items, &len), A(DIM_ORDER));
    for (uint8_t k = 0; k < in->dim; ++k) {
      TM_ARG_CHECK(ctx, items[k] == (int64_t)out->dim_order[k], A(DIM_ORDER));
    }
  }

  const size_t esize = tm_element_size(in->scalar_type);
  const uint8_t *src = (const uint8_t *)in->data;
  uint8_t *dst = (uint8_t *)out->data;
  int64_t in_strides[TM_MAX_DIMS], out_strides[TM_MAX_DIMS];
  logical_strides(in, in_strides);
  logical_strides(out, out_strides);
  int32_t idx[TM_MAX_DIMS] = {0};
  for (uint32_t n = 0; n < out->numel; ++n) {
    int64_t s = 0, d = 0;
    for (int k = 0; k < (int)in->dim; ++k) {
      s += idx[k] * in_strides[k];
      d += idx[k] * out_strides[k];
    }
    memcpy(dst + (size_t)d * esize, src + (size_t)s * esize, esize);
    for (int k = (int)in->dim - 1; k >= 0; --k) {
      if (++idx[k] < out->sizes[k]) {
        break;
      }
      idx[k] = 0;
    }
  }
  return TM_OK;
}
