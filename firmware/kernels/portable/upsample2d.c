/*
 * torchmcu::upsample2d.out - float32 nearest / nearest-exact / bilinear (align_corners false or
 * true) resizing of a contiguous [N, C, H, W] tensor with PyTorch's float coordinate arithmetic
 * (docs/operators.md, upsample2d.out): scale_h / scale_w are the float scales ATen computes
 * (1 / scale_factor, in / out, or (in - 1) / (out - 1) for align_corners).
 */
#include <math.h>

#include "fp32_util.h"
#include "op_args.h"
#include "portable_kernels.h"

#define A(x) TM_ARG(TORCHMCU_UPSAMPLE2D, x)

enum { NEAREST = 0, NEAREST_EXACT = 1, BILINEAR = 2, BILINEAR_ALIGN = 3 };

/* The source index of output index o (nearest modes). */
static int32_t nearest_src(int32_t o, int32_t size, int32_t out_size, float scale, bool exact) {
  int32_t i;
  if (exact) {
    i = (int32_t)floorf((float)(((double)o + 0.5) * (double)scale));
  } else if (out_size == size) {
    i = o;
  } else if (out_size == 2 * size) {
    i = o >> 1;
  } else {
    i = (int32_t)floorf((float)o * scale);
  }
  return i < size - 1 ? i : size - 1;
}

typedef struct {
  int32_t i0, i1;
  float l0, l1;
} linear_taps;

static linear_taps linear_src(int32_t o, int32_t size, float scale, bool align) {
  /* products and sums in separate statements: no compiler may fuse them (fp-contract) */
  const float scaled = align ? scale * (float)o : scale * ((float)o + 0.5f);
  float real = align ? scaled : scaled - 0.5f;
  if (!align && real < 0.0f) {
    real = 0.0f;
  }
  linear_taps t;
  t.i0 = (int32_t)floorf(real);
  if (t.i0 > size - 1) {
    t.i0 = size - 1;
  }
  t.i1 = t.i0 + (t.i0 < size - 1 ? 1 : 0);
  float l1 = real - (float)t.i0;
  t.l1 = l1 < 0.0f ? 0.0f : (l1 > 1.0f ? 1.0f : l1);
  t.l0 = 1.0f - t.l1;
  return t;
}

static bool scale_arg(tm_value *const *args, size_t i, float *out) {
  double d = 0.0;
  if (!tm_double_arg(args, i, &d) || !(d >= 0.0 && d <= 3.4028234663852886e38)) {
    return false;
  }
  *out = (float)d;
  return true;
}

tm_status tm_torchmcu_upsample2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_UPSAMPLE2D));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_f32_arg(args, A(INPUT), 4, 4);
  TM_ARG_CHECK(ctx, in != NULL && tm_has_layout(in, TM_LAYOUT_CONTIGUOUS) && in->sizes[2] > 0 && in->sizes[3] > 0,
               A(INPUT));
  int32_t mode = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(MODE), NEAREST, BILINEAR_ALIGN, &mode), A(MODE));
  float sh = 0.0f, sw = 0.0f;
  TM_ARG_CHECK(ctx, scale_arg(args, A(SCALE_H), &sh), A(SCALE_H));
  TM_ARG_CHECK(ctx, scale_arg(args, A(SCALE_W), &sw), A(SCALE_W));
  tm_tensor *out = tm_f32_arg(args, A(OUT), 4, 4);
  TM_ARG_CHECK(ctx,
               out != NULL && tm_has_layout(out, TM_LAYOUT_CONTIGUOUS) && out->sizes[0] == in->sizes[0] &&
                   out->sizes[1] == in->sizes[1] && out->sizes[2] > 0 && out->sizes[3] > 0 &&
                   tm_tensors_disjoint(in, out),
               A(OUT));
  const int32_t planes = in->sizes[0] * in->sizes[1], h = in->sizes[2], w = in->sizes[3];
  const int32_t oh = out->sizes[2], ow = out->sizes[3];
  const float *src = (const float *)in->data;
  float *dst = (float *)out->data;
  const bool bilinear = mode >= BILINEAR, align = mode == BILINEAR_ALIGN;
  for (int32_t p = 0; p < planes; ++p) {
    const float *plane = src + (size_t)p * (size_t)h * (size_t)w;
    for (int32_t y = 0; y < oh; ++y) {
      if (!bilinear) {
        const float *row = plane + (size_t)nearest_src(y, h, oh, sh, mode == NEAREST_EXACT) * (size_t)w;
        for (int32_t x = 0; x < ow; ++x) {
          *dst++ = row[nearest_src(x, w, ow, sw, mode == NEAREST_EXACT)];
        }
        continue;
      }
      const linear_taps ty = linear_src(y, h, sh, align);
      const float *r0 = plane + (size_t)ty.i0 * (size_t)w, *r1 = plane + (size_t)ty.i1 * (size_t)w;
      for (int32_t x = 0; x < ow; ++x) {
        const linear_taps tx = linear_src(x, w, sw, align);
        const float p00 = tx.l0 * r0[tx.i0], p01 = tx.l1 * r0[tx.i1];
        const float p10 = tx.l0 * r1[tx.i0], p11 = tx.l1 * r1[tx.i1];
        const float top = p00 + p01, bottom = p10 + p11;
        const float q0 = ty.l0 * top, q1 = ty.l1 * bottom;
        *dst++ = q0 + q1;
      }
    }
  }
  return TM_OK;
}
