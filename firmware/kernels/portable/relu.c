/*
 * The relu family in float32, elementwise, out with the input's sizes and memory layout.
 * aten::relu.out(Tensor self, *, Tensor(a!) out):
 * out = max(self, 0) in float32 (NaN stays NaN, -0.0 becomes 0).
 * Elementwise; out has the input's sizes and memory layout.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_RELU, x)

static float relu_one(float v) {
  return v > 0.0f ? v : (v != v ? v : 0.0f);
}

tm_status tm_portable_relu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_RELU), A(SELF), A(OUT), relu_one);
}

/* The Scalar arguments at positions i .. i + count - 1, each a finite float, into v. */
static tm_status scalar_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, size_t count, float *v) {
  for (size_t k = 0; k < count; ++k) {
    TM_ARG_CHECK(ctx, tm_f32_scalar_arg(args, i + k, &v[k]), i + k);
  }
  return TM_OK;
}

/* The prologue of a relu-family kernel with `count` Scalars after self: the unary rule, then
 * the scalars, in that order. */
static tm_status family_args(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, size_t n_schema,
                             size_t i_self, size_t i_first, size_t i_out, size_t count, const tm_tensor **in,
                             tm_tensor **out, float *v) {
  const tm_status st = tm_f32_unary_args(ctx, args, nargs, n_schema, i_self, i_out, in, out);
  return st != TM_OK ? st : scalar_args(ctx, args, i_first, count, v);
}

/* aten::leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) out):
 * out = self > 0 ? self : self * negative_slope (NaN stays NaN). */
tm_status tm_portable_leaky_relu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  const tm_tensor *in = NULL;
  tm_tensor *out = NULL;
  float slope;
  const tm_status st = family_args(ctx, args, nargs, TM_NARGS(PORTABLE_LEAKY_RELU), TM_ARG(PORTABLE_LEAKY_RELU, SELF),
                                   TM_ARG(PORTABLE_LEAKY_RELU, NEGATIVE_SLOPE), TM_ARG(PORTABLE_LEAKY_RELU, OUT), 1,
                                   &in, &out, &slope);
  if (st != TM_OK) {
    return st;
  }
  const float *x = (const float *)in->data;
  float *o = (float *)out->data;
  for (uint32_t i = 0; i < in->numel; ++i) {
    o[i] = x[i] > 0.0f ? x[i] : x[i] * slope;
  }
  return TM_OK;
}

/* aten::hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out):
 * out = self below min_val -> min_val, above max_val -> max_val, else self (NaN stays NaN). */
tm_status tm_portable_hardtanh_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  const tm_tensor *in = NULL;
  tm_tensor *out = NULL;
  float bounds[2];
  const tm_status st = family_args(ctx, args, nargs, TM_NARGS(PORTABLE_HARDTANH), TM_ARG(PORTABLE_HARDTANH, SELF),
                                   TM_ARG(PORTABLE_HARDTANH, MIN_VAL), TM_ARG(PORTABLE_HARDTANH, OUT), 2, &in, &out,
                                   bounds);
  if (st != TM_OK) {
    return st;
  }
  const float *x = (const float *)in->data;
  float *o = (float *)out->data;
  for (uint32_t i = 0; i < in->numel; ++i) {
    o[i] = x[i] < bounds[0] ? bounds[0] : (x[i] > bounds[1] ? bounds[1] : x[i]);
  }
  return TM_OK;
}
