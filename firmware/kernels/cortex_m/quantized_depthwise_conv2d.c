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

/* The kernel variants of this image (op_args.h: all unless a selective build leaves some out).
 * The single-channel form compiles the whole convolution path of conv_mve.h. */
#define HAS(v) TM_VARIANT_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_##v

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
 * are the outer loop, so each block's constants are prepared once on the stack:
 *
 * - the input offset is folded into the bias: acc = bias + input_offset * sum(w) +
 *   sum(x * w), so the taps are pure int8 x int8 products. A tap outside the image
 *   either reads a 16-byte row of the input zero point (-input_offset, an int8 by the
 *   argument check), whose products cancel the folded term: (zp + input_offset) * w = 0,
 *   or (3x3 kernels, a whole kernel row outside) uses a weight set with that row zeroed
 *   and a bias without that row's folded term.
 * - each tap loads 2 x 8 channels widened to int16 and multiplies them widening into
 *   int32 (VMULLB/VMULLT), so the four int32 accumulators hold channels
 *   {0,2,4,6}, {1,3,5,7}, {8,..,14}, {9,..,15}; bias and requantization parameters are
 *   stored in that order, and the narrowing VQMOVNB/VQMOVNT puts the channels back in
 *   order.
 * - 3x3 kernels are unrolled; a row of outputs is three runs (left border column,
 *   interior, right border column) of one loop with pointers walking by the stride.
 *   Other geometries (a border two columns wide, rows with two kernel rows outside)
 *   take nine tap pointers per pixel; other kernel shapes loop over their taps.
 * Output offset and clamp run on int16 lanes: the int8 argument ranges make the
 * saturating int16 forms give the reference's int32 result.
 */
#define DW_BLOCK 16

/* Weight/bias sets of a 3x3 block: all taps, kernel row 0 zeroed, kernel row 2 zeroed. */
enum { DW_SET_ALL, DW_SET_NO_TOP, DW_SET_NO_BOTTOM, DW_SETS };

/* One weight set: its bias (with the folded input offset) right before its weights, so
 * one pointer at the centre tap's weights reaches both by immediate offsets. */
typedef struct {
  int32_t bias[DW_BLOCK];          /* bias + input_offset * sum(w), accumulator order */
  int16_t weight[9][DW_BLOCK];     /* zero beyond the channels */
} __attribute__((aligned(16))) dw_set;

typedef struct {
  int16_t act_min[8], act_max[8]; /* clamp bounds in all int16 lanes */
  int32_t mult[DW_BLOCK];         /* requantization, permuted as the accumulators */
  int32_t left[DW_BLOCK];
  int32_t right_neg[DW_BLOCK];
  int8_t zero_point[DW_BLOCK]; /* the padding row */
  int16_t output_offset;
  dw_set set[DW_SETS];
} __attribute__((aligned(16))) dw_block_consts;

/* The four int32 vectors, in accumulator order, of int16 lanes lo (channels 0-7), hi (8-15). */
TM_MVE_INLINE void dw_widen(int16x8_t lo, int16x8_t hi, int32x4_t out[4]) {
  out[0] = vmovlbq_s16(lo);
  out[1] = vmovltq_s16(lo);
  out[2] = vmovlbq_s16(hi);
  out[3] = vmovltq_s16(hi);
}

/* The block's constants; weight sets only for 3x3 kernels. Lanes beyond `lanes` get
 * zero weights, bias and multipliers. */
