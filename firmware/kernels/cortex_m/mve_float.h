/*
 * Helium (MVE) float <-> int conversions for quantize_per_tensor and
 * dequantize_per_tensor, bit-exact with the scalar kernels (docs/operators.md):
 *
 *   quantize:    q = clamp(round_half_even(float32(x * inv)) + zp, qmin, qmax)
 *   dequantize:  y = float32(q - zp) * scale
 *
 * Why the vector forms give the same bits:
 * - VMUL.F32 rounds to nearest like the scalar FPU; VCVTN.S32.F32 rounds half to
 *   even, maps NaN to 0 (the scalar kernel's NaN -> zero point) and saturates
 *   +-inf and anything beyond int32 to INT32_MIN/MAX.
 * - Narrowing: VQMOVN saturates int32 -> int16 before the zero point is added
 *   (saturating, in int16), then int16 -> int8. Once a value is beyond int16 the
 *   zero point (|zp| <= 128) cannot bring it back into int8, so saturating early
 *   gives the same clamp as the scalar path's clamp at +-2^24 then [qmin, qmax].
 * - MVE floating point always runs with the Arm "standard FPSCR value", which
 *   flushes subnormal inputs and results to zero; the scalar FPU does not. The
 *   results can only differ when a subnormal product or operand matters:
 *   quantize needs inv > 2^125 for a subnormal x to scale to >= 0.5, dequantize
 *   needs scale < 2^-126 for a product of a nonzero integer to be subnormal.
 *   tm_mve_float_safe_factor rejects those (absurd) scales; the kernels then run
 *   the scalar loop.
 *
 * Main loops handle 16 (int8) or 8 (int16) elements without predication; one
 * predicated tail of up to 15 elements follows, four lanes at a time. Loads and
 * stores are of the element size (VLDRW for float, VLDRB/VLDRH for int8/int16),
 * so tensor data aligned to its element size (what the loader checks) is all
 * they need.
 */
#ifndef TORCHMCU_KERNELS_MVE_FLOAT_H
#define TORCHMCU_KERNELS_MVE_FLOAT_H

#include "mve_requantize.h" /* TM_KERNELS_USE_MVE */

/* Float MVE (MVE-F, __ARM_FEATURE_MVE bit 1) is needed as well as the integer part. */
#if TM_KERNELS_USE_MVE && (__ARM_FEATURE_MVE & 2)
#define TM_MVE_FLOAT 1
#else
#define TM_MVE_FLOAT 0
#endif

#if TM_MVE_FLOAT

#include <arm_mve.h>
#include <stdbool.h>
#include <stdint.h>

#define TM_MVE_INLINE static inline __attribute__((always_inline))

/* The factor keeps subnormal flushing from changing any result (see above). */
static inline bool tm_mve_float_safe_factor(float factor) {
  return factor >= 0x1p-126f && factor <= 0x1p125f;
}

/* Four lanes of the quantize tail: round, add zp, clamp, in int32. */
TM_MVE_INLINE int32x4_t tm_mve_quantize4(float32x4_t x, float inv, int32_t zp, int32_t qmin, int32_t qmax) {
  int32x4_t r = vqaddq_n_s32(vcvtnq_s32_f32(vmulq_n_f32(x, inv)), zp);
  r = vmaxq_s32(r, vdupq_n_s32(qmin));
  return vminq_s32(r, vdupq_n_s32(qmax));
}

/* 16 floats per iteration: VLD4 deinterleaves x[4j+k] into val[k], and the narrowing
 * pairs (bottom = val[0]/val[1], top = val[2]/val[3]; then bottom h0, top h1) put
 * every element back in its place. */
TM_MVE_INLINE void tm_mve_quantize_s8_body(const float *src, int8_t *dst, uint32_t blocks, float inv,
                                           int16_t zp, int8_t qmin, int8_t qmax, bool clamp) {
  int16x8_t h0 = vdupq_n_s16(0), h1 = vdupq_n_s16(0);
  int8x16_t b = vdupq_n_s8(0);
  for (uint32_t i = 0; i < blocks; ++i) {
    const float32x4x4_t v = vld4q_f32(src);
    h0 = vqmovnbq_s32(h0, vcvtnq_s32_f32(vmulq_n_f32(v.val[0], inv)));
    h1 = vqmovnbq_s32(h1, vcvtnq_s32_f32(vmulq_n_f32(v.val[1], inv)));
    h0 = vqmovntq_s32(h0, vcvtnq_s32_f32(vmulq_n_f32(v.val[2], inv)));
    h1 = vqmovntq_s32(h1, vcvtnq_s32_f32(vmulq_n_f32(v.val[3], inv)));
    h0 = vqaddq_n_s16(h0, zp);
    h1 = vqaddq_n_s16(h1, zp);
    b = vqmovnbq_s16(b, h0);
    b = vqmovntq_s16(b, h1);
    if (clamp) {
      b = vminq_s8(vmaxq_s8(b, vdupq_n_s8(qmin)), vdupq_n_s8(qmax));
    }
    vst1q_s8(dst, b);
    src += 16;
    dst += 16;
  }
}

