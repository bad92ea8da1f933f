/*
 * The sigmoid family, float32, elementwise (out has the input's sizes and memory layout):
 *   aten::sigmoid.out(Tensor self, *, Tensor(a!) out):     1 / (1 + exp(-self)) (libm expf of
 *                                                           -|self|, so no overflow)
 *   aten::silu.out(Tensor self, *, Tensor(a!) out):        self * sigmoid(self)
 *   aten::hardsigmoid.out(Tensor self, *, Tensor(a!) out): min(max(self / 6 + 1/2, 0), 1)
 *   aten::hardswish.out(Tensor self, *, Tensor(a!) out):   self * min(max(self + 3, 0), 6) / 6
 */
#include <math.h>

#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

static float sigmoid_one(float v) {
  const float e = expf(-fabsf(v)); /* in (0, 1]: no overflow for either sign */
  return v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

tm_status tm_portable_sigmoid_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_SIGMOID), TM_ARG(PORTABLE_SIGMOID, SELF),
                             TM_ARG(PORTABLE_SIGMOID, OUT), sigmoid_one);
}

static float silu_one(float v) { return v * sigmoid_one(v); }

tm_status tm_portable_silu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_SILU), TM_ARG(PORTABLE_SILU, SELF),
                             TM_ARG(PORTABLE_SILU, OUT), silu_one);
}

static float hardsigmoid_one(float v) { return fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f); }

tm_status tm_portable_hardsigmoid_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_HARDSIGMOID), TM_ARG(PORTABLE_HARDSIGMOID, SELF),
                             TM_ARG(PORTABLE_HARDSIGMOID, OUT), hardsigmoid_one);
}

static float hardswish_one(float v) { return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f; }

tm_status tm_portable_hardswish_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_HARDSWISH), TM_ARG(PORTABLE_HARDSWISH, SELF),
                             TM_ARG(PORTABLE_HARDSWISH, OUT), hardswish_one);
}