static void dw_prepare_block(const dw_params *p, int32_t c0, int32_t lanes, bool k3x3, dw_block_consts *k) {
  const int32_t c = p->in_dims[3], taps = p->kh * p->kw, off = p->q.input_offset;
  const mve_pred16_t plo = vctp16q((uint32_t)(lanes > 8 ? 8 : lanes));
  const mve_pred16_t phi = vctp16q((uint32_t)(lanes > 8 ? lanes - 8 : 0));
  /* Weight sums in accumulator order: all taps, kernel row 0, kernel row 2 (3x3). */
  int32x4_t sum[4], top[4], bottom[4];
  if (k3x3) {
    /* Nine int8 weights sum exactly in int16 lanes; the row sums come from the stored set. */
    const int16x8_t zero = vdupq_n_s16(0);
    int16x8_t all_lo = zero, all_hi = zero;
    int16_t *all = k->set[DW_SET_ALL].weight[0], *no_top = k->set[DW_SET_NO_TOP].weight[0];
    int16_t *no_bottom = k->set[DW_SET_NO_BOTTOM].weight[0];
    const int8_t *wp = p->weight + c0;
    /* A rolled loop: unrolled, the stores' offsets outgrow the immediate range (~1 KB more). */
#pragma GCC unroll 1
    for (int32_t t = 0; t < 9; ++t, wp += c, all += DW_BLOCK, no_top += DW_BLOCK, no_bottom += DW_BLOCK) {
      const int16x8_t wl = vldrbq_z_s16(wp, plo), wh = vldrbq_z_s16(wp + 8, phi);
      all_lo = vaddq_s16(all_lo, wl);
      all_hi = vaddq_s16(all_hi, wh);
      vstrhq_s16(all, wl);
      vstrhq_s16(all + 8, wh);
      vstrhq_s16(no_top, t < 3 ? zero : wl);
      vstrhq_s16(no_top + 8, t < 3 ? zero : wh);
      vstrhq_s16(no_bottom, t >= 6 ? zero : wl);
      vstrhq_s16(no_bottom + 8, t >= 6 ? zero : wh);
    }
    const int16_t(*w)[DW_BLOCK] = k->set[DW_SET_ALL].weight;
    dw_widen(all_lo, all_hi, sum);
    dw_widen(vaddq_s16(vaddq_s16(vldrhq_s16(w[0]), vldrhq_s16(w[1])), vldrhq_s16(w[2])),
             vaddq_s16(vaddq_s16(vldrhq_s16(w[0] + 8), vldrhq_s16(w[1] + 8)), vldrhq_s16(w[2] + 8)), top);
    dw_widen(vaddq_s16(vaddq_s16(vldrhq_s16(w[6]), vldrhq_s16(w[7])), vldrhq_s16(w[8])),
             vaddq_s16(vaddq_s16(vldrhq_s16(w[6] + 8), vldrhq_s16(w[7] + 8)), vldrhq_s16(w[8] + 8)), bottom);
  } else {
    for (int32_t j = 0; j < 4; ++j) {
      sum[j] = top[j] = bottom[j] = vdupq_n_s32(0);
    }
    for (int32_t t = 0; t < taps; ++t) {
      const int8_t *wp = p->weight + (size_t)t * (size_t)c + (size_t)c0;
      int32x4_t v[4];
      dw_widen(vldrbq_z_s16(wp, plo), vldrbq_z_s16(wp + 8, phi), v);
      for (int32_t j = 0; j < 4; ++j) {
        sum[j] = vaddq_s32(sum[j], v[j]);
      }
    }
  }
  const uint32x4_t limit = vdupq_n_u32((uint32_t)lanes);
#pragma GCC unroll 1
  for (int32_t j = 0; j < 4; ++j) {
    /* Accumulator j holds channels base, base + 2, base + 4, base + 6. */
    const uint32x4_t ch = vidupq_n_u32((uint32_t)((j >> 1) * 8 + (j & 1)), 2);
    const mve_pred16_t pj = vcmphiq_u32(limit, ch);
    int32x4_t b = p->q.bias != NULL ? vldrwq_gather_shifted_offset_z_s32(p->q.bias + c0, ch, pj) : vdupq_n_s32(0);
    /* Wraps like the accumulator itself: only the final sum modulo 2^32 matters. */
    b = vmlaq_n_s32(b, sum[j], off);
    vstrwq_s32(k->set[DW_SET_ALL].bias + 4 * j, b);
    if (k3x3) {
      vstrwq_s32(k->set[DW_SET_NO_TOP].bias + 4 * j, vmlaq_n_s32(b, top[j], -off));
      vstrwq_s32(k->set[DW_SET_NO_BOTTOM].bias + 4 * j, vmlaq_n_s32(b, bottom[j], -off));
    }
    const int32x4_t s = vldrwq_gather_shifted_offset_z_s32(p->q.shifts + c0, ch, pj);
    vstrwq_s32(k->mult + 4 * j, vldrwq_gather_shifted_offset_z_s32(p->q.mults + c0, ch, pj));
    vstrwq_s32(k->left + 4 * j, vmaxq_s32(s, vdupq_n_s32(0)));
    vstrwq_s32(k->right_neg + 4 * j, vminq_s32(s, vdupq_n_s32(0)));
  }
  vstrbq_s8(k->zero_point, vdupq_n_s8((int8_t)(-off)));
  vstrhq_s16(k->act_min, vdupq_n_s16((int16_t)p->q.act_min));
  vstrhq_s16(k->act_max, vdupq_n_s16((int16_t)p->q.act_max));
  k->output_offset = (int16_t)p->q.output_offset;
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

/* One tap: x the block's 16 input bytes (or the zero-point row), w its 16 int16 weights;
 * each half is loaded where it is used, so only 4 accumulators + 3 registers are live. */
TM_MVE_INLINE void dw_tap(dw_acc *a, const int8_t *x, const int16_t *w, bool tail, mve_pred16_t plo,
                          mve_pred16_t phi) {
  const int16x8_t xlo = tail ? vldrbq_z_s16(x, plo) : vldrbq_s16(x);
  const int16x8_t wlo = vldrhq_s16(w);
  a->a0 = vaddq_s32(a->a0, vmullbq_int_s16(xlo, wlo));
  a->a1 = vaddq_s32(a->a1, vmulltq_int_s16(xlo, wlo));
  const int16x8_t xhi = tail ? vldrbq_z_s16(x + 8, phi) : vldrbq_s16(x + 8);
  const int16x8_t whi = vldrhq_s16(w + 8);
  a->a2 = vaddq_s32(a->a2, vmullbq_int_s16(xhi, whi));
  a->a3 = vaddq_s32(a->a3, vmulltq_int_s16(xhi, whi));
  DW_CHAIN(a);
}

/* As dw_tap with the weights read from the int8 weight tensor (any kernel size). */
TM_MVE_INLINE void dw_tap_i8(dw_acc *a, const int8_t *x, const int8_t *w, bool tail, mve_pred16_t plo,
                             mve_pred16_t phi) {
  const int16x8_t xlo = tail ? vldrbq_z_s16(x, plo) : vldrbq_s16(x);
  const int16x8_t wlo = tail ? vldrbq_z_s16(w, plo) : vldrbq_s16(w);
  a->a0 = vaddq_s32(a->a0, vmullbq_int_s16(xlo, wlo));
  a->a1 = vaddq_s32(a->a1, vmulltq_int_s16(xlo, wlo));
  const int16x8_t xhi = tail ? vldrbq_z_s16(x + 8, phi) : vldrbq_s16(x + 8);
  const int16x8_t whi = tail ? vldrbq_z_s16(w + 8, phi) : vldrbq_s16(w + 8);
  a->a2 = vaddq_s32(a->a2, vmullbq_int_s16(xhi, whi));
  a->a3 = vaddq_s32(a->a3, vmulltq_int_s16(xhi, whi));
  DW_CHAIN(a);
}

/* Tap t of a 3x3 kernel, with w pointing at the centre tap's weights (t = 4), so all
 * nine are within reach of one base register's immediate offsets. */
TM_MVE_INLINE void dw_tap_k(dw_acc *a, const int8_t *x, const int16_t *w, int32_t t, bool tail, mve_pred16_t plo,
                            mve_pred16_t phi) {
  dw_tap(a, x, w + (t - 4) * DW_BLOCK, tail, plo, phi);
}

/* Makes a pointer opaque to the optimiser once per pixel: GCC 12 otherwise hoists
 * every base + offset of the unrolled taps out of the loop and spills them. */
#define DW_OPAQUE(ptr) __asm__("" : "+r"(ptr))

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

/* A 3x3 pixel from its nine tap pointers (row-major), all-taps weight set. */
TM_MVE_INLINE void dw_pixel3x3(const dw_block_consts *k, const int8_t *const x[9], int8_t *dst, bool tail,
                               mve_pred16_t plo, mve_pred16_t phi) {
  const int16_t *w = k->set[DW_SET_ALL].weight[4];
  dw_acc a = dw_acc_init(k->set[DW_SET_ALL].bias);
  for (int32_t t = 0; t < 9; ++t) {
    dw_tap_k(&a, x[t], w, t, tail, plo, phi);
  }
  dw_store(k, a, dst, tail, plo, phi);
}

/* Column masks of a 3x3 run (bit kx: that tap column is inside the image). */
#define DW_COLS_ALL 7u
#define DW_COLS_NO_LEFT 6u
#define DW_COLS_NO_RIGHT 3u

/*
 * One full 16-channel 3x3 pixel in Helium assembly (GCC 12 keeps too few values in
 * registers for the intrinsics form: ~20% more instructions). Fixed registers: q0-q3
 * accumulators, q4-q7 temporaries. `s` points at the weight set's centre tap (bias at
 * -192, tap t's weights at (t - 4) * 32), `k` at dw_block_consts; r0..r2 at the
 * centre tap of the three kernel rows. Side taps take their address from the L/R arguments: the
 * row pointer -/+ col, or the zero-point row. Same arithmetic as dw_tap/dw_store.
 */
#if defined(__OPTIMIZE__)
#define DW_USE_ASM 1 /* five low-register operands: more than -O0's allocator finds */
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
#define DW_ASM_SIDE_L(R) "sub %[x], " R ", %[col]\n\t"
#define DW_ASM_SIDE_R(R) "add %[x], " R ", %[col]\n\t"
#define DW_ASM_SIDE_ZP "add %[x], %[k], #224\n\t"
#define DW_ASM_PIXEL(L0, R0, L1, R1, L2, R2)                                                                   \
  __asm__ volatile("vldrw.32 q0, [%[s], #-192]\n\t"                                                          \
                   "vldrw.32 q1, [%[s], #-176]\n\t"                                                          \
                   "vldrw.32 q2, [%[s], #-160]\n\t"                                                          \
                   "vldrw.32 q3, [%[s], #-144]\n\t" L0 DW_ASM_TAP("%[x]", "-128", "-112")                   \
                       DW_ASM_TAP("%[r0]", "-96", "-80") R0 DW_ASM_TAP("%[x]", "-64", "-48") L1              \
                           DW_ASM_TAP("%[x]", "-32", "-16") DW_ASM_TAP("%[r1]", "0", "16") R1                 \
                               DW_ASM_TAP("%[x]", "32", "48") L2 DW_ASM_TAP("%[x]", "64", "80")               \
                                   DW_ASM_TAP("%[r2]", "96", "112") R2 DW_ASM_TAP("%[x]", "128", "144")       \
                                       DW_ASM_REQ("q0", "96", "32", "160") DW_ASM_REQ("q1", "112", "48", "176") \
                                           DW_ASM_REQ("q2", "128", "64", "192")                               \
                                               DW_ASM_REQ("q3", "144", "80", "208")                           \
                   "vldrh.16 q6, [%[k]]\n\t"                                                                 \
                   "vldrh.16 q7, [%[k], #16]\n\t"                                                            \
                   "vqmovnb.s32 q4, q0\n\t"                                                                  \
                   "vqmovnt.s32 q4, q1\n\t"                                                                  \
                   "vqadd.s16 q4, q4, %[off]\n\t"                                                            \
                   "vmax.s16 q4, q4, q6\n\t"                                                                 \
                   "vmin.s16 q4, q4, q7\n\t"                                                                 \
                   "vstrb.16 q4, [%[dst]]\n\t"                                                               \
                   "vqmovnb.s32 q5, q2\n\t"                                                                  \
                   "vqmovnt.s32 q5, q3\n\t"                                                                  \
                   "vqadd.s16 q5, q5, %[off]\n\t"                                                            \
                   "vmax.s16 q5, q5, q6\n\t"                                                                 \
                   "vmin.s16 q5, q5, q7\n\t"                                                                 \
                   "vstrb.16 q5, [%[dst], #8]"                                                                \
                   : [x] "=&l"(x)                                                                             \
                   : [r0] "l"(r0), [r1] "l"(r1), [r2] "l"(r2), [col] "r"(col), [s] "r"(w), [k] "r"(k),        \
                     [dst] "l"(dst), [off] "r"(off)                                                           \
                   : "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11", "d12", "d13", \
                     "d14", "d15", "memory")

_Static_assert(offsetof(dw_block_consts, mult) == 32 && offsetof(dw_block_consts, left) == 96 &&
                   offsetof(dw_block_consts, right_neg) == 160 && offsetof(dw_block_consts, zero_point) == 224,
               "DW_ASM_PIXEL's offsets into dw_block_consts");
_Static_assert(offsetof(dw_set, weight) - offsetof(dw_set, bias) == 64 && sizeof(((dw_set *)0)->weight[0]) == 32,
               "DW_ASM_PIXEL's offsets into dw_set");

/* `count` pixels of a row: three pointers at the centre tap column of the kernel's
 * rows walk by `step` bytes, the taps of a row are `col` bytes apart. Columns not in
 * `cmask` (a compile-time constant) read the zero-point row instead. */
TM_MVE_INLINE void dw_run3x3(const dw_block_consts *k, const int16_t *w, const int32_t *bias, const int8_t *r0,
                             const int8_t *r1, const int8_t *r2, ptrdiff_t col, ptrdiff_t step, int8_t *dst,
                             ptrdiff_t dst_step, int32_t count, bool tail, mve_pred16_t plo, mve_pred16_t phi,
                             unsigned cmask) {
  if (DW_USE_ASM && !tail) {
    const int32_t off = k->output_offset;
    (void)bias; /* at w - 192 */
    for (int32_t i = 0; i < count; ++i) {
      const int8_t *x;
      if (cmask == DW_COLS_ALL) {
        DW_ASM_PIXEL(DW_ASM_SIDE_L("%[r0]"), DW_ASM_SIDE_R("%[r0]"), DW_ASM_SIDE_L("%[r1]"), DW_ASM_SIDE_R("%[r1]"),
                     DW_ASM_SIDE_L("%[r2]"), DW_ASM_SIDE_R("%[r2]"));
      } else if (cmask == DW_COLS_NO_LEFT) {
        DW_ASM_PIXEL(DW_ASM_SIDE_ZP, DW_ASM_SIDE_R("%[r0]"), DW_ASM_SIDE_ZP, DW_ASM_SIDE_R("%[r1]"), DW_ASM_SIDE_ZP,
                     DW_ASM_SIDE_R("%[r2]"));
      } else {
        DW_ASM_PIXEL(DW_ASM_SIDE_L("%[r0]"), DW_ASM_SIDE_ZP, DW_ASM_SIDE_L("%[r1]"), DW_ASM_SIDE_ZP,
                     DW_ASM_SIDE_L("%[r2]"), DW_ASM_SIDE_ZP);
      }
      (void)x;
      r0 += step;
      r1 += step;
      r2 += step;
      dst += dst_step;
    }
    return;
  }
  for (int32_t i = 0; i < count; ++i) {
    DW_OPAQUE(k);
    DW_OPAQUE(w);
    DW_OPAQUE(bias);
    const int8_t *zp = k->zero_point;
    dw_acc a = dw_acc_init(bias);
    dw_tap_k(&a, cmask & 1 ? r0 - col : zp, w, 0, tail, plo, phi);
    dw_tap_k(&a, r0, w, 1, tail, plo, phi);
    dw_tap_k(&a, cmask & 4 ? r0 + col : zp, w, 2, tail, plo, phi);
    dw_tap_k(&a, cmask & 1 ? r1 - col : zp, w, 3, tail, plo, phi);
    dw_tap_k(&a, r1, w, 4, tail, plo, phi);
    dw_tap_k(&a, cmask & 4 ? r1 + col : zp, w, 5, tail, plo, phi);
    dw_tap_k(&a, cmask & 1 ? r2 - col : zp, w, 6, tail, plo, phi);
    dw_tap_k(&a, r2, w, 7, tail, plo, phi);
    dw_tap_k(&a, cmask & 4 ? r2 + col : zp, w, 8, tail, plo, phi);
    dw_store(k, a, dst, tail, plo, phi);
    r0 += step;
    r1 += step;
    r2 += step;
    dst += dst_step;
  }
}

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
 * is given as another row, with a weight set that zeroes it). */
