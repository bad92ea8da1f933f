/* The int8 matrix product shared by cortex_m::quantized_linear and
 * cortex_m::quantized_batch_matmul: rows x [K] against [N, K] with offsets on both sides,
 * per-tensor or per-channel requantization (docs/operators.md, quantized_linear.out). */
#ifndef TM_LINEAR_CORE_H
#define TM_LINEAR_CORE_H

#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"

#include "mve_gemm.h"
#include "mve_requantize.h"

typedef struct {
  const int8_t *input;
  const int8_t *weights;
  const int32_t *bias;       /* NULL: none */
  const int32_t *kernel_sum; /* NULL: none; when set, bias is ignored */
  const int64_t *mults;
  const int64_t *shifts;
  uint32_t per_channel; /* 1 if mults/shifts have one item per output channel */
  int32_t rows, k, n;
  int32_t input_offset, filter_offset, output_offset, act_min, act_max;
  int8_t *out;
} linear_params;

TM_MAYBE_UNUSED static inline void linear_scalar(const linear_params *p) {
  for (int32_t r = 0; r < p->rows; ++r) {
    const int8_t *x = p->input + (size_t)r * (size_t)p->k;
    int32_t x_sum = 0;
    for (int32_t i = 0; i < p->k; ++i) {
      x_sum += x[i];
    }
    for (int32_t o = 0; o < p->n; ++o) {
      const int8_t *w = p->weights + (size_t)o * (size_t)p->k;
      int64_t acc;
      if (p->kernel_sum != NULL) {
        int32_t dot = 0;
        for (int32_t i = 0; i < p->k; ++i) {
          dot += (int32_t)x[i] * (int32_t)w[i];
        }
        acc = (int64_t)dot + (int64_t)p->filter_offset * x_sum + p->kernel_sum[o];
      } else {
        int32_t dot = 0;
        for (int32_t i = 0; i < p->k; ++i) {
          dot += ((int32_t)x[i] + p->input_offset) * ((int32_t)w[i] + p->filter_offset);
        }
        acc = (int64_t)dot + (p->bias != NULL ? p->bias[o] : 0);
      }
      const uint32_t q = p->per_channel ? (uint32_t)o : 0u;
      const int64_t r_val = tm_requantize(acc, (int32_t)p->mults[q], (int32_t)p->shifts[q]) + p->output_offset;
      p->out[(size_t)r * (size_t)p->n + (size_t)o] = (int8_t)tm_clamp64(r_val, p->act_min, p->act_max);
    }
  }
}

#if TM_KERNELS_USE_MVE
/*
 * Helium path: four output channels at a time, each input row loaded once per 16 bytes
 * for the four weight rows (tm_mve_dot4_s8). The offsets are folded out of the dot product:
 *   sum (x + a)(w + b) = x.w + b*sum(x) + a*sum(w) + k*a*b
 * so the inner loop multiplies raw int8. With kernel_sum the last two terms and the bias
 * come precomputed (kernel_sum[o]); without it the weight sums of the four rows are
 * computed once per block, for all rows. Arithmetic wraps modulo 2^32 exactly like the
 * scalar int32 accumulators.
 */
static inline void linear_mve(const linear_params *p) {
  const int32_t k = p->k;
  const size_t row = (size_t)k;
  const uint32_t const_term = (uint32_t)k * (uint32_t)p->input_offset * (uint32_t)p->filter_offset;
  /* Low words of the int64 multipliers/shifts, four channels per gather (per tensor:
   * the same item four times). */
  const uint32x4_t param_offsets = p->per_channel ? vidupq_n_u32(0u, 8) : vdupq_n_u32(0u);
  for (int32_t o = 0; o < p->n; o += 4) {
    const int32_t left = p->n - o;
    const int32_t count = left < 4 ? left : 4;
    const mve_pred16_t pred = vctp32q((uint32_t)count);
    /* Rows past the end (tail block) repeat the last row; their lanes are never stored. */
    const int8_t *w0 = p->weights + (size_t)o * row;
    const int8_t *w1 = count > 1 ? w0 + row : w0;
    const int8_t *w2 = count > 2 ? w1 + row : w1;
    const int8_t *w3 = count > 3 ? w2 + row : w2;
    int32x4_t base;
    if (p->kernel_sum != NULL) {
      base = vldrwq_z_s32(p->kernel_sum + o, pred);
    } else {
      base = p->bias == NULL ? vdupq_n_s32(0) : vldrwq_z_s32(p->bias + o, pred);
      if (p->input_offset != 0) {
        const int32x4_t wsum = tm_mve_lanes(tm_mve_sum_s8(w0, k), tm_mve_sum_s8(w1, k), tm_mve_sum_s8(w2, k),
                                            tm_mve_sum_s8(w3, k));
        base = vmlaq_n_s32(base, wsum, p->input_offset);
      }
      base = vaddq_n_s32(base, (int32_t)const_term);
    }
    const size_t first = p->per_channel ? (size_t)o : 0u;
    const int32x4_t m = vldrwq_gather_offset_z_s32((const int32_t *)(const void *)(p->mults + first),
                                                   param_offsets, pred);
    const int32x4_t sh = vldrwq_gather_offset_z_s32((const int32_t *)(const void *)(p->shifts + first),
                                                    param_offsets, pred);
    tm_mve_requant rq;
    rq.multiplier = m;
    rq.left = vmaxq_s32(sh, vdupq_n_s32(0));
    rq.right_neg = vminq_s32(sh, vdupq_n_s32(0));
    const int8_t *x = p->input;
    int8_t *dst = p->out + o;
    for (int32_t r = 0; r < p->rows; ++r) {
      int32x4_t acc = vaddq_s32(tm_mve_dot4_s8(x, w0, w1, w2, w3, k), base);
      if (p->filter_offset != 0) {
        acc = vaddq_n_s32(acc, (int32_t)((uint32_t)p->filter_offset * (uint32_t)tm_mve_sum_s8(x, k)));
      }
      vstrbq_p_s32(dst, tm_mve_requantize_out(acc, rq, p->output_offset, p->act_min, p->act_max), pred);
      x += row;
      dst += p->n;
    }
  }
}
#endif

#endif /* TM_LINEAR_CORE_H */
