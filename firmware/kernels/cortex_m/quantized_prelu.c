/* torchmcu::quantized_prelu.out - int8 PReLU, one slope per channel (docs/operators.md):
 * d = in - input_zero_point, out = clamp(requantize(d, m, s) + output_zero_point) with the
 * positive (m, s) for d >= 0 and channel c's negative pair for d < 0. The channel is the
 * innermost dimension in memory (rank 2 [N, C] contiguous, or rank 4 NHWC), so element i
 * is channel i % C. */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "op_args.h"
#include "requantize.h"
#include "mve_requantize.h" /* TM_KERNELS_USE_MVE, TM_MAYBE_UNUSED, <arm_mve.h> on Helium */

#define A(x) TM_ARG(TORCHMCU_QUANTIZED_PRELU, x)

typedef struct {
  int32_t in_zp, out_zp, pos_m, pos_s;
  const int32_t *neg_m, *neg_s;
  int32_t channels;
} prelu_params;

TM_MAYBE_UNUSED static void prelu_scalar(const int8_t *in, int8_t *out, uint32_t rows, const prelu_params *p) {
  for (uint32_t r = 0; r < rows; ++r) {
    for (int32_t c = 0; c < p->channels; ++c) {
      const int64_t d = (int64_t)in[c] - p->in_zp;
      const int64_t y = d >= 0 ? tm_requantize(d, p->pos_m, p->pos_s) : tm_requantize(d, p->neg_m[c], p->neg_s[c]);
      out[c] = (int8_t)tm_clamp64(y + p->out_zp, -128, 127);
    }
    in += p->channels;
    out += p->channels;
  }
}

#if TM_KERNELS_USE_MVE
/* Four channels from c: each lane takes the positive or its channel's negative (m, s) by
 * the sign of d, then one requantization; `masked` (a constant at each call) loads and
 * stores only the lanes pred enables. */
static inline __attribute__((always_inline)) void prelu4(const int8_t *in, int8_t *out, int32_t c,
                                                         const prelu_params *p, const tm_mve_requant *pos,
                                                         bool masked, mve_pred16_t pred) {
  const int32x4_t d = vsubq_n_s32(masked ? vldrbq_z_s32(in + c, pred) : vldrbq_s32(in + c), p->in_zp);
  const tm_mve_requant neg = masked ? tm_mve_requant_load_p(p->neg_m + c, p->neg_s + c, pred)
                                    : tm_mve_requant_load(p->neg_m + c, p->neg_s + c);
  const mve_pred16_t lt = vcmpltq_n_s32(d, 0);
  tm_mve_requant r;
  r.multiplier = vpselq_s32(neg.multiplier, pos->multiplier, lt);
  r.left = vpselq_s32(neg.left, pos->left, lt);
  r.right_neg = vpselq_s32(neg.right_neg, pos->right_neg, lt);
  const int32x4_t q = vminq_s32(vmaxq_s32(vaddq_n_s32(tm_mve_requantize(d, r), p->out_zp), vdupq_n_s32(-128)),
                                vdupq_n_s32(127));
  if (masked) {
    vstrbq_p_s32(out + c, q, pred);
  } else {
    vstrbq_s32(out + c, q);
  }
}

/* Whole groups of four channels unpredicated, the channel tail of each row predicated. */
static void prelu_mve(const int8_t *in, int8_t *out, uint32_t rows, const prelu_params *p) {
  const tm_mve_requant pos = tm_mve_requant_dup(p->pos_m, p->pos_s);
  const int32_t full = p->channels - p->channels % 4;
  const mve_pred16_t tail = vctp32q((uint32_t)(p->channels - full));
  for (uint32_t r = 0; r < rows; ++r) {
    for (int32_t c = 0; c < full; c += 4) {
      prelu4(in, out, c, p, &pos, false, tail);
    }
    if (full < p->channels) {
      prelu4(in, out, full, p, &pos, true, tail);
    }
    in += p->channels;
    out += p->channels;
  }
}
#endif

tm_status tm_torchmcu_quantized_prelu_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_QUANTIZED_PRELU));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), TM_CHAR, 2, 4);
  const bool laid_out = in != NULL && ((in->dim == 2 && tm_has_layout(in, TM_LAYOUT_CONTIGUOUS)) ||
                                       (in->dim == 4 && tm_has_layout(in, TM_LAYOUT_NHWC_LEGACY)));
  TM_ARG_CHECK(ctx, laid_out && in->sizes[1] > 0, A(INPUT));
  prelu_params p;
  p.channels = in->sizes[1];
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(INPUT_ZERO_POINT), -128, 127, &p.in_zp), A(INPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), -128, 127, &p.out_zp), A(OUTPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(POSITIVE_MULTIPLIER), INT32_MIN, INT32_MAX, &p.pos_m),
               A(POSITIVE_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(POSITIVE_SHIFT), -31, 31, &p.pos_s), A(POSITIVE_SHIFT));
  TM_ARG_CHECK(ctx, tm_per_channel_mults(args, A(NEGATIVE_MULTIPLIERS), p.channels, &p.neg_m),
               A(NEGATIVE_MULTIPLIERS));
  TM_ARG_CHECK(ctx, tm_per_channel_shifts(args, A(NEGATIVE_SHIFTS), p.channels, &p.neg_s), A(NEGATIVE_SHIFTS));
  tm_tensor *out = tm_tensor_arg(args, A(OUT), TM_CHAR, in->dim, in->dim);
  TM_ARG_CHECK(ctx, out != NULL && tm_same_layout(in, out), A(OUT));
  const uint32_t rows = in->numel / (uint32_t)p.channels;
#if TM_KERNELS_USE_MVE
  prelu_mve((const int8_t *)in->data, (int8_t *)out->data, rows, &p);
  return TM_OK;
#endif
  prelu_scalar((const int8_t *)in->data, (int8_t *)out->data, rows, &p);
  return TM_OK;
}
