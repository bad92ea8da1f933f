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
  /* Walk the output's logical index with its longest dim as the inner run (a channel
   * shuffle's out [N*H*W, C/g, g] runs along N*H*W, not along g); the offsets move with the
   * index (odometer) instead of being recomputed per element. */
  int64_t src_step[TM_MAX_DIMS];
  int inner = rank - 1;
  for (int k = 0; k < rank; ++k) {
    src_step[k] = in_strides[perm[k]];
    if (out->sizes[k] > out->sizes[inner]) {
      inner = k;
    }
  }
  const int32_t run = out->sizes[inner];
  const int64_t ss = src_step[inner], ds = out_strides[inner];
  int32_t idx[TM_MAX_DIMS] = {0};
  const uint8_t *src = (const uint8_t *)in->data;
  uint8_t *dst = (uint8_t *)out->data;
  int64_t s = 0, d = 0;
  for (uint32_t n = 0; run > 0 && n < out->numel; n += (uint32_t)run) {
    if (esize == 1) {
      for (int32_t j = 0; j < run; ++j) {
        dst[d + j * ds] = src[s + j * ss];
      }
    } else {
      for (int32_t j = 0; j < run; ++j) {
        memcpy(dst + (size_t)(d + j * ds) * esize, src + (size_t)(s + j * ss) * esize, esize);
      }
    }
    for (int k = rank - 1; k >= 0; --k) {
      if (k == inner) {
        continue;
      }
      s += src_step[k];
      d += out_strides[k];
      if (++idx[k] < out->sizes[k]) {
        break;
      }
      s -= src_step[k] * out->sizes[k];
      d -= out_strides[k] * out->sizes[k];
      idx[k] = 0;
    }
  }
  return TM_OK;
}
