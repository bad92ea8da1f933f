/* cortex_m::quantized_depthwise_conv2d.out and _nhwc.out - int8 depthwise convolution,
 * NHWC activations, [1, KH, KW, Cout] weights (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "mve_gemm.h"
#include "mve_requantize.h"
#include "requantize.h"

enum {
  A_INPUT,
  A_WEIGHT,
  A_BIAS,
  A_STRIDE,
  A_PADDING,
  A_DILATION,
  A_DEPTH_MULTIPLIER,
  A_INPUT_OFFSET,
  A_OUTPUT_OFFSET,
  A_MULTIPLIERS,
  A_SHIFTS,
  A_ACT_MIN,
  A_ACT_MAX,
  A_SCRATCH,
  A_OUT,
  N_SCHEMA
};

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
/* Channels of one Helium block: four int32x4 accumulators. */
#define DW_BLOCK 16

/* Taps [lo, hi) of one axis whose input index origin + t * dilation lies in [0, size). */
static void dw_tap_range(int32_t origin, int32_t dilation, int32_t taps, int32_t size, int32_t *lo, int32_t *hi) {
  int32_t a = 0, b = taps;
  while (a < b && origin + a * dilation < 0) {
    ++a;
  }
  while (b > a && origin + (b - 1) * dilation >= size) {
    --b;
  }
  *lo = a;
  *hi = b;
}

/*
 * DW_BLOCK channels c0.. of one output pixel: for each in-bounds tap, 4 + 4 widening
 * byte loads (input, weight) and four multiplies-and-adds of (x + input_offset) * w,
 * then per-lane requantization and four 4-byte stores. `tail` (a compile-time constant
 * at each call) predicates everything to the `left` channels that remain.
 */
TM_MVE_INLINE void dw_block(const dw_params *p, const int8_t *image, int32_t c0, int32_t ih0, int32_t iw0,
                            const int32_t range[4], int8_t *dst, int32_t left, bool tail) {
  const int32_t w = p->in_dims[2], c = p->in_dims[3];
  const int32_t off = p->q.input_offset;
  mve_pred16_t pr[4];
  int32x4_t acc[4];
  for (int32_t j = 0; j < 4; ++j) {
    const int32_t lanes = left - 4 * j;
    pr[j] = vctp32q((uint32_t)(lanes < 0 ? 0 : (lanes > 4 ? 4 : lanes)));
    const int32_t *bias = p->q.bias + c0 + 4 * j;
    acc[j] = p->q.bias == NULL ? vdupq_n_s32(0) : (tail ? vldrwq_z_s32(bias, pr[j]) : vldrwq_s32(bias));
  }
  /* Written out per accumulator: a loop over them keeps them in memory at -O2. */
  int32x4_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  for (int32_t ky = range[0]; ky < range[1]; ++ky) {
    const int8_t *xrow = image + (size_t)(ih0 + ky * p->win.dil_h) * (size_t)w * (size_t)c + (size_t)c0;
    const int8_t *wrow = p->weight + (size_t)ky * (size_t)p->kw * (size_t)c + (size_t)c0;
    for (int32_t kx = range[2]; kx < range[3]; ++kx) {
      const int8_t *xp = xrow + (ptrdiff_t)(iw0 + kx * p->win.dil_w) * c;
      const int8_t *wp = wrow + (size_t)kx * (size_t)c;
#define DW_MAC(a, j)                                                                            \
  do {                                                                                          \
    const int32x4_t x = tail ? vldrbq_z_s32(xp + 4 * (j), pr[j]) : vldrbq_s32(xp + 4 * (j));    \
    const int32x4_t wv = tail ? vldrbq_z_s32(wp + 4 * (j), pr[j]) : vldrbq_s32(wp + 4 * (j));   \
    (a) = vaddq_s32((a), vmulq_s32(vaddq_n_s32(x, off), wv));                                   \
  } while (0)
      DW_MAC(a0, 0);
      DW_MAC(a1, 1);
      DW_MAC(a2, 2);
      DW_MAC(a3, 3);
#undef DW_MAC
    }
  }
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
  for (int32_t j = 0; j < 4; ++j) {
    const int32_t *m = p->q.mults + c0 + 4 * j, *s = p->q.shifts + c0 + 4 * j;
    const tm_mve_requant rq = tail ? tm_mve_requant_load_p(m, s, pr[j]) : tm_mve_requant_load(m, s);
    const int32x4_t q = tm_mve_requantize_out(acc[j], rq, p->q.output_offset, p->q.act_min, p->q.act_max);
    if (tail) {
      vstrbq_p_s32(dst + 4 * j, q, pr[j]);
    } else {
      vstrbq_s32(dst + 4 * j, q);
    }
  }
}