TM_MVE_INLINE void dw_row3x3(const dw_block_consts *k, const dw_geom *g, const int16_t *w, const int32_t *bias,
                             const int8_t *r0, const int8_t *r1, const int8_t *r2, int8_t *dst, bool tail,
                             mve_pred16_t plo, mve_pred16_t phi) {
  const ptrdiff_t col = g->col, step = g->step, c = g->c;
  ptrdiff_t at = g->first;
  dw_run3x3(k, w, bias, r0 + at, r1 + at, r2 + at, col, step, dst, c, g->lo, tail, plo, phi, DW_COLS_NO_LEFT);
  at += g->lo * step;
  dst += g->lo * c;
  dw_run3x3(k, w, bias, r0 + at, r1 + at, r2 + at, col, step, dst, c, g->hi - g->lo, tail, plo, phi, DW_COLS_ALL);
  at += (g->hi - g->lo) * step;
  dst += (g->hi - g->lo) * c;
  dw_run3x3(k, w, bias, r0 + at, r1 + at, r2 + at, col, step, dst, c, g->ows - g->hi, tail, plo, phi,
            DW_COLS_NO_RIGHT);
}

__attribute__((noinline)) static void dw_pixel3x3_full(const dw_block_consts *k, const int8_t *const x[9],
                                                       int8_t *dst) {
  dw_pixel3x3(k, x, dst, false, 0, 0);
}

