/* cortex_m::softmax.out - int8 softmax along the last dimension with CMSIS-NN's fixed-point
 * algorithm (arm_softmax_s8; docs/operators.md, host/torchmcu/ops/defs/softmax.py), and
 * torchmcu::masked_softmax.out, the same with a boolean mask (true: left out, as
 * masked_fill(-inf) before softmax leaves it): masked elements take no part in the row's
 * maximum or sum and give -128; a row with every element masked is all -128. */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"
#include "mve_requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_SOFTMAX, x)
#define M(x) TM_ARG(TORCHMCU_MASKED_SOFTMAX, x)

#define ACCUM_BITS 12       /* the exponentials are summed in Q12.19 */
#define MAX_ROW_SIZE 4096   /* 4096 * exp(0) fills the Q12.19 sum */

static int64_t sat_shl(int64_t x, int e) { return tm_sat_i32(tm_sat_i32(x) * ((int64_t)1 << e)); }

/* exp(a) for a <= 0 in Q5.26, result in Q0.31 (gemmlowp's exp_on_negative_values). */
static int64_t exp_on_negative_values(int64_t a) {
  /* exp(-2^k / 4) in Q0.31 for k = 0..6 */
  static const int32_t kBarrel[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
  const int64_t exp_minus_eighth = 1895147668; /* exp(-1/8) in Q0.31 */
  const int64_t one_third = 715827883;         /* 1/3 in Q0.31 */
  const int64_t quarter = (int64_t)1 << 24;    /* 1/4 in Q5.26 */
  if (a == 0) {
    return TM_I32_MAX;
  }
  const int64_t a_mod_minus_quarter = (a & (quarter - 1)) - quarter;
  const int64_t remainder = a_mod_minus_quarter - a;
  const int64_t x = a_mod_minus_quarter * 32 + ((int64_t)1 << 28);
  const int64_t x2 = tm_srdhm(x, x);
  const int64_t x3 = tm_srdhm(x2, x);
  const int64_t x4 = tm_srdhm(x2, x2);
  const int64_t poly = tm_round_div_pow2(tm_srdhm(tm_round_div_pow2(x4, 2) + x3, one_third) + x2, 1);
  int64_t result = exp_minus_eighth + tm_srdhm(exp_minus_eighth, x + poly);
  for (int k = 0; k < 7; ++k) {
    if ((remainder & ((int64_t)1 << (24 + k))) != 0) {
      result = tm_srdhm(result, kBarrel[k]);
    }
  }
  return result;
}

/* 1 / (1 + a) for a in [0, 1) in Q0.31; result in Q0.31 (three Newton-Raphson steps). */
static int64_t one_over_one_plus_x(int64_t a) {
  const int64_t total = a + TM_I32_MAX;
  const int64_t half_den = total >= 0 ? (total + 1) / 2 : -((-total + 1) / 2);
  int64_t x = 1515870810 + tm_srdhm(half_den, -1010580540); /* 48/17 - 32/17 * d in Q2.29 */
  const int64_t one_q29 = (int64_t)1 << 29;
  for (int i = 0; i < 3; ++i) {
    x = tm_sat_i32(x + sat_shl(tm_srdhm(x, one_q29 - tm_srdhm(half_den, x)), 2));
  }
  return sat_shl(x, 1);
}

TM_MAYBE_UNUSED static int count_leading_zeros32(uint32_t v) {
  int n = 0;
  for (uint32_t bit = 0x80000000u; bit != 0 && (v & bit) == 0; bit >>= 1) {
    ++n;
  }
  return n;
}

typedef struct {
  const int8_t *input;
  int8_t *out;
  uint32_t rows, row_size;
  int32_t mult, shift, diff_min;
  /* The mask (NULL: none), broadcast over the input's leading dims: row r, written as the
   * index (i_0, ..., i_{k-1}) over `lead_sizes`, reads the mask row at sum of i_d * lead_strides[d]
   * (a stride 0 where the mask's size is 1). */
  const uint8_t *mask;
  uint32_t lead_dims;
  uint32_t lead_sizes[TM_MAX_DIMS];
  uint32_t lead_strides[TM_MAX_DIMS];
} softmax_params;

/* The mask row of input row r (NULL without a mask). */
static const uint8_t *mask_row(const softmax_params *p, uint32_t r) {
  if (p->mask == NULL) {
    return NULL;
  }
  uint32_t offset = 0;
  for (uint32_t d = p->lead_dims; d-- > 0;) {
    offset += (r % p->lead_sizes[d]) * p->lead_strides[d];
    r /= p->lead_sizes[d];
  }
  return p->mask + offset;
}

static int64_t scaled_exp(const softmax_params *p, int32_t diff) {
  return exp_on_negative_values(tm_srdhm(tm_sat_i32((int64_t)diff * ((int64_t)1 << p->shift)), p->mult));
}

TM_MAYBE_UNUSED static void softmax_scalar(const softmax_params *p) {
  for (uint32_t r = 0; r < p->rows; ++r) {
    const int8_t *x = p->input + (size_t)r * p->row_size;
    int8_t *y = p->out + (size_t)r * p->row_size;
    const uint8_t *m = mask_row(p, r);
    int32_t max = INT8_MIN;
    for (uint32_t i = 0; i < p->row_size; ++i) {
      max = (m == NULL || m[i] == 0) && x[i] > max ? x[i] : max;
    }
    int64_t sum = 0;
    for (uint32_t i = 0; i < p->row_size; ++i) {
      const int32_t diff = x[i] - max;
      if (diff >= p->diff_min && (m == NULL || m[i] == 0)) {
        sum += tm_round_div_pow2(scaled_exp(p, diff), ACCUM_BITS);
      }
    }
    if (sum == 0) { /* every element masked */
      for (uint32_t i = 0; i < p->row_size; ++i) {
        y[i] = INT8_MIN;
      }
      continue;
    }
    const int headroom = count_leading_zeros32((uint32_t)sum);
    /* sum << headroom has its top bit set; minus 1.0 leaves x in [0, 1) for 1 / (1 + x). */
    const int64_t normalised = (int64_t)(((uint64_t)sum << headroom) & 0xFFFFFFFFu) - ((int64_t)1 << 31);
    const int64_t recip = one_over_one_plus_x(normalised);
    const int bits_over_unit = ACCUM_BITS - headroom + 23;
    for (uint32_t i = 0; i < p->row_size; ++i) {
      const int32_t diff = x[i] - max;
      if (diff >= p->diff_min && (m == NULL || m[i] == 0)) {
        const int64_t v = tm_round_div_pow2(tm_srdhm(recip, scaled_exp(p, diff)), bits_over_unit) - 128;
        y[i] = (int8_t)tm_clamp64(v, INT8_MIN, INT8_MAX);
      } else {
        y[i] = INT8_MIN;
      }
    }
  }
}

#if TM_KERNELS_USE_MVE
/*
 * Helium path, bit-exact with the scalar code: every fixed-point step above is a VQRDMULH
 * (the reference's rounding doubling high multiply, saturation included), the rounding
 * divides are VRSHR/VRSHL (with the sign fix-up of mve_requantize.h where the value can
 * be negative), the barrel stages are predicated multiplies and exp(0) a select.
 * The differences to the row maximum are int8 differences, so exp takes at most 256
 * values: tensors of TABLE_MIN_NUMEL elements or more get one 256-entry table per call
 * (index max - x, gather loads); smaller ones compute exp once per element into a stack
 * buffer. Entries / lanes below diff_min hold 0, which both sums and outputs as the
 * reference's masked lanes (0 in the sum, -128 out).
 */
#define TABLE_SIZE 256
#define TABLE_MIN_NUMEL 256 /* a table costs about as much as this many direct exps */

#define EXP_BARREL_STEP(r, rem, k, factor) \
  r = vqrdmulhq_m_n_s32(r, r, factor, vcmpltq_n_s32(vshlq_n_s32(rem, 7 - (k)), 0))

/* exp_on_negative_values on four lanes of a <= 0 (Q5.26), result in Q0.31. */
static inline __attribute__((always_inline)) int32x4_t exp4(int32x4_t a) {
  const int32x4_t amq = vsubq_n_s32(vandq_s32(a, vdupq_n_s32((1 << 24) - 1)), 1 << 24);
  const int32x4_t rem = vsubq_s32(amq, a); /* bits 24..30: the quarters still to apply */
  const int32x4_t x = vaddq_n_s32(vshlq_n_s32(amq, 5), 1 << 28);
  const int32x4_t x2 = vqrdmulhq_s32(x, x);
  const int32x4_t x3 = vqrdmulhq_s32(x2, x);
  const int32x4_t x4 = vqrdmulhq_s32(x2, x2);             /* >= 0: plain rounding shift */
  int32x4_t t = vaddq_s32(vrshrq_n_s32(x4, 2), x3);
  t = vaddq_s32(vqrdmulhq_n_s32(t, 715827883), x2);      /* 1/3 in Q0.31 */
  t = vrshrq_n_s32(vaddq_s32(t, vshrq_n_s32(t, 31)), 1); /* half away from zero */
  int32x4_t r = vaddq_n_s32(vqrdmulhq_n_s32(vaddq_s32(x, t), 1895147668), 1895147668);
  EXP_BARREL_STEP(r, rem, 0, 1672461947);
  EXP_BARREL_STEP(r, rem, 1, 1302514674);
  EXP_BARREL_STEP(r, rem, 2, 790015084);
  EXP_BARREL_STEP(r, rem, 3, 290630308);
  EXP_BARREL_STEP(r, rem, 4, 39332535);
  EXP_BARREL_STEP(r, rem, 5, 720401);
  EXP_BARREL_STEP(r, rem, 6, 242);
  return vpselq_s32(vdupq_n_s32(TM_I32_MAX), r, vcmpeqq_n_s32(a, 0));
}

/* exp of the scaled differences diff (<= 0); 0 where diff < diff_min or outside `live`. */
static inline __attribute__((always_inline)) int32x4_t scaled_exp4(const softmax_params *p, int32x4_t diff,
                                                                   mve_pred16_t live) {
  const int32x4_t a = vqrdmulhq_n_s32(vqshlq_r_s32(diff, p->shift), p->mult);
  live &= vcmpgeq_n_s32(diff, p->diff_min);
  return vpselq_s32(exp4(a), vdupq_n_s32(0), live);
}

/* The lanes of four elements from i that pred enables and the mask (if any) keeps. */
static inline __attribute__((always_inline)) mve_pred16_t kept4(const uint8_t *m, uint32_t i, mve_pred16_t pred) {
  return m == NULL ? pred : vcmpeqq_m_n_u32(vldrbq_z_u32(m + i, pred), 0, pred);
}

/* The maximum of the row's kept elements (INT8_MIN when the mask keeps none). */
static int32_t row_max(const int8_t *x, uint32_t n, const uint8_t *mask) {
  int8x16_t m = vdupq_n_s8(INT8_MIN);
  uint32_t i = 0;
  if (mask == NULL) {
    for (; i + 16 <= n; i += 16) {
      m = vmaxq_s8(m, vldrbq_s8(x + i));
    }
  }
  int8_t max = vmaxvq_s8(INT8_MIN, m);
  for (; i < n; i += 16) {
    mve_pred16_t pred = vctp8q(n - i);
    if (mask != NULL) {
      pred = vcmpeqq_m_n_u8(vldrbq_z_u8(mask + i, pred), 0, pred);
    }
    max = vmaxvq_p_s8(max, vldrbq_z_s8(x + i, pred), pred);
  }
  return max;
}

/* The scalar tail of a row: 1 / sum as recip and the output shift. False when the shift is
 * 32 or more: then every output is -128 (srdhm(recip, e) < 2^31 rounds to 0), and when
 * the mask left nothing to sum. */
static bool row_scale(uint32_t sum, int32_t *recip, int32_t *shift) {
  if (sum == 0) { /* every element masked */
    return false;
  }
  const int headroom = __builtin_clz(sum); /* sum >= 2^19: the maximum's exp(0) */
  const int64_t normalised = (int64_t)((sum << headroom) & 0xFFFFFFFFu) - ((int64_t)1 << 31);
  *recip = (int32_t)one_over_one_plus_x(normalised);
  *shift = ACCUM_BITS - headroom + 23;
  return *shift < 32;
}

/* out = min(rdp2(srdhm(recip, e), shift) - 128, 127) for non-negative e. */
static inline __attribute__((always_inline)) int32x4_t out4(int32x4_t e, int32_t recip, int32_t neg_shift) {
  const int32x4_t v = vrshlq_n_s32(vqrdmulhq_n_s32(e, recip), neg_shift);
  return vminq_s32(vsubq_n_s32(v, 128), vdupq_n_s32(127));
}

static void fill_min(int8_t *y, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    y[i] = INT8_MIN;
  }
}

