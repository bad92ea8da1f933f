/* cortex_m::quantized_depthwise_conv2d.out and _nhwc.out - int8 depthwise convolution,
 * NHWC activations, [1, KH, KW, Cout] weights (docs/operators.md). */
#if defined(__ARM_FEATURE_MVE) && defined(__GNUC__) && !defined(__clang__)
/* GCC 12's pre-allocation scheduler hoists the Helium loads of the unrolled taps
 * ahead of their uses and runs out of the eight Q registers (spills, ~2x the
 * instructions); source order is already a good schedule. Before the includes so the
 * intrinsics inline under the same options. */
#pragma GCC optimize("no-schedule-insns")
#endif
#include <stddef.h>

#include "cortex_m_kernels.h"
#include "conv_mve.h"
#include "kernel_args.h"
#include "mve_gemm.h"
#include "mve_requantize.h"
#include "requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D, x)

typedef struct {
  const int8_t *input;
  const int8_t *weight;
  int8_t *out;
  int32_t in_dims[4];  /* N, H, W, C */
  int32_t out_dims[4]; /* N, OH, OW, Cout */
  int32_t kh, kw, depth_multiplier;
  tm_window win;
  tm_conv_quant q;
} dw_params;

size_t tm_quantized_depthwise_conv2d_scratch_bytes(const int32_t input_nhwc[4], const int32_t weight_1hwc[4]) {
  (void)input_nhwc;
  (void)weight_1hwc;
  return 0;
}

TM_MAYBE_UNUSED static void depthwise_scalar(const dw_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t cout = p->out_dims[3];
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
      for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
        const int32_t ih0 = oh * p->win.stride_h - p->win.pad_h;
        const int32_t iw0 = ow * p->win.stride_w - p->win.pad_w;
        for (int32_t oc = 0; oc < cout; ++oc) {
          const int32_t ic = oc / p->depth_multiplier;
          int32_t acc = p->q.bias != NULL ? p->q.bias[oc] : 0;
          for (int32_t ky = 0; ky < p->kh; ++ky) {
            const int32_t ih = ih0 + ky * p->win.dil_h;
            if (ih < 0 || ih >= h) {
              continue;
            }
            for (int32_t kx = 0; kx < p->kw; ++kx) {
              const int32_t iw = iw0 + kx * p->win.dil_w;
              if (iw < 0 || iw >= w) {
                continue;
              }
              const int32_t xv = image[((size_t)ih * (size_t)w + (size_t)iw) * (size_t)c + (size_t)ic];
              const int32_t wv = p->weight[((size_t)ky * (size_t)p->kw + (size_t)kx) * (size_t)cout + (size_t)oc];
              acc += (xv + p->q.input_offset) * wv;
            }
          }
          const int64_t r = tm_requantize(acc, p->q.mults[oc], p->q.shifts[oc]) + p->q.output_offset;
          *dst++ = (int8_t)tm_clamp64(r, p->q.act_min, p->q.act_max);
        }
      }
    }
  }
}

#if TM_KERNELS_USE_MVE
/*
 * Helium path for depth_multiplier 1. Channels are contiguous in input, weight and
 * output, so a block of DW_BLOCK of them runs side by side in vector lanes; the blocks
 * are the outer loop, so each block's constants are prepared once on the stack. With
 * C >= DW_BLOCK every block is a full one: the last starts at C - DW_BLOCK and
 * recomputes (the same bytes) channels of the one before; only C < DW_BLOCK takes
 * predicated (tail) loads and stores.
 *
 * - the input offset is folded into the bias: acc = bias + input_offset * sum(w) +
 *   sum(x * w), so the taps are pure int8 x int8 products. A tap outside the image
 *   either reads a 16-byte row of the input zero point (-input_offset, an int8 by the
 *   argument check), whose products cancel the folded term: (zp + input_offset) * w = 0,
 *   or (3x3 kernels) is replaced by a tap inside the image with zero weights and a
 *   bias without its folded term (dw_set).
 * - each tap loads 2 x 8 channels widened to int16 and multiplies them widening into
 *   int32 (VMULLB/VMULLT), so the four int32 accumulators hold channels
 *   {0,2,4,6}, {1,3,5,7}, {8,..,14}, {9,..,15}; bias and requantization parameters are
 *   stored in that order, and the narrowing VQMOVNB/VQMOVNT puts the channels back in
 *   order.
 * - 3x3 kernels are unrolled; a row of outputs is three runs (left border columns,
 *   interior, right border columns) of one loop with pointers walking by the stride; a
 *   border run's pointers sit one column inwards, with a window of weights whose
 *   outside column is zero (dw_set). Rows that do not split that way, and other kernel
 *   shapes, loop over their taps per pixel.
 * Output offset and clamp run on int16 lanes: the int8 argument ranges make the
 * saturating int16 forms give the reference's int32 result.
 */
#define DW_BLOCK 16

/* Weight sets of a 3x3 block by the kernel rows: all, row 0 zeroed, row 2 zeroed. */
enum { DW_ROWS_ALL, DW_ROWS_NO_TOP, DW_ROWS_NO_BOTTOM, DW_ROW_SETS };

/*
 * One row set's weights as five tap columns, column-major (tap (ky, kx) of column
 * kx + 1 at weight[3 * (kx + 1) + ky]), columns 0 and 4 zero. A window of three columns is
 * a weight set: window 1 the kernel, window 0 (zero, column 0, column 1) a right border
 * pixel's with its tap pointers one column to the left, window 2 (column 1, column 2,
 * zero) a left border pixel's with its pointers one column to the right, so every tap
 * read is inside the image. Window i's bias (with the folded input offset of its taps)
 * is bias[i], at the same distance from the window as for the others, so one pointer at
 * the window's centre tap reaches both by immediate offsets.
 */
