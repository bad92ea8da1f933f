/* cortex_m::quantized_transpose_conv2d.out and _nhwc.out - int8 transposed 2-D convolution,
 * NHWC activations, OHWI weights [Cout, KH, KW, Cin] (docs/operators.md).
 *
 * Computed output-stationary: output pixel (oy, ox) sums, over the kernel taps (ky, kx)
 * whose input position iy = (oy + pad_h - ky * dil_h) / stride_h (an exact division) and
 * ix likewise lie inside the input, the dot products of that input pixel's channels
 * (plus input_offset) with the tap's weights; then it is requantized once. Every output
 * byte is written once and no accumulator buffer is needed. A kernel that tiles the
 * output (kernel == stride, no padding: U-Net's 2x2 stride-2 up-convolution) runs on
 * Helium as a 1x1 convolution per tap, four input pixels at a time. */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "mve_gemm.h"
#include "mve_requantize.h"
#include "requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_TRANSPOSE_CONV2D, x)

/* Kernel rows/columns the Helium path lists per output pixel; larger kernels run scalar. */
#define TCONV_MAX_TAPS 16
/* Input pixels the tiled Helium path computes at once (tm_mve_cols4_channels' columns). */
#define TCONV_COLS 4u

typedef struct {
  const int8_t *input;
  const int8_t *weight;
  int8_t *out;
  int32_t in_dims[4];  /* N, H, W, Cin */
  int32_t out_dims[4]; /* N, OH, OW, Cout */
  int32_t kh, kw;
  tm_window win;
  tm_conv_quant q;
} tconv_params;

static size_t round_up(size_t v, size_t a) { return (v + a - 1u) / a * a; }

/*
 * The Helium path's scratch: 16 bytes of alignment slack; per kernel tap, the int32
 * term input_offset * sum(weights of that tap) of every output channel (Cout rounded up
 * to 4; the tiled path adds the bias in); and four interleaved input columns of Cin
 * bytes rounded up to 16 (the tiled path's). The scalar path needs none and any scratch
 * is accepted; with less than this the Helium build runs the scalar path. output_scratch
 * is ExecuTorch's second buffer (CMSIS-NN's reverse-conv buffer); this kernel reads none
 * of it.
 */
size_t tm_quantized_transpose_conv2d_scratch_bytes(const int32_t input_nhwc[4], const int32_t weight_ohwi[4]) {
  (void)input_nhwc;
  const size_t taps = (size_t)weight_ohwi[1] * (size_t)weight_ohwi[2];
  return 16u + 4u * taps * round_up((size_t)weight_ohwi[0], 4u) + TCONV_COLS * round_up((size_t)weight_ohwi[3], 16u);
}

/* Output size of a transposed convolution along one axis (may be <= 0). */
static int64_t tconv_out_size(int32_t size, int32_t kernel, int32_t stride, int32_t pad, int32_t out_pad,
                              int32_t dilation) {
  return ((int64_t)size - 1) * stride - 2 * (int64_t)pad + (int64_t)dilation * (kernel - 1) + out_pad + 1;
}

/* The input position of tap k of output position o along one axis, or -1 if the tap
 * reads no input there (not on the stride grid, or outside the input). */
static int32_t tconv_source(int32_t o, int32_t k, int32_t stride, int32_t pad, int32_t dilation, int32_t size) {
  const int32_t t = o + pad - k * dilation;
  if (t < 0 || t % stride != 0 || t / stride >= size) {
    return -1;
  }
  return t / stride;
}

