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
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_GELU, x)

static bool string_is(const tm_value *v, const char *text) {
  const size_t n = strlen(text);
  return v->tag == TM_VALUE_STRING && v->u.string.chars != NULL && v->u.string.length == n &&
         memcmp(v->u.string.chars, text, n) == 0;
}

static float gelu_tanh(float v) {
  const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

static float gelu_erf(float v) {
  const float r = 0.7071067811865476f; /* 1 / sqrt(2) */
  return 0.5f * v * (1.0f + erff(v * r));
}

tm_status tm_portable_gelu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  const tm_tensor *in = NULL;
  tm_tensor *out = NULL;
  const tm_status st = tm_f32_unary_args(ctx, args, nargs, TM_NARGS(PORTABLE_GELU), A(SELF), A(OUT), &in, &out);
  if (st != TM_OK) {
    return st;
  }
  const bool use_tanh = string_is(args[A(APPROXIMATE)], "tanh");
  TM_ARG_CHECK(ctx, use_tanh || string_is(args[A(APPROXIMATE)], "none"), A(APPROXIMATE));

  if (use_tanh) {
    tm_f32_map(in, out, gelu_tanh);
  } else {
    tm_f32_map(in, out, gelu_erf);
  }
  return TM_OK;
}
