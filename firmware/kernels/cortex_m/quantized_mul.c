/* cortex_m::quantized_mul.out - CMSIS-NN int8 mul (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"
#include "mve_requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_MUL, x)

#if TM_KERNELS_USE_MVE
/*
 * Helium path: eight elements per step in int16 lanes (zero-point-centred operands fit
 * int16), the products widen to int32 in two halves (VMULLB even lanes, VMULLT odd
 * lanes); after requantization the saturating narrows (bottom, top) put every element
 * back in its place, and the output zero point is added in int16 with saturation. Any
 * requantized value beyond int16 is beyond int8 after the zero point as well, so
 * saturating early gives the reference's clamp. Main loop of 16 elements, one
 * predicated tail. (The product |x| <= 2^16 cannot reach the VQRDMULH INT32_MIN edge.)
 */
typedef struct {
  int32_t a_zp, b_zp, out_zp, mult, left, right;
} mul_params;

static inline __attribute__((always_inline)) int16x8_t mul8(int16x8_t a, int16x8_t b, const mul_params *p) {
  a = vsubq_n_s16(a, (int16_t)p->a_zp);
  b = vsubq_n_s16(b, (int16_t)p->b_zp);
  const int32x4_t even = tm_mve_requantize_n(vmullbq_int_s16(a, b), p->mult, p->left, p->right);
  const int32x4_t odd = tm_mve_requantize_n(vmulltq_int_s16(a, b), p->mult, p->left, p->right);
  int16x8_t r = vqmovnbq_s32(a, even);
  r = vqmovntq_s32(r, odd);
  r = vqaddq_n_s16(r, (int16_t)p->out_zp);
  return vminq_s16(vmaxq_s16(r, vdupq_n_s16(INT8_MIN)), vdupq_n_s16(INT8_MAX));
}

static void mul_row_mve(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const mul_params *p) {
  for (uint32_t blocks = n / 16u; blocks > 0; --blocks) {
    vstrbq_s16(out, mul8(vldrbq_s16(a), vldrbq_s16(b), p));
    vstrbq_s16(out + 8, mul8(vldrbq_s16(a + 8), vldrbq_s16(b + 8), p));
    a += 16;
    b += 16;
    out += 16;
  }
  for (int32_t left = (int32_t)(n % 16u); left > 0; left -= 8) {
    const mve_pred16_t pred = vctp16q((uint32_t)left);
    vstrbq_p_s16(out, mul8(vldrbq_z_s16(a, pred), vldrbq_z_s16(b, pred), p), pred);
    a += 8;
    b += 8;
    out += 8;
  }
}

static void mul_row_mve_fn(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const void *p) {
  mul_row_mve(a, b, out, n, (const mul_params *)p);
}

/* Elementwise, or row by row when one operand is per channel, a single element (its
 * period) or broadcast (tm_binary_rows). */
static void mul_mve(const int8_t *a, const int8_t *b, int8_t *out, const tm_binary_shape *shape,
                    const mul_params *p) {
  tm_binary_rows(shape, a, b, out, mul_row_mve_fn, p);
}
#endif

typedef struct {
  int32_t a_zp, b_zp, out_zp, mult, shift;
} mul_scalar_params;

TM_MAYBE_UNUSED static void mul_row_scalar(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n,
                                           const void *v) {
  const mul_scalar_params *p = (const mul_scalar_params *)v;
  for (uint32_t i = 0; i < n; ++i) {
    const int64_t prod = ((int64_t)a[i] - p->a_zp) * ((int64_t)b[i] - p->b_zp);
    out[i] = (int8_t)tm_clamp64(tm_requantize(prod, p->mult, p->shift) + p->out_zp, INT8_MIN, INT8_MAX);
  }
}

tm_status tm_cortex_m_quantized_mul_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_MUL));
  if (st != TM_OK) {
    return st;
  }
  int32_t a_zp = 0, b_zp = 0, out_zp = 0, mult = 0, shift = 0;
  const tm_tensor *a = tm_tensor_arg(args, A(SELF), TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, a != NULL, A(SELF));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SELF_ZERO_POINT), INT8_MIN, INT8_MAX, &a_zp), A(SELF_ZERO_POINT));
  const tm_tensor *b = tm_tensor_arg(args, A(OTHER), TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, b != NULL, A(OTHER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OTHER_ZERO_POINT), INT8_MIN, INT8_MAX, &b_zp), A(OTHER_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), INT8_MIN, INT8_MAX, &out_zp), A(OUTPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_MULTIPLIER), INT32_MIN, INT32_MAX, &mult), A(OUTPUT_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_SHIFT), -31, 31, &shift), A(OUTPUT_SHIFT));
  tm_tensor *out = NULL;
  tm_binary_shape shape;
  st = tm_binary_out_arg(ctx, args, A(SELF), A(OTHER), A(OUT), &out, &shape);
  if (st != TM_OK) {
    return st;
  }

#if TM_KERNELS_USE_MVE
  const mul_params mp = {a_zp, b_zp, out_zp, mult, shift > 0 ? shift : 0, shift < 0 ? shift : 0};
  mul_mve((const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, &shape, &mp);
  return TM_OK;
#endif
  const mul_scalar_params sp = {a_zp, b_zp, out_zp, mult, shift};
  tm_binary_rows(&shape, (const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, mul_row_scalar, &sp);
  return TM_OK;
}