typedef struct {
  int16_t weight[15][DW_BLOCK]; /* zero beyond the channels */
  int32_t bias[3][24];          /* bias + input_offset * sum(w) of the window, accumulator order */
} __attribute__((aligned(16))) dw_set;

/* Window i's centre tap, and its bias relative to it (DW_ASM_RUN's offsets). */
#define DW_WINDOW(set, i) ((set)->weight[3 * (i) + 4])
#define DW_WINDOW_BIAS 176 /* int16 elements: 352 bytes */

typedef struct {
  int16_t act_min[8], act_max[8]; /* clamp bounds in all int16 lanes */
  int32_t mult[DW_BLOCK];         /* requantization, permuted as the accumulators */
  int32_t left[DW_BLOCK];
  int32_t right_neg[DW_BLOCK];
  int8_t zero_point[DW_BLOCK]; /* the padding row */
  int16_t output_offset;
  bool right_only; /* all DW_BLOCK lanes' shifts are negative (right shifts) */
  dw_set set[DW_ROW_SETS];
} __attribute__((aligned(16))) dw_block_consts;

/* The all-taps bias (any kernel) is window 1's of set DW_ROWS_ALL. */
#define DW_BIAS(k) ((k)->set[DW_ROWS_ALL].bias[1])

/* Makes a pointer opaque to the optimiser (once per pixel in the loops below: GCC 12 otherwise hoists
 * every base + offset of the unrolled taps out of the loop and spills them). */
#define DW_OPAQUE(ptr) __asm__("" : "+r"(ptr))

/* The block's constants; weight sets only for 3x3 kernels. Lanes beyond `lanes` get
 * zero weights, bias and multipliers. */
__attribute__((noinline)) static void dw_prepare_block(const dw_params *p, int32_t c0, int32_t lanes, bool k3x3, dw_block_consts *k) {
  const int32_t c = p->in_dims[3], taps = p->kh * p->kw, off = p->q.input_offset;
  const mve_pred16_t plo = vctp16q((uint32_t)(lanes > 8 ? 8 : lanes));
  const mve_pred16_t phi = vctp16q((uint32_t)(lanes > 8 ? lanes - 8 : 0));
  const uint32x4_t limit = vdupq_n_u32((uint32_t)lanes);
  int32x4_t top = vdupq_n_s32(INT32_MIN); /* the largest shift */
  /* Bias and requantization parameters; the bias without the folded term for now. */
  for (int32_t j = 0; j < 4; ++j) {
    DW_OPAQUE(j); /* a loop, not four unrolled copies */
    /* Accumulator j holds channels base, base + 2, base + 4, base + 6. */
    const uint32x4_t ch = vidupq_n_u32((uint32_t)((j >> 1) * 8 + (j & 1)), 2);
    const mve_pred16_t pj = vcmphiq_u32(limit, ch);
    const int32x4_t b =
        p->q.bias != NULL ? vldrwq_gather_shifted_offset_z_s32(p->q.bias + c0, ch, pj) : vdupq_n_s32(0);
    vstrwq_s32(DW_BIAS(k) + 4 * j, b);
    const int32x4_t s = vldrwq_gather_shifted_offset_z_s32(p->q.shifts + c0, ch, pj);
    top = vmaxq_s32(top, s);
    vstrwq_s32(k->mult + 4 * j, vldrwq_gather_shifted_offset_z_s32(p->q.mults + c0, ch, pj));
    vstrwq_s32(k->left + 4 * j, vmaxq_s32(s, vdupq_n_s32(0)));
    vstrwq_s32(k->right_neg + 4 * j, vminq_s32(s, vdupq_n_s32(0)));
  }
  vstrbq_s8(k->zero_point, vdupq_n_s8((int8_t)(-off)));
  vstrhq_s16(k->act_min, vdupq_n_s16((int16_t)p->q.act_min));
  vstrhq_s16(k->act_max, vdupq_n_s16((int16_t)p->q.act_max));
  k->output_offset = (int16_t)p->q.output_offset;
  k->right_only = lanes == DW_BLOCK && vmaxvq_s32(INT32_MIN, top) < 0;
  /* The folded input offsets: other kernels' tap sums in int32 lanes, 3x3 windows' in
   * int16 lanes (at most 9 * 128). */
  const int32_t *b0 = DW_BIAS(k);
  const int32x4_t b[4] = {vldrwq_s32(b0), vldrwq_s32(b0 + 4), vldrwq_s32(b0 + 8), vldrwq_s32(b0 + 12)};
  if (!k3x3) {
    int32x4_t sum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int32_t t = 0; t < taps; ++t) {
      const int8_t *wp = p->weight + (size_t)t * (size_t)c + (size_t)c0;
      const int16x8_t wl = vldrbq_z_s16(wp, plo), wh = vldrbq_z_s16(wp + 8, phi);
      sum[0] = vaddq_s32(sum[0], vmovlbq_s16(wl));
      sum[1] = vaddq_s32(sum[1], vmovltq_s16(wl));
      sum[2] = vaddq_s32(sum[2], vmovlbq_s16(wh));
      sum[3] = vaddq_s32(sum[3], vmovltq_s16(wh));
    }
    for (int32_t j = 0; j < 4; ++j) {
      /* Wraps like the accumulator itself: only the final sum modulo 2^32 matters. */
      vstrwq_s32(DW_BIAS(k) + 4 * j, vmlaq_n_s32(b[j], sum[j], off));
    }
    return;
  }
  /* 3x3: the three row sets' weights tap by tap, then each window's sum from the column
   * sums (int16 lanes, at most 9 * 128). */
  const int16x8_t zero = vdupq_n_s16(0);
  for (int32_t t = 0; t < 9; ++t) {
    DW_OPAQUE(t); /* a loop, not nine unrolled copies */
    const int32_t ky = t / 3, at = 3 * (t % 3 + 1) + ky;
    const int8_t *wp = p->weight + (size_t)t * (size_t)c + (size_t)c0;
    const int16x8_t wl = vldrbq_z_s16(wp, plo), wh = vldrbq_z_s16(wp + 8, phi);
    for (int32_t rows = 0; rows < DW_ROW_SETS; ++rows) {
      const bool out = (rows == DW_ROWS_NO_TOP && ky == 0) || (rows == DW_ROWS_NO_BOTTOM && ky == 2);
      vstrhq_s16(k->set[rows].weight[at], out ? zero : wl);
      vstrhq_s16(k->set[rows].weight[at] + 8, out ? zero : wh);
    }
  }
  for (int32_t rows = 0; rows < DW_ROW_SETS; ++rows) {
    DW_OPAQUE(rows);
    dw_set *s = &k->set[rows];
    int16_t sum[5][DW_BLOCK]; /* column sums; columns 0 and 4 are zero */
    for (int32_t x = 0; x < 5; ++x) {
      int16x8_t l = zero, h = zero;
      for (int32_t ky = 0; ky < 3; ++ky) {
        int16_t *wv = s->weight[3 * x + ky];
        if (x == 0 || x == 4) {
          vstrhq_s16(wv, zero);
          vstrhq_s16(wv + 8, zero);
        } else {
          l = vaddq_s16(l, vldrhq_s16(wv));
          h = vaddq_s16(h, vldrhq_s16(wv + 8));
        }
      }
      vstrhq_s16(sum[x], l);
      vstrhq_s16(sum[x] + 8, h);
    }
    for (int32_t i = 0; i < 3; ++i) {
      DW_OPAQUE(i);
      const int16x8_t l = vaddq_s16(vaddq_s16(vldrhq_s16(sum[i]), vldrhq_s16(sum[i + 1])), vldrhq_s16(sum[i + 2]));
      const int16x8_t h =
          vaddq_s16(vaddq_s16(vldrhq_s16(sum[i] + 8), vldrhq_s16(sum[i + 1] + 8)), vldrhq_s16(sum[i + 2] + 8));
      vstrwq_s32(s->bias[i], vmlaq_n_s32(b[0], vmovlbq_s16(l), off));
      vstrwq_s32(s->bias[i] + 4, vmlaq_n_s32(b[1], vmovltq_s16(l), off));
      vstrwq_s32(s->bias[i] + 8, vmlaq_n_s32(b[2], vmovlbq_s16(h), off));
      vstrwq_s32(s->bias[i] + 12, vmlaq_n_s32(b[3], vmovltq_s16(h), off));
    }
  }
}

