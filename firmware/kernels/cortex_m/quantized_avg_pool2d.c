/* cortex_m::quantized_avg_pool2d.out and _nhwc.out - int8 average pooling over the in-bounds
 * taps, rounded half away from zero (CMSIS-NN arm_avgpool_s8; docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"

enum {
  A_INPUT,
  A_KERNEL_SIZE,
  A_STRIDE,
  A_PADDING,
  A_CEIL_MODE,
  A_ZERO_POINT,
  A_MULTIPLIER,
  A_SHIFT,
  A_SCRATCH,
  A_OUT,
  N_SCHEMA
};

size_t tm_quantized_avg_pool2d_scratch_bytes(const int32_t input_nhwc[4]) {
  (void)input_nhwc;
  return 0;
}

typedef struct {
  const int8_t *input;
  int8_t *out;
  int32_t in_dims[4], out_dims[4];
  int32_t kh, kw;
  tm_window win;
} pool_params;

static void avg_pool_scalar(const pool_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
      const int32_t y0 = oh * p->win.stride_h - p->win.pad_h;
      const int32_t ys = y0 < 0 ? 0 : y0;
      const int32_t ye = y0 + p->kh > h ? h : y0 + p->kh;
      for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
        const int32_t x0 = ow * p->win.stride_w - p->win.pad_w;
        const int32_t xs = x0 < 0 ? 0 : x0;
        const int32_t xe = x0 + p->kw > w ? w : x0 + p->kw;
        const int32_t count = (ye - ys) * (xe - xs);
        for (int32_t ch = 0; ch < c; ++ch) {
          int32_t sum = 0;
          for (int32_t y = ys; y < ye; ++y) {
            for (int32_t x = xs; x < xe; ++x) {
              sum += image[((size_t)y * (size_t)w + (size_t)x) * (size_t)c + (size_t)ch];
            }
          }
          const int32_t half = count / 2;
          const int32_t avg = sum > 0 ? (sum + half) / count : (sum - half) / count;
          *dst++ = (int8_t)tm_clamp64(avg, INT8_MIN, INT8_MAX);
        }
      }
    }
  }
}

static tm_status avg_pool_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SCHEMA);
  if (st != TM_OK) {
    return st;
  }
  pool_params p;
  const tm_tensor *in = tm_activation_arg(args, A_INPUT, nhwc_sizes, p.in_dims);
  TM_ARG_CHECK(ctx, in != NULL, A_INPUT);
  st = tm_pool_window_args(ctx, args, A_KERNEL_SIZE, &p.kh, &p.kw, &p.win);
  if (st != TM_OK) {
    return st;
  }
  bool ceil_mode = false;
  TM_ARG_CHECK(ctx, tm_bool_arg(args, A_CEIL_MODE, &ceil_mode), A_CEIL_MODE);
  int32_t unused = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_ZERO_POINT, INT8_MIN, INT8_MAX, &unused), A_ZERO_POINT);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_MULTIPLIER, INT32_MIN, INT32_MAX, &unused), A_MULTIPLIER);
  TM_ARG_CHECK(ctx, tm_int_arg(args, A_SHIFT, -31, 31, &unused), A_SHIFT);
  TM_ARG_CHECK(ctx, tm_scratch_arg(args, A_SCRATCH, tm_quantized_avg_pool2d_scratch_bytes(p.in_dims)), A_SCRATCH);
  tm_tensor *out = tm_activation_arg(args, A_OUT, nhwc_sizes, p.out_dims);
  const int32_t oh = tm_pool_out_size(p.in_dims[1], p.kh, p.win.stride_h, p.win.pad_h, ceil_mode);
  const int32_t ow = tm_pool_out_size(p.in_dims[2], p.kw, p.win.stride_w, p.win.pad_w, ceil_mode);
  TM_ARG_CHECK(ctx, out != NULL && tm_window_out_dims(p.out_dims, p.in_dims[0], oh, ow, p.in_dims[3]), A_OUT);
  p.input = (const int8_t *)in->data;
  p.out = (int8_t *)out->data;

  /* An MVE path would be selected here under __ARM_FEATURE_MVE; only the scalar path exists. */
  avg_pool_scalar(&p);
  return TM_OK;
}

tm_status tm_cortex_m_quantized_avg_pool2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return avg_pool_entry(ctx, args, nargs, false);
}

tm_status tm_cortex_m_quantized_avg_pool2d_nhwc_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return avg_pool_entry(ctx, args, nargs, true);
}
