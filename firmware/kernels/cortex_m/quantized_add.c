/* cortex_m::quantized_add.out - CMSIS-NN int8 add (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"
#include "mve_requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_ADD, x)

#define ADD_INPUT_LEFT_SHIFT 20

typedef struct {
  int32_t a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_zp, out_mult, out_shift, act_min, act_max;
} add_params;

#if TM_KERNELS_USE_MVE
/*
 * Helium path: four int32 lanes per step, 16 elements per main-loop iteration, one
 * predicated tail. Each operand: widen (VLDRB.S32), subtract its zero point, then
 * requantize with the 2^20 headroom folded into the left shift (saturate(x * 2^(20+ls))
 * equals saturate(saturate(x * 2^20) * 2^ls) since |x| * 2^20 < 2^31); the sum adds with
 * saturation (the reference saturates it before the output requantization).
 * A multiplier of INT32_MIN (never produced by quantize_multiplier) is left to the scalar
 * loop: VQRDMULH would saturate where the reference does not, and the int32 sum keeps it.
 */
static inline __attribute__((always_inline)) int32x4_t add4(int32x4_t a, int32x4_t b, const add_params *p,
                                                            const tm_mve_add_shifts *s) {
  a = tm_mve_requantize_n(vsubq_n_s32(a, p->a_zp), p->a_mult, s->a_left, s->a_right);
  b = tm_mve_requantize_n(vsubq_n_s32(b, p->b_zp), p->b_mult, s->b_left, s->b_right);
  int32x4_t r = tm_mve_requantize_n(vqaddq_s32(a, b), p->out_mult, s->out_left, s->out_right);
  r = vqaddq_n_s32(r, p->out_zp);
  return vminq_s32(vmaxq_s32(r, vdupq_n_s32(p->act_min)), vdupq_n_s32(p->act_max));
}

/* out[i] = add(a[i], b[i]) for i < n. */
static void add_row_mve(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const add_params *p,
                        const tm_mve_add_shifts *s) {
  for (uint32_t blocks = n / 16u; blocks > 0; --blocks) {
    vstrbq_s32(out, add4(vldrbq_s32(a), vldrbq_s32(b), p, s));
    vstrbq_s32(out + 4, add4(vldrbq_s32(a + 4), vldrbq_s32(b + 4), p, s));
    vstrbq_s32(out + 8, add4(vldrbq_s32(a + 8), vldrbq_s32(b + 8), p, s));
    vstrbq_s32(out + 12, add4(vldrbq_s32(a + 12), vldrbq_s32(b + 12), p, s));
    a += 16;
    b += 16;
    out += 16;
  }
  for (int32_t left = (int32_t)(n % 16u); left > 0; left -= 4) {
    const mve_pred16_t pred = vctp32q((uint32_t)left);
    vstrbq_p_s32(out, add4(vldrbq_z_s32(a, pred), vldrbq_z_s32(b, pred), p, s), pred);
    a += 4;
    b += 4;
    out += 4;
  }
}

/*
 * Tensors of LUT_MIN_NUMEL elements or more: each operand's requantized value depends on
 * its int8 value only, so two 256-entry int32 tables (indexed by the byte as unsigned,
 * built with add4's own operand steps) replace the per-element operand requantization by
 * a gather load. 2 KB of stack (boards give the firmware >= 32 KB).
 */
#define LUT_SIZE 256
#define LUT_MIN_NUMEL 512 /* the tables cost about as much as 400 elements */

static void build_lut(int32_t *lut, int32_t zp, int32_t mult, int32_t left, int32_t right) {
  const uint32_t first[4] = {0, 1, 2, 3};
  uint32x4_t u = vldrwq_u32(first);
  for (uint32_t i = 0; i < LUT_SIZE; i += 4) {
    const int32x4_t v = vshrq_n_s32(vreinterpretq_s32_u32(vshlq_n_u32(u, 24)), 24); /* the int8 value */
    vstrwq_s32(lut + i, tm_mve_requantize_n(vsubq_n_s32(v, zp), mult, left, right));
    u = vaddq_n_u32(u, 4);
  }
}

/* The output step of add4 with its parameters in registers (locals the stores cannot alias). */
typedef struct {
  int32x4_t act_min, act_max;
  int32_t mult, left, right_n, zp;
} add_out_regs;

/* With `shl` false the output left shift is 0 (VQSHL skipped); with `shr` false the right
 * shift is 0 (no rounding shift, no fix-up); with `shr` true it is > 0 and the fix-up is
 * the sign alone. Callers pass constants, so each variant is its own loop. */