typedef struct {
  int32x4_t a0, a1, a2, a3;
} dw_acc;

TM_MVE_INLINE dw_acc dw_acc_init(const int32_t *bias) {
  dw_acc a;
  a.a0 = vldrwq_s32(bias);
  a.a1 = vldrwq_s32(bias + 4);
  a.a2 = vldrwq_s32(bias + 8);
  a.a3 = vldrwq_s32(bias + 12);
  return a;
}

/* Keeps the sum a chain: GCC 12 would otherwise reassociate the taps' adds into a tree
 * and spill the products. */
#define DW_CHAIN(a) __asm__("" : "+w"((a)->a0), "+w"((a)->a1), "+w"((a)->a2), "+w"((a)->a3))

/* One tap: x the block's 16 input bytes (or the zero-point row), w its 16 weights (int16
 * from a weight set, or int8 from the weight tensor: `wide`); each half is loaded where it
 * is used, so only 4 accumulators + 3 registers are live. Weight sets are zero beyond the
 * channels, so only the tensor's reads are predicated. */
TM_MVE_INLINE void dw_tap(dw_acc *a, const int8_t *x, const void *w, bool wide, bool tail, mve_pred16_t plo,
                          mve_pred16_t phi) {
  const int16_t *w16 = (const int16_t *)w;
  const int8_t *w8 = (const int8_t *)w;
  const int16x8_t xlo = tail ? vldrbq_z_s16(x, plo) : vldrbq_s16(x);
  const int16x8_t wlo = wide ? vldrhq_s16(w16) : (tail ? vldrbq_z_s16(w8, plo) : vldrbq_s16(w8));
  a->a0 = vaddq_s32(a->a0, vmullbq_int_s16(xlo, wlo));
  a->a1 = vaddq_s32(a->a1, vmulltq_int_s16(xlo, wlo));
  const int16x8_t xhi = tail ? vldrbq_z_s16(x + 8, phi) : vldrbq_s16(x + 8);
  const int16x8_t whi = wide ? vldrhq_s16(w16 + 8) : (tail ? vldrbq_z_s16(w8 + 8, phi) : vldrbq_s16(w8 + 8));
  a->a2 = vaddq_s32(a->a2, vmullbq_int_s16(xhi, whi));
  a->a3 = vaddq_s32(a->a3, vmulltq_int_s16(xhi, whi));
  DW_CHAIN(a);
}