TM_MAYBE_UNUSED static void tconv_scalar(const tconv_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t cout = p->out_dims[3];
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oy = 0; oy < p->out_dims[1]; ++oy) {
      for (int32_t ox = 0; ox < p->out_dims[2]; ++ox) {
        for (int32_t oc = 0; oc < cout; ++oc) {
          const int8_t *filt = p->weight + (size_t)oc * (size_t)p->kh * (size_t)p->kw * (size_t)c;
          int32_t acc = p->q.bias != NULL ? p->q.bias[oc] : 0;
          for (int32_t ky = 0; ky < p->kh; ++ky) {
            const int32_t iy = tconv_source(oy, ky, p->win.stride_h, p->win.pad_h, p->win.dil_h, h);
            if (iy < 0) {
              continue;
            }
            for (int32_t kx = 0; kx < p->kw; ++kx) {
              const int32_t ix = tconv_source(ox, kx, p->win.stride_w, p->win.pad_w, p->win.dil_w, w);
              if (ix < 0) {
                continue;
              }
              const int8_t *px = image + ((size_t)iy * (size_t)w + (size_t)ix) * (size_t)c;
              const int8_t *wk = filt + ((size_t)ky * (size_t)p->kw + (size_t)kx) * (size_t)c;
              for (int32_t ci = 0; ci < c; ++ci) {
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
/*
 * Helium path: per output pixel the contributing kernel rows and columns are listed
 * once; then four output channels at a time take, per contributing tap, four dot
 * products of the input pixel's Cin bytes with the four channels' tap weights
 * (tm_mve_dot4_s8: the input is loaded once per 16 bytes) plus the tap's precomputed
 * input_offset * sum(w) term, and are requantized and stored together. A last group of
 * fewer than four channels repeats its last channel's weights in the unused lanes and
 * stores only its own.
 */
/* The kernel taps k (and their input positions) that feed output position o along one
 * axis, in kernel order; returns their count (at most `kernel` <= TCONV_MAX_TAPS). */
static int32_t tconv_taps(int32_t o, int32_t kernel, int32_t stride, int32_t pad, int32_t dilation, int32_t size,
                          int32_t *taps, int32_t *sources) {
  int32_t count = 0;
  for (int32_t k = 0; k < kernel; ++k) {
    const int32_t i = tconv_source(o, k, stride, pad, dilation, size);
    if (i >= 0) {
      taps[count] = k;
      sources[count++] = i;
    }
  }
  return count;
}

/* kterm[t * cout4 + oc] = input_offset * sum(weights of tap t, channel oc), plus the bias
 * with `with_bias` (wrapping like the accumulator); 0 in the lanes past Cout. */
static void tconv_kterms(const tconv_params *p, int32_t *kterm, bool with_bias) {
  const int32_t c = p->in_dims[3], cout = p->out_dims[3], taps = p->kh * p->kw;
  const int32_t cout4 = (int32_t)round_up((size_t)cout, 4u);
  const size_t wrow = (size_t)taps * (size_t)c; /* one output channel's weights */
  for (int32_t t = 0; t < taps; ++t) {
    for (int32_t oc = 0; oc < cout4; ++oc) {
      uint32_t term = 0;
      if (oc < cout) {
        const uint32_t wsum = (uint32_t)tm_mve_sum_s8(p->weight + (size_t)oc * wrow + (size_t)t * (size_t)c, c);
        term = (uint32_t)p->q.input_offset * wsum;
        term += with_bias && p->q.bias != NULL ? (uint32_t)p->q.bias[oc] : 0u;
      }
      kterm[t * cout4 + oc] = (int32_t)term;
    }
  }
}

/* The kernel tiles the output: kernel == stride, no padding, dilation 1 and no output
 * padding, so output pixel (oy, ox) takes exactly one tap, (oy % KH, ox % KW), of input
 * pixel (oy / KH, ox / KW). */
static bool tconv_tiles(const tconv_params *p) {
  return p->kh == p->win.stride_h && p->kw == p->win.stride_w && p->win.pad_h == 0 && p->win.pad_w == 0 &&
         p->win.dil_h == 1 && p->win.dil_w == 1 && p->out_dims[1] == p->in_dims[1] * p->kh &&
         p->out_dims[2] == p->in_dims[2] * p->kw;
}

/*
 * Tiled Helium path: four input pixels of a row at a time are copied interleaved into
 * scratch (a short last group repeats its last pixel, not stored); then per tap every
 * output channel takes their four dot products with its tap weights
 * (tm_mve_cols4_channels, two channels per pass) plus bias + input_offset * sum(w), and
 * stores the four outputs, KW * Cout bytes apart, with one scatter.
 */
static void tconv_tiled_mve(const tconv_params *p, int32_t *kterm, int8_t *cols) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t cout = p->out_dims[3], ow = p->out_dims[2];
  const int32_t cout4 = (int32_t)round_up((size_t)cout, 4u);
  const size_t wrow = (size_t)p->kh * (size_t)p->kw * (size_t)c;
  tconv_kterms(p, kterm, true);
  const bool right_only = tm_mve_right_shifts_only(p->q.shifts, cout);
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    for (int32_t iy = 0; iy < h; ++iy) {
      const int8_t *row = p->input + ((size_t)n * (size_t)h + (size_t)iy) * (size_t)w * (size_t)c;
      for (int32_t ix = 0; ix < w; ix += (int32_t)TCONV_COLS) {
        const int32_t count = w - ix < (int32_t)TCONV_COLS ? w - ix : (int32_t)TCONV_COLS;
        for (int32_t j = 0; j < (int32_t)TCONV_COLS; ++j) {
          const int32_t x = ix + (j < count ? j : count - 1);
          tm_mve_interleave_col_s8(cols + 16 * j, row + (size_t)x * (size_t)c, c);
        }
        const uint32x4_t offsets = tm_mve_pixel_offsets((uint32_t)(p->kw * cout), count);
        for (int32_t ky = 0; ky < p->kh; ++ky) {
          const size_t oy = ((size_t)n * (size_t)p->out_dims[1] + (size_t)iy * (size_t)p->kh + (size_t)ky);
          for (int32_t kx = 0; kx < p->kw; ++kx) {
            const int32_t t = ky * p->kw + kx;
            int8_t *dst = p->out + (oy * (size_t)ow + (size_t)ix * (size_t)p->kw + (size_t)kx) * (size_t)cout;
            tm_mve_cols4_channels(cols, p->weight + (size_t)t * (size_t)c, wrow, c, 0, cout, kterm + t * cout4,
                                  &p->q, dst, offsets, right_only);
          }
        }
      }
    }
  }
}

static void tconv_mve(const tconv_params *p, int32_t *kterm) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t cout = p->out_dims[3];
  const int32_t cout4 = (int32_t)round_up((size_t)cout, 4u);
  const size_t wrow = (size_t)p->kh * (size_t)p->kw * (size_t)c; /* one output channel's weights */
  tconv_kterms(p, kterm, false);
  const int32x4_t act_min = vdupq_n_s32(p->q.act_min), act_max = vdupq_n_s32(p->q.act_max);
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oy = 0; oy < p->out_dims[1]; ++oy) {
      int32_t rows_k[TCONV_MAX_TAPS], rows_i[TCONV_MAX_TAPS];
      const int32_t nrows = tconv_taps(oy, p->kh, p->win.stride_h, p->win.pad_h, p->win.dil_h, h, rows_k, rows_i);
      /* The taps' offsets once per row / pixel, not per channel quad: row_at[r] is kernel row r's
       * input row, rows_k[r] becomes its first tap (ky * KW) and, below, cols_i[q] a byte offset. */
      const int8_t *row_at[TCONV_MAX_TAPS];
      for (int32_t r = 0; r < nrows; ++r) {
        row_at[r] = image + (size_t)rows_i[r] * (size_t)w * (size_t)c;
        rows_k[r] *= p->kw;
      }
      for (int32_t ox = 0; ox < p->out_dims[2]; ++ox, dst += cout) {
        int32_t cols_k[TCONV_MAX_TAPS], cols_i[TCONV_MAX_TAPS];
        const int32_t ncols = tconv_taps(ox, p->kw, p->win.stride_w, p->win.pad_w, p->win.dil_w, w, cols_k, cols_i);
        for (int32_t q = 0; q < ncols; ++q) {
          cols_i[q] *= c;
        }
        for (int32_t oc = 0; oc < cout; oc += 4) {
          const int32_t lanes = cout - oc < 4 ? cout - oc : 4;
          const mve_pred16_t pred = vctp32q((uint32_t)lanes);
          const int8_t *w0 = p->weight + (size_t)oc * wrow;
          const int8_t *w1 = lanes > 1 ? w0 + wrow : w0;
          const int8_t *w2 = lanes > 2 ? w0 + 2u * wrow : w1;
          const int8_t *w3 = lanes > 3 ? w0 + 3u * wrow : w2;
          int32x4_t acc = p->q.bias != NULL ? vldrwq_z_s32(p->q.bias + oc, pred) : vdupq_n_s32(0);
          for (int32_t r = 0; r < nrows; ++r) {
            const int8_t *row = row_at[r];
            for (int32_t q = 0; q < ncols; ++q) {
              const int32_t t = rows_k[r] + cols_k[q];
              const size_t at = (size_t)t * (size_t)c;
              const int8_t *px = row + cols_i[q];
              acc = vaddq_s32(acc, tm_mve_dot4_s8(px, w0 + at, w1 + at, w2 + at, w3 + at, c));
              acc = vaddq_s32(acc, vldrwq_s32(kterm + t * cout4 + oc));
            }
          }
          const tm_mve_requant rq = tm_mve_requant_load_p(p->q.mults + oc, p->q.shifts + oc, pred);
          int32x4_t v = vqaddq_n_s32(tm_mve_requantize(acc, rq), p->q.output_offset);
          v = vminq_s32(vmaxq_s32(v, act_min), act_max);
          vstrbq_p_s32(dst + oc, v, pred);
        }
      }
    }
  }
}
#endif

/* The kernel, or with `prepare` its prepare step (the checks, then what the Helium paths need of
 * the shared scratch). */
static tm_status tconv_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes,
                             bool prepare) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_TRANSPOSE_CONV2D));
  if (st != TM_OK) {
    return st;
  }
  tconv_params p;
  const tm_tensor *in = tm_activation_arg(args, A(INPUT), nhwc_sizes, p.in_dims);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  const tm_tensor *wt = tm_tensor_arg(args, A(WEIGHT), TM_CHAR, 4, 4);
  TM_ARG_CHECK(ctx, wt != NULL && tm_has_layout(wt, TM_LAYOUT_CONTIGUOUS), A(WEIGHT));
  const int32_t cout = wt->sizes[0];
  p.kh = wt->sizes[1];
  p.kw = wt->sizes[2];
  TM_ARG_CHECK(ctx, cout > 0 && p.kh > 0 && p.kw > 0 && wt->sizes[3] == p.in_dims[3], A(WEIGHT));
  TM_ARG_CHECK(ctx, tm_bias_arg(args, A(BIAS), cout, &p.q.bias), A(BIAS));
  TM_ARG_CHECK(ctx, tm_pair_arg(args, A(STRIDE), false, 1, INT16_MAX, &p.win.stride_h, &p.win.stride_w), A(STRIDE));
  TM_ARG_CHECK(ctx, tm_pair_arg(args, A(PADDING), false, 0, INT16_MAX, &p.win.pad_h, &p.win.pad_w), A(PADDING));
  int32_t out_pad_h = 0, out_pad_w = 0;
  const bool out_pad_ok = tm_pair_arg(args, A(OUTPUT_PADDING), false, 0, INT16_MAX, &out_pad_h, &out_pad_w);
  TM_ARG_CHECK(ctx, tm_pair_arg(args, A(DILATION), false, 1, INT16_MAX, &p.win.dil_h, &p.win.dil_w), A(DILATION));
  /* torch's rule: output_padding smaller than the stride or the dilation */
  TM_ARG_CHECK(ctx,
               out_pad_ok && (out_pad_h < p.win.stride_h || out_pad_h < p.win.dil_h) &&
                   (out_pad_w < p.win.stride_w || out_pad_w < p.win.dil_w),
               A(OUTPUT_PADDING));
  st = tm_conv_quant_args(ctx, args, A(INPUT_OFFSET), cout, &p.q);
  if (st != TM_OK) {
    return st;
  }
  const int32_t weight_dims[4] = {cout, p.kh, p.kw, p.in_dims[3]};
  TM_ARG_CHECK(ctx, tm_scratch_arg(args, A(SCRATCH), 0), A(SCRATCH));
  TM_ARG_CHECK(ctx, tm_scratch_arg(args, A(OUTPUT_SCRATCH), 0), A(OUTPUT_SCRATCH));
  const tm_tensor *scratch = args[A(SCRATCH)]->u.tensor;
  tm_tensor *out = tm_activation_arg(args, A(OUT), nhwc_sizes, p.out_dims);
  const int64_t oh = tconv_out_size(p.in_dims[1], p.kh, p.win.stride_h, p.win.pad_h, out_pad_h, p.win.dil_h);
  const int64_t ow = tconv_out_size(p.in_dims[2], p.kw, p.win.stride_w, p.win.pad_w, out_pad_w, p.win.dil_w);
  TM_ARG_CHECK(ctx,
               out != NULL && oh > 0 && ow > 0 && oh <= INT32_MAX && ow <= INT32_MAX &&
                   tm_window_out_dims(p.out_dims, p.in_dims[0], (int32_t)oh, (int32_t)ow, cout),
               A(OUT));
  p.input = (const int8_t *)in->data;
  p.weight = (const int8_t *)wt->data;
  p.out = (int8_t *)out->data;
  const size_t need = tm_quantized_transpose_conv2d_scratch_bytes(p.in_dims, weight_dims);
  if (prepare) {
    return tm_prepared(ctx, scratch, need);
  }

