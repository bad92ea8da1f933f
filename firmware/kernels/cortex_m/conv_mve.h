/*
 * The int8 convolution's Helium (MVE) path, shared by quantized_conv2d and by the depthwise
 * kernel's single-input-channel form (a depthwise convolution of one input channel with
 * depth multiplier Cout is a convolution with Cin = 1). Static, in each including translation
 * unit: a selective image may hold either kernel alone, and the conv kernel's codegen stays
 * what it was in one translation unit (its parameters a local the int8 stores cannot alias).
 */
#ifndef TORCHMCU_KERNELS_CONV_MVE_H
#define TORCHMCU_KERNELS_CONV_MVE_H

#include "kernel_args.h"
#include "mve_requantize.h" /* TM_KERNELS_USE_MVE */

typedef struct {
  const int8_t *input;
  const int8_t *weight;
  int8_t *out;
  int32_t in_dims[4];  /* N, H, W, C */
  int32_t out_dims[4]; /* N, OH, OW, Cout */
  int32_t kh, kw, cin_g, groups;
  tm_window win;
  tm_conv_quant q;
} tm_conv_params;

/* The paths of tm_conv_mve an including translation unit compiles (its kernel variants,
 * TM_VARIANT_*; all unless it says otherwise): the pointwise matrix product, the im2col
 * windows and their copy of whole 16-byte chunks (without it such windows take the general
 * im2col: the same result, slower), and the requantization for right shifts only and the
 * general one. */
#ifndef TM_CONV_MVE_WINDOW_CHUNKS
#define TM_CONV_MVE_WINDOW_CHUNKS 1
#endif
#ifndef TM_CONV_MVE_POINTWISE
#define TM_CONV_MVE_POINTWISE 1
#endif
#ifndef TM_CONV_MVE_WINDOW
#define TM_CONV_MVE_WINDOW 1
#endif
#ifndef TM_CONV_MVE_SHIFT_RIGHT
#define TM_CONV_MVE_SHIFT_RIGHT 1
#endif
#ifndef TM_CONV_MVE_SHIFT_ANY
#define TM_CONV_MVE_SHIFT_ANY 1
#endif

/* A pointwise conv (1x1, stride 1, no padding) is a matrix product: output pixel q reads input
 * pixel q, with no position to track. */
static inline bool tm_conv_pointwise(const tm_conv_params *p) {
  return p->kh == 1 && p->kw == 1 && p->win.stride_h == 1 && p->win.stride_w == 1 && p->win.pad_h == 0 &&
         p->win.pad_w == 0 && p->in_dims[1] == p->out_dims[1] && p->in_dims[2] == p->out_dims[2];
}

/* Columns (output pixels) the Helium path computes at once. */
#define TM_CONV_COLS 4

static inline size_t tm_round_up(size_t v, size_t a) { return (v + a - 1u) / a * a; }

/* Scratch of the Helium path (tm_quantized_conv2d_scratch_bytes): 16 bytes of alignment slack,
 * the int32 constant term per output channel, TM_CONV_COLS interleaved columns and, for
 * kernels larger than 1x1, one im2col staging column, of KH*KW*Cin_g bytes each rounded to 16. */
static inline size_t tm_conv_mve_scratch_bytes(size_t cout, size_t kh, size_t kw, size_t cin_g) {
  const size_t k = kh * kw * cin_g;
  return 16u + 4u * tm_round_up(cout, 4u) + (TM_CONV_COLS + (kh * kw > 1 ? 1u : 0u)) * tm_round_up(k, 16u);
}

/* The convolution p on Helium, with tm_conv_mve_scratch_bytes of 16-byte aligned scratch (the
 * definition below). */
#if TM_KERNELS_USE_MVE
#include "mve_gemm.h"

/* Output pixel position while walking the output in memory order. */
typedef struct {
  int32_t n, oh, ow;
} pixel_pos;

TM_MAYBE_UNUSED static void pixel_next(pixel_pos *px, const tm_conv_params *p) {
  if (++px->ow == p->out_dims[2]) {
    px->ow = 0;
    if (++px->oh == p->out_dims[1]) {
      px->oh = 0;
      ++px->n;
    }
  }
}

/* Input byte of tap (0, 0) of pixel px, channel 0 (may lie outside the image when padded). */
TM_MAYBE_UNUSED static const int8_t *pixel_origin(const tm_conv_params *p, const pixel_pos *px) {
  const int32_t ih = px->oh * p->win.stride_h - p->win.pad_h;
  const int32_t iw = px->ow * p->win.stride_w - p->win.pad_w;
  const intptr_t at = (((intptr_t)px->n * p->in_dims[1] + ih) * p->in_dims[2] + iw) * p->in_dims[3];
  return p->input + at;
}

/*
 * The im2col column of pixel px for channel group g: KH*KW*Cin_g bytes in weight order
 * (OHWI). Taps outside the image hold the input zero point (-input_offset, an int8 by
 * the contract), so with input_offset * sum(weights) added back they contribute 0,
 * exactly as padding does in the reference.
 */
