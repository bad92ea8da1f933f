/*
 * aten::tanh.out(Tensor self, *, Tensor(a!) out):
 * out = tanh(self) in float32 (libm tanhf).
 * Elementwise; out has the input's sizes and memory layout.
 */
#include <math.h>

#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_TANH, x)

static float tanh_one(float v) {
  return tanhf(v);
}

tm_status tm_portable_tanh_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_TANH), A(SELF), A(OUT), tanh_one);
}