__attribute__((noinline)) static void dw_pixel3x3_tail(const dw_block_consts *k, const int8_t *const x[9],
                                                       int8_t *dst, mve_pred16_t plo, mve_pred16_t phi) {
  dw_pixel3x3(k, x, dst, true, plo, phi);
}

__attribute__((noinline)) static void dw_row3x3_full(const dw_block_consts *k, const dw_geom *g, const int16_t *w,
                                                     const int32_t *bias, const int8_t *r0, const int8_t *r1,
                                                     const int8_t *r2, int8_t *dst) {
  dw_row3x3(k, g, w, bias, r0, r1, r2, dst, false, 0, 0);
}

__attribute__((noinline)) static void dw_row3x3_tail(const dw_block_consts *k, const dw_geom *g, const int16_t *w,
                                                     const int32_t *bias, const int8_t *r0, const int8_t *r1,
                                                     const int8_t *r2, int8_t *dst, mve_pred16_t plo,
                                                     mve_pred16_t phi) {
  dw_row3x3(k, g, w, bias, r0, r1, r2, dst, true, plo, phi);
}

/* Which of the three tap columns of output column ow are inside the row (bit kx). */
static inline unsigned dw_cols(const dw_params *p, int32_t ow) {
  unsigned m = 0;
  for (int32_t kx = 0; kx < 3; ++kx) {
    const int32_t iw = ow * p->win.stride_w - p->win.pad_w + kx * p->win.dil_w;
    m |= (iw >= 0 && iw < p->in_dims[2]) ? 1u << kx : 0u;
  }
  return m;
}