TM_MVE_INLINE int32x4_t dw_requant4(int32x4_t acc, const dw_block_consts *k, int32_t j) {
  tm_mve_requant r;
  r.multiplier = vldrwq_s32(k->mult + 4 * j);
  r.left = vldrwq_s32(k->left + 4 * j);
  r.right_neg = vldrwq_s32(k->right_neg + 4 * j);
  return tm_mve_requantize(acc, r);
}

/* Requantizes the block's accumulators and stores its output bytes. */
TM_MVE_INLINE void dw_store(const dw_block_consts *k, dw_acc a, int8_t *dst, bool tail, mve_pred16_t plo,
                            mve_pred16_t phi) {
  const int16x8_t lo16 = vldrhq_s16(k->act_min), hi16 = vldrhq_s16(k->act_max);
  int16x8_t q = vqmovnbq_s32(vuninitializedq_s16(), dw_requant4(a.a0, k, 0));
  q = vqmovntq_s32(q, dw_requant4(a.a1, k, 1));
  q = vminq_s16(vmaxq_s16(vqaddq_n_s16(q, k->output_offset), lo16), hi16);
  if (tail) {
    vstrbq_p_s16(dst, q, plo);
  } else {
    vstrbq_s16(dst, q);
  }
  q = vqmovnbq_s32(vuninitializedq_s16(), dw_requant4(a.a2, k, 2));
  q = vqmovntq_s32(q, dw_requant4(a.a3, k, 3));
  q = vminq_s16(vmaxq_s16(vqaddq_n_s16(q, k->output_offset), lo16), hi16);
  if (tail) {
    vstrbq_p_s16(dst + 8, q, phi);
  } else {
    vstrbq_s16(dst + 8, q);
  }
}

/* dw_store of a tail block, out of line: the tail paths share it. */
__attribute__((noinline)) static void dw_store_tail(const dw_block_consts *k, dw_acc a, int8_t *dst, mve_pred16_t plo,
                                                    mve_pred16_t phi) {
  dw_store(k, a, dst, true, plo, phi);
}

/* dw_store, inline for a full block. */
TM_MVE_INLINE void dw_store_any(const dw_block_consts *k, dw_acc a, int8_t *dst, bool tail, mve_pred16_t plo,
                                mve_pred16_t phi) {
  if (tail) {
    dw_store_tail(k, a, dst, plo, phi);
  } else {
    dw_store(k, a, dst, false, plo, phi);
  }
}

/*
 * One full 16-channel 3x3 pixel in Helium assembly (GCC 12 keeps too few values in
 * registers for the intrinsics form: ~20% more instructions). Fixed registers: q0-q3
 * accumulators, q4-q7 temporaries. `s` points at a window's centre tap (dw_set: tap
 * (ky, kx) at (3 * kx + ky - 4) * 32, the bias at +352), `k` at dw_block_consts; r0..r2
 * at the centre tap of the three kernel rows, the side taps `col` bytes before and after.
 * Same arithmetic as dw_tap/dw_store.
 */
/* 12 register operands, five of them low registers: more than the allocators of -O0, -O1
 * and -Os find, so -O0 and -Os builds take the intrinsics form (-O1 is no build type). */
#if defined(__OPTIMIZE__) && !defined(__OPTIMIZE_SIZE__)
#define DW_USE_ASM 1
#else
#define DW_USE_ASM 0
#endif
#define DW_ASM_TAP(X, WO, WO8)                 \
  "vldrb.s16 q4, [" X "]\n\t"                 \
  "vldrh.16 q5, [%[s], #" WO "]\n\t"          \
  "vmullb.s16 q6, q4, q5\n\t"                 \
  "vmullt.s16 q7, q4, q5\n\t"                 \
  "vadd.i32 q0, q0, q6\n\t"                   \
  "vadd.i32 q1, q1, q7\n\t"                   \
  "vldrb.s16 q4, [" X ", #8]\n\t"             \
  "vldrh.16 q5, [%[s], #" WO8 "]\n\t"         \
  "vmullb.s16 q6, q4, q5\n\t"                 \
  "vmullt.s16 q7, q4, q5\n\t"                 \
  "vadd.i32 q2, q2, q6\n\t"                   \
  "vadd.i32 q3, q3, q7\n\t"
#define DW_ASM_REQ(Q, LEFT, MULT, RNEG)        \
  "vldrw.32 q4, [%[k], #" LEFT "]\n\t"        \
  "vqshl.s32 " Q ", " Q ", q4\n\t"            \
  "vldrw.32 q4, [%[k], #" MULT "]\n\t"        \
  "vqrdmulh.s32 " Q ", " Q ", q4\n\t"         \
  "vldrw.32 q4, [%[k], #" RNEG "]\n\t"        \
  "vand q5, " Q ", q4\n\t"                    \
  "vshr.s32 q5, q5, #31\n\t"                  \
  "vadd.i32 " Q ", " Q ", q5\n\t"             \
  "vrshl.s32 " Q ", " Q ", q4\n\t"
/* DW_ASM_REQ when every lane's shift is negative (k->right_only): no left
 * shift, and the fix-up mask is all ones, so it is the sign of p alone. */
#define DW_ASM_REQ_R(Q, LEFT, MULT, RNEG)      \
  "vldrw.32 q4, [%[k], #" MULT "]\n\t"        \
  "vqrdmulh.s32 " Q ", " Q ", q4\n\t"         \
  "vshr.s32 q5, " Q ", #31\n\t"               \
  "vadd.i32 " Q ", " Q ", q5\n\t"             \
  "vldrw.32 q4, [%[k], #" RNEG "]\n\t"        \
  "vrshl.s32 " Q ", " Q ", q4\n\t"