#if TM_KERNELS_USE_MVE
  uint8_t *aligned = tm_kernel_scratch(ctx, scratch, need);
  if (aligned != NULL && tconv_tiles(&p)) {
    const size_t kterm_bytes = 4u * (size_t)p.kh * (size_t)p.kw * round_up((size_t)cout, 4u);
    tconv_tiled_mve(&p, (int32_t *)(void *)aligned, (int8_t *)(aligned + kterm_bytes));
    return TM_OK;
  }
  if (aligned != NULL && p.kh <= TCONV_MAX_TAPS && p.kw <= TCONV_MAX_TAPS) {
    tconv_mve(&p, (int32_t *)(void *)aligned);
    return TM_OK;
  }
#endif
  tconv_scalar(&p);
  return TM_OK;
}

tm_status tm_cortex_m_quantized_transpose_conv2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return tconv_entry(ctx, args, nargs, false, false);
}

tm_status tm_cortex_m_quantized_transpose_conv2d_nhwc_out(tm_kernel_context *ctx, tm_value *const *args,
                                                          size_t nargs) {
  return tconv_entry(ctx, args, nargs, true, false);
}

static tm_status tconv_prepare(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes) {
  return tconv_entry(ctx, args, nargs, nhwc_sizes, true);
}

TM_PREPARE_ENTRIES(tm_cortex_m_quantized_transpose_conv2d, tconv_prepare)