TM_ONCE_PER_CALL static void dw_geometry(const dw_params *p, dw_geom *g) {
  const int32_t c = p->in_dims[3], ows = p->out_dims[2];
  int32_t lo = 0, hi = ows;
  while (lo < ows && dw_cols(p, lo) != DW_COLS_ALL) {
    ++lo;
  }
  while (hi > lo && dw_cols(p, hi - 1) != DW_COLS_ALL) {
    --hi;
  }
  /* Columns between the first and the last with all taps inside have all taps inside too (a
   * tap's input column grows with the output column): only the borders need a look. */
  bool ok = true;
  for (int32_t ow = 0; ow < lo; ++ow) {
    ok = ok && dw_cols(p, ow) == DW_COLS_NO_LEFT;
  }
  for (int32_t ow = hi; ow < ows; ++ow) {
    ok = ok && dw_cols(p, ow) == DW_COLS_NO_RIGHT;
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

/* All output pixels of one channel block of a 3x3 kernel. */
TM_MVE_INLINE void dw_block3x3(const dw_params *p, const dw_geom *g, const dw_block_consts *k, const int8_t *image,
                               int8_t *out, int32_t c0, bool tail, mve_pred16_t plo, mve_pred16_t phi) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t ohs = p->out_dims[1], ows = p->out_dims[2];
  for (int32_t oh = 0; oh < ohs; ++oh) {
    const int32_t ih0 = oh * p->win.stride_h - p->win.pad_h;
    const int8_t *row[3];
    bool in[3];
    for (int32_t r = 0; r < 3; ++r) {
      const int32_t ih = ih0 + r * p->win.dil_h;
      in[r] = ih >= 0 && ih < h;
      row[r] = in[r] ? image + (size_t)ih * (size_t)w * (size_t)c + (size_t)c0 : NULL;
    }
    int8_t *dst = out + (size_t)oh * (size_t)ows * (size_t)c + (size_t)c0;
    int32_t set = -1;
    if (g->rows_ok && in[1]) {
      if (in[0] && in[2]) {
        set = DW_SET_ALL;
      } else if (in[2]) {
        set = DW_SET_NO_TOP;
        row[0] = row[1];
      } else if (in[0]) {
        set = DW_SET_NO_BOTTOM;
        row[2] = row[1];
      }
    }
    if (set >= 0) {
      if (tail) {
        dw_row3x3_tail(k, g, k->set[set].weight[4], k->set[set].bias, row[0], row[1], row[2], dst, plo, phi);
      } else {
        dw_row3x3_full(k, g, k->set[set].weight[4], k->set[set].bias, row[0], row[1], row[2], dst);
      }
      continue;
    }
    if (!HAS(3X3_PIXEL)) {
      continue; /* never reached: the call's check refuses such a block (dw_path_compiled) */
    }
    for (int32_t ow = 0; ow < ows; ++ow) {
      const int32_t iw0 = ow * p->win.stride_w - p->win.pad_w;
      const int8_t *x[9];
      for (int32_t kx = 0; kx < 3; ++kx) {
        const int32_t iw = iw0 + kx * p->win.dil_w;
        const bool col_in = iw >= 0 && iw < w;
        for (int32_t r = 0; r < 3; ++r) {
          x[3 * r + kx] = col_in && row[r] != NULL ? row[r] + (ptrdiff_t)iw * c : k->zero_point;
        }
      }
      if (tail) {
        dw_pixel3x3_tail(k, x, dst + (size_t)ow * (size_t)c, plo, phi);
      } else {
        dw_pixel3x3_full(k, x, dst + (size_t)ow * (size_t)c);
      }
    }
  }
}

/* Any kernel shape: taps in a loop, weights widened from the weight tensor. */
TM_MVE_INLINE void dw_block_general(const dw_params *p, const dw_block_consts *k, const int8_t *image, int8_t *out,
                                    int32_t c0, bool tail, mve_pred16_t plo, mve_pred16_t phi) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t ohs = p->out_dims[1], ows = p->out_dims[2];
  for (int32_t oh = 0; oh < ohs; ++oh) {
    const int32_t ih0 = oh * p->win.stride_h - p->win.pad_h;
    for (int32_t ow = 0; ow < ows; ++ow) {
      const int32_t iw0 = ow * p->win.stride_w - p->win.pad_w;
      dw_acc a = dw_acc_init(k->set[DW_SET_ALL].bias);
      const int8_t *wt = p->weight + c0;
      for (int32_t ky = 0; ky < p->kh; ++ky) {
        const int32_t ih = ih0 + ky * p->win.dil_h;
        const bool row_in = ih >= 0 && ih < h;
        for (int32_t kx = 0; kx < p->kw; ++kx, wt += c) {
          const int32_t iw = iw0 + kx * p->win.dil_w;
          const int8_t *x = row_in && iw >= 0 && iw < w
                                ? image + ((size_t)ih * (size_t)w + (size_t)iw) * (size_t)c + (size_t)c0
                                : k->zero_point;
          dw_tap_i8(&a, x, wt, tail, plo, phi);
        }
      }
      dw_store(k, a, out + ((size_t)oh * (size_t)ows + (size_t)ow) * (size_t)c + (size_t)c0, tail, plo, phi);
    }
  }
}