#define DW_ASM_ROW(R, WL, WL8, WC, WC8, WR, WR8) \
  "sub %[x], " R ", %[col]\n\t" DW_ASM_TAP("%[x]", WL, WL8) DW_ASM_TAP(R, WC, WC8) \
  "add %[x], " R ", %[col]\n\t" DW_ASM_TAP("%[x]", WR, WR8)
/* `n` > 0 pixels of a run: the row pointers and dst walk by `step` and `c` bytes. */
#define DW_ASM_RUN(REQ)                                                                                          \
  __asm__ volatile("dls lr, lr\n"                                                                          \
                   "1:\n\t"                                                                                  \
                   "vldrw.32 q0, [%[s], #352]\n\t"                                                           \
                   "vldrw.32 q1, [%[s], #368]\n\t"                                                           \
                   "vldrw.32 q2, [%[s], #384]\n\t"                                                           \
                   "vldrw.32 q3, [%[s], #400]\n\t"                                                           \
                   DW_ASM_ROW("%[r0]", "-128", "-112", "-32", "-16", "64", "80")                              \
                   DW_ASM_ROW("%[r1]", "-96", "-80", "0", "16", "96", "112")                                  \
                   DW_ASM_ROW("%[r2]", "-64", "-48", "32", "48", "128", "144")                                \
                   REQ("q0", "96", "32", "160") REQ("q1", "112", "48", "176")                                 \
                   REQ("q2", "128", "64", "192") REQ("q3", "144", "80", "208")                                \
                   "vldrh.16 q6, [%[k]]\n\t"                                                                 \
                   "vldrh.16 q7, [%[k], #16]\n\t"                                                            \
                   "vqmovnb.s32 q4, q0\n\t"                                                                  \
                   "vqmovnt.s32 q4, q1\n\t"                                                                  \
                   "vqadd.s16 q4, q4, %[off]\n\t"                                                              \
                   "vmax.s16 q4, q4, q6\n\t"                                                                 \
                   "vmin.s16 q4, q4, q7\n\t"                                                                 \
                   "vstrb.16 q4, [%[dst]]\n\t"                                                               \
                   "vqmovnb.s32 q5, q2\n\t"                                                                  \
                   "vqmovnt.s32 q5, q3\n\t"                                                                  \
                   "vqadd.s16 q5, q5, %[off]\n\t"                                                              \
                   "vmax.s16 q5, q5, q6\n\t"                                                                 \
                   "vmin.s16 q5, q5, q7\n\t"                                                                 \
                   "vstrb.16 q5, [%[dst], #8]\n\t"                                                           \
                   "add %[r0], %[r0], %[step]\n\t"                                                           \
                   "add %[r1], %[r1], %[step]\n\t"                                                           \
                   "add %[r2], %[r2], %[step]\n\t"                                                           \
                   "add %[dst], %[dst], %[c]\n\t"                                                            \
                   "le lr, 1b"                                                                               \
                   : [x] "=&l"(x), [r0] "+l"(r0), [r1] "+l"(r1), [r2] "+l"(r2), [dst] "+l"(dst), "+r"(n)     \
                   : [col] "r"(col), [s] "r"(w), [k] "r"(k), [step] "r"(step), [c] "r"(c),       \
                     [off] "r"(off)                                                                           \
                   : "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11", "d12", "d13", \
                     "d14", "d15", "memory")

_Static_assert(offsetof(dw_block_consts, mult) == 32 && offsetof(dw_block_consts, left) == 96 &&
                   offsetof(dw_block_consts, right_neg) == 160 && offsetof(dw_block_consts, zero_point) == 224 &&
                   offsetof(dw_block_consts, output_offset) == 240,
               "DW_ASM_RUN's offsets into dw_block_consts");
_Static_assert(offsetof(dw_set, bias) - offsetof(dw_set, weight[4]) == 2 * DW_WINDOW_BIAS &&
                   sizeof(((dw_set *)0)->weight[0]) == 32 && sizeof(((dw_set *)0)->bias[0]) == 96,
               "DW_ASM_RUN's offsets into dw_set");

/* Column geometry of a 3x3 block, the same for every row: output columns [0, lo) have
 * only their left tap column outside the image, [lo, hi) none, [hi, ows) only the right
 * one (`rows_ok` is false when the row does not split that way). */
typedef struct {
  int32_t lo, hi, ows;
  ptrdiff_t first; /* byte offset in an input row of output column 0's centre tap */
  ptrdiff_t col, step, c;
  bool rows_ok;
} dw_geom;

/* One output row whose kernel rows all read image rows r0..r2 (a row outside the image
 * is given as another row, with the row set `set` that zeroes it): three runs of one
 * loop - left border, interior, right border - with windows 2, 1 and 0 of the set; a
 * border run's pointers move one column inwards, so its zero-weight tap column is the
 * one beyond its last inside column (dw_geometry checks it is inside too). */
