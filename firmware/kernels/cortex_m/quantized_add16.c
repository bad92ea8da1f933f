/* torchmcu::quantized_add16.out - the residual stream's add: int8 or int16 operands, int16
 * out (docs/operators.md). quantized_add's steps with CMSIS-NN's int16 headroom, 2^15. */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"
#include "mve_requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(TORCHMCU_QUANTIZED_ADD16, x)

#define ADD16_INPUT_LEFT_SHIFT 15

typedef struct {
  int32_t a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_zp, out_mult, out_shift, act_min, act_max;
} add16_params;

/* An operand: its data and whether its elements are int16 (else int8). */
typedef struct {
  const void *data;
  bool wide;
} add16_operand;

static inline int32_t element(const add16_operand *x, uint32_t i) {
  return x->wide ? ((const int16_t *)x->data)[i] : ((const int8_t *)x->data)[i];
}

static inline int16_t add16_one(int32_t a, int32_t b, const add16_params *p) {
  const int64_t av = ((int64_t)a - p->a_zp) * ((int64_t)1 << ADD16_INPUT_LEFT_SHIFT);
  const int64_t bv = ((int64_t)b - p->b_zp) * ((int64_t)1 << ADD16_INPUT_LEFT_SHIFT);
  const int64_t sum = tm_requantize(av, p->a_mult, p->a_shift) + tm_requantize(bv, p->b_mult, p->b_shift);
  const int64_t r = tm_requantize(sum, p->out_mult, p->out_shift) + p->out_zp;
  return (int16_t)tm_clamp64(r, p->act_min, p->act_max);
}

/* Every element of out in memory order: the period forms (a[i % a_period]) or the general
 * broadcast's nested loops, an operand advancing its step per element of each dim. */
static void add16_scalar(const add16_operand *a, const add16_operand *b, int16_t *out, const tm_binary_shape *shape,
                         const add16_params *p) {
  if (shape->dims == 0) {
    for (uint32_t i = 0; i < shape->numel; ++i) {
      out[i] = add16_one(element(a, i % shape->a_period), element(b, i % shape->b_period), p);
    }
    return;
  }
  uint32_t index[TM_MAX_DIMS] = {0};
  uint32_t ia = 0, ib = 0;
  for (uint32_t i = 0; i < shape->numel; ++i) {
    out[i] = add16_one(element(a, ia), element(b, ib), p);
    for (uint32_t k = shape->dims; k-- > 0;) {
      ia += shape->a_step[k];
      ib += shape->b_step[k];
      if (++index[k] < shape->size[k]) {
        break;
      }
      index[k] = 0;
      ia -= shape->a_step[k] * shape->size[k];
      ib -= shape->b_step[k] * shape->size[k];
    }
  }
}

#if TM_KERNELS_USE_MVE
/*
 * Helium path for operands of out's layout (the residual stream's adds): four int32 lanes
 * per step with one predicated tail, quantized_add's add4 with the 2^15 headroom folded into
 * the saturating left shift (|x - zp| * 2^15 < 2^31 for either operand type). A multiplier
 * of INT32_MIN is left to the scalar loop (VQRDMULH would saturate where the reference does
 * not).
 */
static inline __attribute__((always_inline)) int32x4_t load4(const add16_operand *x, uint32_t i, mve_pred16_t pred) {
  return x->wide ? vldrhq_z_s32((const int16_t *)x->data + i, pred) : vldrbq_z_s32((const int8_t *)x->data + i, pred);
}

/* The step of four lanes, every parameter a local (the stores cannot alias them). */
typedef struct {
  int32_t a_zp, a_mult, a_left, a_right, b_zp, b_mult, b_left, b_right, out_mult, out_left, out_right, out_zp;
} add16_regs;

static inline __attribute__((always_inline)) int32x4_t add16_4(int32x4_t a, int32x4_t b, const add16_regs r,
                                                               int32x4_t lo, int32x4_t hi) {
  a = tm_mve_requantize_n(vsubq_n_s32(a, r.a_zp), r.a_mult, r.a_left, r.a_right);
  b = tm_mve_requantize_n(vsubq_n_s32(b, r.b_zp), r.b_mult, r.b_left, r.b_right);
  const int32x4_t v = tm_mve_requantize_n(vqaddq_s32(a, b), r.out_mult, r.out_left, r.out_right);
  return vminq_s32(vmaxq_s32(vqaddq_n_s32(v, r.out_zp), lo), hi);
}