static void dw_block3x3_full(const dw_params *p, const dw_geom *g, const dw_block_consts *k, const int8_t *image,
                             int8_t *out, int32_t c0) {
  dw_block3x3(p, g, k, image, out, c0, false, 0, 0);
}

static void dw_block3x3_tail(const dw_params *p, const dw_geom *g, const dw_block_consts *k, const int8_t *image,
                             int8_t *out, int32_t c0, mve_pred16_t plo, mve_pred16_t phi) {
  dw_block3x3(p, g, k, image, out, c0, true, plo, phi);
}

static void dw_block_general_full(const dw_params *p, const dw_block_consts *k, const int8_t *image, int8_t *out,
                                  int32_t c0) {
  dw_block_general(p, k, image, out, c0, false, 0, 0);
}

static void dw_block_general_tail(const dw_params *p, const dw_block_consts *k, const int8_t *image, int8_t *out,
                                  int32_t c0, mve_pred16_t plo, mve_pred16_t phi) {
  dw_block_general(p, k, image, out, c0, true, plo, phi);
}

/* A 3x3 block has rows the row runs cannot take (geometry g): their pixels take nine tap
 * pointers (dw_block3x3's per-pixel loop). */
TM_ONCE_PER_CALL static bool dw_needs_pixels(const dw_params *p, const dw_geom *g) {
  if (!g->rows_ok) {
    return true;
  }
  for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
    bool in[3];
    for (int32_t r = 0; r < 3; ++r) {
      const int32_t ih = oh * p->win.stride_h - p->win.pad_h + r * p->win.dil_h;
      in[r] = ih >= 0 && ih < p->in_dims[1];
    }
    if (!in[1] || (!in[0] && !in[2])) {
      return true;
    }
  }
  return false;
}