TM_MVE_INLINE void dw_row3x3(const dw_block_consts *k, const dw_geom *g, const dw_set *set, const int8_t *r0,
                             const int8_t *r1, const int8_t *r2, int8_t *dst, bool tail, mve_pred16_t plo,
                             mve_pred16_t phi) {
  const ptrdiff_t step = g->step, c = g->c, col = g->col;
  const int32_t off = k->output_offset;
  r0 += g->first;
  r1 += g->first;
  r2 += g->first;
  for (int32_t run = 0; run < 3; ++run) {
    const int32_t count = run == 0 ? g->lo : (run == 1 ? g->hi - g->lo : g->ows - g->hi);
    /* + col for run 0, back for run 1, - col for run 2 */
    const ptrdiff_t shift = run == 0 ? col : -col;
    const int16_t *w = DW_WINDOW(set, 2 - run);
    r0 += shift;
    r1 += shift;
    r2 += shift;
    if (DW_USE_ASM && !tail) {
      if (count > 0) {
        const int8_t *x;
        register int32_t n __asm__("lr") = count; /* the loop count, as DLS wants it */
        if (k->right_only) {
          DW_ASM_RUN(DW_ASM_REQ_R);
        } else {
          DW_ASM_RUN(DW_ASM_REQ);
        }
        (void)x;
      }
    } else {
      for (int32_t i = 0; i < count; ++i) {
        DW_OPAQUE(k);
        DW_OPAQUE(w);
        dw_acc a = dw_acc_init((const int32_t *)(const void *)(w + DW_WINDOW_BIAS));
        const int8_t *const rows[3] = {r0, r1, r2};
        for (int32_t ky = 0; ky < 3; ++ky) {
          DW_OPAQUE(ky); /* a loop: tails are rare, their size is not */
          const int16_t *wy = w + (ky - 4) * DW_BLOCK;
          dw_tap(&a, rows[ky] - col, wy, true, tail, plo, phi);
          dw_tap(&a, rows[ky], wy + 3 * DW_BLOCK, true, tail, plo, phi);
          dw_tap(&a, rows[ky] + col, wy + 6 * DW_BLOCK, true, tail, plo, phi);
        }
        dw_store_any(k, a, dst, tail, plo, phi);
        r0 += step;
        r1 += step;
        r2 += step;
        dst += c;
      }
    }
  }
}

__attribute__((noinline)) static void dw_row3x3_full(const dw_block_consts *k, const dw_geom *g, const dw_set *set,
                                                     const int8_t *r0, const int8_t *r1, const int8_t *r2,
                                                     int8_t *dst) {
  dw_row3x3(k, g, set, r0, r1, r2, dst, false, 0, 0);
}

__attribute__((noinline)) static void dw_row3x3_tail(const dw_block_consts *k, const dw_geom *g, const dw_set *set,
                                                     const int8_t *r0, const int8_t *r1, const int8_t *r2,
                                                     int8_t *dst, mve_pred16_t plo, mve_pred16_t phi) {
  dw_row3x3(k, g, set, r0, r1, r2, dst, true, plo, phi);
}

/* Which of the tap columns kx = -1..3 of output column ow are inside the row (bit
 * kx + 1): the kernel's three and the one a border run reads beyond them. Not inlined:
 * the geometry calls it per column, and size is all that matters there. */
__attribute__((noinline)) static unsigned dw_cols(const dw_params *p, int32_t ow) {
  unsigned m = 0;
  for (int32_t kx = -1; kx < 4; ++kx) {
    const int32_t iw = ow * p->win.stride_w - p->win.pad_w + kx * p->win.dil_w;
    m |= (iw >= 0 && iw < p->in_dims[2]) ? 1u << (kx + 1) : 0u;
  }
  return m;
}

__attribute__((noinline)) static void dw_geometry(const dw_params *p, dw_geom *g) {
  const int32_t c = p->in_dims[3], ows = p->out_dims[2];
  const unsigned all = 0xeu; /* kx = 0..2 inside */
  int32_t lo = 0, hi = ows;
  while (lo < ows && (dw_cols(p, lo) & all) != all) {
    ++lo;
  }
  while (hi > lo && (dw_cols(p, hi - 1) & all) != all) {
    --hi;
  }
  /* Columns lo and hi - 1 have all taps inside, so all between them do (the left tap's
   * position grows with ow, the right one's too, and the image is an interval): only the
   * border columns need a check, left ones for kx = 1..3 inside and kx = 0 outside,
   * right ones for kx = -1..1 inside and kx = 2 outside. */
  bool ok = true;
  for (int32_t ow = 0; ow < lo; ++ow) {
    ok = ok && (dw_cols(p, ow) & 0x1eu) == 0x1cu;
  }
  for (int32_t ow = hi; ow < ows; ++ow) {
    ok = ok && (dw_cols(p, ow) & 0x0fu) == 0x07u;
  }
  g->lo = lo;
  g->hi = hi;
  g->ows = ows;
  g->first = (ptrdiff_t)(p->win.dil_w - p->win.pad_w) * c;
  g->col = (ptrdiff_t)p->win.dil_w * c;
  g->step = (ptrdiff_t)p->win.stride_w * c;
  g->c = c;
  g->rows_ok = ok;
}

/* One output pixel of any kernel shape: taps in a loop, weights widened from the weight
 * tensor; `image` and `weight` at the block's first channel. */
