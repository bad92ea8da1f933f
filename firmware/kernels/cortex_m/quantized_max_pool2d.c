/* cortex_m::quantized_max_pool2d.out and _nhwc.out - int8 max pooling over the in-bounds taps
 * (CMSIS-NN arm_max_pool_s8; docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"
#include "op_args.h"

#include "mve_requantize.h" /* TM_KERNELS_USE_MVE */

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_MAX_POOL2D, x)

typedef struct {
  const int8_t *input;
  int8_t *out;
  int32_t in_dims[4], out_dims[4];
  int32_t kh, kw, act_min, act_max;
  tm_window win;
  bool adaptive;
} pool_params;

#define ADAPTIVE_A(x) TM_ARG(TORCHMCU_QUANTIZED_ADAPTIVE_MAX_POOL2D, x)

/* The in-bounds taps of output o's window along an axis of `size`: the first coordinate
 * and an exclusive end (first >= end: none), stepping by dil. Strided: start + j * dil for
 * j in [0, k), start = o * stride - pad; adaptive (dil 1): torch's adaptive window. */
static inline void dilated_span(const pool_params *p, int32_t o, int32_t out, int32_t stride, int32_t pad, int32_t k,
                                int32_t dil, int32_t size, int32_t *first, int32_t *end) {
  if (p->adaptive) {
    tm_adaptive_span(o, out, size, first, end);
    return;
  }
  const int32_t start = o * stride - pad;
  const int64_t f = start < 0 ? start + (int64_t)((-start + dil - 1) / dil) * dil : start;
  const int64_t last = (int64_t)start + (int64_t)(k - 1) * dil + 1;
  *first = (int32_t)(f < size ? f : size);
  *end = (int32_t)(last < size ? last : size);
}

#if !TM_KERNELS_USE_MVE
static void max_pool_scalar(const pool_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
      int32_t ys = 0, ye = 0;
      dilated_span(p, oh, p->out_dims[1], p->win.stride_h, p->win.pad_h, p->kh, p->win.dil_h, h, &ys, &ye);
      for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
        int32_t xs = 0, xe = 0;
        dilated_span(p, ow, p->out_dims[2], p->win.stride_w, p->win.pad_w, p->kw, p->win.dil_w, w, &xs, &xe);
        for (int32_t ch = 0; ch < c; ++ch) {
          int32_t best = INT8_MIN;
          for (int32_t y = ys; y < ye; y += p->win.dil_h) {
            for (int32_t x = xs; x < xe; x += p->win.dil_w) {
              const int32_t v = image[((size_t)y * (size_t)w + (size_t)x) * (size_t)c + (size_t)ch];
              best = v > best ? v : best;
            }
          }
          *dst++ = (int8_t)tm_clamp64(best, p->act_min, p->act_max);
        }
      }
    }
  }
}
#endif

#if TM_KERNELS_USE_MVE
/* Max of one window over 16 channels from ch; `masked` (a constant at each call) loads
 * only the lanes pred enables, for the channel tail. */
static inline __attribute__((always_inline)) int8x16_t window_max(const int8_t *image, const pool_params *p,
                                                                  int32_t ys, int32_t ye, int32_t xs, int32_t xe,
                                                                  int32_t ch, bool masked, mve_pred16_t pred) {
  const int32_t w = p->in_dims[2], c = p->in_dims[3];
  const size_t step = (size_t)p->win.dil_w * (size_t)c;
  int8x16_t best = vdupq_n_s8(INT8_MIN);
  for (int32_t y = ys; y < ye; y += p->win.dil_h) {
    const int8_t *src = image + ((size_t)y * (size_t)w + (size_t)xs) * (size_t)c + (size_t)ch;
    for (int32_t x = xs; x < xe; x += p->win.dil_w) {
      best = vmaxq_s8(best, masked ? vldrbq_z_s8(src, pred) : vld1q_s8(src));
      src += step;
    }
  }
  return best;
}

/* NHWC: each output pixel takes the max over its taps of 16 channels at a time; the
 * channel tail (c % 16) is one predicated step. int8 loads need no alignment. */
