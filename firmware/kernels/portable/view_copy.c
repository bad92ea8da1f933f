/*
 * aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out), any handled dtype
 * (self and out the same): out holds self's elements in row-major logical
 * order under the new sizes. `size` may hold one -1 (inferred); its product must equal
 * self's element count and out's sizes must equal it. Both tensors must be contiguous in
 * memory (a channels-last tensor is first made contiguous by _clone_dim_order); the copy
 * is then a byte copy (memmove: self and out may share memory).
 */
#include <string.h>

#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_VIEW_COPY, x)

tm_status tm_portable_view_copy_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_VIEW_COPY));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(SELF), -1, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_element_size(in->scalar_type) != 0 && tm_has_layout(in, TM_LAYOUT_CONTIGUOUS),
               A(SELF));
  const int64_t *items = NULL;
  uint32_t len = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(SIZE), 0, TM_MAX_DIMS, &items, &len), A(SIZE));
  int inferred = -1;
  uint64_t known = 1;
  for (uint32_t k = 0; k < len; ++k) {
    if (items[k] == -1) {
      TM_ARG_CHECK(ctx, inferred < 0, A(SIZE));
      inferred = (int)k;
    } else {
      TM_ARG_CHECK(ctx, items[k] >= 0 && items[k] <= INT32_MAX, A(SIZE));
      known *= (uint64_t)items[k];
      TM_ARG_CHECK(ctx, known <= UINT32_MAX, A(SIZE));
    }
  }
  int64_t fill = 0;
  if (inferred >= 0) {
    TM_ARG_CHECK(ctx, known != 0 && in->numel % known == 0, A(SIZE));
    fill = (int64_t)(in->numel / known);
  } else {
    TM_ARG_CHECK(ctx, known == in->numel, A(SIZE));
  }
  tm_tensor *out = tm_tensor_arg(args, A(OUT), in->scalar_type, (int)len, (int)len);
  bool ok = out != NULL && tm_has_layout(out, TM_LAYOUT_CONTIGUOUS);
  for (uint32_t k = 0; ok && k < len; ++k) {
    ok = out->sizes[k] == ((int)k == inferred ? fill : items[k]);
  }
  TM_ARG_CHECK(ctx, ok, A(OUT));
  if (in->nbytes != 0 && out->data != in->data) {
    memmove(out->data, in->data, in->nbytes);
  }
  return TM_OK;
}
