/*
 * aten::maximum.out(Tensor self, Tensor other, *, Tensor(a!) out) and
 * aten::minimum.out(...): elementwise max / min in float32 with torch broadcasting (see
 * fp32_util.h); a NaN operand gives NaN (torch's rule). Any dim orders.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define AMAX(x) TM_ARG(PORTABLE_MAXIMUM, x)
#define AMIN(x) TM_ARG(PORTABLE_MINIMUM, x)

static float max_one(float x, float y, float alpha) {
  (void)alpha;
  if (x != x || y != y) {
    return x != x ? x : y;
  }
  return x > y ? x : y;
}

static float min_one(float x, float y, float alpha) {
  (void)alpha;
  if (x != x || y != y) {
    return x != x ? x : y;
  }
  return x < y ? x : y;
}

tm_status tm_portable_maximum_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_binary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_MAXIMUM), AMAX(SELF), AMAX(OTHER), TM_F32_NO_ALPHA,
                              AMAX(OUT), max_one);
}

tm_status tm_portable_minimum_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_binary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_MINIMUM), AMIN(SELF), AMIN(OTHER), TM_F32_NO_ALPHA,
                              AMIN(OUT), min_one);
}
