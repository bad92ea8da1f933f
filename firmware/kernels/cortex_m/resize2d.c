/*
 * torchmcu::resize2d.out - nearest / bilinear resize of an int8 NHWC activation with TOSA 1.0
 * RESIZE's integer arithmetic (docs/operators.md, resize2d.out): per axis the source coordinate
 * of output index o is (o * d + offset) / n; nearest copies one input pixel, bilinear weighs
 * four with integer weights summing to n_y * n_x and requantizes the int32 sum once.
 */
#include <string.h>

#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "mve_requantize.h" /* TM_KERNELS_USE_MVE */
#include "op_args.h"
#include "requantize.h"

#define A(x) TM_ARG(TORCHMCU_RESIZE2D, x)

#define SIZE_LIMIT 16384
#define SCALE_N_MAX 2048

/* One axis walked output index by output index: v = o * d + offset = i * n + r with 0 <= r < n,
 * stepped without a division (d < 16 n: at most 16 subtractions a step). */
typedef struct {
  int32_t i, r, n, d, size;
} axis_walk;

static axis_walk walk_start(int32_t n, int32_t d, int32_t offset, int32_t size) {
  axis_walk a;
  a.i = offset >= 0 ? offset / n : -((-offset + n - 1) / n);
  a.r = offset - a.i * n;
  a.n = n;
  a.d = d;
  a.size = size;
  return a;
}

static void walk_next(axis_walk *a) {
  a->r += a->d;
  while (a->r >= a->n) {
    a->r -= a->n;
    ++a->i;
  }
}

static int32_t clamp_index(int32_t i, int32_t size) {
  return i < 0 ? 0 : (i > size - 1 ? size - 1 : i);
}

typedef struct {
  const int8_t *input;
  int8_t *out;
  int32_t in_dims[4], out_dims[4]; /* N, H, W, C */
  int32_t scale[4], offset[2];
  int32_t multiplier, shift;
} resize_params;

static void copy_pixel(int8_t *dst, const int8_t *src, int32_t c) {
#if TM_KERNELS_USE_MVE
  for (int32_t k = 0; k < c; k += 16) {
    const mve_pred16_t p = vctp8q((uint32_t)(c - k));
    vstrbq_p_s8(dst + k, vldrbq_z_s8(src + k, p), p);
  }
#else
  memcpy(dst, src, (size_t)c);
#endif
}

/* One output pixel of bilinear: channels weighted by w[0..3] (rows i0/i1 x columns i0/i1). */
static void blend_pixel(int8_t *dst, const int8_t *const px[4], const int32_t w[4], int32_t c,
                        const resize_params *p) {
#if TM_KERNELS_USE_MVE
  const int32_t left = p->shift > 0 ? p->shift : 0, right_neg = p->shift < 0 ? p->shift : 0;
  const int32x4_t lo = vdupq_n_s32(INT8_MIN), hi = vdupq_n_s32(INT8_MAX);
  for (int32_t k = 0; k < c; k += 4) {
    const mve_pred16_t pr = vctp32q((uint32_t)(c - k));
    int32x4_t acc = vmulq_n_s32(vldrbq_z_s32(px[0] + k, pr), w[0]);
    acc = vmlaq_n_s32(acc, vldrbq_z_s32(px[1] + k, pr), w[1]);
    acc = vmlaq_n_s32(acc, vldrbq_z_s32(px[2] + k, pr), w[2]);
    acc = vmlaq_n_s32(acc, vldrbq_z_s32(px[3] + k, pr), w[3]);
    const int32x4_t q = tm_mve_requantize_n(acc, p->multiplier, left, right_neg);
    vstrbq_p_s32(dst + k, vminq_s32(vmaxq_s32(q, lo), hi), pr);
  }
#else
  for (int32_t k = 0; k < c; ++k) {
    const int64_t acc = (int64_t)px[0][k] * w[0] + (int64_t)px[1][k] * w[1] + (int64_t)px[2][k] * w[2] +
                        (int64_t)px[3][k] * w[3];
    dst[k] = (int8_t)tm_clamp64(tm_requantize(acc, p->multiplier, p->shift), INT8_MIN, INT8_MAX);
  }
#endif
}

