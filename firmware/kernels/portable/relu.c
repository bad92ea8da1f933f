/*
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