/* Small tensors: exp once per element into `e` (row_size <= TABLE_SIZE). */
static void softmax_direct(const softmax_params *p) {
  int32_t e[TABLE_SIZE];
  const uint32_t n = p->row_size;
  for (uint32_t r = 0; r < p->rows; ++r) {
    const int8_t *x = p->input + (size_t)r * n;
    int8_t *y = p->out + (size_t)r * n;
    const uint8_t *m = mask_row(p, r);
    const int32x4_t max = vdupq_n_s32(row_max(x, n, m));
    uint32_t sum = 0;
    for (uint32_t i = 0; i < n; i += 4) {
      const mve_pred16_t pred = vctp32q(n - i);
      const int32x4_t v = scaled_exp4(p, vsubq_s32(vldrbq_z_s32(x + i, pred), max), kept4(m, i, pred));
      vstrwq_s32(e + i, v);
      sum = vaddvaq_u32(sum, vreinterpretq_u32_s32(vrshrq_n_s32(v, ACCUM_BITS)));
    }
    int32_t recip = 0, shift = 0;
    if (!row_scale(sum, &recip, &shift)) {
      fill_min(y, n);
      continue;
    }
    for (uint32_t i = 0; i < n; i += 4) {
      vstrbq_p_s32(y + i, out4(vldrwq_s32(e + i), recip, -shift), vctp32q(n - i));
    }
  }
}

