/*
 * Requantization of four int32 lanes at once with Helium (MVE), bit-exact with
 * tm_requantize (requantize.h) and reference.requantize (docs/operators.md):
 *
 *   v = saturate_int32(x * 2^ls)      VQSHL by the per-lane left shift ls = max(s, 0)
 *   p = (v * m + 2^30) >> 31          VQRDMULH: floor((2*v*m + 2^31) / 2^32), same value
 *   q = p / 2^rs, half away from 0    VRSHL by -rs rounds half up; subtracting 1 from
 *                                     negative p first (only when rs > 0) turns that
 *                                     into half away from zero
 *
 * Why the last step is exact: for p < 0 and rs > 0, floor((p - 1 + 2^(rs-1)) / 2^rs)
 * equals round-half-away(p / 2^rs) for every remainder, and p - 1 cannot wrap because
 * p >= -2^31 + 1 for int32 operands. The fix-up mask is (p & -rs) >> 31: the sign bit
 * of -rs is set exactly when rs > 0.
 *
 * One edge differs inside the helper and not in any result: for v == m == INT32_MIN
 * VQRDMULH saturates p to 2^31 - 1 where the reference has 2^31. A rounding right shift
 * by rs >= 1 maps both to the same value, and with rs == 0 both are far outside int8, so
 * tm_mve_requantize_out (saturating add of the output offset, then clamp) returns the
 * same int8 as the reference. Callers that keep the int32 (quantized_add's intermediate
 * sums) cannot reach it: their multipliers are > INT32_MIN.
 *
 * Safe to include on every target: everything below is compiled only for MVE targets.
 * TM_KERNELS_USE_MVE is the switch the kernels test (1: Helium paths); defining
 * TM_KERNELS_SCALAR_ONLY (e.g. -DTM_KERNELS_SCALAR_ONLY in CMAKE_C_FLAGS) builds an MVE
 * target with the scalar paths, for comparisons.
 */
#ifndef TORCHMCU_KERNELS_MVE_REQUANTIZE_H
#define TORCHMCU_KERNELS_MVE_REQUANTIZE_H

#if defined(__ARM_FEATURE_MVE) && !defined(TM_KERNELS_SCALAR_ONLY)
#define TM_KERNELS_USE_MVE 1
#else
#define TM_KERNELS_USE_MVE 0
#endif

/* For scalar functions that MVE builds keep only as a fallback (or not at all). */
#define TM_MAYBE_UNUSED __attribute__((unused))

/* A scalar fallback that Helium builds reach only in rare cases (absurd scales, huge windows):
 * out of line and optimized for size there; a plain function in scalar builds. */
#if TM_KERNELS_USE_MVE
#define TM_MVE_FALLBACK __attribute__((noinline, cold))
#else
#define TM_MVE_FALLBACK
#endif

/* Work a Helium kernel does once per call or in its prepare step, not per element (argument
 * checks, geometry): out of line and optimized for size, as the image's size counts and its
 * time does not. Not `cold`: GCC would then treat every caller that always calls it, the
 * kernel's own loops included, as cold code too. */
#if TM_KERNELS_USE_MVE && defined(__GNUC__) && !defined(__clang__)
#define TM_ONCE_PER_CALL __attribute__((noinline, optimize("Os")))
#else
#define TM_ONCE_PER_CALL
#endif

#if TM_KERNELS_USE_MVE

#include <arm_mve.h>
#include <stdint.h>

/* Per-lane requantization parameters: multiplier, left shift (>= 0) and the negated
 * right shift (<= 0), the form the instructions take. */
typedef struct {
  int32x4_t multiplier;
  int32x4_t left;
  int32x4_t right_neg;
} tm_mve_requant;

/* The same (multiplier, shift) in all four lanes (per-tensor quantization). */
static inline tm_mve_requant tm_mve_requant_dup(int32_t multiplier, int32_t shift) {
  tm_mve_requant r;
  r.multiplier = vdupq_n_s32(multiplier);
  r.left = vdupq_n_s32(shift > 0 ? shift : 0);
  r.right_neg = vdupq_n_s32(shift < 0 ? shift : 0);
  return r;
}