static inline __attribute__((always_inline)) void add16_run(const add16_operand *a, const add16_operand *b,
                                                            int16_t *out, uint32_t n, const add16_params *p,
                                                            const tm_mve_add_shifts *s) {
  const add16_regs r = {p->a_zp,   p->a_mult,  s->a_left,  s->a_right,   p->b_zp,   p->b_mult,
                        s->b_left, s->b_right, p->out_mult, s->out_left, s->out_right, p->out_zp};
  const int32x4_t lo = vdupq_n_s32(p->act_min);
  const int32x4_t hi = vdupq_n_s32(p->act_max);
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    vstrhq_s32(out + i, add16_4(load4(a, i, 0xFFFF), load4(b, i, 0xFFFF), r, lo, hi));
  }
  if (i < n) {
    const mve_pred16_t pred = vctp32q(n - i);
    vstrhq_p_s32(out + i, add16_4(load4(a, i, pred), load4(b, i, pred), r, lo, hi), pred);
  }
}

static bool add16_mve(const add16_operand *a, const add16_operand *b, int16_t *out, const tm_binary_shape *shape,
                      const add16_params *p) {
  if (p->a_mult == INT32_MIN || p->b_mult == INT32_MIN || shape->dims != 0 || shape->a_period != shape->numel ||
      shape->b_period != shape->numel) {
    return false;
  }
  const tm_mve_add_shifts s = tm_mve_add_shifts_of(ADD16_INPUT_LEFT_SHIFT, p->a_shift, p->b_shift, p->out_shift);
  /* one loop per operand type pair, the loads known at compile time */
  const add16_operand a8 = {a->data, false}, a16 = {a->data, true};
  const add16_operand b8 = {b->data, false}, b16 = {b->data, true};
  if (a->wide && b->wide) {
    add16_run(&a16, &b16, out, shape->numel, p, &s);
  } else if (a->wide) {
    add16_run(&a16, &b8, out, shape->numel, p, &s);
  } else if (b->wide) {
    add16_run(&a8, &b16, out, shape->numel, p, &s);
  } else {
    add16_run(&a8, &b8, out, shape->numel, p, &s);
  }
  return true;
}
#endif

/* An int8 or int16 operand at argument i and its zero point at i_zp (0 for int16). */
static bool operand_arg(tm_value *const *args, size_t i, add16_operand *x, const tm_tensor **t) {
  *t = tm_tensor_arg(args, i, TM_CHAR, 0, TM_MAX_DIMS);
  x->wide = *t == NULL;
  if (x->wide) {
    *t = tm_tensor_arg(args, i, TM_SHORT, 0, TM_MAX_DIMS);
  }
  x->data = *t != NULL ? (*t)->data : NULL;
  return *t != NULL;
}

tm_status tm_torchmcu_quantized_add16_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_QUANTIZED_ADD16));
  if (st != TM_OK) {
    return st;
  }
  add16_params p;
  add16_operand a, b;
  const tm_tensor *ta = NULL, *tb = NULL;
  TM_ARG_CHECK(ctx, operand_arg(args, A(SELF), &a, &ta), A(SELF));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SELF_ZERO_POINT), a.wide ? 0 : INT8_MIN, a.wide ? 0 : INT8_MAX, &p.a_zp),
               A(SELF_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SELF_MULTIPLIER), INT32_MIN, INT32_MAX, &p.a_mult), A(SELF_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SELF_SHIFT), -31, 31, &p.a_shift), A(SELF_SHIFT));
  TM_ARG_CHECK(ctx, operand_arg(args, A(OTHER), &b, &tb), A(OTHER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OTHER_ZERO_POINT), b.wide ? 0 : INT8_MIN, b.wide ? 0 : INT8_MAX, &p.b_zp),
               A(OTHER_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OTHER_MULTIPLIER), INT32_MIN, INT32_MAX, &p.b_mult), A(OTHER_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OTHER_SHIFT), -31, 31, &p.b_shift), A(OTHER_SHIFT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), 0, 0, &p.out_zp), A(OUTPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_MULTIPLIER), INT32_MIN, INT32_MAX, &p.out_mult), A(OUTPUT_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_SHIFT), -31, 31, &p.out_shift), A(OUTPUT_SHIFT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ACTIVATION_MIN), INT16_MIN, INT16_MAX, &p.act_min), A(ACTIVATION_MIN));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ACTIVATION_MAX), p.act_min, INT16_MAX, &p.act_max), A(ACTIVATION_MAX));
  tm_tensor *out = NULL;
  tm_binary_shape shape;
  st = tm_binary_out_arg_typed(ctx, args, A(SELF), A(OTHER), A(OUT), TM_SHORT, &out, &shape);
  if (st != TM_OK) {
    return st;
  }
#if TM_KERNELS_USE_MVE
  if (add16_mve(&a, &b, (int16_t *)out->data, &shape, &p)) {
    return TM_OK;
  }
#endif
  add16_scalar(&a, &b, (int16_t *)out->data, &shape, &p);
  return TM_OK;
}
