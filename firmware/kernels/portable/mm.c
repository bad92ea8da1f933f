/*
 * aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out), float32: out = self @ mat2,
 * self [M, K], mat2 [K, N], out [M, N] (a linear layer without bias). Any dim orders.
 * Products summed in float32 in k order. out must not share memory with self or mat2.
 */
#include "fp32_util.h"
#include "portable_kernels.h"

enum { A_SELF, A_MAT2, A_OUT, N_SCHEMA };

tm_status tm_portable_mm_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SCHEMA);
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *m1 = tm_f32_arg(args, A_SELF, 2, 2);
  TM_ARG_CHECK(ctx, m1 != NULL, A_SELF);
  const tm_tensor *m2 = tm_f32_arg(args, A_MAT2, 2, 2);
  TM_ARG_CHECK(ctx, m2 != NULL && m2->sizes[0] == m1->sizes[1], A_MAT2);
  tm_tensor *out = tm_f32_arg(args, A_OUT, 2, 2);
  TM_ARG_CHECK(ctx, out != NULL && out->sizes[0] == m1->sizes[0] && out->sizes[1] == m2->sizes[1] &&
                        (out->numel == 0 || (out->data != m1->data && out->data != m2->data)),
               A_OUT);
  int64_t s1[TM_MAX_DIMS], s2[TM_MAX_DIMS], so[TM_MAX_DIMS];
  tm_f32_strides(m1, s1);
  tm_f32_strides(m2, s2);
  tm_f32_strides(out, so);
  const int32_t M = out->sizes[0];
  const int32_t N = out->sizes[1];
  const int32_t K = m1->sizes[1];
  const float *a = (const float *)m1->data;
  const float *b = (const float *)m2->data;
  float *o = (float *)out->data;
  for (int32_t i = 0; i < M; ++i) {
    for (int32_t j = 0; j < N; ++j) {
      const float *ai = a + i * s1[0];
      const float *bj = b + j * s2[1];
      float acc = 0.0f;
      for (int32_t k = 0; k < K; ++k) {
        acc += ai[k * s1[1]] * bj[k * s2[0]];
      }
      o[i * so[0] + j * so[1]] = acc;
    }
  }
  return TM_OK;
}
