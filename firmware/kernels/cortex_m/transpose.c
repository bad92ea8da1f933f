/* cortex_m::transpose.out - permutes the logical dims of a tensor of any element size
 * (docs/operators.md). Both tensors are addressed through their own dim orders. */
#include <string.h>

#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_TRANSPOSE, x)

/* Element strides of each logical dim. */
static void logical_strides(const tm_tensor *t, int64_t strides[TM_MAX_DIMS]) {
  int64_t step = 1;
  for (int k = (int)t->dim - 1; k >= 0; --k) {
    strides[t->dim_order[k]] = step;
    step *= t->sizes[t->dim_order[k]];
  }
}

tm_status tm_cortex_m_transpose_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_TRANSPOSE));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), -1, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_element_size(in->scalar_type) != 0, A(INPUT));
  const int rank = in->dim;
  const int64_t *items = NULL;
  uint32_t len = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(PERM), (uint32_t)rank, (uint32_t)rank, &items, &len), A(PERM));
  int perm[TM_MAX_DIMS];
  uint32_t seen = 0;
  for (int k = 0; k < rank; ++k) {
    TM_ARG_CHECK(ctx, items[k] >= -rank && items[k] < rank, A(PERM));
    perm[k] = (int)((items[k] + rank) % rank);
    TM_ARG_CHECK(ctx, (seen & (1u << perm[k])) == 0, A(PERM));
    seen |= 1u << perm[k];
  }
  tm_tensor *out = tm_tensor_arg(args, A(OUT), in->scalar_type, rank, rank);
  bool out_ok = out != NULL && tm_tensors_disjoint(in, out); /* element copies: no overlap */
  for (int k = 0; out_ok && k < rank; ++k) {
    out_ok = out->sizes[k] == in->sizes[perm[k]];
  }
  TM_ARG_CHECK(ctx, out_ok, A(OUT));

  const size_t esize = tm_element_size(in->scalar_type);
  int64_t in_strides[TM_MAX_DIMS], out_strides[TM_MAX_DIMS];
  logical_strides(in, in_strides);
  logical_strides(out, out_strides);
  /* Walk the output's logical index; src offset follows the permuted input strides. */
  int64_t src_step[TM_MAX_DIMS];
  for (int k = 0; k < rank; ++k) {
    src_step[k] = in_strides[perm[k]];
  }
  int32_t idx[TM_MAX_DIMS] = {0};
  const uint8_t *src = (const uint8_t *)in->data;
  uint8_t *dst = (uint8_t *)out->data;
  for (uint32_t n = 0; n < out->numel; ++n) {
    int64_t s = 0, d = 0;
    for (int k = 0; k < rank; ++k) {
      s += idx[k] * src_step[k];
      d += idx[k] * out_strides[k];
    }
    memcpy(dst + (size_t)d * esize, src + (size_t)s * esize, esize);
    for (int k = rank - 1; k >= 0; --k) {
      if (++idx[k] < out->sizes[k]) {
        break;
      }
      idx[k] = 0;
    }
  }
  return TM_OK;
}
