/* cortex_m::quantized_conv2d.out and quantized_conv2d_nhwc.out - int8 (grouped) 2-D convolution,
 * NHWC activations, OHWI weights (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "mve_gemm.h"
#include "mve_requantize.h"
#include "requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_CONV2D, x)

typedef struct {
  const int8_t *input;
  const int8_t *weight;
  int8_t *out;
  int32_t in_dims[4];  /* N, H, W, C */
  int32_t out_dims[4]; /* N, OH, OW, Cout */
  int32_t kh, kw, cin_g, groups;
  tm_window win;
  tm_conv_quant q;
} conv_params;

/* Columns (output pixels) the Helium path computes at once. */
#define CONV_COLS 4

static size_t round_up(size_t v, size_t a) { return (v + a - 1u) / a * a; }

/*
 * What the Helium path uses (the same figure on every build, because the exporter plans
 * it for the target): 16 bytes of alignment slack, the per-channel constant term
 * bias + input_offset * sum(weights) as int32, CONV_COLS interleaved columns and, for
 * kernels larger than 1x1, one im2col staging column, of KH*KW*Cin_g bytes each rounded
 * to 16. The scalar path needs none and any scratch is
 * accepted; with less than this the Helium build runs the scalar path.
 */
size_t tm_quantized_conv2d_scratch_bytes(const int32_t input_nhwc[4], const int32_t weight_ohwi[4]) {
  (void)input_nhwc;
  const size_t cout = (size_t)weight_ohwi[0];
  const size_t k = (size_t)weight_ohwi[1] * (size_t)weight_ohwi[2] * (size_t)weight_ohwi[3];
  const size_t staging = weight_ohwi[1] * weight_ohwi[2] > 1 ? 1u : 0u;
  return 16u + 4u * round_up(cout, 4u) + (CONV_COLS + staging) * round_up(k, 16u);
}

