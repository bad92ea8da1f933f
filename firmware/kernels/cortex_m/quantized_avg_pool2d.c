/* cortex_m::quantized_avg_pool2d.out and _nhwc.out - int8 average pooling over the in-bounds
 * taps, rounded half away from zero (CMSIS-NN arm_avgpool_s8; docs/operators.md); and
 * torchmcu::quantized_adaptive_avg_pool2d.out, the same over torch's adaptive windows. */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"
#include "op_args.h"

#include "mve_requantize.h" /* TM_KERNELS_USE_MVE */

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_AVG_POOL2D, x)
/* The paths this image compiles: a kernel variant of either operator (op_args.h: all unless a
 * selective build leaves some out; an operator it does not select takes none). */
#define HAS(v) \
  (TM_VARIANT_CORTEX_M_QUANTIZED_AVG_POOL2D_##v || TM_VARIANT_TORCHMCU_QUANTIZED_ADAPTIVE_AVG_POOL2D_##v)

size_t tm_quantized_avg_pool2d_scratch_bytes(const int32_t input_nhwc[4]) {
  (void)input_nhwc;
  return 0;
}

typedef struct {
  const int8_t *input;
  int8_t *out;
  int32_t in_dims[4], out_dims[4];
  int32_t kh, kw; /* adaptive: the largest window's extent */
  tm_window win;
  bool adaptive;
} pool_params;

#define ADAPTIVE_A(x) TM_ARG(TORCHMCU_QUANTIZED_ADAPTIVE_AVG_POOL2D, x)

/* The in-bounds rows (or columns) [lo, hi) of output o along an axis of `size`. */
static inline void window_span(const pool_params *p, int32_t o, int32_t out, int32_t size, int32_t k,
                               int32_t stride, int32_t pad, int32_t *lo, int32_t *hi) {
  if (p->adaptive) {
    tm_adaptive_span(o, out, size, lo, hi);
    return;
  }
  const int32_t start = o * stride - pad;
  *lo = start < 0 ? 0 : start;
  *hi = start + k > size ? size : start + k;
}

#if TM_KERNELS_USE_MVE
/*
 * Helium path (NHWC, vectorised over channels). The window sums are exact integers;
 * the rounded division by the tap count d uses a multiply-high by a precomputed
 * reciprocal, exact for every sum the window can produce:
 *   n = |S| + d/2,  q = floor(n * M / 2^(B + j)),  out = S < 0 ? -q : q
 * with j = floor(log2(d - 1)) and M = ceil(2^(B+j) / d) < 2^B. For d <= 256 the sums
 * fit int16 and B = 16 (checked exhaustively: all n <= 128 d + d/2, all d in 2..256);
 * larger windows (a global pool) add int16 partial sums of at most 256 taps into int32
 * and divide with B = 32 (exact while n * d <= 2^(32+j), i.e. for d < 2^24; beyond that
 * the scalar loop runs). d == 1 copies the input.
 */
#define AVG_MVE_MAX_COUNT (1 << 23)

typedef struct {
  int32_t count, half, right_neg; /* right_neg = -j */
  uint32_t mult;
} avg_divisor;

static void avg_divisor_set(avg_divisor *dv, int32_t count) {
  int32_t j = 0;
  while (((uint32_t)(count - 1) >> (j + 1)) != 0) {
    ++j;
  }
  const uint32_t bits = count <= 256 ? 16u : 32u;
  const uint64_t num = (uint64_t)1 << (bits + (uint32_t)j);
  dv->count = count;
  dv->half = count / 2;
  dv->right_neg = -j;
  dv->mult = tm_udiv64_32(num + (uint64_t)count - 1u, (uint32_t)count); /* < 2^32: count > 2^j */
}

/* 8 int16 window sums -> 8 averages, stored as int8 (truncating store of |avg| <= 128). */
static inline __attribute__((always_inline)) void avg_store16(int8_t *dst, int16x8_t sum, const avg_divisor *dv,
                                                              bool masked, mve_pred16_t pred) {
  int16x8_t avg = sum;
  if (dv->count > 1) {
    uint16x8_t n = vaddq_n_u16(vreinterpretq_u16_s16(vabsq_s16(sum)), (uint16_t)dv->half);
    n = vshlq_r_u16(vmulhq_u16(n, vdupq_n_u16((uint16_t)dv->mult)), dv->right_neg);
    const int16x8_t q = vreinterpretq_s16_u16(n);
    avg = vpselq_s16(vnegq_s16(q), q, vcmpltq_n_s16(sum, 0));
  }
  if (masked) {
    vstrbq_p_s16(dst, avg, pred);
  } else {
    vstrbq_s16(dst, avg);
  }
}

/* 4 int32 window sums -> 4 averages, stored as int8 at dst + offsets (lanes pred enables). */
static inline __attribute__((always_inline)) void avg_store32(int8_t *dst, uint32x4_t offsets, int32x4_t sum,
                                                              const avg_divisor *dv, mve_pred16_t pred) {
  uint32x4_t n = vaddq_n_u32(vreinterpretq_u32_s32(vabsq_s32(sum)), (uint32_t)dv->half);
  n = vshlq_r_u32(vmulhq_u32(n, vdupq_n_u32(dv->mult)), dv->right_neg);
  const int32x4_t q = vreinterpretq_s32_u32(n);
  vstrbq_scatter_offset_p_s32(dst, offsets, vpselq_s32(vnegq_s32(q), q, vcmpltq_n_s32(sum, 0)), pred);
}

typedef struct {
  int32_t ys, ye, xs, xe;
} avg_window;

static inline __attribute__((always_inline)) int16x8_t window_sum16(const int8_t *image, const pool_params *p,
                                                                    const avg_window *win, int32_t ch, bool masked,
                                                                    mve_pred16_t pred) {
  const int32_t w = p->in_dims[2], c = p->in_dims[3];
  int16x8_t sum = vdupq_n_s16(0);
  for (int32_t y = win->ys; y < win->ye; ++y) {
    const int8_t *src = image + ((size_t)y * (size_t)w + (size_t)win->xs) * (size_t)c + (size_t)ch;
    for (int32_t x = win->xs; x < win->xe; ++x) {
      sum = vaddq_s16(sum, masked ? vldrbq_z_s16(src, pred) : vldrbq_s16(src));
      src += c;
    }
  }
  return sum;
}

/* The sums of 8 channels from ch over a window of more than 256 taps: int16 partial sums
 * over at most 256 taps (|sum| <= 256 * 128), widened into int32: *even gets channels ch,
 * ch + 2, ch + 4, ch + 6, *odd the others. */
static inline __attribute__((always_inline)) void window_sum_wide(const int8_t *image, const pool_params *p,
                                                                  const avg_window *win, int32_t ch, bool masked,
                                                                  mve_pred16_t pred, int32x4_t *even,
                                                                  int32x4_t *odd) {
  const int32_t w = p->in_dims[2], c = p->in_dims[3];
  int32x4_t e = vdupq_n_s32(0), o = vdupq_n_s32(0);
  int16x8_t part = vdupq_n_s16(0);
  int32_t room = 256; /* taps the partial sum can still take */
  for (int32_t y = win->ys; y < win->ye; ++y) {
    const int8_t *src = image + ((size_t)y * (size_t)w + (size_t)win->xs) * (size_t)c + (size_t)ch;
    for (int32_t x = win->xs; x < win->xe;) {
      const int32_t run = win->xe - x < room ? win->xe - x : room;
      for (int32_t i = 0; i < run; ++i) {
        part = vaddq_s16(part, masked ? vldrbq_z_s16(src, pred) : vldrbq_s16(src));
        src += c;
      }
      x += run;
      room -= run;
      if (room == 0) {
        e = vaddq_s32(e, vmovlbq_s16(part));
        o = vaddq_s32(o, vmovltq_s16(part));
        part = vdupq_n_s16(0);
        room = 256;
      }
    }
  }
  *even = vaddq_s32(e, vmovlbq_s16(part));
  *odd = vaddq_s32(o, vmovltq_s16(part));
}

/* One output pixel: 8 channels per step (int16 sums, or int32 from int16 partial sums),
 * one predicated channel tail. */
static void avg_pixel(const int8_t *image, int8_t *dst, const pool_params *p, const avg_window *win,
                      const avg_divisor *dv) {
  const int32_t c = p->in_dims[3];
  /* A path left out of the image is never reached: the call's check refuses it. */
  if (HAS(SUM16) && (dv->count <= 256 || !HAS(SUM32))) {
    const int32_t full = c - c % 8;
    for (int32_t ch = 0; ch < full; ch += 8) {
      avg_store16(dst + ch, window_sum16(image, p, win, ch, false, 0), dv, false, 0);
    }
    if (full < c) {
      const mve_pred16_t tail = vctp16q((uint32_t)(c - full));
      avg_store16(dst + full, window_sum16(image, p, win, full, true, tail), dv, true, tail);
    }
  } else if (HAS(SUM32)) {
    const uint32x4_t offsets = vidupq_n_u32(0u, 2); /* 0, 2, 4, 6 */
    const int32_t full = c - c % 8;
    int32x4_t even, odd;
    for (int32_t ch = 0; ch < full; ch += 8) {
      window_sum_wide(image, p, win, ch, false, 0, &even, &odd);
      avg_store32(dst + ch, offsets, even, dv, vctp32q(4u));
      avg_store32(dst + ch + 1, offsets, odd, dv, vctp32q(4u));
    }
    if (full < c) {
      const uint32_t rest = (uint32_t)(c - full);
      window_sum_wide(image, p, win, full, true, vctp16q(rest), &even, &odd);
      avg_store32(dst + full, offsets, even, dv, vctp32q((rest + 1u) / 2u));
      avg_store32(dst + full + 1, offsets, odd, dv, vctp32q(rest / 2u));
    }
  }
}

/* False (nothing written) when a window is too large for the exact reciprocal. */
static bool avg_pool_mve(const pool_params *p) {
  if ((int64_t)p->kh * p->kw > AVG_MVE_MAX_COUNT) {
    return false;
  }
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  avg_divisor dv = {0, 0, 0, 0};
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
      avg_window win;
      window_span(p, oh, p->out_dims[1], h, p->kh, p->win.stride_h, p->win.pad_h, &win.ys, &win.ye);
      for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
        window_span(p, ow, p->out_dims[2], w, p->kw, p->win.stride_w, p->win.pad_w, &win.xs, &win.xe);
        const int32_t count = (win.ye - win.ys) * (win.xe - win.xs);
        if (count != dv.count) { /* border windows change it; interior ones reuse it */
          avg_divisor_set(&dv, count);
        }
        avg_pixel(image, dst, p, &win, &dv);
        dst += c;
      }
    }
  }
  return true;
}
#endif

