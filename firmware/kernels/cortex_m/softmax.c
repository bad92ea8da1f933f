/* cortex_m::softmax.out - int8 softmax along the last dimension with CMSIS-NN's fixed-point
 * algorithm (arm_softmax_s8; docs/operators.md, host/torchmcu/reference/ops_softmax.py). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"

enum { A_INPUT, A_DIM, A_INPUT_ZP, A_OUTPUT_ZP, A_MULT, A_SHIFT, A_DIFF_MIN, A_OUT, N_SCHEMA };

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

static int count_leading_zeros32(uint32_t v) {
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
} softmax_params;

static int64_t scaled_exp(const softmax_params *p, int32_t diff) {
  return exp_on_negative_values(tm_srdhm(tm_sat_i32((int64_t)diff * ((int64_t)1 << p->shift)), p->mult));
}

static void softmax_scalar(const softmax_params *p) {
  for (uint32_t r = 0; r < p->rows; ++r) {
    const int8_t *x = p->input + (size_t)r * p->row_size;
    int8_t *y = p->out + (size_t)r * p->row_size;
    int32_t max = x[0];
    for (uint32_t i = 1; i < p->row_size; ++i) {
      max = x[i] > max ? x[i] : max;
    }
    int64_t sum = 0;
    for (uint32_t i = 0; i < p->row_size; ++i) {
      const int32_t diff = x[i] - max;
      if (diff >= p->diff_min) {
        sum += tm_round_div_pow2(scaled_exp(p, diff), ACCUM_BITS);
      }
    }
    const int headroom = count_leading_zeros32((uint32_t)sum);
    /* sum << headroom has its top bit set; minus 1.0 leaves x in [0, 1) for 1 / (1 + x). */
    const int64_t normalised = (int64_t)(((uint64_t)sum << headroom) & 0xFFFFFFFFu) - ((int64_t)1 << 31);
    const int64_t recip = one_over_one_plus_x(normalised);
    const int bits_over_unit = ACCUM_BITS - headroom + 23;
    for (uint32_t i = 0; i < p->row_size; ++i) {
      const int32_t diff = x[i] - max;
      if (diff >= p->diff_min) {
        const int64_t v = tm_round_div_pow2(tm_srdhm(recip, scaled_exp(p, diff)), bits_over_unit) - 128;
        y[i] = (int8_t)tm_clamp64(v, INT8_MIN, INT8_MAX);
      } else {
        y[i] = INT8_MIN;
      }
    }
  }
}

tm_status tm_cortex_m_softmax_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SCHEMA);
  if (st != TM_OK) {
    return st;
  }
  softmax_params p;
  const tm_tensor *in = tm_tensor_arg(args, A_INPUT, TM_CHAR, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_has_layout(in, TM_LAYOUT_CONTIGUOUS), A_INPUT);
  const int32_t rank = in->dim;
  int32_t dim = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_DIM, -rank, rank - 1, &dim) && (dim + rank) % rank == rank - 1, A_DIM);
  p.row_size = (uint32_t)in->sizes[rank - 1];
  TM_ARG_CHECK(ctx, p.row_size >= 1 && p.row_size <= MAX_ROW_SIZE, A_INPUT);
  p.rows = in->numel / p.row_size;
  int32_t zp = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_INPUT_ZP, INT8_MIN, INT8_MAX, &zp), A_INPUT_ZP);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_OUTPUT_ZP, INT8_MIN, INT8_MIN, &zp), A_OUTPUT_ZP);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_MULT, 1, INT32_MAX, &p.mult), A_MULT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_SHIFT, 0, 31, &p.shift), A_SHIFT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_DIFF_MIN, INT32_MIN, 0, &p.diff_min), A_DIFF_MIN);
  tm_tensor *out = tm_tensor_arg(args, A_OUT, TM_CHAR, rank, rank);
  TM_ARG_CHECK(ctx, out != NULL && tm_same_layout(in, out), A_OUT);
  p.input = (const int8_t *)in->data;
  p.out = (int8_t *)out->data;

  /* CMSIS-NN's MVE softmax does not build with GCC 12.2; scalar on every target for now. */
  softmax_scalar(&p);
  return TM_OK;
}
