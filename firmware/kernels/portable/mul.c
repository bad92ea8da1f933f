/*
 * aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out): out = self * other in
 * float32, with torch broadcasting (see fp32_util.h). Any dim orders; out has the
 * broadcast sizes.
 */
#include "fp32_util.h"
#include "portable_kernels.h"

enum { A_SELF, A_OTHER, A_OUT, N_SCHEMA };

tm_status tm_portable_mul_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SCHEMA);
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *a = tm_f32_arg(args, A_SELF, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, a != NULL, A_SELF);
  const tm_tensor *b = tm_f32_arg(args, A_OTHER, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, b != NULL, A_OTHER);
  tm_tensor *out = tm_f32_arg(args, A_OUT, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, out != NULL, A_OUT);
  tm_f32_walk w;
  const int bad = tm_f32_broadcast(a, b, out, &w);
  TM_ARG_CHECK(ctx, bad == 0, bad == 1 ? A_SELF : (bad == 2 ? A_OTHER : A_OUT));

  const float *x = (const float *)a->data;
  const float *y = (const float *)b->data;
  float *o = (float *)out->data;
  if (tm_same_layout(a, out) && tm_same_layout(b, out)) {
    for (uint32_t i = 0; i < out->numel; ++i) {
      o[i] = x[i] * y[i];
    }
  } else if (tm_same_layout(a, out) && b->numel == 1) {
    const float v = y[0];
    for (uint32_t i = 0; i < out->numel; ++i) {
      o[i] = x[i] * v;
    }
  } else {
    for (uint32_t i = 0; i < out->numel; ++i) {
      o[w.off[2]] = x[w.off[0]] * y[w.off[1]];
      tm_f32_walk_next(&w);
    }
  }
  return TM_OK;
}