/* Helium builds: only windows of more than AVG_MVE_MAX_COUNT taps. */
static TM_MVE_FALLBACK void avg_pool_scalar(const pool_params *p) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  int8_t *dst = p->out;
  for (int32_t n = 0; n < p->in_dims[0]; ++n) {
    const int8_t *image = p->input + (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
      int32_t ys = 0, ye = 0;
      window_span(p, oh, p->out_dims[1], h, p->kh, p->win.stride_h, p->win.pad_h, &ys, &ye);
      for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
        int32_t xs = 0, xe = 0;
        window_span(p, ow, p->out_dims[2], w, p->kw, p->win.stride_w, p->win.pad_w, &xs, &xe);
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

#if TM_KERNELS_USE_MVE
/* The paths p takes are compiled in (a selective image leaves out the variants its programs
 * never take): the window tap counts of every output pixel, or a window too large. */
TM_ONCE_PER_CALL static bool avg_paths_compiled(const pool_params *p) {
  if ((int64_t)p->kh * p->kw > AVG_MVE_MAX_COUNT) {
    return HAS(SCALAR);
  }
  for (int32_t oh = 0; oh < p->out_dims[1]; ++oh) {
    avg_window win;
    window_span(p, oh, p->out_dims[1], p->in_dims[1], p->kh, p->win.stride_h, p->win.pad_h, &win.ys, &win.ye);
    for (int32_t ow = 0; ow < p->out_dims[2]; ++ow) {
      window_span(p, ow, p->out_dims[2], p->in_dims[2], p->kw, p->win.stride_w, p->win.pad_w, &win.xs, &win.xe);
      if ((win.ye - win.ys) * (win.xe - win.xs) <= 256 ? !HAS(SUM16) : !HAS(SUM32)) {
        return false;
      }
    }
  }
  return true;
}
#endif

/* The pooling of checked arguments p; on a call whose arguments are not verified yet (its first:
 * the kernel has no prepare step), TM_ERR_UNSUPPORTED when a path it takes was left out. */
static tm_status avg_pool_run(tm_kernel_context *ctx, const pool_params *p, uint16_t input_arg) {
#if TM_KERNELS_USE_MVE
  if (!(HAS(SUM16) && HAS(SUM32) && HAS(SCALAR)) && !ctx->arguments_verified && !avg_paths_compiled(p)) {
    ctx->bad_argument = input_arg;
    return TM_ERR_UNSUPPORTED;
  }
  if (avg_pool_mve(p)) {
    return TM_OK;
  }
  if (!HAS(SCALAR)) {
    return TM_OK; /* not reached: refused above */
  }
#else
  (void)ctx;
  (void)input_arg;
#endif
  avg_pool_scalar(p);
  return TM_OK;
}

static tm_status avg_pool_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_AVG_POOL2D));
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
  bool ceil_mode = false;
  TM_ARG_CHECK(ctx, tm_bool_arg(args, A(CEIL_MODE), &ceil_mode), A(CEIL_MODE));
  int32_t unused = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ZERO_POINT), INT8_MIN, INT8_MAX, &unused), A(ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(MULTIPLIER), INT32_MIN, INT32_MAX, &unused), A(MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SHIFT), -31, 31, &unused), A(SHIFT));
  TM_ARG_CHECK(ctx, tm_scratch_arg(args, A(SCRATCH), tm_quantized_avg_pool2d_scratch_bytes(p.in_dims)), A(SCRATCH));
  tm_tensor *out = tm_activation_arg(args, A(OUT), nhwc_sizes, p.out_dims);
  const int32_t oh = tm_pool_out_size(p.in_dims[1], p.kh, p.win.stride_h, p.win.pad_h, ceil_mode);
  const int32_t ow = tm_pool_out_size(p.in_dims[2], p.kw, p.win.stride_w, p.win.pad_w, ceil_mode);
  TM_ARG_CHECK(ctx, out != NULL && tm_window_out_dims(p.out_dims, p.in_dims[0], oh, ow, p.in_dims[3]), A(OUT));
  p.input = (const int8_t *)in->data;
  p.out = (int8_t *)out->data;

  return avg_pool_run(ctx, &p, A(INPUT));
}

tm_status tm_cortex_m_quantized_avg_pool2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return avg_pool_entry(ctx, args, nargs, false);
}

tm_status tm_cortex_m_quantized_avg_pool2d_nhwc_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return avg_pool_entry(ctx, args, nargs, true);
}

tm_status tm_torchmcu_quantized_adaptive_avg_pool2d_out(tm_kernel_context *ctx, tm_value *const *args,
                                                        size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_QUANTIZED_ADAPTIVE_AVG_POOL2D));
  if (st != TM_OK) {
    return st;
  }
  pool_params p;
  p.adaptive = true;
  p.win = (tm_window){1, 1, 0, 0, 1, 1};
  st = tm_adaptive_pool_args(ctx, args, ADAPTIVE_A(INPUT), ADAPTIVE_A(OUT), p.in_dims, p.out_dims, &p.input, &p.out);
  if (st != TM_OK) {
    return st;
  }
  /* a window spans at most ceil(size / out) + 1 positions */
  p.kh = p.in_dims[1] / p.out_dims[1] + 2;
  p.kw = p.in_dims[2] / p.out_dims[2] + 2;
  return avg_pool_run(ctx, &p, ADAPTIVE_A(INPUT));
}
