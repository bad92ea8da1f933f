/* torchmcu::quantized_layer_norm.out - int8 layer norm over the last dimension in integer
 * arithmetic only (docs/operators.md: the exact algorithm, the reference's). The input is int8,
 * or int16 (a transformer's residual stream: den without the factor C). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "mve_gemm.h" /* and TM_KERNELS_USE_MVE, which the #if below need */
#include "op_args.h"

#define A(x) TM_ARG(TORCHMCU_QUANTIZED_LAYER_NORM, x)

#define LN_MAX_ROW 4096
#define LN_MAX_ROW16 1024
#define LN_EPS_MAX ((int64_t)1 << 61)
#define LN_WEIGHT_SHIFT_MAX 22
#define LN_EPS_BITS 5

/* floor(sqrt(n)), bit by bit. */
static uint64_t isqrt64(uint64_t n) {
  uint64_t res = 0;
  uint64_t bit = (uint64_t)1 << 62;
  while (bit > n) {
    bit >>= 2;
  }
  while (bit != 0) {
    if (n >= res + bit) {
      n -= res + bit;
      res = (res >> 1) + bit;
    } else {
      res >>= 1;
    }
    bit >>= 2;
  }
  return res;
}

/* v / 2^e rounded half away from zero (1 <= e <= 62); an arithmetic right shift. */
static inline int64_t rdiv64(int64_t v, int32_t e) {
  const int64_t mask = ((int64_t)1 << e) - 1;
  const int64_t q = v >> e;
  const int64_t threshold = (mask >> 1) + (v < 0 ? 1 : 0);
  return q + ((v & mask) > threshold ? 1 : 0);
}

static inline int32_t bit_length64(uint64_t v) {
  int32_t n = 0;
  while (v != 0) {
    ++n;
    v >>= 1;
  }
  return n;
}

/* sum(x) and sum(x^2) of one row (exact in int32 for C <= 4096). */
static void row_sums(const int8_t *x, int32_t c, int32_t *sum, int32_t *sum_sq) {
#if TM_KERNELS_USE_MVE
  int32_t sq = 0;
  const int8_t *p = x;
  for (int32_t blocks = c >> 4; blocks > 0; --blocks) {
    const int8x16_t v = vldrbq_s8(p);
    sq = vmladavaq_s8(sq, v, v);
    p += 16;
  }
  const uint32_t rest = (uint32_t)c & 15u;
  if (rest != 0) {
    const int8x16_t v = vldrbq_z_s8(p, vctp8q(rest));
    sq = vmladavaq_s8(sq, v, v);
  }
  *sum = tm_mve_sum_s8(x, c);
  *sum_sq = sq;
#else
  int32_t s = 0, sq = 0;
  for (int32_t i = 0; i < c; ++i) {
    s += x[i];
    sq += (int32_t)x[i] * (int32_t)x[i];
  }
  *sum = s;
  *sum_sq = sq;
#endif
}

/* sum(x) (exact in int32 for C <= 1024) and sum(x^2) (int64) of one int16 row. */
static void row_sums16(const int16_t *x, int32_t c, int32_t *sum, int64_t *sum_sq) {
#if TM_KERNELS_USE_MVE
  int32_t s = 0;
  int64_t sq = 0;
  const int16_t *p = x;
  for (int32_t blocks = c >> 3; blocks > 0; --blocks) {
    const int16x8_t v = vldrhq_s16(p);
    s = vaddvaq_s16(s, v);
    sq = vmlaldavaq_s16(sq, v, v);
    p += 8;
  }
  const uint32_t rest = (uint32_t)c & 7u;
  if (rest != 0) {
    const int16x8_t v = vldrhq_z_s16(p, vctp16q(rest));
    s = vaddvaq_s16(s, v);
    sq = vmlaldavaq_s16(sq, v, v);
  }
  *sum = s;
  *sum_sq = sq;
#else
  int32_t s = 0;
  int64_t sq = 0;
  for (int32_t i = 0; i < c; ++i) {
    s += x[i];
    sq += (int32_t)x[i] * (int32_t)x[i];
  }
  *sum = s;
  *sum_sq = sq;
#endif
}

typedef struct {
  int32_t c;
  int64_t eps;
  int32_t shift, out_zp;
  const int32_t *gamma, *beta;
} ln_params;