/* Helium path for depth_multiplier 1: channels are contiguous in input, weight and output,
 * so DW_BLOCK of them run side by side in vector lanes; one predicated block per pixel
 * takes the channels left over. */
static void depthwise_mve(const dw_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t full = c - c % DW_BLOCK;
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
      const int32_t ih0 = oh * p->win.stride_h - p->win.pad_h;
      int32_t range[4];
      dw_tap_range(ih0, p->win.dil_h, p->kh, h, &range[0], &range[1]);
      for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
        const int32_t iw0 = ow * p->win.stride_w - p->win.pad_w;
        dw_tap_range(iw0, p->win.dil_w, p->kw, w, &range[2], &range[3]);
        for (int32_t c0 = 0; c0 < full; c0 += DW_BLOCK) {
          dw_block(p, image, c0, ih0, iw0, range, dst + c0, DW_BLOCK, false);
        }
        if (full < c) {
          dw_block(p, image, full, ih0, iw0, range, dst + full, c - full, true);
        }
        dst += c;
      }
    }
  }
}
#endif

static tm_status depthwise_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SCHEMA);
  if (st != TM_OK) {
    return st;
  }
  dw_params p;
  const tm_tensor *in = tm_activation_arg(args, A_INPUT, nhwc_sizes, p.in_dims);
  TM_ARG_CHECK(ctx, in != NULL, A_INPUT);
  const tm_tensor *wt = tm_tensor_arg(args, A_WEIGHT, TM_CHAR, 4, 4);
  TM_ARG_CHECK(ctx, wt != NULL && tm_has_layout(wt, TM_LAYOUT_CONTIGUOUS) && wt->sizes[0] == 1 &&
                        wt->sizes[1] > 0 && wt->sizes[2] > 0 && wt->sizes[3] > 0,
               A_WEIGHT);
  const int32_t cout = wt->sizes[3];
  p.kh = wt->sizes[1];
  p.kw = wt->sizes[2];
  TM_ARG_CHECK(ctx, tm_bias_arg(args, A_BIAS, cout, &p.q.bias), A_BIAS);
  st = tm_conv_window_args(ctx, args, A_STRIDE, &p.win);
  if (st != TM_OK) {
    return st;
  }
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_DEPTH_MULTIPLIER, 1, INT16_MAX, &p.depth_multiplier) &&
                        (int64_t)p.in_dims[3] * p.depth_multiplier == cout,
               A_DEPTH_MULTIPLIER);
  st = tm_conv_quant_args(ctx, args, A_INPUT_OFFSET, cout, &p.q);
  if (st != TM_OK) {
    return st;
  }
  const int32_t weight_dims[4] = {1, p.kh, p.kw, cout};
  TM_ARG_CHECK(ctx,
               tm_scratch_arg(args, A_SCRATCH, tm_quantized_depthwise_conv2d_scratch_bytes(p.in_dims, weight_dims)),
               A_SCRATCH);
  tm_tensor *out = tm_activation_arg(args, A_OUT, nhwc_sizes, p.out_dims);
  const int32_t oh = tm_conv_out_size(p.in_dims[1], p.kh, p.win.stride_h, p.win.pad_h, p.win.dil_h);
  const int32_t ow = tm_conv_out_size(p.in_dims[2], p.kw, p.win.stride_w, p.win.pad_w, p.win.dil_w);
  TM_ARG_CHECK(ctx, out != NULL && tm_window_out_dims(p.out_dims, p.in_dims[0], oh, ow, cout), A_OUT);
  p.input = (const int8_t *)in->data;
  p.weight = (const int8_t *)wt->data;
  p.out = (int8_t *)out->data;

#if TM_KERNELS_USE_MVE
  if (p.depth_multiplier == 1) {
    depthwise_mve(&p);
    return TM_OK;
  }
#endif
  depthwise_scalar(&p);
  return TM_OK;
}

tm_status tm_cortex_m_quantized_depthwise_conv2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return depthwise_entry(ctx, args, nargs, false);
}

tm_status tm_cortex_m_quantized_depthwise_conv2d_nhwc_out(tm_kernel_context *ctx, tm_value *const *args,
                                                          size_t nargs) {
  return depthwise_entry(ctx, args, nargs, true);
}