static inline void tm_mve_quantize_s8(const float *src, int8_t *dst, uint32_t n, float inv, int32_t zp,
                                      int32_t qmin, int32_t qmax) {
  const uint32_t blocks = n / 16u;
  if (qmin == INT8_MIN && qmax == INT8_MAX) { /* the narrowing already clamps */
    tm_mve_quantize_s8_body(src, dst, blocks, inv, (int16_t)zp, INT8_MIN, INT8_MAX, false);
  } else {
    tm_mve_quantize_s8_body(src, dst, blocks, inv, (int16_t)zp, (int8_t)qmin, (int8_t)qmax, true);
  }
  src += 16u * blocks;
  dst += 16u * blocks;
  for (int32_t left = (int32_t)(n % 16u); left > 0; left -= 4) {
    const mve_pred16_t p = vctp32q((uint32_t)left);
    vstrbq_p_s32(dst, tm_mve_quantize4(vldrwq_z_f32(src, p), inv, zp, qmin, qmax), p);
    src += 4;
    dst += 4;
  }
}

/* int16 output: 8 floats per iteration; VLD2 puts even elements in val[0], odd in
 * val[1], the bottom/top narrowing interleaves them back. The int16 zero point can
 * undo a saturation to int16, so here it is added in int32, before narrowing. */
static inline void tm_mve_quantize_s16(const float *src, int16_t *dst, uint32_t n, float inv, int32_t zp,
                                       int32_t qmin, int32_t qmax) {
  const uint32_t blocks = n / 8u;
  const int16x8_t lo = vdupq_n_s16((int16_t)qmin), hi = vdupq_n_s16((int16_t)qmax);
  int16x8_t h = vdupq_n_s16(0);
  for (uint32_t i = 0; i < blocks; ++i) {
    const float32x4x2_t v = vld2q_f32(src);
    h = vqmovnbq_s32(h, vqaddq_n_s32(vcvtnq_s32_f32(vmulq_n_f32(v.val[0], inv)), zp));
    h = vqmovntq_s32(h, vqaddq_n_s32(vcvtnq_s32_f32(vmulq_n_f32(v.val[1], inv)), zp));
    h = vminq_s16(vmaxq_s16(h, lo), hi);
    vst1q_s16(dst, h);
    src += 8;
    dst += 8;
  }
  for (int32_t left = (int32_t)(n % 8u); left > 0; left -= 4) {
    const mve_pred16_t p = vctp32q((uint32_t)left);
    vstrhq_p_s32(dst, tm_mve_quantize4(vldrwq_z_f32(src, p), inv, zp, qmin, qmax), p);
    src += 4;
    dst += 4;
  }
}

/* Dequantize: four elements per step, widened by the load; 16 per iteration. */
TM_MVE_INLINE float32x4_t tm_mve_dequantize4(int32x4_t q, float32x4_t scale, int32x4_t zp) {
  return vmulq_f32(vcvtq_f32_s32(vsubq_s32(q, zp)), scale);
}

/* Out of line: inlined into the kernel entry, GCC 12 reloads the scalar operands from
 * the FPU bank on every step. */
static __attribute__((noinline, unused)) void tm_mve_dequantize_s8(const int8_t *src, float *dst, uint32_t n,
                                                                  float scale_f, int32_t zp_i) {
  const float32x4_t scale = vdupq_n_f32(scale_f);
  const int32x4_t zp = vdupq_n_s32(zp_i);
  /* Eight elements per step: one widening load to int16, the zero point off in int16,
   * then even lanes (VMOVLB) and odd lanes (VMOVLT) to int32; VST2 interleaves them
   * back into element order. */
  const int16x8_t zp16 = vdupq_n_s16((int16_t)zp_i);
  for (uint32_t blocks = n / 8u; blocks > 0; --blocks) {
    const int16x8_t q = vsubq_s16(vldrbq_s16(src), zp16);
    float32x4x2_t f;
    f.val[0] = vmulq_f32(vcvtq_f32_s32(vmovlbq_s16(q)), scale);
    f.val[1] = vmulq_f32(vcvtq_f32_s32(vmovltq_s16(q)), scale);
    vst2q_f32(dst, f);
    src += 8;
    dst += 8;
  }
  for (int32_t left = (int32_t)(n % 8u); left > 0; left -= 4) {
    const mve_pred16_t p = vctp32q((uint32_t)left);
    vstrwq_p_f32(dst, tm_mve_dequantize4(vldrbq_z_s32(src, p), scale, zp), p);
    src += 4;
    dst += 4;
  }
}

static __attribute__((noinline, unused)) void tm_mve_dequantize_s16(const int16_t *src, float *dst, uint32_t n,
                                                           float scale_f, int32_t zp_i) {
  const float32x4_t scale = vdupq_n_f32(scale_f);
  const int32x4_t zp = vdupq_n_s32(zp_i);
  const uint32_t blocks = n / 8u;
  for (uint32_t i = 0; i < blocks; ++i) {
    vst1q_f32(dst, tm_mve_dequantize4(vldrhq_s32(src), scale, zp));
    vst1q_f32(dst + 4, tm_mve_dequantize4(vldrhq_s32(src + 4), scale, zp));
    src += 8;
    dst += 8;
  }
  for (int32_t left = (int32_t)(n % 8u); left > 0; left -= 4) {
    const mve_pred16_t p = vctp32q((uint32_t)left);
    vstrwq_p_f32(dst, tm_mve_dequantize4(vldrhq_z_s32(src, p), scale, zp), p);
    src += 4;
    dst += 4;
  }
}

#endif /* TM_MVE_FLOAT */

#endif /* TORCHMCU_KERNELS_MVE_FLOAT_H */
