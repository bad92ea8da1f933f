/*
 * Integer helpers shared by the int8 kernels: the one definition of
 * requantization (docs/operators.md, "requantize"), saturation and rounding.
 * All intermediate arithmetic is 64-bit so nothing wraps; right shifts of
 * negative values are arithmetic (as on gcc, clang and arm-none-eabi-gcc).
 */
#ifndef TORCHMCU_KERNELS_REQUANTIZE_H
#define TORCHMCU_KERNELS_REQUANTIZE_H

#include <stdint.h>

#define TM_I32_MIN ((int64_t)INT32_MIN)
#define TM_I32_MAX ((int64_t)INT32_MAX)

static inline int64_t tm_sat_i32(int64_t v) {
  return v < TM_I32_MIN ? TM_I32_MIN : (v > TM_I32_MAX ? TM_I32_MAX : v);
}

static inline int64_t tm_clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

/* x / 2^e rounded half away from zero; 0 <= e <= 62. */
static inline int64_t tm_round_div_pow2(int64_t x, int32_t e) {
  const int64_t mask = ((int64_t)1 << e) - 1;
  const int64_t remainder = x & mask;
  const int64_t q = x >> e;
  const int64_t threshold = (mask >> 1) + (q < 0 ? 1 : 0);
  return q + (remainder > threshold ? 1 : 0);
}

/*
 * CMSIS-NN requantization of x by (multiplier, shift), shift in [-31, 31]:
 * saturate(x * 2^left) -> (v*m + 2^30) >> 31 -> rounding right shift.
 */
static inline int64_t tm_requantize(int64_t x, int32_t multiplier, int32_t shift) {
  int64_t v = tm_sat_i32(x);
  if (shift > 0) {
    v = tm_sat_i32(v * ((int64_t)1 << shift));
  }
  const int64_t p = (v * (int64_t)multiplier + ((int64_t)1 << 30)) >> 31;
  return shift < 0 ? tm_round_div_pow2(p, -shift) : p;
}

/* Saturating rounding doubling high multiply (VQRDMULH), for softmax. */
static inline int64_t tm_srdhm(int64_t a, int64_t b) {
  if (a == TM_I32_MIN && b == TM_I32_MIN) {
    return TM_I32_MAX;
  }
  const int64_t nudge = ((a < 0) != (b < 0)) ? (1 - ((int64_t)1 << 30)) : ((int64_t)1 << 30);
  const int64_t t = a * b + nudge;
  return t >= 0 ? (t >> 31) : -((-t) >> 31);
}

#endif /* TORCHMCU_KERNELS_REQUANTIZE_H */