static void max_pool_mve(const pool_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int8x16_t lo = vdupq_n_s8((int8_t)p->act_min), hi = vdupq_n_s8((int8_t)p->act_max);
  const mve_pred16_t tail = vctp8q((uint32_t)(c % 16));
  const int32_t full = c - c % 16;
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
      int32_t ys = 0, ye = 0;
      dilated_span(p, oh, p->out_dims[1], p->win.stride_h, p->win.pad_h, p->kh, p->win.dil_h, h, &ys, &ye);
      for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
        int32_t xs = 0, xe = 0;
        dilated_span(p, ow, p->out_dims[2], p->win.stride_w, p->win.pad_w, p->kw, p->win.dil_w, w, &xs, &xe);
        for (int32_t ch = 0; ch < full; ch += 16) {
          const int8x16_t m = window_max(image, p, ys, ye, xs, xe, ch, false, tail);
          vst1q_s8(dst + ch, vminq_s8(vmaxq_s8(m, lo), hi));
        }
        if (full < c) {
          const int8x16_t m = window_max(image, p, ys, ye, xs, xe, full, true, tail);
          vstrbq_p_s8(dst + full, vminq_s8(vmaxq_s8(m, lo), hi), tail);
        }
        dst += c;
      }
    }
  }
}
#endif

static tm_status max_pool_run(const pool_params *p) {
#if TM_KERNELS_USE_MVE
  max_pool_mve(p);
#else
  max_pool_scalar(p);
#endif
  return TM_OK;
}

static tm_status max_pool_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_MAX_POOL2D));
  if (st != TM_OK) {
    return st;
  }
  pool_params p;
  p.adaptive = false;
  const tm_tensor *in = tm_activation_arg(args, A(INPUT), nhwc_sizes, p.in_dims);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  st = tm_pool_window_args(ctx, args, A(KERNEL_SIZE), &p.kh, &p.kw, &p.win);
  if (st != TM_OK) {
    return st;
  }
  TM_ARG_CHECK(ctx, tm_pair_arg(args, A(DILATION), true, 1, INT16_MAX, &p.win.dil_h, &p.win.dil_w), A(DILATION));
  bool ceil_mode = false;
  TM_ARG_CHECK(ctx, tm_bool_arg(args, A(CEIL_MODE), &ceil_mode), A(CEIL_MODE));
  int32_t in_zp = 0, out_zp = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(INPUT_ZERO_POINT), INT8_MIN, INT8_MAX, &in_zp), A(INPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), in_zp, in_zp, &out_zp), A(OUTPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ACTIVATION_MIN), INT8_MIN, INT8_MAX, &p.act_min), A(ACTIVATION_MIN));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ACTIVATION_MAX), p.act_min, INT8_MAX, &p.act_max), A(ACTIVATION_MAX));
  tm_tensor *out = tm_activation_arg(args, A(OUT), nhwc_sizes, p.out_dims);
  /* the dilated kernel's extent: at most 32767 * 32766 + 1, an int32 */
  const int32_t oh = tm_pool_out_size(p.in_dims[1], p.win.dil_h * (p.kh - 1) + 1, p.win.stride_h, p.win.pad_h, ceil_mode);
  const int32_t ow = tm_pool_out_size(p.in_dims[2], p.win.dil_w * (p.kw - 1) + 1, p.win.stride_w, p.win.pad_w, ceil_mode);
  TM_ARG_CHECK(ctx, out != NULL && tm_window_out_dims(p.out_dims, p.in_dims[0], oh, ow, p.in_dims[3]), A(OUT));
  p.input = (const int8_t *)in->data;
  p.out = (int8_t *)out->data;
  return max_pool_run(&p);
}

tm_status tm_cortex_m_quantized_max_pool2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return max_pool_entry(ctx, args, nargs, false);
}

tm_status tm_cortex_m_quantized_max_pool2d_nhwc_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return max_pool_entry(ctx, args, nargs, true);
}

tm_status tm_torchmcu_quantized_adaptive_max_pool2d_out(tm_kernel_context *ctx, tm_value *const *args,
                                                        size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_QUANTIZED_ADAPTIVE_MAX_POOL2D));
  if (st != TM_OK) {
    return st;
  }
  pool_params p;
  p.adaptive = true;
  p.win = (tm_window){1, 1, 0, 0, 1, 1};
  p.kh = 1;
  p.kw = 1;
  st = tm_adaptive_pool_args(ctx, args, ADAPTIVE_A(INPUT), ADAPTIVE_A(OUT), p.in_dims, p.out_dims, &p.input, &p.out);
  if (st != TM_OK) {
    return st;
  }
  TM_ARG_CHECK(ctx, tm_int_arg(args, ADAPTIVE_A(ACTIVATION_MIN), INT8_MIN, INT8_MAX, &p.act_min),
               ADAPTIVE_A(ACTIVATION_MIN));
  TM_ARG_CHECK(ctx, tm_int_arg(args, ADAPTIVE_A(ACTIVATION_MAX), p.act_min, INT8_MAX, &p.act_max),
               ADAPTIVE_A(ACTIVATION_MAX));
  return max_pool_run(&p);
}
