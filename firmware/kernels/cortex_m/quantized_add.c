/* cortex_m::quantized_add.out - CMSIS-NN int8 add (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"

enum {
  A_SELF,
  A_SELF_ZP,
  A_SELF_MULT,
  A_SELF_SHIFT,
  A_OTHER,
  A_OTHER_ZP,
  A_OTHER_MULT,
  A_OTHER_SHIFT,
  A_OUT_ZP,
  A_OUT_MULT,
  A_OUT_SHIFT,
  A_ACT_MIN,
  A_ACT_MAX,
  A_OUT,
  N_SCHEMA
};

#define ADD_INPUT_LEFT_SHIFT 20

typedef struct {
  int32_t a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_zp, out_mult, out_shift, act_min, act_max;
} add_params;

static void add_scalar(const int8_t *a, const int8_t *b, int8_t *out, const tm_binary_shape *shape,
                       const add_params *p) {
  for (uint32_t i = 0; i < shape->numel; ++i) {
    const int64_t av = ((int64_t)a[i % shape->a_period] - p->a_zp) * ((int64_t)1 << ADD_INPUT_LEFT_SHIFT);
    const int64_t bv = ((int64_t)b[i % shape->b_period] - p->b_zp) * ((int64_t)1 << ADD_INPUT_LEFT_SHIFT);
    const int64_t sum = tm_requantize(av, p->a_mult, p->a_shift) + tm_requantize(bv, p->b_mult, p->b_shift);
    const int64_t r = tm_requantize(sum, p->out_mult, p->out_shift) + p->out_zp;
    out[i] = (int8_t)tm_clamp64(r, p->act_min, p->act_max);
  }
}

tm_status tm_cortex_m_quantized_add_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SCHEMA);
  if (st != TM_OK) {
    return st;
  }
  add_params p;
  const tm_tensor *a = tm_tensor_arg(args, A_SELF, TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, a != NULL, A_SELF);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_SELF_ZP, INT8_MIN, INT8_MAX, &p.a_zp), A_SELF_ZP);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_SELF_MULT, INT32_MIN, INT32_MAX, &p.a_mult), A_SELF_MULT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_SELF_SHIFT, -31, 31, &p.a_shift), A_SELF_SHIFT);
  const tm_tensor *b = tm_tensor_arg(args, A_OTHER, TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, b != NULL, A_OTHER);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OTHER_ZP, INT8_MIN, INT8_MAX, &p.b_zp), A_OTHER_ZP);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OTHER_MULT, INT32_MIN, INT32_MAX, &p.b_mult), A_OTHER_MULT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OTHER_SHIFT, -31, 31, &p.b_shift), A_OTHER_SHIFT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OUT_ZP, INT8_MIN, INT8_MAX, &p.out_zp), A_OUT_ZP);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OUT_MULT, INT32_MIN, INT32_MAX, &p.out_mult), A_OUT_MULT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OUT_SHIFT, -31, 31, &p.out_shift), A_OUT_SHIFT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_ACT_MIN, INT8_MIN, INT8_MAX, &p.act_min), A_ACT_MIN);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_ACT_MAX, p.act_min, INT8_MAX, &p.act_max), A_ACT_MAX);
  tm_tensor *out = NULL;
  tm_binary_shape shape;
  st = tm_binary_out_arg(ctx, args, A_SELF, A_OTHER, A_OUT, &out, &shape);
  if (st != TM_OK) {
    return st;
  }

  /* An MVE path would be selected here under __ARM_FEATURE_MVE; only the scalar path exists. */
  add_scalar((const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, &shape, &p);
  return TM_OK;
}
