/*
 * aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out): out = self * other in
 * float32, with torch broadcasting (see fp32_util.h). Any dim orders; out has the
 * broadcast sizes.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_MUL, x)

static float mul_one(float x, float y, float alpha) {
  (void)alpha;
  return x * y;
}

tm_status tm_portable_mul_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_binary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_MUL), A(SELF), A(OTHER), TM_F32_NO_ALPHA, A(OUT),
                              mul_one);
}
