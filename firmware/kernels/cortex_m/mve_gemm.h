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

#include "kernel_args.h" /* tm_conv_quant */
#include "mve_requantize.h"

#if TM_KERNELS_USE_MVE

#include <arm_mve.h>
#include <stdbool.h>
#include <stdint.h>

#define TM_MVE_INLINE static inline __attribute__((always_inline))

/* Four int32 scalars as one vector (lane i = vi): two dual-lane moves (VMOV Qd[i], Qd[i+2],
 * Rt, Rt2, which no intrinsic offers; vsetq_lane takes four instructions and a VDUP). */
TM_MVE_INLINE int32x4_t tm_mve_lanes(int32_t v0, int32_t v1, int32_t v2, int32_t v3) {
  int32x4_t v;
  __asm__("vmov %q0[2], %q0[0], %1, %3\n\tvmov %q0[3], %q0[1], %2, %4"
          : "=w"(v)
          : "r"(v0), "r"(v1), "r"(v2), "r"(v3));
  return v;
}

/* (a . b0, a . b1, a . b2, a . b3) over k int8 items: a is loaded once per 16 bytes. */
TM_MVE_INLINE int32x4_t tm_mve_dot4_s8(const int8_t *a, const int8_t *b0, const int8_t *b1, const int8_t *b2,
                                       const int8_t *b3, int32_t k) {
  /* The main loop in assembly (VMLADAVA accumulates only into even registers; GCC 12
   * reloads pointers inside the loop): 10 instructions per 64 MACs. */
  register int32_t s0 __asm__("r0") = 0;
  register int32_t s1 __asm__("r2") = 0;
  register int32_t s2 __asm__("r4") = 0;
  register int32_t s3 __asm__("r6") = 0;
  register const int8_t *pa __asm__("r1") = a;
  register const int8_t *p0 __asm__("r3") = b0;
  register const int8_t *p1 __asm__("r5") = b1;
  register const int8_t *p2 __asm__("r9") = b2;
  register const int8_t *p3 __asm__("r11") = b3;
  register int32_t blocks __asm__("r8") = k >> 4; /* bound too: -O0 finds no free register */
  __asm__ volatile(
      "wls lr, %[n], 2f\n"
      "1:\n"
      "vldrb.u8 q0, [%[a]], #16\n"
      "vldrb.u8 q1, [%[b0]], #16\n"
      "vldrb.u8 q2, [%[b1]], #16\n"
      "vmladava.s8 %[s0], q0, q1\n"
      "vldrb.u8 q1, [%[b2]], #16\n"
      "vmladava.s8 %[s1], q0, q2\n"
      "vldrb.u8 q2, [%[b3]], #16\n"
      "vmladava.s8 %[s2], q0, q1\n"
      "vmladava.s8 %[s3], q0, q2\n"
      "le lr, 1b\n"
      "2:\n"
      : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [a] "+r"(pa), [b0] "+r"(p0), [b1] "+r"(p1),
        [b2] "+r"(p2), [b3] "+r"(p3)
      : [n] "r"(blocks)
      : "d0", "d1", "d2", "d3", "d4", "d5", "lr", "memory");
  a = pa;
  b0 = p0;
  b1 = p1;
  b2 = p2;
  b3 = p3;
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

/*
 * Four columns of k int8 items stored interleaved in 16-byte chunks: chunk c of column
 * j at byte (4c + j) * 16, so one pointer walks all four (immediate offsets 0/16/32/48)
 * and a dot loop keeps its registers for the accumulators. The last chunk of each
 * column may hold anything past item k: the weight rows are loaded predicated there,
 * so those bytes multiply by 0.
 */

/* Column j of an interleaved block (block + 16 j) = src[0..k); the tail chunk is
 * written whole (zeros past k), src is read only within [0, k). */
TM_MVE_INLINE void tm_mve_interleave_col_s8(int8_t *dst, const int8_t *src, int32_t k) {
  for (int32_t blocks = k >> 4; blocks > 0; --blocks) {
    vstrbq_s8(dst, vldrbq_s8(src));
    dst += 64;
    src += 16;
  }
  const uint32_t rest = (uint32_t)k & 15u;
  if (rest != 0) {
    vstrbq_s8(dst, vldrbq_z_s8(src, vctp8q(rest)));
  }
}

/* Column j of an interleaved block (block + 16 j) = value in all k items (whole chunks). */
TM_MVE_INLINE void tm_mve_interleave_fill_s8(int8_t *dst, int8_t value, int32_t k) {
  const int8x16_t v = vdupq_n_s8(value);
  for (int32_t chunks = (k + 15) >> 4; chunks > 0; --chunks) {
    vstrbq_s8(dst, v);
    dst += 64;
  }
}

/* One 16-byte block of tm_mve_dot4x2_il_s8's loop: six loads, eight multiply-accumulates with
 * `op` (vmladav starts the sums, vmladava adds to them). */
#define TM_DOT4X2_IL_BLOCK(op)               \
  "vldrb.u8 q0, [%[w0]], #16\n"              \
  "vldrb.u8 q1, [%[w1]], #16\n"              \
  "vldrb.u8 q2, [%[c], #16]\n"               \
  "vldrb.u8 q3, [%[c]], #64\n"               \
  op ".s8 %[a1], q2, q0\n"                    \
  op ".s8 %[b1], q2, q1\n"                    \
  "vldrb.u8 q2, [%[c], #-32]\n"              \
  op ".s8 %[a0], q3, q0\n"                    \
  op ".s8 %[b0], q3, q1\n"                    \
  "vldrb.u8 q3, [%[c], #-16]\n"              \
  op ".s8 %[a2], q2, q0\n"                    \
  op ".s8 %[b2], q2, q1\n"                    \
  op ".s8 %[a3], q3, q0\n"                    \
  op ".s8 %[b3], q3, q1\n"                    \
  "subs %[n], %[n], #1\n"

/* Dot products of weight rows w0 and w1 with the four interleaved columns: lanes j of
 * *d0 / *d1 are w0 . col_j / w1 . col_j. k < 16 (pointwise convs of few channels) takes one
 * predicated block that starts the sums, with no accumulators to clear. */
TM_MVE_INLINE void tm_mve_dot4x2_il_s8(const int8_t *cols, const int8_t *w0, const int8_t *w1, int32_t k,
                                       int32x4_t *d0, int32x4_t *d1) {
  /* The main loop in assembly: VMLADAVA accumulates only into even registers, and
   * GCC 12 shuffles the eight sums and spills pointers inside the loop (25 instructions
   * instead of these 16 per 128 MACs). The sums take the eight even registers (lr
   * among them), so the loop counts down r9 instead of using LE. The first block starts
   * the sums with VMLADAV (no accumulate), which saves zeroing eight registers. */
  register int32_t a0 __asm__("r0");
  register int32_t a1 __asm__("r2");
  register int32_t a2 __asm__("r4");
  register int32_t a3 __asm__("r6");
  register int32_t b0 __asm__("r8");
  register int32_t b1 __asm__("r10");
  register int32_t b2 __asm__("r12");
  register int32_t b3 __asm__("lr");
  register const int8_t *pc __asm__("r1") = cols;
  register const int8_t *pw0 __asm__("r3") = w0;
  register const int8_t *pw1 __asm__("r5") = w1;
  register int32_t blocks __asm__("r9") = k >> 4;
  if (blocks > 0) {
    __asm__ volatile(
        TM_DOT4X2_IL_BLOCK("vmladav")
        "beq 2f\n"
        "1:\n"
        TM_DOT4X2_IL_BLOCK("vmladava")
        "bne 1b\n"
        "2:\n"
        : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [b0] "=&r"(b0), [b1] "=&r"(b1),
          [b2] "=&r"(b2), [b3] "=&r"(b3), [c] "+r"(pc), [w0] "+r"(pw0), [w1] "+r"(pw1), [n] "+r"(blocks)
        :
        : "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "cc", "memory");
  } else { /* k < 16: the tail alone, starting the sums */
    const mve_pred16_t p = vctp8q((uint32_t)k);
    const int8x16_t x0 = vldrbq_z_s8(w0, p);
    const int8x16_t x1 = vldrbq_z_s8(w1, p);
    int8x16_t c = vldrbq_s8(cols);
    a0 = vmladavq_s8(c, x0);
    b0 = vmladavq_s8(c, x1);
    c = vldrbq_s8(cols + 16);
    a1 = vmladavq_s8(c, x0);
    b1 = vmladavq_s8(c, x1);
    c = vldrbq_s8(cols + 32);
    a2 = vmladavq_s8(c, x0);
    b2 = vmladavq_s8(c, x1);
    c = vldrbq_s8(cols + 48);
    a3 = vmladavq_s8(c, x0);
    b3 = vmladavq_s8(c, x1);
    *d0 = tm_mve_lanes(a0, a1, a2, a3);
    *d1 = tm_mve_lanes(b0, b1, b2, b3);
    return;
  }
  cols = pc;
  w0 = pw0;
  w1 = pw1;
  const uint32_t rest = (uint32_t)k & 15u;
  if (rest != 0) {
    const mve_pred16_t p = vctp8q(rest);
    const int8x16_t x0 = vldrbq_z_s8(w0, p);
    const int8x16_t x1 = vldrbq_z_s8(w1, p);
    int8x16_t c = vldrbq_s8(cols);
    a0 = vmladavaq_s8(a0, c, x0);
    b0 = vmladavaq_s8(b0, c, x1);
    c = vldrbq_s8(cols + 16);
    a1 = vmladavaq_s8(a1, c, x0);
    b1 = vmladavaq_s8(b1, c, x1);
    c = vldrbq_s8(cols + 32);
    a2 = vmladavaq_s8(a2, c, x0);
    b2 = vmladavaq_s8(b2, c, x1);
    c = vldrbq_s8(cols + 48);
    a3 = vmladavaq_s8(a3, c, x0);
    b3 = vmladavaq_s8(b3, c, x1);
  }
  *d0 = tm_mve_lanes(a0, a1, a2, a3);
  *d1 = tm_mve_lanes(b0, b1, b2, b3);
}

/* As tm_mve_dot4x2_il_s8 for one weight row. */
TM_MVE_INLINE int32x4_t tm_mve_dot4x1_il_s8(const int8_t *cols, const int8_t *w0, int32_t k) {
  int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int32_t blocks = k >> 4; blocks > 0; --blocks) {
    const int8x16_t x0 = vldrbq_s8(w0);
    a0 = vmladavaq_s8(a0, vldrbq_s8(cols), x0);
    a1 = vmladavaq_s8(a1, vldrbq_s8(cols + 16), x0);
    a2 = vmladavaq_s8(a2, vldrbq_s8(cols + 32), x0);
    a3 = vmladavaq_s8(a3, vldrbq_s8(cols + 48), x0);
    cols += 64;
    w0 += 16;
  }
  const uint32_t rest = (uint32_t)k & 15u;
  if (rest != 0) {
    const int8x16_t x0 = vldrbq_z_s8(w0, vctp8q(rest));
    a0 = vmladavaq_s8(a0, vldrbq_s8(cols), x0);
    a1 = vmladavaq_s8(a1, vldrbq_s8(cols + 16), x0);
    a2 = vmladavaq_s8(a2, vldrbq_s8(cols + 32), x0);
    a3 = vmladavaq_s8(a3, vldrbq_s8(cols + 48), x0);
  }
  return tm_mve_lanes(a0, a1, a2, a3);
}

/* Scatter offsets of four output pixels `stride` bytes apart of which the first `count` (1..4)
 * exist: lane j at min(j, count - 1) * stride. Lanes past the last pixel repeat it (the columns
 * do), so they store its value again at its own address and no predicate is needed. */
TM_MVE_INLINE uint32x4_t tm_mve_pixel_offsets(uint32_t stride, int32_t count) {
  return vmulq_n_u32(vminq_u32(vidupq_n_u32(0u, 1), vdupq_n_u32((uint32_t)count - 1u)), stride);
}

/* clamp(requantize(acc + kterm, mult, shift) + q's output offset): four pixels' int8 outputs
 * of one channel, in int32 lanes. With right_only the caller knows shift < 0: no left shift,
 * and the rounding fix-up applies to every negative lane (tm_mve_requantize_n's general form
 * selects it by the shift's sign). */
TM_MVE_INLINE int32x4_t tm_mve_channel_out(int32x4_t acc, int32_t kterm, int32_t mult, int32_t shift, bool right_only,
                                           const tm_conv_quant *q, int32x4_t act_min, int32x4_t act_max) {
  int32x4_t v;
  if (right_only) {
    const int32x4_t p = vqrdmulhq_n_s32(vaddq_n_s32(acc, kterm), mult);
    v = vrshlq_n_s32(vaddq_s32(p, vshrq_n_s32(p, 31)), shift);
  } else {
    v = tm_mve_requantize_n(vaddq_n_s32(acc, kterm), mult, shift > 0 ? shift : 0, shift < 0 ? shift : 0);
  }
  return vminq_s32(vmaxq_s32(vqaddq_n_s32(v, q->output_offset), act_min), act_max);
}

/* Every shift of channels [0, n) is negative (a right shift): tm_mve_channel_out's right_only. */
TM_MVE_INLINE bool tm_mve_right_shifts_only(const int32_t *shifts, int32_t n) {
  int32_t top = INT32_MIN;
  for (int32_t c = 0; c < n; ++c) {
    top = shifts[c] > top ? shifts[c] : top;
  }
  return top < 0;
}

/* Output channels [oc, end) of four interleaved columns: tm_mve_cols4_channels, with the
 * requantization's form fixed (right_only: tm_mve_channel_out). */
TM_MVE_INLINE void tm_mve_cols4_channels_as(const int8_t *cols, const int8_t *w, size_t wstride, int32_t k,
                                            int32_t oc, int32_t end, const int32_t *kbias, const tm_conv_quant *q,
                                            int8_t *dst, uint32x4_t offsets, bool right_only) {
  const int32x4_t act_min = vdupq_n_s32(q->act_min), act_max = vdupq_n_s32(q->act_max);
  const int32_t *mults = q->mults, *shifts = q->shifts;
  for (; oc + 1 < end; oc += 2) {
    int32x4_t acc0, acc1;
    tm_mve_dot4x2_il_s8(cols, w, w + wstride, k, &acc0, &acc1);
    w += 2u * wstride;
    vstrbq_scatter_offset_s32(
        dst + oc, offsets, tm_mve_channel_out(acc0, kbias[oc], mults[oc], shifts[oc], right_only, q, act_min, act_max));
    vstrbq_scatter_offset_s32(dst + oc + 1, offsets,
                              tm_mve_channel_out(acc1, kbias[oc + 1], mults[oc + 1], shifts[oc + 1], right_only, q,
                                                 act_min, act_max));
  }
  if (oc < end) {
    const int32x4_t acc = tm_mve_dot4x1_il_s8(cols, w, k);
    vstrbq_scatter_offset_s32(
        dst + oc, offsets, tm_mve_channel_out(acc, kbias[oc], mults[oc], shifts[oc], right_only, q, act_min, act_max));
  }
}

/*
 * Output channels [oc, end) of four interleaved columns (k items each): channel c's weight
 * row is w + (c - oc) * wstride, its constant term (bias + input_offset * sum of the row)
 * kbias[c]. Each channel's four dot products (two channels at a time,
 * tm_mve_dot4x2_il_s8) are requantized with q's parameters of c, offset and clamped, and
 * stored by one scatter: column j's byte at dst + c + offsets[j] (tm_mve_pixel_offsets).
 * right_only: tm_mve_right_shifts_only of q's shifts (for all of the layer's channels,
 * computed once per call), which takes the shorter requantization.
 */
TM_MVE_INLINE void tm_mve_cols4_channels(const int8_t *cols, const int8_t *w, size_t wstride, int32_t k, int32_t oc,
                                         int32_t end, const int32_t *kbias, const tm_conv_quant *q, int8_t *dst,
                                         uint32x4_t offsets, bool right_only) {
  if (right_only) {
    tm_mve_cols4_channels_as(cols, w, wstride, k, oc, end, kbias, q, dst, offsets, true);
  } else {
    tm_mve_cols4_channels_as(cols, w, wstride, k, oc, end, kbias, q, dst, offsets, false);
  }
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