/* The rows of an int8 (wide false) or int16 (wide true) input; callers pass a constant. */
static inline __attribute__((always_inline)) void ln_rows(const void *input, bool wide, int8_t *dst, uint32_t rows,
                                                          const ln_params *p) {
  const int32_t c = p->c;
  const int8_t *x8 = (const int8_t *)input;
  const int16_t *x16 = (const int16_t *)input;
  for (uint32_t r = 0; r < rows; ++r) {
    int32_t sum = 0;
    int64_t var_c; /* C * sum(x^2) - sum(x)^2 = C^2 var */
    if (wide) {
      int64_t sum_sq = 0;
      row_sums16(x16, c, &sum, &sum_sq);
      var_c = (int64_t)c * sum_sq - (int64_t)sum * sum;
    } else {
      int32_t sum_sq = 0;
      row_sums(x8, c, &sum, &sum_sq);
      var_c = (int64_t)c * sum_sq - (int64_t)sum * sum;
    }
    /* den = ((int8: C *) var_c << 10) + eps < 2^62 */
    const int64_t v = wide ? var_c : (int64_t)c * var_c;
    const uint64_t den = ((uint64_t)v << (2 * LN_EPS_BITS)) + (uint64_t)p->eps;
    const int32_t t = (62 - bit_length64(den)) / 2;
    const uint64_t root = isqrt64(den << (2 * t));
    const int64_t recip = (int64_t)(((uint64_t)1 << 62) / root);
    for (int32_t i = 0; i < c; ++i) {
      const int64_t dev = (int64_t)c * (wide ? x16[i] : x8[i]) - sum;
      const int64_t y = rdiv64(dev * recip, 38 - LN_EPS_BITS - t);
      const int64_t acc = y * p->gamma[i] + (int64_t)((uint64_t)(int64_t)p->beta[i] << (p->shift + 8));
      const int64_t o = rdiv64(acc, 24 + p->shift) + p->out_zp;
      dst[i] = (int8_t)(o < INT8_MIN ? INT8_MIN : (o > INT8_MAX ? INT8_MAX : o));
    }
    x8 += c;
    x16 += c;
    dst += c;
  }
}

tm_status tm_torchmcu_quantized_layer_norm_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  const tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_QUANTIZED_LAYER_NORM));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), TM_CHAR, 1, TM_MAX_DIMS);
  const bool wide = in == NULL;
  if (wide) {
    in = tm_tensor_arg(args, A(INPUT), TM_SHORT, 1, TM_MAX_DIMS);
  }
  TM_ARG_CHECK(ctx,
               in != NULL && tm_has_layout(in, TM_LAYOUT_CONTIGUOUS) && in->sizes[in->dim - 1] >= 1 &&
                   in->sizes[in->dim - 1] <= (wide ? LN_MAX_ROW16 : LN_MAX_ROW),
               A(INPUT));
  const int32_t c = in->sizes[in->dim - 1];
  const tm_tensor *w = tm_tensor_arg(args, A(WEIGHT), TM_INT, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, w != NULL && w->numel == (uint32_t)c, A(WEIGHT));
  const tm_tensor *b = tm_tensor_arg(args, A(BIAS), TM_INT, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, b != NULL && b->numel == (uint32_t)c, A(BIAS));
  const tm_value *eps_v = args[A(EPS)];
  TM_ARG_CHECK(ctx, eps_v != NULL && eps_v->tag == TM_VALUE_INT && eps_v->u.i >= 1 && eps_v->u.i <= LN_EPS_MAX,
               A(EPS));
  const int64_t eps = eps_v->u.i;
  int32_t shift = 0, out_zp = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(WEIGHT_SHIFT), 0, LN_WEIGHT_SHIFT_MAX, &shift), A(WEIGHT_SHIFT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), INT8_MIN, INT8_MAX, &out_zp), A(OUTPUT_ZERO_POINT));
  const tm_tensor *out = tm_tensor_arg(args, A(OUT), TM_CHAR, in->dim, in->dim);
  bool out_ok = out != NULL && tm_has_layout(out, TM_LAYOUT_CONTIGUOUS);
  for (uint8_t d = 0; out_ok && d < in->dim; ++d) {
    out_ok = out->sizes[d] == in->sizes[d];
  }
  TM_ARG_CHECK(ctx, out_ok, A(OUT));

  const ln_params p = {c, eps, shift, out_zp, (const int32_t *)w->data, (const int32_t *)b->data};
  const uint32_t rows = in->numel / (uint32_t)c;
  if (wide) {
    ln_rows(in->data, true, (int8_t *)out->data, rows, &p);
  } else {
    ln_rows(in->data, false, (int8_t *)out->data, rows, &p);
  }
  return TM_OK;
}