/* Larger tensors: table[d] = exp of the difference -d for d in 0..255. */
static void softmax_table(const softmax_params *p) {
  int32_t table[TABLE_SIZE];
  const int32_t first[4] = {0, -1, -2, -3};
  int32x4_t diff = vldrwq_s32(first);
  for (uint32_t d = 0; d < TABLE_SIZE; d += 4) {
    vstrwq_s32(table + d, scaled_exp4(p, diff, 0xFFFF));
    diff = vsubq_n_s32(diff, 4);
  }
  const uint32_t n = p->row_size;
  for (uint32_t r = 0; r < p->rows; ++r) {
    const int8_t *x = p->input + (size_t)r * n;
    int8_t *y = p->out + (size_t)r * n;
    const uint8_t *m = mask_row(p, r);
    const int32x4_t max = vdupq_n_s32(row_max(x, n, m));
    uint32_t sum = 0;
    uint32_t i = 0;
    if (m == NULL) {
      for (; i + 4 <= n; i += 4) {
        const uint32x4_t d = vreinterpretq_u32_s32(vsubq_s32(max, vldrbq_s32(x + i)));
        const int32x4_t v = vldrwq_gather_shifted_offset_s32(table, d);
        sum = vaddvaq_u32(sum, vreinterpretq_u32_s32(vrshrq_n_s32(v, ACCUM_BITS)));
      }
    }
    /* the tail, and masked rows: a masked lane (its element may exceed the kept maximum)
     * reads no table entry and sums 0 */
    for (; i < n; i += 4) {
      const mve_pred16_t keep = kept4(m, i, vctp32q(n - i));
      const uint32x4_t d = vreinterpretq_u32_s32(vsubq_s32(max, vldrbq_z_s32(x + i, keep)));
      const int32x4_t v = vldrwq_gather_shifted_offset_z_s32(table, d, keep);
      sum = vaddvaq_u32(sum, vreinterpretq_u32_s32(vrshrq_n_s32(v, ACCUM_BITS)));
    }
    int32_t recip = 0, shift = 0;
    if (!row_scale(sum, &recip, &shift)) {
      fill_min(y, n);
      continue;
    }
    i = 0;
    if (m == NULL) {
      for (; i + 4 <= n; i += 4) {
        const uint32x4_t d = vreinterpretq_u32_s32(vsubq_s32(max, vldrbq_s32(x + i)));
        vstrbq_s32(y + i, out4(vldrwq_gather_shifted_offset_s32(table, d), recip, -shift));
      }
    }
    for (; i < n; i += 4) {
      const mve_pred16_t pred = vctp32q(n - i);
      const mve_pred16_t keep = kept4(m, i, pred);
      const uint32x4_t d = vreinterpretq_u32_s32(vsubq_s32(max, vldrbq_z_s32(x + i, keep)));
      vstrbq_p_s32(y + i, out4(vldrwq_gather_shifted_offset_z_s32(table, d, keep), recip, -shift), pred);
    }
  }
}
#endif

