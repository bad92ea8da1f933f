/*
 * aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out):
 * out = self + alpha * other in float32, with torch broadcasting (see fp32_util.h).
 * Any dim orders; out has the broadcast sizes.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_ADD, x)

static float add_one(float x, float y, float alpha) {
  return x + alpha * y;
}

tm_status tm_portable_add_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tm_f32_binary_kernel(ctx, args, nargs, TM_NARGS(PORTABLE_ADD), A(SELF), A(OTHER), A(ALPHA), A(OUT), add_one);
}
