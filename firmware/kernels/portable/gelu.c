/*
 * aten::gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out), float32:
 *   "none": out = x/2 * (1 + erf(x / sqrt(2)))                     (libm erff)
 *   "tanh": out = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))  (libm tanhf)
 * Any other string is an invalid argument. Elementwise; out has the input's sizes and
 * memory layout.
 */
#include <math.h>
#include <string.h>

#include "fp32_util.h"
#include "portable_kernels.h"

enum { A_SELF, A_APPROXIMATE, A_OUT, N_SCHEMA };

static bool string_is(const tm_value *v, const char *text) {
  const size_t n = strlen(text);
  return v->tag == TM_VALUE_STRING && v->u.string.chars != NULL && v->u.string.length == n &&
         memcmp(v->u.string.chars, text, n) == 0;
}

tm_status tm_portable_gelu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
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
  const bool use_tanh = string_is(args[A_APPROXIMATE], "tanh");
  TM_ARG_CHECK(ctx, use_tanh || string_is(args[A_APPROXIMATE], "none"), A_APPROXIMATE);

  const float *x = (const float *)in->data;
  float *o = (float *)out->data;
  if (use_tanh) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (uint32_t i = 0; i < in->numel; ++i) {
      const float v = x[i];
      o[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
  } else {
    const float r = 0.7071067811865476f; /* 1 / sqrt(2) */
    for (uint32_t i = 0; i < in->numel; ++i) {
      const float v = x[i];
      o[i] = 0.5f * v * (1.0f + erff(v * r));
    }
  }
  return TM_OK;
}