/* The arguments both operators share: masked_softmax's are softmax's with the mask inserted
 * after the input, so each index past the input is `after` more. */
#define SHARED(x) (A(x) + after)
_Static_assert(M(DIM) == A(DIM) + 1 && M(OUT) == A(OUT) + 1, "masked_softmax = softmax + mask at 1");

static tm_status read_shared_args(tm_kernel_context *ctx, tm_value *const *args, size_t after, softmax_params *p,
                                  const tm_tensor **input) {
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), TM_CHAR, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_has_layout(in, TM_LAYOUT_CONTIGUOUS), A(INPUT));
  const int32_t rank = in->dim;
  int32_t dim = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, SHARED(DIM), -rank, rank - 1, &dim) && (dim + rank) % rank == rank - 1,
               SHARED(DIM));
  p->row_size = (uint32_t)in->sizes[rank - 1];
  TM_ARG_CHECK(ctx, p->row_size >= 1 && p->row_size <= MAX_ROW_SIZE, A(INPUT));
  p->rows = in->numel / p->row_size;
  int32_t zp = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, SHARED(INPUT_ZERO_POINT), INT8_MIN, INT8_MAX, &zp), SHARED(INPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, SHARED(OUTPUT_ZERO_POINT), INT8_MIN, INT8_MIN, &zp), SHARED(OUTPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, SHARED(INPUT_MULTIPLIER), 1, INT32_MAX, &p->mult), SHARED(INPUT_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, SHARED(INPUT_SHIFT), 0, 31, &p->shift), SHARED(INPUT_SHIFT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, SHARED(DIFF_MIN), INT32_MIN, 0, &p->diff_min), SHARED(DIFF_MIN));
  tm_tensor *out = tm_tensor_arg(args, SHARED(OUT), TM_CHAR, rank, rank);
  TM_ARG_CHECK(ctx, out != NULL && tm_same_layout(in, out), SHARED(OUT));
  p->input = (const int8_t *)in->data;
  p->out = (int8_t *)out->data;
  p->mask = NULL;
  *input = in;
  return TM_OK;
}

