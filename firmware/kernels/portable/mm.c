/*
 * aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out), float32: out = self @ mat2,
 * self [M, K], mat2 [K, N], out [M, N] (a linear layer without bias). Any dim orders.
 * Products summed in float32 in k order. out must not share memory with self or mat2.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_MM, x)

tm_status tm_portable_mm_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_MM));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *m1 = tm_f32_arg(args, A(SELF), 2, 2);
  TM_ARG_CHECK(ctx, m1 != NULL, A(SELF));
  const tm_tensor *m2 = tm_f32_arg(args, A(MAT2), 2, 2);
  TM_ARG_CHECK(ctx, m2 != NULL && m2->sizes[0] == m1->sizes[1], A(MAT2));
  tm_tensor *out = tm_f32_arg(args, A(OUT), 2, 2);
  TM_ARG_CHECK(ctx, tm_f32_matmul_out_ok(m1, m2, out), A(OUT));
  tm_f32_matmul(m1, m2, out, 1.0f, 0.0f, NULL, 0, 0);
  return TM_OK;
}
