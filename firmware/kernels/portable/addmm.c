/*
 * aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1,
 * Tensor(a!) out), float32: out = beta * self + alpha * (mat1 @ mat2), mat1 [M, K],
 * mat2 [K, N], out [M, N]. self broadcasts to [M, N] (rank <= 2, torch rules: [N], [1, N],
 * [M, 1], [M, N], a single value). beta == 0 ignores self's values (NaN does not
 * propagate), as torch. Any dim orders (a transposed weight [K, N] with dim order [1, 0]
 * reads the [N, K] memory of a linear weight in place). Products summed in float32 in k
 * order. out must not share memory with mat1 or mat2.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_ADDMM, x)

tm_status tm_portable_addmm_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_ADDMM));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *bias = tm_f32_arg(args, A(SELF), 0, 2);
  TM_ARG_CHECK(ctx, bias != NULL, A(SELF));
  const tm_tensor *m1 = tm_f32_arg(args, A(MAT1), 2, 2);
  TM_ARG_CHECK(ctx, m1 != NULL, A(MAT1));
  const tm_tensor *m2 = tm_f32_arg(args, A(MAT2), 2, 2);
  TM_ARG_CHECK(ctx, m2 != NULL && m2->sizes[0] == m1->sizes[1], A(MAT2));
  float beta = 1.0f;
  float alpha = 1.0f;
  TM_ARG_CHECK(ctx, tm_f32_scalar_arg(args, A(BETA), &beta), A(BETA));
  TM_ARG_CHECK(ctx, tm_f32_scalar_arg(args, A(ALPHA), &alpha), A(ALPHA));
  tm_tensor *out = tm_f32_arg(args, A(OUT), 2, 2);
  TM_ARG_CHECK(ctx, tm_f32_matmul_out_ok(m1, m2, out), A(OUT));
  /* self's stride per output row / column (0 where it broadcasts). */
  int64_t bs[TM_MAX_DIMS] = {0};
  tm_f32_strides(bias, bs);
  int64_t bias_row = 0;
  int64_t bias_col = 0;
  const int32_t M = out->sizes[0];
  const int32_t N = out->sizes[1];
  if (bias->dim == 2) {
    TM_ARG_CHECK(ctx, (bias->sizes[0] == M || bias->sizes[0] == 1) && (bias->sizes[1] == N || bias->sizes[1] == 1),
                 A(SELF));
    bias_row = bias->sizes[0] == 1 ? 0 : bs[0];
    bias_col = bias->sizes[1] == 1 ? 0 : bs[1];
  } else if (bias->dim == 1) {
    TM_ARG_CHECK(ctx, bias->sizes[0] == N || bias->sizes[0] == 1, A(SELF));
    bias_col = bias->sizes[0] == 1 ? 0 : 1;
  }
  TM_ARG_CHECK(ctx, bias->numel != 0 || out->numel == 0, A(SELF));

  tm_f32_matmul(m1, m2, out, alpha, beta, (const float *)bias->data, bias_row, bias_col);
  return TM_OK;
}