TM_MVE_INLINE void dw_pixel_any(const dw_params *p, const dw_block_consts *k, const int8_t *image,
                                const int8_t *weight, int8_t *dst, int32_t oh, int32_t ow, bool tail,
                                mve_pred16_t plo, mve_pred16_t phi) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t ih0 = oh * p->win.stride_h - p->win.pad_h;
  const int32_t iw0 = ow * p->win.stride_w - p->win.pad_w;
  dw_acc a = dw_acc_init(DW_BIAS(k));
  const int8_t *wt = weight;
  for (int32_t ky = 0; ky < p->kh; ++ky) {
    const int32_t ih = ih0 + ky * p->win.dil_h;
    const bool row_in = ih >= 0 && ih < h;
    for (int32_t kx = 0; kx < p->kw; ++kx, wt += c) {
      const int32_t iw = iw0 + kx * p->win.dil_w;
      const int8_t *x = row_in && iw >= 0 && iw < w ? image + ((size_t)ih * (size_t)w + (size_t)iw) * (size_t)c
                                                    : k->zero_point;
      dw_tap(&a, x, wt, false, tail, plo, phi);
    }
  }
  dw_store_any(k, a, dst, tail, plo, phi);
}

/* One output row of any kernel shape, pixel by pixel. */
TM_MVE_INLINE void dw_row_any(const dw_params *p, const dw_block_consts *k, const int8_t *image, const int8_t *weight,
                              int8_t *dst, int32_t oh, bool tail, mve_pred16_t plo, mve_pred16_t phi) {
  for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
    dw_pixel_any(p, k, image, weight, dst + (size_t)ow * (size_t)p->in_dims[3], oh, ow, tail, plo, phi);
  }
}

__attribute__((noinline)) static void dw_row_any_full(const dw_params *p, const dw_block_consts *k,
                                                      const int8_t *image, const int8_t *weight, int8_t *dst,
                                                      int32_t oh) {
  dw_row_any(p, k, image, weight, dst, oh, false, 0, 0);
}

__attribute__((noinline)) static void dw_row_any_tail(const dw_params *p, const dw_block_consts *k,
                                                      const int8_t *image, const int8_t *weight, int8_t *dst,
                                                      int32_t oh, mve_pred16_t plo, mve_pred16_t phi) {
  dw_row_any(p, k, image, weight, dst, oh, true, plo, phi);
}

/* All output pixels of one channel block (`tail`: its `lanes` < DW_BLOCK); `g` is the
 * geometry of a 3x3 kernel, else NULL. */
static void dw_block(const dw_params *p, const dw_geom *g, const dw_block_consts *k, const int8_t *image, int8_t *out,
                     int32_t c0, int32_t lanes) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t ohs = p->out_dims[1], ows = p->out_dims[2];
  const bool tail = lanes < DW_BLOCK;
  const mve_pred16_t plo = vctp16q((uint32_t)(lanes > 8 ? 8 : lanes));
  const mve_pred16_t phi = vctp16q((uint32_t)(lanes > 8 ? lanes - 8 : 0));
  image += c0;
  out += c0;
  for (int32_t oh = 0; oh < ohs; ++oh) {
    int8_t *dst = out + (size_t)oh * (size_t)ows * (size_t)c;
    if (g != NULL && g->rows_ok) {
      const int32_t ih0 = oh * p->win.stride_h - p->win.pad_h;
      const int8_t *row[3];
      bool in[3];
      for (int32_t r = 0; r < 3; ++r) {
        const int32_t ih = ih0 + r * p->win.dil_h;
        in[r] = ih >= 0 && ih < h;
        row[r] = image + (ptrdiff_t)ih * w * c;
      }
      int32_t rows = -1;
      if (in[1]) {
        if (in[0] && in[2]) {
          rows = DW_ROWS_ALL;
        } else if (in[2]) {
          rows = DW_ROWS_NO_TOP;
          row[0] = row[1];
        } else if (in[0]) {
          rows = DW_ROWS_NO_BOTTOM;
          row[2] = row[1];
        }
      }
      if (rows >= 0) {
        if (tail) {
          dw_row3x3_tail(k, g, &k->set[rows], row[0], row[1], row[2], dst, plo, phi);
        } else {
          dw_row3x3_full(k, g, &k->set[rows], row[0], row[1], row[2], dst);
        }
        continue;
      }
    }
    if (tail) {
      dw_row_any_tail(p, k, image, p->weight + c0, dst, oh, plo, phi);
    } else {
      dw_row_any_full(p, k, image, p->weight + c0, dst, oh);
    }
  }
}

static void depthwise_mve(const dw_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const bool k3x3 = p->kh == 3 && p->kw == 3;
  dw_geom g;
  if (k3x3) {
    dw_geometry(p, &g);
  }
  dw_block_consts k;
  for (int32_t c0 = 0; c0 < c; c0 += DW_BLOCK) {
    /* The last block of C >= DW_BLOCK overlaps the one before instead of being partial. */
    if (c0 + DW_BLOCK > c && c >= DW_BLOCK) {
      c0 = c - DW_BLOCK;
    }
    const int32_t lanes = c - c0 < DW_BLOCK ? c - c0 : DW_BLOCK;
    dw_prepare_block(p, c0, lanes, k3x3, &k);
    for (int32_t n = 0; n < p->in_dims[0]; ++n) {
      const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
      int8_t *out = p->out + (size_t)n * (size_t)p->out_dims[1] * (size_t)p->out_dims[2] * (size_t)c;
      dw_block(p, k3x3 ? &g : NULL, &k, image, out, c0, lanes);
    }
  }
}
#endif

/*
 * One input channel with depth multiplier Cout (DS-CNN's first layer as ExecuTorch exports it)
 * is a convolution with Cin = 1: its weights [1, KH, KW, Cout] transposed into OHWI at the
 * scratch's start, then the convolution's Helium path (conv_mve.h) in the rest. The same sums
 * in the same int32 arithmetic as the depthwise reference.
 */