TM_MAYBE_UNUSED static void im2col(const tm_conv_params *p, const pixel_pos *px, int32_t g, int8_t *dst) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t ih0 = px->oh * p->win.stride_h - p->win.pad_h;
  const int32_t iw0 = px->ow * p->win.stride_w - p->win.pad_w;
  const int8_t pad = (int8_t)(-p->q.input_offset);
  const int32_t row_bytes = p->kw * p->cin_g;
  const int8_t *image = p->input + (size_t)px->n * (size_t)h * (size_t)w * (size_t)c + (size_t)g * (size_t)p->cin_g;
  /* Whole rows are contiguous in the input when the taps of a row are adjacent pixels
   * inside the image and the group spans all channels. */
  const bool row_contiguous = p->win.dil_w == 1 && p->cin_g == c && iw0 >= 0 && iw0 + p->kw <= w;
  for (int32_t ky = 0; ky < p->kh; ++ky) {
    const int32_t ih = ih0 + ky * p->win.dil_h;
    if (ih < 0 || ih >= h) {
      dst = tm_mve_fill_s8(dst, pad, row_bytes);
      continue;
    }
    const int8_t *row = image + (size_t)ih * (size_t)w * (size_t)c;
    if (row_contiguous) {
      dst = tm_mve_copy_s8(dst, row + (size_t)iw0 * (size_t)c, row_bytes);
      continue;
    }
    for (int32_t kx = 0; kx < p->kw; ++kx) {
      const int32_t iw = iw0 + kx * p->win.dil_w;
      dst = (iw < 0 || iw >= w) ? tm_mve_fill_s8(dst, pad, p->cin_g)
                                : tm_mve_copy_s8(dst, row + (size_t)iw * (size_t)c, p->cin_g);
    }
  }
}

/* All taps of pixel px lie inside the image (span_h / span_w: the kernel's extent minus one,
 * 0 for a 1x1 kernel). */
TM_MAYBE_UNUSED static bool pixel_interior(const tm_conv_params *p, const pixel_pos *px, int32_t span_h,
                                           int32_t span_w) {
  const int32_t ih = px->oh * p->win.stride_h - p->win.pad_h;
  const int32_t iw = px->ow * p->win.stride_w - p->win.pad_w;
  return ih >= 0 && ih + span_h < p->in_dims[1] && iw >= 0 && iw + span_w < p->in_dims[2];
}

/* An interior pixel's im2col column is KH x segs segments of `seg` contiguous input bytes: a
 * whole kernel row (segs 1) when the row's taps are adjacent pixels of all channels, else one
 * tap's channels of the group (segs KW). Segments of at most 16 bytes are copied with one
 * predicated load and store each (p = vctp8q(seg)) into the staging column; whole 16-byte
 * chunks go straight into column slot of the interleaved block (chunks 64 bytes apart). src:
 * the first segment; segments seg_step apart in a row, rows row_step apart. Inlined with a
 * literal segs of 1 for the row form. */
TM_MVE_INLINE void im2col_short_segments(int8_t *dst, const int8_t *src, int32_t kh, int32_t row_step, int32_t segs,
                                         int32_t seg_step, int32_t seg, mve_pred16_t p) {
  for (int32_t ky = 0; ky < kh; ++ky, src += row_step) {
    const int8_t *at = src;
    for (int32_t x = 0; x < segs; ++x, at += seg_step, dst += seg) {
      vstrbq_p_s8(dst, vldrbq_z_s8(at, p), p);
    }
  }
}

TM_MVE_INLINE void im2col_chunk_segments(int8_t *slot, const int8_t *src, int32_t kh, int32_t row_step, int32_t segs,
                                         int32_t seg_step, int32_t chunks) {
  for (int32_t ky = 0; ky < kh; ++ky, src += row_step) {
    const int8_t *at = src;
    for (int32_t x = 0; x < segs; ++x, at += seg_step) {
      for (int32_t c = 0; c < chunks; ++c, slot += 64) {
        vstrbq_s8(slot, vldrbq_s8(at + 16 * c));
      }
    }
  }
}

/*
 * Helium path: TM_CONV_COLS output pixels at a time. Their input columns (for 1x1 kernels a
 * pixel's channels, contiguous in NHWC, or the zero point in the padding; otherwise
 * gathered by im2col into a staging column) are copied interleaved into scratch
 * (tm_mve_interleave_col_s8); then every pair of output channels takes eight dot
 * products (tm_mve_dot4x2_il_s8: per 16 bytes six loads feed eight multiply-accumulates),
 * an odd last channel of a group takes four. The four results of a channel, one per
 * pixel, are requantized together and stored with one scatter (they are Cout bytes
 * apart). acc = x.w + (bias + input_offset * sum(w)), the second term precomputed.
 */
