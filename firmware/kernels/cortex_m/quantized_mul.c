/* cortex_m::quantized_mul.out - CMSIS-NN int8 mul (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"

enum { A_SELF, A_SELF_ZP, A_OTHER, A_OTHER_ZP, A_OUT_ZP, A_OUT_MULT, A_OUT_SHIFT, A_OUT, N_SCHEMA };

static void mul_scalar(const int8_t *a, const int8_t *b, int8_t *out, const tm_binary_shape *shape,
                       int32_t a_zp, int32_t b_zp, int32_t out_zp, int32_t mult, int32_t shift) {
  for (uint32_t i = 0; i < shape->numel; ++i) {
    const int64_t prod = ((int64_t)a[i % shape->a_period] - a_zp) * ((int64_t)b[i % shape->b_period] - b_zp);
    out[i] = (int8_t)tm_clamp64(tm_requantize(prod, mult, shift) + out_zp, INT8_MIN, INT8_MAX);
  }
}

tm_status tm_cortex_m_quantized_mul_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SCHEMA);
  if (st != TM_OK) {
    return st;
  }
  int32_t a_zp = 0, b_zp = 0, out_zp = 0, mult = 0, shift = 0;
  const tm_tensor *a = tm_tensor_arg(args, A_SELF, TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, a != NULL, A_SELF);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_SELF_ZP, INT8_MIN, INT8_MAX, &a_zp), A_SELF_ZP);
  const tm_tensor *b = tm_tensor_arg(args, A_OTHER, TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, b != NULL, A_OTHER);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OTHER_ZP, INT8_MIN, INT8_MAX, &b_zp), A_OTHER_ZP);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OUT_ZP, INT8_MIN, INT8_MAX, &out_zp), A_OUT_ZP);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OUT_MULT, INT32_MIN, INT32_MAX, &mult), A_OUT_MULT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OUT_SHIFT, -31, 31, &shift), A_OUT_SHIFT);
  tm_tensor *out = NULL;
  tm_binary_shape shape;
  st = tm_binary_out_arg(ctx, args, A_SELF, A_OTHER, A_OUT, &out, &shape);
  if (st != TM_OK) {
    return st;
  }

  /* An MVE path would be selected here under __ARM_FEATURE_MVE; only the scalar path exists. */
  mul_scalar((const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, &shape, a_zp, b_zp, out_zp,
             mult, shift);
  return TM_OK;
}
