/*
 * aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
 * Tensor(a!) out), float32: the mean over the listed dims (each in [-rank, rank), no
 * repeats; None or [] reduces every dim). out keeps a reduced dim as size 1 when keepdim,
 * else drops it; dtype is None or Float (6). Any dim orders. Sums in float32 in input
 * order, then divides by the count (a reduction over zero elements gives NaN, as torch).
 * aten::amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out): the
 * maximum, NaN if any reduced element is NaN (-inf over zero elements).
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#include <math.h>

#define A(x) TM_ARG(PORTABLE_MEAN, x)

typedef enum { REDUCE_MEAN, REDUCE_AMAX } reduce_kind;

/* self, dim and keepdim are arguments 0-2 of both; mean's dtype is 3 and out 4, amax's out
 * is 3. */
static tm_status reduce_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, size_t want_nargs,
                            reduce_kind kind) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, want_nargs);
  if (st != TM_OK) {
    return st;
  }
  const size_t i_out = kind == REDUCE_AMAX ? TM_ARG(PORTABLE_AMAX, OUT) : A(OUT);
  const tm_tensor *in = tm_f32_arg(args, A(SELF), 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL, A(SELF));
  bool reduced[TM_MAX_DIMS] = {false};
  uint32_t ndims = 0;
  if (!tm_is_none(args, A(DIM))) {
    const int64_t *items = NULL;
    TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(DIM), 0, TM_MAX_DIMS, &items, &ndims), A(DIM));
    for (uint32_t k = 0; k < ndims; ++k) {
      int32_t d = 0;
      TM_ARG_CHECK(ctx, tm_f32_dim(items[k], in->dim, &d), A(DIM));
      TM_ARG_CHECK(ctx, in->dim == 0 || !reduced[d], A(DIM));
      reduced[d] = true;
    }
  }
  for (uint8_t d = 0; d < in->dim; ++d) {
    reduced[d] = reduced[d] || ndims == 0;
  }
  bool keepdim = false;
  TM_ARG_CHECK(ctx, tm_bool_arg(args, A(KEEPDIM), &keepdim), A(KEEPDIM));
  TM_ARG_CHECK(ctx,
               kind == REDUCE_AMAX || tm_is_none(args, A(DTYPE)) ||
                   (args[A(DTYPE)]->tag == TM_VALUE_INT && args[A(DTYPE)]->u.i == TM_FLOAT),
               A(DTYPE));

  /* Expected out sizes, and out's stride for each input dim (0 along reduced dims). */
  int32_t want[TM_MAX_DIMS];
  int rank = 0;
  for (uint8_t d = 0; d < in->dim; ++d) {
    if (!reduced[d] || keepdim) {
      want[rank++] = reduced[d] ? 1 : in->sizes[d];
    }
  }
  tm_tensor *out = tm_f32_arg(args, i_out, rank, rank);
  bool ok = out != NULL;
  for (int k = 0; ok && k < rank; ++k) {
    ok = out->sizes[k] == want[k];
  }
  /* out is zeroed before the sums: it must not be the input */
  TM_ARG_CHECK(ctx, ok && tm_tensors_disjoint(in, out), i_out);

  tm_f32_walk w = {0};
  int64_t out_strides[TM_MAX_DIMS];
  tm_f32_strides(out, out_strides);
  tm_f32_strides(in, w.strides[0]);
  w.dim = in->dim;
  uint32_t count = 1;
  for (int d = 0, k = 0; d < in->dim; ++d) {
    w.sizes[d] = in->sizes[d];
    if (reduced[d]) {
      count *= (uint32_t)in->sizes[d];
    }
    if (!reduced[d] || keepdim) {
      w.strides[2][d] = reduced[d] ? 0 : out_strides[k];
      ++k;
    }
  }
  const float *x = (const float *)in->data;
  float *o = (float *)out->data;
  for (uint32_t i = 0; i < out->numel; ++i) {
    o[i] = kind == REDUCE_AMAX ? -INFINITY : 0.0f;
  }
  for (uint32_t i = 0; i < in->numel; ++i) {
    const float v = x[w.off[0]];
    float *acc = &o[w.off[2]];
    if (kind == REDUCE_MEAN) {
      *acc += v;
    } else if (v > *acc || v != v) { /* NaN sticks: nothing compares above it */
      *acc = v;
    }
    tm_f32_walk_next(&w);
  }
  if (kind == REDUCE_MEAN) {
    const float n = (float)count;
    for (uint32_t i = 0; i < out->numel; ++i) {
      o[i] = o[i] / n; /* nothing reduced over: 0/0, NaN */
    }
  }
  return TM_OK;
}

tm_status tm_portable_mean_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return reduce_out(ctx, args, nargs, TM_NARGS(PORTABLE_MEAN), REDUCE_MEAN);
}

tm_status tm_portable_amax_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return reduce_out(ctx, args, nargs, TM_NARGS(PORTABLE_AMAX), REDUCE_AMAX);
}