static void resize(const resize_params *p, bool bilinear) {
  const int32_t h = p->in_dims[1], w = p->in_dims[2], c = p->in_dims[3];
  const int32_t yn = p->scale[0], xn = p->scale[2];
  const size_t row_bytes = (size_t)p->out_dims[2] * (size_t)c;
  int8_t *dst = p->out;
  for (int32_t b = 0; b < p->in_dims[0]; ++b) {
    const int8_t *image = p->input + (size_t)b * (size_t)h * (size_t)w * (size_t)c;
    axis_walk y = walk_start(yn, p->scale[1], p->offset[0], h);
    int32_t last_row = -1; /* nearest: the source row of the previous output row */
    for (int32_t oy = 0; oy < p->out_dims[1]; ++oy, walk_next(&y)) {
      const int32_t y0 = clamp_index(y.i, h), y1 = clamp_index(y.i + 1, h);
      if (!bilinear) {
        const int32_t iy = 2 * y.r >= yn ? y1 : y0;
        if (iy == last_row) { /* the same source row: repeat the output row */
          memcpy(dst, dst - row_bytes, row_bytes);
          dst += row_bytes;
          continue;
        }
        last_row = iy;
        const int8_t *row = image + (size_t)iy * (size_t)w * (size_t)c;
        axis_walk x = walk_start(xn, p->scale[3], p->offset[1], w);
        for (int32_t ox = 0; ox < p->out_dims[2]; ++ox, walk_next(&x)) {
          const int32_t ix = 2 * x.r >= xn ? clamp_index(x.i + 1, w) : clamp_index(x.i, w);
          copy_pixel(dst, row + (size_t)ix * (size_t)c, c);
          dst += c;
        }
        continue;
      }
      const int8_t *r0 = image + (size_t)y0 * (size_t)w * (size_t)c;
      const int8_t *r1 = image + (size_t)y1 * (size_t)w * (size_t)c;
      axis_walk x = walk_start(xn, p->scale[3], p->offset[1], w);
      for (int32_t ox = 0; ox < p->out_dims[2]; ++ox, walk_next(&x)) {
        const size_t x0 = (size_t)clamp_index(x.i, w) * (size_t)c, x1 = (size_t)clamp_index(x.i + 1, w) * (size_t)c;
        const int8_t *const px[4] = {r0 + x0, r0 + x1, r1 + x0, r1 + x1};
        const int32_t wts[4] = {(yn - y.r) * (xn - x.r), (yn - y.r) * x.r, y.r * (xn - x.r), y.r * x.r};
        blend_pixel(dst, px, wts, c, p);
        dst += c;
      }
    }
  }
}

static bool size_ok(const int32_t dims[4]) {
  return dims[1] >= 1 && dims[1] < SIZE_LIMIT && dims[2] >= 1 && dims[2] < SIZE_LIMIT;
}

tm_status tm_torchmcu_resize2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_RESIZE2D));
  if (st != TM_OK) {
    return st;
  }
  resize_params p;
  const tm_tensor *in = tm_activation_arg(args, A(INPUT), false, p.in_dims);
  TM_ARG_CHECK(ctx, in != NULL && size_ok(p.in_dims), A(INPUT));
  const int64_t *items = NULL;
  uint32_t len = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(SCALE), 4, 4, &items, &len), A(SCALE));
  for (int k = 0; k < 4; k += 2) {
    TM_ARG_CHECK(ctx, items[k] >= 1 && items[k] <= SCALE_N_MAX && items[k + 1] >= 1 && items[k + 1] < 16 * items[k],
                 A(SCALE));
    p.scale[k] = (int32_t)items[k];
    p.scale[k + 1] = (int32_t)items[k + 1];
  }
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(OFFSET), 2, 2, &items, &len), A(OFFSET));
  for (int k = 0; k < 2; ++k) {
    TM_ARG_CHECK(ctx, items[k] >= -p.scale[2 * k] && items[k] < 16 * p.scale[2 * k], A(OFFSET));
    p.offset[k] = (int32_t)items[k];
  }
  bool bilinear = false;
  TM_ARG_CHECK(ctx, tm_bool_arg(args, A(BILINEAR), &bilinear), A(BILINEAR));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(MULTIPLIER), 0, INT32_MAX, &p.multiplier), A(MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(SHIFT), -31, 31, &p.shift), A(SHIFT));
  tm_tensor *out = tm_activation_arg(args, A(OUT), false, p.out_dims);
  TM_ARG_CHECK(ctx,
               out != NULL && size_ok(p.out_dims) && p.out_dims[0] == p.in_dims[0] && p.out_dims[3] == p.in_dims[3] &&
                   tm_tensors_disjoint(in, out),
               A(OUT));
  p.input = (const int8_t *)in->data;
  p.out = (int8_t *)out->data;
  resize(&p, bilinear);
  return TM_OK;
}