static inline __attribute__((always_inline)) int32x4_t add4_lut(int32x4_t a, int32x4_t b, const add_out_regs *o,
                                                                bool shl, bool shr) {
  int32x4_t v = vqaddq_s32(a, b);
  if (shl) {
    v = vqshlq_r_s32(v, o->left);
  }
  v = vqrdmulhq_n_s32(v, o->mult);
  if (shr) {
    v = vrshlq_n_s32(vaddq_s32(v, vshrq_n_s32(v, 31)), o->right_n);
  }
  const int32x4_t r = vqaddq_n_s32(v, o->zp);
  return vminq_s32(vmaxq_s32(r, o->act_min), o->act_max);
}

static inline __attribute__((always_inline)) void add_row_lut_impl(const uint8_t *ua, const uint8_t *ub, int8_t *out,
                                                                    uint32_t n, const int32_t *lut_a,
                                                                    const int32_t *lut_b, const add_out_regs *o,
                                                                    bool shl, bool shr) {
  for (uint32_t blocks = n / 16u; blocks > 0; --blocks) {
    const int32x4_t a0 = vldrwq_gather_shifted_offset_s32(lut_a, vldrbq_u32(ua));
    const int32x4_t b0 = vldrwq_gather_shifted_offset_s32(lut_b, vldrbq_u32(ub));
    const int32x4_t a1 = vldrwq_gather_shifted_offset_s32(lut_a, vldrbq_u32(ua + 4));
    const int32x4_t b1 = vldrwq_gather_shifted_offset_s32(lut_b, vldrbq_u32(ub + 4));
    vstrbq_s32(out, add4_lut(a0, b0, o, shl, shr));
    vstrbq_s32(out + 4, add4_lut(a1, b1, o, shl, shr));
    const int32x4_t a2 = vldrwq_gather_shifted_offset_s32(lut_a, vldrbq_u32(ua + 8));
    const int32x4_t b2 = vldrwq_gather_shifted_offset_s32(lut_b, vldrbq_u32(ub + 8));
    const int32x4_t a3 = vldrwq_gather_shifted_offset_s32(lut_a, vldrbq_u32(ua + 12));
    const int32x4_t b3 = vldrwq_gather_shifted_offset_s32(lut_b, vldrbq_u32(ub + 12));
    vstrbq_s32(out + 8, add4_lut(a2, b2, o, shl, shr));
    vstrbq_s32(out + 12, add4_lut(a3, b3, o, shl, shr));
    ua += 16;
    ub += 16;
    out += 16;
  }
  for (int32_t left = (int32_t)(n % 16u); left > 0; left -= 4) {
    const mve_pred16_t pred = vctp32q((uint32_t)left);
    const int32x4_t a0 = vldrwq_gather_shifted_offset_z_s32(lut_a, vldrbq_z_u32(ua, pred), pred);
    const int32x4_t b0 = vldrwq_gather_shifted_offset_z_s32(lut_b, vldrbq_z_u32(ub, pred), pred);
    vstrbq_p_s32(out, add4_lut(a0, b0, o, shl, shr), pred);
    ua += 4;
    ub += 4;
    out += 4;
  }
}

static void add_row_lut(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const int32_t *lut_a,
                        const int32_t *lut_b, const add_params *p, const tm_mve_add_shifts *s) {
  add_out_regs o;
  o.act_min = vdupq_n_s32(p->act_min);
  o.act_max = vdupq_n_s32(p->act_max);
  o.mult = p->out_mult;
  o.left = s->out_left;
  o.right_n = s->out_right;
  o.zp = p->out_zp;
  const uint8_t *ua = (const uint8_t *)a;
  const uint8_t *ub = (const uint8_t *)b;
  if (o.left > 0) {
    add_row_lut_impl(ua, ub, out, n, lut_a, lut_b, &o, true, false); /* left > 0: right == 0 */
  } else if (o.right_n < 0) {
    add_row_lut_impl(ua, ub, out, n, lut_a, lut_b, &o, false, true);
  } else {
    add_row_lut_impl(ua, ub, out, n, lut_a, lut_b, &o, false, false);
  }
}

/* What a row of the vector paths reads besides its operands. */
typedef struct {
  const add_params *p;
  const tm_mve_add_shifts *s;
  const int32_t *lut_a, *lut_b;
} add_rows;

static void add_row_lut_fn(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const void *v) {
  const add_rows *r = (const add_rows *)v;
  add_row_lut(a, b, out, n, r->lut_a, r->lut_b, r->p, r->s);
}

