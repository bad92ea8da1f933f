/*
 * aten::abs.out(Tensor self, *, Tensor(a!) out): out = |self| in float32 (the sign bit
 * cleared: NaN stays NaN). Elementwise; out has the input's sizes and memory layout.
 */
#include <math.h>

#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_ABS, x)

static float abs_one(float v) {
  return fabsf(v);
}

tm_status tm_portable_abs_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_unary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_ABS), A(SELF), A(OUT), abs_one);
}
