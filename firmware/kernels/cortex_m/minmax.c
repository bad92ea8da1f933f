/* cortex_m::maximum.out / minimum.out - int8 elementwise max and min with the binary
 * broadcast; operands and out share their qparams (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "mve_requantize.h"
#include "op_args.h"

#define AMAX(x) TM_ARG(CORTEX_M_MAXIMUM, x)
#define AMIN(x) TM_ARG(CORTEX_M_MINIMUM, x)

#if TM_KERNELS_USE_MVE
/* out[i] = max/min(a[i], b[i]) for i < n: 16 lanes per step, one predicated tail. */
static void minmax_row_mve(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, bool is_max) {
  for (uint32_t blocks = n / 16u; blocks > 0; --blocks) {
    const int8x16_t x = vld1q_s8(a);
    const int8x16_t y = vld1q_s8(b);
    vst1q_s8(out, is_max ? vmaxq_s8(x, y) : vminq_s8(x, y));
    a += 16;
    b += 16;
    out += 16;
  }
  const uint32_t left = n % 16u;
  if (left > 0) {
    const mve_pred16_t pred = vctp8q(left);
    const int8x16_t x = vld1q_z_s8(a, pred);
    const int8x16_t y = vld1q_z_s8(b, pred);
    vstrbq_p_s8(out, is_max ? vmaxq_s8(x, y) : vminq_s8(x, y), pred);
  }
}

static void max_row_mve(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const void *p) {
  (void)p;
  minmax_row_mve(a, b, out, n, true);
}

static void min_row_mve(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const void *p) {
  (void)p;
  minmax_row_mve(a, b, out, n, false);
}

static void minmax_mve(const int8_t *a, const int8_t *b, int8_t *out, const tm_binary_shape *shape,
                       bool is_max) {
  tm_binary_rows(shape, a, b, out, is_max ? max_row_mve : min_row_mve, NULL);
}
#endif

TM_MAYBE_UNUSED static void max_row_scalar(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n,
                                           const void *p) {
  (void)p;
  for (uint32_t i = 0; i < n; ++i) {
    out[i] = a[i] > b[i] ? a[i] : b[i];
  }
}

TM_MAYBE_UNUSED static void min_row_scalar(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n,
                                           const void *p) {
  (void)p;
  for (uint32_t i = 0; i < n; ++i) {
    out[i] = a[i] < b[i] ? a[i] : b[i];
  }
}

static tm_status minmax(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, size_t want, size_t i_self,
                        size_t i_other, size_t i_out, bool is_max) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, want);
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *a = tm_tensor_arg(args, i_self, TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, a != NULL, i_self);
  const tm_tensor *b = tm_tensor_arg(args, i_other, TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, b != NULL, i_other);
  tm_tensor *out = NULL;
  tm_binary_shape shape;
  st = tm_binary_out_arg(ctx, args, i_self, i_other, i_out, &out, &shape);
  if (st != TM_OK) {
    return st;
  }
#if TM_KERNELS_USE_MVE
  minmax_mve((const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, &shape, is_max);
#else
  tm_binary_rows(&shape, (const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data,
                 is_max ? max_row_scalar : min_row_scalar, NULL);
#endif
  return TM_OK;
}

tm_status tm_cortex_m_maximum_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return minmax(ctx, args, nargs, TM_NARGS(CORTEX_M_MAXIMUM), AMAX(SELF), AMAX(OTHER), AMAX(OUT), true);
}

tm_status tm_cortex_m_minimum_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return minmax(ctx, args, nargs, TM_NARGS(CORTEX_M_MINIMUM), AMIN(SELF), AMIN(OTHER), AMIN(OUT), false);
}
