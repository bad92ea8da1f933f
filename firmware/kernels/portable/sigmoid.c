/*
 * aten::sigmoid.out(Tensor self, *, Tensor(a!) out):
 * out = 1 / (1 + exp(-self)) in float32 (libm expf of -|self|, so no overflow).
 * Elementwise; out has the input's sizes and memory layout.
 */
#include <math.h>

#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_SIGMOID, x)

static float sigmoid_one(float v) {
  const float e = expf(-fabsf(v)); /* in (0, 1]: no overflow for either sign */
  return v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

tm_status tm_portable_sigmoid_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_SIGMOID), A(SELF), A(OUT), sigmoid_one);
}
