/*
 * aten::relu.out(Tensor self, *, Tensor(a!) out):
 * out = max(self, 0) in float32 (NaN stays NaN, -0.0 becomes 0).
 * Elementwise; out has the input's sizes and memory layout.
 */
#include "fp32_util.h"
#include "portable_kernels.h"

enum { A_SELF, A_OUT, N_SCHEMA };

tm_status tm_portable_relu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SCHEMA);
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = NULL;
  tm_tensor *out = NULL;
  st = tm_f32_unary_args(ctx, args, A_SELF, A_OUT, &in, &out);
  if (st != TM_OK) {
    return st;
  }
  const float *x = (const float *)in->data;
  float *o = (float *)out->data;
  for (uint32_t i = 0; i < in->numel; ++i) {
    const float v = x[i];
    o[i] = v > 0.0f ? v : (v != v ? v : 0.0f);
  }
  return TM_OK;
}