static void run_softmax(const softmax_params *p) {
#if TM_KERNELS_USE_MVE
  if (p->rows * p->row_size >= TABLE_MIN_NUMEL) {
    softmax_table(p);
  } else {
    softmax_direct(p);
  }
#else
  softmax_scalar(p);
#endif
}

/* The mask: bool, contiguous, the input's rank, the input's row size, every other size the
 * input's or 1 (broadcast). */
static bool read_mask(tm_value *const *args, const tm_tensor *in, softmax_params *p) {
  const tm_tensor *mask = tm_tensor_arg(args, M(MASK), TM_BOOL, in->dim, in->dim);
  if (mask == NULL || !tm_has_layout(mask, TM_LAYOUT_CONTIGUOUS) || mask->sizes[in->dim - 1] != in->sizes[in->dim - 1]) {
    return false;
  }
  p->lead_dims = in->dim - 1u;
  uint32_t stride = (uint32_t)mask->sizes[in->dim - 1];
  for (uint32_t d = p->lead_dims; d-- > 0;) {
    if (mask->sizes[d] != in->sizes[d] && mask->sizes[d] != 1) {
      return false;
    }
    p->lead_sizes[d] = (uint32_t)in->sizes[d];
    p->lead_strides[d] = mask->sizes[d] == 1 ? 0 : stride;
    stride *= (uint32_t)mask->sizes[d];
  }
  p->mask = (const uint8_t *)mask->data;
  return true;
}

/* Both entry points: softmax's arguments, and the mask after the input when `masked`. */
static tm_status softmax_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool masked) {
  tm_status st =
      tm_check_arg_count(ctx, args, nargs, masked ? TM_NARGS(TORCHMCU_MASKED_SOFTMAX) : TM_NARGS(CORTEX_M_SOFTMAX));
  if (st != TM_OK) {
    return st;
  }
  softmax_params p;
  const tm_tensor *in = NULL;
  st = read_shared_args(ctx, args, masked ? 1 : 0, &p, &in);
  if (st != TM_OK) {
    return st;
  }
  TM_ARG_CHECK(ctx, !masked || read_mask(args, in, &p), M(MASK));
  run_softmax(&p);
  return TM_OK;
}

tm_status tm_cortex_m_softmax_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return softmax_entry(ctx, args, nargs, false);
}

tm_status tm_torchmcu_masked_softmax_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return softmax_entry(ctx, args, nargs, true);
}