/* Four consecutive channels' parameters (per-channel quantization). The arrays are
 * int32 tensors: 4-byte aligned, as VLDRW needs. */
static inline tm_mve_requant tm_mve_requant_load(const int32_t *multipliers, const int32_t *shifts) {
  const int32x4_t s = vldrwq_s32(shifts);
  const int32x4_t zero = vdupq_n_s32(0);
  tm_mve_requant r;
  r.multiplier = vldrwq_s32(multipliers);
  r.left = vmaxq_s32(s, zero);
  r.right_neg = vminq_s32(s, zero);
  return r;
}

/* As tm_mve_requant_load for the lanes `pred` enables (tail); other lanes are zero,
 * which requantizes anything to 0, and nothing beyond the enabled lanes is read. */
static inline tm_mve_requant tm_mve_requant_load_p(const int32_t *multipliers, const int32_t *shifts,
                                                   mve_pred16_t pred) {
  const int32x4_t s = vldrwq_z_s32(shifts, pred);
  const int32x4_t zero = vdupq_n_s32(0);
  tm_mve_requant r;
  r.multiplier = vldrwq_z_s32(multipliers, pred);
  r.left = vmaxq_s32(s, zero);
  r.right_neg = vminq_s32(s, zero);
  return r;
}

/* requantize(x, m, s) on each lane (x: int32 accumulators). */
static inline int32x4_t tm_mve_requantize(int32x4_t x, tm_mve_requant r) {
  const int32x4_t v = vqshlq_s32(x, r.left);
  int32x4_t p = vqrdmulhq_s32(v, r.multiplier);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(p, r.right_neg), 31);
  p = vaddq_s32(p, fixup);
  return vrshlq_s32(p, r.right_neg);
}

/* The per-tensor form with scalar operands (no vector registers held for the
 * parameters): left = max(s, 0), right_neg = min(s, 0). */
static inline int32x4_t tm_mve_requantize_n(int32x4_t x, int32_t multiplier, int32_t left,
                                            int32_t right_neg) {
  const int32x4_t v = vqshlq_r_s32(x, left);
  int32x4_t p = vqrdmulhq_n_s32(v, multiplier);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(p, vdupq_n_s32(right_neg)), 31);
  p = vaddq_s32(p, fixup);
  return vrshlq_n_s32(p, right_neg);
}

/* clamp(requantize(acc) + output_offset, act_min, act_max): the int8 output value of
 * every conv/linear kernel, still in int32 lanes (store with vstrbq_s32). The offset is
 * added with saturation, as the reference's int64 sum followed by the clamp. */
static inline int32x4_t tm_mve_requantize_out(int32x4_t acc, tm_mve_requant r, int32_t output_offset,
                                              int32_t act_min, int32_t act_max) {
  int32x4_t q = vqaddq_n_s32(tm_mve_requantize(acc, r), output_offset);
  q = vmaxq_s32(q, vdupq_n_s32(act_min));
  return vminq_s32(q, vdupq_n_s32(act_max));
}

/* The shifts of an elementwise add's three requantizations split for tm_mve_requantize_n:
 * the operands' with the add's input headroom (2^input_left_shift) folded into their left
 * shifts (saturate(x * 2^(h+ls)) equals saturate(saturate(x * 2^h) * 2^ls) while
 * |x| * 2^h < 2^31). */
typedef struct {
  int32_t a_left, a_right, b_left, b_right, out_left, out_right;
} tm_mve_add_shifts;

static inline tm_mve_add_shifts tm_mve_add_shifts_of(int32_t input_left_shift, int32_t a_shift, int32_t b_shift,
                                                     int32_t out_shift) {
  tm_mve_add_shifts s;
  s.a_left = input_left_shift + (a_shift > 0 ? a_shift : 0);
  s.a_right = a_shift < 0 ? a_shift : 0;
  s.b_left = input_left_shift + (b_shift > 0 ? b_shift : 0);
  s.b_right = b_shift < 0 ? b_shift : 0;
  s.out_left = out_shift > 0 ? out_shift : 0;
  s.out_right = out_shift < 0 ? out_shift : 0;
  return s;
}

#endif /* TM_KERNELS_USE_MVE */

#endif /* TORCHMCU_KERNELS_MVE_REQUANTIZE_H */
