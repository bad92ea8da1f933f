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

static float silu_one(float v) { return v * sigmoid_one(v); }

static float hardsigmoid_one(float v) { return fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f); }

static float hardswish_one(float v) { return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f; }

tm_status tm_portable_sigmoid_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_SIGMOID), TM_ARG(PORTABLE_SIGMOID, SELF),
                             TM_ARG(PORTABLE_SIGMOID, OUT), sigmoid_one);
}

/* The others share sigmoid's argument rules: TM_NARGS and the SELF/OUT positions of their own
 * operator (op_args.h). */
#define TM_UNARY_KERNEL(name, op)                                                                  \
  tm_status tm_portable_##name##_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) { \
    return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(op), TM_ARG(op, SELF), TM_ARG(op, OUT),  \
                               name##_one);                                                         \
  }

TM_UNARY_KERNEL(silu, PORTABLE_SILU)
TM_UNARY_KERNEL(hardsigmoid, PORTABLE_HARDSIGMOID)
TM_UNARY_KERNEL(hardswish, PORTABLE_HARDSWISH)