TM_MAYBE_UNUSED static void conv_scalar(const conv_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t oh_n = p->out_dims[1], ow_n = p->out_dims[2], cout = p->out_dims[3];
  const int32_t cout_g = cout / p->groups;
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oh = 0; oh < oh_n; ++oh) {
      for (int32_t ow = 0; ow < ow_n; ++ow) {
        const int32_t ih0 = oh * p->win.stride_h - p->win.pad_h;
        const int32_t iw0 = ow * p->win.stride_w - p->win.pad_w;
        for (int32_t oc = 0; oc < cout; ++oc) {
          const int32_t c0 = (oc / cout_g) * p->cin_g;
          const int8_t *filt = p->weight + (size_t)oc * (size_t)p->kh * (size_t)p->kw * (size_t)p->cin_g;
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
              const int8_t *px = image + ((size_t)ih * (size_t)w + (size_t)iw) * (size_t)c + (size_t)c0;
              const int8_t *wk = filt + ((size_t)ky * (size_t)p->kw + (size_t)kx) * (size_t)p->cin_g;
              for (int32_t ci = 0; ci < p->cin_g; ++ci) {
                acc += ((int32_t)px[ci] + p->q.input_offset) * (int32_t)wk[ci];
              }
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
/* Output pixel position while walking the output in memory order. */
typedef struct {
  int32_t n, oh, ow;
} pixel_pos;

static void pixel_next(pixel_pos *px, const conv_params *p) {
  if (++px->ow == p->out_dims[2]) {
    px->ow = 0;
    if (++px->oh == p->out_dims[1]) {
      px->oh = 0;
      ++px->n;
    }
  }
}

/* Input byte of tap (0, 0) of pixel px, channel 0 (may lie outside the image when padded). */
static const int8_t *pixel_origin(const conv_params *p, const pixel_pos *px) {
  const int32_t ih = px->oh * p->win.stride_h - p->win.pad_h;
  const int32_t iw = px->ow * p->win.stride_w - p->win.pad_w;
  const intptr_t at = (((intptr_t)px->n * p->in_dims[1] + ih) * p->in_dims[2] + iw) * p->in_dims[3];
  return p->input + at;
}

/* The single tap of a 1x1 kernel at pixel px lies inside the image. */
static bool pixel_inside(const conv_params *p, const pixel_pos *px) {
  const int32_t ih = px->oh * p->win.stride_h - p->win.pad_h;
  const int32_t iw = px->ow * p->win.stride_w - p->win.pad_w;
  return ih >= 0 && ih < p->in_dims[1] && iw >= 0 && iw < p->in_dims[2];
}

/*
 * The im2col column of pixel px for channel group g: KH*KW*Cin_g bytes in weight order
 * (OHWI). Taps outside the image hold the input zero point (-input_offset, an int8 by
 * the contract), so with input_offset * sum(weights) added back they contribute 0,
 * exactly as padding does in the reference.
 */
static void im2col(const conv_params *p, const pixel_pos *px, int32_t g, int8_t *dst) {
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

/*
 * Helium path: CONV_COLS output pixels at a time. Their input columns (for 1x1 kernels a
 * pixel's channels, contiguous in NHWC, or the zero point in the padding; otherwise
 * gathered by im2col into a staging column) are copied interleaved into scratch
 * (tm_mve_interleave_col_s8); then every pair of output channels takes eight dot
 * products (tm_mve_dot4x2_il_s8: per 16 bytes six loads feed eight multiply-accumulates),
 * an odd last channel of a group takes four. The four results of a channel, one per
 * pixel, are requantized together and stored with one scatter (they are Cout bytes
 * apart). acc = x.w + (bias + input_offset * sum(w)), the second term precomputed.
 */
static void conv_mve(const conv_params *p, uint8_t *scratch) {
  const int32_t cout = p->out_dims[3];
  const int32_t cout_g = cout / p->groups;
  const int32_t k = p->kh * p->kw * p->cin_g;
  const size_t k_pad = round_up((size_t)k, 16u);
  int32_t *kbias = (int32_t *)(void *)scratch;
  int8_t *cols = (int8_t *)(scratch + 4u * round_up((size_t)cout, 4u));
  int8_t *staging = cols + CONV_COLS * k_pad;
  for (int32_t oc = 0; oc < cout; ++oc) {
    const uint32_t wsum = (uint32_t)tm_mve_sum_s8(p->weight + (size_t)oc * (size_t)k, k);
    const uint32_t bias = p->q.bias != NULL ? (uint32_t)p->q.bias[oc] : 0u;
    kbias[oc] = (int32_t)(bias + (uint32_t)p->q.input_offset * wsum);
  }
  const bool one_tap = p->kh == 1 && p->kw == 1;
  const int8_t pad = (int8_t)(-p->q.input_offset);
  const uint32x4_t offsets = vmulq_n_u32(vidupq_n_u32(0u, 1), (uint32_t)cout);
  const int32_t total = p->in_dims[0] * p->out_dims[1] * p->out_dims[2];
  pixel_pos px = {0, 0, 0};
  for (int32_t p0 = 0; p0 < total; p0 += CONV_COLS) {
    const int32_t count = total - p0 < CONV_COLS ? total - p0 : CONV_COLS;
    const mve_pred16_t store_pred = vctp32q((uint32_t)count);
    pixel_pos pos[CONV_COLS];
    for (int32_t j = 0; j < CONV_COLS; ++j) {
      /* Lanes past the last pixel repeat it; they are not stored. */
      pos[j] = px;
      if (j + 1 < count) {
        pixel_next(&px, p);
      }
    }
    pixel_next(&px, p);
    int8_t *dst = p->out + (size_t)p0 * (size_t)cout;
    for (int32_t g = 0; g < p->groups; ++g) {
      for (int32_t j = 0; j < CONV_COLS; ++j) {
        int8_t *slot = cols + 16 * j;
        if (!one_tap) {
          im2col(p, &pos[j], g, staging);
          tm_mve_interleave_col_s8(slot, staging, k);
        } else if (pixel_inside(p, &pos[j])) {
          tm_mve_interleave_col_s8(slot, pixel_origin(p, &pos[j]) + (size_t)g * (size_t)p->cin_g, k);
        } else {
          tm_mve_interleave_fill_s8(slot, pad, k); /* a 1x1 tap in the padding */
        }
      }
      const int32_t oc = g * cout_g;
      tm_mve_cols4_channels(cols, p->weight + (size_t)oc * (size_t)k, (size_t)k, k, oc, oc + cout_g, kbias, &p->q,
                            dst, offsets, store_pred);
    }
  }
}
#endif

static tm_status conv_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_CONV2D));
  if (st != TM_OK) {
    return st;
  }
  conv_params p;
  const tm_tensor *in = tm_activation_arg(args, A(INPUT), nhwc_sizes, p.in_dims);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  const tm_tensor *wt = tm_tensor_arg(args, A(WEIGHT), TM_CHAR, 4, 4);
  TM_ARG_CHECK(ctx, wt != NULL && tm_has_layout(wt, TM_LAYOUT_CONTIGUOUS), A(WEIGHT));
  const int32_t cout = wt->sizes[0];
  p.kh = wt->sizes[1];
  p.kw = wt->sizes[2];
  p.cin_g = wt->sizes[3];
  TM_ARG_CHECK(ctx, cout > 0 && p.kh > 0 && p.kw > 0 && p.cin_g > 0 && p.in_dims[3] % p.cin_g == 0, A(WEIGHT));
  p.groups = p.in_dims[3] / p.cin_g;
  TM_ARG_CHECK(ctx, p.groups > 0 && cout % p.groups == 0, A(WEIGHT));
  TM_ARG_CHECK(ctx, tm_bias_arg(args, A(BIAS), cout, &p.q.bias), A(BIAS));
  st = tm_conv_window_args(ctx, args, A(STRIDE), &p.win);
  if (st != TM_OK) {
    return st;
  }
  st = tm_conv_quant_args(ctx, args, A(INPUT_OFFSET), cout, &p.q);
  if (st != TM_OK) {
    return st;
  }
  const int32_t weight_dims[4] = {cout, p.kh, p.kw, p.cin_g};
  /* Any scratch is accepted (the scalar path needs none); the Helium path wants
   * tm_quantized_conv2d_scratch_bytes and otherwise falls back to the scalar path. */
  TM_ARG_CHECK(ctx, tm_scratch_arg(args, A(SCRATCH), 0), A(SCRATCH));
  const tm_tensor *scratch = args[A(SCRATCH)]->u.tensor;
  tm_tensor *out = tm_activation_arg(args, A(OUT), nhwc_sizes, p.out_dims);
  const int32_t oh = tm_conv_out_size(p.in_dims[1], p.kh, p.win.stride_h, p.win.pad_h, p.win.dil_h);
  const int32_t ow = tm_conv_out_size(p.in_dims[2], p.kw, p.win.stride_w, p.win.pad_w, p.win.dil_w);
  TM_ARG_CHECK(ctx, out != NULL && tm_window_out_dims(p.out_dims, p.in_dims[0], oh, ow, cout), A(OUT));
  p.input = (const int8_t *)in->data;
  p.weight = (const int8_t *)wt->data;
  p.out = (int8_t *)out->data;

#if TM_KERNELS_USE_MVE
  /* Scratch is a byte tensor: its start aligned for the int32 table. */
  uint8_t *aligned = tm_aligned_scratch(scratch, tm_quantized_conv2d_scratch_bytes(p.in_dims, weight_dims));
  if (aligned != NULL) {
    conv_mve(&p, aligned);
    return TM_OK;
  }
#else
  (void)scratch;
  (void)weight_dims;
#endif
  conv_scalar(&p);
  return TM_OK;
}

tm_status tm_cortex_m_quantized_conv2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return conv_entry(ctx, args, nargs, false);
}

tm_status tm_cortex_m_quantized_conv2d_nhwc_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return conv_entry(ctx, args, nargs, true);
}
