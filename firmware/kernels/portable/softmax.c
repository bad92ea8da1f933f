/*
 * aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out), float32:
 * out = exp(x - max) / sum(exp(x - max)) along dim (libm expf). dim in [-rank, rank);
 * half_to_float must be false (no half tensors here). Any dim order; out has the input's
 * sizes and memory layout.
 */
#include <math.h>

#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_SOFTMAX, x)

tm_status tm_portable_softmax_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  const tm_tensor *in = NULL;
  tm_tensor *out = NULL;
  const tm_status st = tm_f32_unary_args(ctx, args, nargs, TM_NARGS(PORTABLE_SOFTMAX), A(SELF), A(OUT), &in, &out);
  if (st != TM_OK) {
    return st;
  }
  TM_ARG_CHECK(ctx, args[A(DIM)]->tag == TM_VALUE_INT, A(DIM));
  int32_t dim = 0;
  TM_ARG_CHECK(ctx, tm_f32_dim(args[A(DIM)]->u.i, in->dim, &dim), A(DIM));
  bool half_to_float = true;
  TM_ARG_CHECK(ctx, tm_bool_arg(args, A(HALF_TO_FLOAT), &half_to_float) && !half_to_float, A(HALF_TO_FLOAT));

  /* Rows along dim: memory offset o starts a row when its coordinate along dim is 0. */
  int64_t strides[TM_MAX_DIMS];
  tm_f32_strides(in, strides);
  const uint32_t len = in->dim > 0 ? (uint32_t)in->sizes[dim] : 1u;
  const uint32_t step = in->dim > 0 ? (uint32_t)strides[dim] : 1u;
  const float *x = (const float *)in->data;
  float *o = (float *)out->data;
  for (uint32_t start = 0; start < in->numel; ++start) {
    if ((start / step) % len != 0) {
      continue;
    }
    float mx = x[start];
    for (uint32_t k = 1; k < len; ++k) {
      mx = fmaxf(mx, x[start + k * step]);
    }
    float sum = 0.0f;
    for (uint32_t k = 0; k < len; ++k) {
      const float e = expf(x[start + k * step] - mx);
      o[start + k * step] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (uint32_t k = 0; k < len; ++k) {
      o[start + k * step] *= inv;
    }
  }
  return TM_OK;
}