TM_MAYBE_UNUSED static void tm_conv_mve(const tm_conv_params *p, uint8_t *scratch) {
  const int32_t cout = p->out_dims[3];
  const int32_t cout_g = cout / p->groups;
  const int32_t k = p->kh * p->kw * p->cin_g;
  const size_t k_pad = tm_round_up((size_t)k, 16u);
  int32_t *kbias = (int32_t *)(void *)scratch;
  int8_t *cols = (int8_t *)(scratch + 4u * tm_round_up((size_t)cout, 4u));
  int8_t *staging = cols + TM_CONV_COLS * k_pad;
  for (int32_t oc = 0; oc < cout; ++oc) {
    const uint32_t wsum = (uint32_t)tm_mve_sum_s8(p->weight + (size_t)oc * (size_t)k, k);
    const uint32_t bias = p->q.bias != NULL ? (uint32_t)p->q.bias[oc] : 0u;
    kbias[oc] = (int32_t)(bias + (uint32_t)p->q.input_offset * wsum);
  }
  const bool one_tap = p->kh == 1 && p->kw == 1;
  /* With one requantization form compiled, the call's check has made sure it applies. */
  const bool right_only = TM_CONV_MVE_SHIFT_RIGHT && (!TM_CONV_MVE_SHIFT_ANY || tm_mve_right_shifts_only(p->q.shifts, cout));
  /* Interior pixels copy whole segments (im2col_short_segments) when they are short or whole chunks. */
  const int32_t c_in = p->in_dims[3];
  const bool rows = p->win.dil_w == 1 && p->cin_g == c_in;
  const int32_t seg = rows ? p->kw * c_in : p->cin_g, seg_step = p->win.dil_w * c_in;
  const int32_t row_step = p->win.dil_h * p->in_dims[2] * c_in;
  const mve_pred16_t seg_pred = vctp8q((uint32_t)seg);
  const bool chunk_segments = TM_CONV_MVE_WINDOW_CHUNKS && seg % 16 == 0;
  const bool fast_segments = chunk_segments || seg <= 16;
  const int32_t span_h = (p->kh - 1) * p->win.dil_h, span_w = (p->kw - 1) * p->win.dil_w;
  const int8_t pad = (int8_t)(-p->q.input_offset);
  const bool pointwise = !TM_CONV_MVE_WINDOW || (TM_CONV_MVE_POINTWISE && tm_conv_pointwise(p));
  const int32_t total = p->in_dims[0] * p->out_dims[1] * p->out_dims[2];
  pixel_pos px = {0, 0, 0};
  pixel_pos pos[TM_CONV_COLS] = {{0, 0, 0}};
  for (int32_t p0 = 0; p0 < total; p0 += TM_CONV_COLS) {
    const int32_t count = total - p0 < TM_CONV_COLS ? total - p0 : TM_CONV_COLS;
    const uint32x4_t offsets = tm_mve_pixel_offsets((uint32_t)cout, count);
    if (!pointwise) {
      for (int32_t j = 0; j < TM_CONV_COLS; ++j) {
        /* Lanes past the last pixel repeat it (stored again at its address). */
        pos[j] = px;
        if (j + 1 < count) {
          pixel_next(&px, p);
        }
      }
      pixel_next(&px, p);
    }
    int8_t *dst = p->out + (size_t)p0 * (size_t)cout;
    for (int32_t g = 0; g < p->groups; ++g) {
      for (int32_t j = 0; j < TM_CONV_COLS; ++j) {
        int8_t *slot = cols + 16 * j;
        if (pointwise) {
          const size_t q = (size_t)p0 + (size_t)(j < count ? j : count - 1);
          tm_mve_interleave_col_s8(slot, p->input + q * (size_t)c_in + (size_t)g * (size_t)p->cin_g, k);
        } else if (!one_tap && fast_segments && pixel_interior(p, &pos[j], span_h, span_w)) {
          const int8_t *src = pixel_origin(p, &pos[j]) + (size_t)g * (size_t)p->cin_g;
          if (chunk_segments && rows) {
            im2col_chunk_segments(slot, src, p->kh, row_step, 1, 0, seg / 16);
          } else if (chunk_segments) {
            im2col_chunk_segments(slot, src, p->kh, row_step, p->kw, seg_step, seg / 16);
          } else {
            if (rows) {
              im2col_short_segments(staging, src, p->kh, row_step, 1, 0, seg, seg_pred);
            } else {
              im2col_short_segments(staging, src, p->kh, row_step, p->kw, seg_step, seg, seg_pred);
            }
            tm_mve_interleave_col_s8(slot, staging, k);
          }
        } else if (!one_tap) {
          im2col(p, &pos[j], g, staging);
          tm_mve_interleave_col_s8(slot, staging, k);
        } else if (pixel_interior(p, &pos[j], 0, 0)) { /* a 1x1 tap */
          tm_mve_interleave_col_s8(slot, pixel_origin(p, &pos[j]) + (size_t)g * (size_t)p->cin_g, k);
        } else {
          tm_mve_interleave_fill_s8(slot, pad, k); /* a 1x1 tap in the padding */
        }
      }
      const int32_t oc = g * cout_g;
      const int8_t *w = p->weight + (size_t)oc * (size_t)k;
      if (right_only) {
        tm_mve_cols4_channels_as(cols, w, (size_t)k, k, oc, oc + cout_g, kbias, &p->q, dst, offsets, true);
      } else {
        tm_mve_cols4_channels_as(cols, w, (size_t)k, k, oc, oc + cout_g, kbias, &p->q, dst, offsets, false);
      }
    }
  }
}
#endif

#endif