static void depthwise_mve(const dw_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  /* Constant where the image holds only one of the two kernel-shape paths. */
  const bool k3x3 = HAS(3X3) && (!HAS(GENERAL) || (p->kh == 3 && p->kw == 3));
  dw_geom g;
  if (k3x3) {
    dw_geometry(p, &g);
  }
  dw_block_consts k;
  for (int32_t c0 = 0; c0 < c; c0 += DW_BLOCK) {
    const int32_t lanes = c - c0 < DW_BLOCK ? c - c0 : DW_BLOCK;
    const mve_pred16_t plo = vctp16q((uint32_t)(lanes > 8 ? 8 : lanes));
    const mve_pred16_t phi = vctp16q((uint32_t)(lanes > 8 ? lanes - 8 : 0));
    dw_prepare_block(p, c0, lanes, k3x3, &k);
    for (int32_t n = 0; n < p->in_dims[0]; ++n) {
      const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
      int8_t *out = p->out + (size_t)n * (size_t)p->out_dims[1] * (size_t)p->out_dims[2] * (size_t)c;
      /* A path left out of the image is never reached: the call's check refuses it. */
      if (lanes == DW_BLOCK || !HAS(TAIL)) {
        if (k3x3 && HAS(3X3)) {
          dw_block3x3_full(p, &g, &k, image, out, c0);
        } else if (HAS(GENERAL)) {
          dw_block_general_full(p, &k, image, out, c0);
        }
      } else if (k3x3 && HAS(3X3)) {
        dw_block3x3_tail(p, &g, &k, image, out, c0, plo, phi);
      } else if (HAS(GENERAL)) {
        dw_block_general_tail(p, &k, image, out, c0, plo, phi);
      }
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

#if TM_KERNELS_USE_MVE
/* The path of p is compiled in (a selective image leaves out the variants its programs never
 * take): false with the argument that decides which path is missing. */
TM_ONCE_PER_CALL static bool dw_path_compiled(const dw_params *p, uint16_t *arg) {
  if (p->depth_multiplier > 1) {
    *arg = A(DEPTH_MULTIPLIER);
    return single_channel(p) ? HAS(SINGLE_CHANNEL) : HAS(MULTIPLIER);
  }
  const bool k3x3 = p->kh == 3 && p->kw == 3;
  *arg = A(WEIGHT);
  if (k3x3 ? !HAS(3X3) : !HAS(GENERAL)) {
    return false;
  }
  *arg = A(INPUT);
  if (!HAS(TAIL) && p->in_dims[3] % DW_BLOCK != 0) {
    return false;
  }
  if (k3x3 && !HAS(3X3_PIXEL)) {
    dw_geom g;
    dw_geometry(p, &g);
    return !dw_needs_pixels(p, &g);
  }
  return true;
}
#endif

/* The kernel, or with `prepare` its prepare step (the checks, then the shared scratch of the
 * single-channel form). One out-of-line copy for the entry points and the prepare steps. */
__attribute__((noinline)) static tm_status depthwise_entry(tm_kernel_context *ctx, tm_value *const *args,
                                                          size_t nargs, bool nhwc_sizes, bool prepare) {
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
#if TM_KERNELS_USE_MVE
  /* Before the arguments are verified: in the prepare step, or on the first execution of a
   * call that the prepare step refused. */
  if (!ctx->arguments_verified && !dw_path_compiled(&p, &ctx->bad_argument)) {
    return TM_ERR_UNSUPPORTED;
  }
#endif
  if (prepare) {
    return tm_prepared(ctx, scratch, single_channel(&p) ? single_channel_scratch_bytes(&p) : 0u);
  }

#if TM_KERNELS_USE_MVE
  if (p.depth_multiplier == 1) {
    depthwise_mve(&p);
    return TM_OK;
  }
  if (single_channel(&p) && HAS(SINGLE_CHANNEL)) {
    /* After the prepare step the method's shared scratch holds it: no scalar fallback. */
    uint8_t *buffer = tm_kernel_scratch(ctx, scratch, single_channel_scratch_bytes(&p));
    if (buffer == NULL) {
      ctx->bad_argument = A(SCRATCH);
      return TM_ERR_OUT_OF_MEMORY;
    }
    depthwise_single_channel_mve(&p, buffer);
    return TM_OK;
  }
  if (HAS(MULTIPLIER)) {
    depthwise_scalar(&p);
  }
#else
  (void)scratch;
  depthwise_scalar(&p);
#endif
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