static void add_row_mve_fn(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const void *v) {
  const add_rows *r = (const add_rows *)v;
  add_row_mve(a, b, out, n, r->p, r->s);
}

/* Not inlined: the table loops keep their registers to themselves. */
static __attribute__((noinline)) void add_lut(const int8_t *a, const int8_t *b, int8_t *out,
                                              const tm_binary_shape *shape, const add_params *p,
                                              const tm_mve_add_shifts *s) {
  int32_t lut_a[LUT_SIZE];
  int32_t lut_b[LUT_SIZE];
  build_lut(lut_a, p->a_zp, p->a_mult, s->a_left, s->a_right);
  build_lut(lut_b, p->b_zp, p->b_mult, s->b_left, s->b_right);
  const add_rows rows = {p, s, lut_a, lut_b};
  tm_binary_rows(shape, a, b, out, add_row_lut_fn, &rows);
}

/* Elementwise, or row by row when one operand is per channel, a single element (its
 * period) or broadcast (tm_binary_rows); false when the scalar loop must run. */
static bool add_mve(const int8_t *a, const int8_t *b, int8_t *out, const tm_binary_shape *shape,
                    const add_params *p) {
  if (p->a_mult == INT32_MIN || p->b_mult == INT32_MIN) {
    return false;
  }
  const tm_mve_add_shifts s = tm_mve_add_shifts_of(ADD_INPUT_LEFT_SHIFT, p->a_shift, p->b_shift, p->out_shift);
  if (shape->numel >= LUT_MIN_NUMEL) {
    add_lut(a, b, out, shape, p, &s);
    return true;
  }
  const add_rows rows = {p, &s, NULL, NULL};
  tm_binary_rows(shape, a, b, out, add_row_mve_fn, &rows);
  return true;
}
#endif

static void add_row_scalar(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const void *v) {
  const add_params *p = (const add_params *)v;
  for (uint32_t i = 0; i < n; ++i) {
    const int64_t av = ((int64_t)a[i] - p->a_zp) * ((int64_t)1 << ADD_INPUT_LEFT_SHIFT);
    const int64_t bv = ((int64_t)b[i] - p->b_zp) * ((int64_t)1 << ADD_INPUT_LEFT_SHIFT);
    const int64_t sum = tm_requantize(av, p->a_mult, p->a_shift) + tm_requantize(bv, p->b_mult, p->b_shift);
    const int64_t r = tm_requantize(sum, p->out_mult, p->out_shift) + p->out_zp;
    out[i] = (int8_t)tm_clamp64(r, p->act_min, p->act_max);
  }
}

tm_status tm_cortex_m_quantized_add_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_ADD));
  if (st != TM_OK) {
    return st;
  }
  add_params p;
  const tm_tensor *a = tm_tensor_arg(args, A(SELF), TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, a != NULL, A(SELF));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SELF_ZERO_POINT), INT8_MIN, INT8_MAX, &p.a_zp), A(SELF_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SELF_MULTIPLIER), INT32_MIN, INT32_MAX, &p.a_mult), A(SELF_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SELF_SHIFT), -31, 31, &p.a_shift), A(SELF_SHIFT));
  const tm_tensor *b = tm_tensor_arg(args, A(OTHER), TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, b != NULL, A(OTHER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OTHER_ZERO_POINT), INT8_MIN, INT8_MAX, &p.b_zp), A(OTHER_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OTHER_MULTIPLIER), INT32_MIN, INT32_MAX, &p.b_mult), A(OTHER_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OTHER_SHIFT), -31, 31, &p.b_shift), A(OTHER_SHIFT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), INT8_MIN, INT8_MAX, &p.out_zp), A(OUTPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_MULTIPLIER), INT32_MIN, INT32_MAX, &p.out_mult), A(OUTPUT_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_SHIFT), -31, 31, &p.out_shift), A(OUTPUT_SHIFT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ACTIVATION_MIN), INT8_MIN, INT8_MAX, &p.act_min), A(ACTIVATION_MIN));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ACTIVATION_MAX), p.act_min, INT8_MAX, &p.act_max), A(ACTIVATION_MAX));
  tm_tensor *out = NULL;
  tm_binary_shape shape;
  st = tm_binary_out_arg(ctx, args, A(SELF), A(OTHER), A(OUT), &out, &shape);
  if (st != TM_OK) {
    return st;
  }

#if TM_KERNELS_USE_MVE
  if (add_mve((const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, &shape, &p)) {
    return TM_OK;
  }
#endif
  tm_binary_rows(&shape, (const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, add_row_scalar, &p);
  return TM_OK;
}
