/*
 * Helium (MVE) building blocks of the int8 matrix kernels (linear, conv2d): four dot
 * products that share one operand, byte sums, and the byte copy/fill that builds
 * im2col columns. Every loop runs whole 16-byte vectors unpredicated and ends with one
 * predicated tail; all loads and stores are byte-sized (VLDRB/VSTRB), so int8 data
 * needs no alignment.
 *
 * Sums wrap modulo 2^32 like the scalar kernels' int32 accumulators (the contract keeps
 * real accumulators inside int32).
 */
#ifndef TORCHMCU_KERNELS_MVE_GEMM_H
#define TORCHMCU_KERNELS_MVE_GEMM_H

#include "mve_requantize.h"

#if TM_KERNELS_USE_MVE

#include <arm_mve.h>
#include <stdint.h>

#define TM_MVE_INLINE static inline __attribute__((always_inline))

/* Four int32 scalars as one vector (lane i = vi). */
TM_MVE_INLINE int32x4_t tm_mve_lanes(int32_t v0, int32_t v1, int32_t v2, int32_t v3) {
  int32x4_t v = vdupq_n_s32(v0);
  v = vsetq_lane_s32(v1, v, 1);
  v = vsetq_lane_s32(v2, v, 2);
  return vsetq_lane_s32(v3, v, 3);
}

/* (a . b0, a . b1, a . b2, a . b3) over k int8 items: a is loaded once per 16 bytes. */
TM_MVE_INLINE int32x4_t tm_mve_dot4_s8(const int8_t *a, const int8_t *b0, const int8_t *b1, const int8_t *b2,
                                       const int8_t *b3, int32_t k) {
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int32_t blocks = k >> 4; blocks > 0; --blocks) {
    const int8x16_t va = vldrbq_s8(a);
    s0 = vmladavaq_s8(s0, va, vldrbq_s8(b0));
    s1 = vmladavaq_s8(s1, va, vldrbq_s8(b1));
    s2 = vmladavaq_s8(s2, va, vldrbq_s8(b2));
    s3 = vmladavaq_s8(s3, va, vldrbq_s8(b3));
    a += 16;
    b0 += 16;
    b1 += 16;
    b2 += 16;
    b3 += 16;
  }
  const uint32_t rest = (uint32_t)k & 15u;
  if (rest != 0) {
    /* Disabled lanes load as 0 and are never read from memory. */
    const mve_pred16_t p = vctp8q(rest);
    const int8x16_t va = vldrbq_z_s8(a, p);
    s0 = vmladavaq_s8(s0, va, vldrbq_z_s8(b0, p));
    s1 = vmladavaq_s8(s1, va, vldrbq_z_s8(b1, p));
    s2 = vmladavaq_s8(s2, va, vldrbq_z_s8(b2, p));
    s3 = vmladavaq_s8(s3, va, vldrbq_z_s8(b3, p));
  }
  return tm_mve_lanes(s0, s1, s2, s3);
}

/* Sum of k int8 items. */
TM_MVE_INLINE int32_t tm_mve_sum_s8(const int8_t *a, int32_t k) {
  int32_t s = 0;
  for (int32_t blocks = k >> 4; blocks > 0; --blocks) {
    s = vaddvaq_s8(s, vldrbq_s8(a));
    a += 16;
  }
  const uint32_t rest = (uint32_t)k & 15u;
  if (rest != 0) {
    s = vaddvaq_s8(s, vldrbq_z_s8(a, vctp8q(rest)));
  }
  return s;
}

/* dst[0..n) = src[0..n) (non-overlapping). Returns dst + n. */
TM_MVE_INLINE int8_t *tm_mve_copy_s8(int8_t *dst, const int8_t *src, int32_t n) {
  for (int32_t blocks = n >> 4; blocks > 0; --blocks) {
    vstrbq_s8(dst, vldrbq_s8(src));
    dst += 16;
    src += 16;
  }
  const uint32_t rest = (uint32_t)n & 15u;
  if (rest != 0) {
    const mve_pred16_t p = vctp8q(rest);
    vstrbq_p_s8(dst, vldrbq_z_s8(src, p), p);
  }
  return dst + rest;
}

/* dst[0..n) = value. Returns dst + n. */
TM_MVE_INLINE int8_t *tm_mve_fill_s8(int8_t *dst, int8_t value, int32_t n) {
  const int8x16_t v = vdupq_n_s8(value);
  for (int32_t blocks = n >> 4; blocks > 0; --blocks) {
    vstrbq_s8(dst, v);
    dst += 16;
  }
  const uint32_t rest = (uint32_t)n & 15u;
  if (rest != 0) {
    vstrbq_p_s8(dst, v, vctp8q(rest));
  }
  return dst + rest;
}

#endif /* TM_KERNELS_USE_MVE */

#endif /* TORCHMCU_KERNELS_MVE_GEMM_H */