static size_t single_channel_scratch_bytes(const dw_params *p) {
  const size_t taps = (size_t)p->kh * (size_t)p->kw, cout = (size_t)p->out_dims[3];
  return tm_round_up(taps * cout, 16u) + tm_conv_mve_scratch_bytes(cout, (size_t)p->kh, (size_t)p->kw, 1u);
}

static bool single_channel(const dw_params *p) { return p->in_dims[3] == 1 && p->depth_multiplier > 1; }

#if TM_KERNELS_USE_MVE
static void depthwise_single_channel_mve(const dw_params *p, uint8_t *scratch) {
  const int32_t taps = p->kh * p->kw, cout = p->out_dims[3];
  int8_t *ohwi = (int8_t *)scratch;
  for (int32_t t = 0; t < taps; ++t) {
    const int8_t *row = p->weight + (size_t)t * (size_t)cout;
    for (int32_t oc = 0; oc < cout; ++oc) {
      ohwi[(size_t)oc * (size_t)taps + (size_t)t] = row[oc];
    }
  }
  tm_conv_params c;
  c.input = p->input;
  c.weight = ohwi;
  c.out = p->out;
  for (int32_t d = 0; d < 4; ++d) {
    c.in_dims[d] = p->in_dims[d];
    c.out_dims[d] = p->out_dims[d];
  }
  c.kh = p->kh;
  c.kw = p->kw;
  c.cin_g = 1;
  c.groups = 1;
  c.win = p->win;
  c.q = p->q;
  tm_conv_mve(&c, scratch + tm_round_up((size_t)taps * (size_t)cout, 16u));
}
#endif

/* The kernel, or with `prepare` its prepare step (the checks, then the shared scratch of the
 * single-channel form). */
__attribute__((noinline)) static tm_status depthwise_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes,
                                 bool prepare) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D));
  if (st != TM_OK) {
    return st;
  }
  dw_params p;
  const tm_tensor *in = tm_activation_arg(args, A(INPUT), nhwc_sizes, p.in_dims);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  const tm_tensor *wt = tm_tensor_arg(args, A(WEIGHT), TM_CHAR, 4, 4);
  TM_ARG_CHECK(ctx, wt != NULL && tm_has_layout(wt, TM_LAYOUT_CONTIGUOUS) && wt->sizes[0] == 1 &&
                        wt->sizes[1] > 0 && wt->sizes[2] > 0 && wt->sizes[3] > 0,
               A(WEIGHT));
  const int32_t cout = wt->sizes[3];
  p.kh = wt->sizes[1];
  p.kw = wt->sizes[2];
  TM_ARG_CHECK(ctx, tm_bias_arg(args, A(BIAS), cout, &p.q.bias), A(BIAS));
  st = tm_conv_window_args(ctx, args, A(STRIDE), &p.win);
  if (st != TM_OK) {
    return st;
  }
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(DEPTH_MULTIPLIER), 1, INT16_MAX, &p.depth_multiplier) &&
                        (int64_t)p.in_dims[3] * p.depth_multiplier == cout,
               A(DEPTH_MULTIPLIER));
  st = tm_conv_quant_args(ctx, args, A(INPUT_OFFSET), cout, &p.q);
  if (st != TM_OK) {
    return st;
  }
  const int32_t weight_dims[4] = {1, p.kh, p.kw, cout};
  TM_ARG_CHECK(ctx,
               tm_scratch_arg(args, A(SCRATCH), tm_quantized_depthwise_conv2d_scratch_bytes(p.in_dims, weight_dims)),
               A(SCRATCH));
  tm_tensor *out = tm_activation_arg(args, A(OUT), nhwc_sizes, p.out_dims);
  const int32_t oh = tm_conv_out_size(p.in_dims[1], p.kh, p.win.stride_h, p.win.pad_h, p.win.dil_h);
  const int32_t ow = tm_conv_out_size(p.in_dims[2], p.kw, p.win.stride_w, p.win.pad_w, p.win.dil_w);
  TM_ARG_CHECK(ctx, out != NULL && tm_window_out_dims(p.out_dims, p.in_dims[0], oh, ow, cout), A(OUT));
  p.input = (const int8_t *)in->data;
  p.weight = (const int8_t *)wt->data;
  p.out = (int8_t *)out->data;
  const tm_tensor *scratch = args[A(SCRATCH)]->u.tensor;
  if (prepare) {
    return tm_prepared(ctx, scratch, single_channel(&p) ? single_channel_scratch_bytes(&p) : 0u);
  }

#if TM_KERNELS_USE_MVE
  if (p.depth_multiplier == 1) {
    depthwise_mve(&p);
    return TM_OK;
  }
  uint8_t *buffer = single_channel(&p) ? tm_kernel_scratch(ctx, scratch, single_channel_scratch_bytes(&p)) : NULL;
  if (buffer != NULL) {
    depthwise_single_channel_mve(&p, buffer);
    return TM_OK;
  }
#else
  (void)scratch;
#endif
  depthwise_scalar(&p);
  return TM_OK;
}

tm_status tm_cortex_m_quantized_depthwise_conv2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return depthwise_entry(ctx, args, nargs, false, false);
}

tm_status tm_cortex_m_quantized_depthwise_conv2d_nhwc_out(tm_kernel_context *ctx, tm_value *const *args,
                                                          size_t nargs) {
  return depthwise_entry(ctx, args, nargs, true, false);
}

static tm_status depthwise_prepare(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes) {
  return depthwise_entry(ctx, args, nargs, nhwc_sizes, true);
}

TM_PREPARE_ENTRIES(tm_cortex_m_quantized_depthwise_conv2d, depthwise_prepare)
