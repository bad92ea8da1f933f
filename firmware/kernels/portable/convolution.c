/*
 * aten::convolution.out(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride,
 * SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding,
 * SymInt groups, *, Tensor(a!) out), float32, 2-D ([N, C, H, W]) or 1-D ([N, C, L],
 * computed as H = 1):
 *   out[n, co, oy, ox] = bias[co] + sum over ci < C/groups, ky, kx of
 *     input[n, g*C/groups + ci, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw] * weight[co, ci, ky, kx]
 * with g = co / (Cout/groups), zero outside the input. weight [Cout, C/groups, KH, KW]
 * (or [Cout, C/groups, K]); bias None or [Cout]; stride and dilation >= 1, padding >= 0,
 * one item per spatial dim (or one for all); transposed false; output_padding all 0;
 * groups >= 1 dividing C and Cout; out [N, Cout, OH, OW] with OH = (H + 2ph - dh(KH-1) - 1)
 * / sh + 1 (likewise OW) and each > 0. Tensors are addressed through their dim orders
 * (contiguous NCHW as ExecuTorch's portable kernel takes, or channels-last). Products
 * summed in float32 (ci, ky, kx order, then bias). out must not share memory with input.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_CONVOLUTION, x)

/* A list of one item or `spatial` items into (h, w), each in [lo, hi]; 1-D keeps h = first. */
static bool spatial_arg(tm_value *const *args, size_t i, int spatial, int64_t lo, int64_t hi, int32_t *h,
                        int32_t *w, int32_t h_1d) {
  const int64_t *items = NULL;
  uint32_t len = 0;
  if (!tm_int_list_arg(args, i, 1, (uint32_t)spatial, &items, &len)) {
    return false;
  }
  for (uint32_t k = 0; k < len; ++k) {
    if (items[k] < lo || items[k] > hi) {
      return false;
    }
  }
  *w = (int32_t)items[len - 1];
  *h = spatial == 2 ? (int32_t)items[0] : h_1d;
  return true;
}

/* Strides of a 3-D tensor seen as 4-D with H = 1 (or the 4-D strides as they are). */
static void strides4(const tm_tensor *t, int64_t s[4]) {
  int64_t own[TM_MAX_DIMS];
  tm_f32_strides(t, own);
  if (t->dim == 4) {
    for (int k = 0; k < 4; ++k) {
      s[k] = own[k];
    }
  } else {
    s[0] = own[0];
    s[1] = own[1];
    s[2] = 0;
    s[3] = own[2];
  }
}

tm_status tm_portable_convolution_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_CONVOLUTION));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_f32_arg(args, A(INPUT), 3, 4);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  const int rank = in->dim;
  const int spatial = rank - 2;
  const int32_t batch = in->sizes[0];
  const int32_t cin = in->sizes[1];
  const int32_t ih = rank == 4 ? in->sizes[2] : 1;
  const int32_t iw = in->sizes[rank - 1];
  const tm_tensor *wt = tm_f32_arg(args, A(WEIGHT), rank, rank);
  TM_ARG_CHECK(ctx, wt != NULL && wt->sizes[0] > 0 && wt->sizes[1] > 0, A(WEIGHT));
  const int32_t cout = wt->sizes[0];
  const int32_t cpg = wt->sizes[1]; /* input channels per group */
  const int32_t kh = rank == 4 ? wt->sizes[2] : 1;
  const int32_t kw = wt->sizes[rank - 1];
  TM_ARG_CHECK(ctx, kh > 0 && kw > 0, A(WEIGHT));
  const float *bias = NULL;
  if (!tm_is_none(args, A(BIAS))) {
    const tm_tensor *b = tm_f32_arg(args, A(BIAS), 1, 1);
    TM_ARG_CHECK(ctx, b != NULL && b->sizes[0] == cout, A(BIAS));
    bias = (const float *)b->data;
  }
  int32_t sh, sw, ph, pw, dh, dw;
  TM_ARG_CHECK(ctx, spatial_arg(args, A(STRIDE), spatial, 1, INT16_MAX, &sh, &sw, 1), A(STRIDE));
  TM_ARG_CHECK(ctx, spatial_arg(args, A(PADDING), spatial, 0, INT16_MAX, &ph, &pw, 0), A(PADDING));
  TM_ARG_CHECK(ctx, spatial_arg(args, A(DILATION), spatial, 1, INT16_MAX, &dh, &dw, 1), A(DILATION));
  bool transposed = true;
  TM_ARG_CHECK(ctx, tm_bool_arg(args, A(TRANSPOSED), &transposed) && !transposed, A(TRANSPOSED));
  const int64_t *opad = NULL;
  uint32_t nopad = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(OUTPUT_PADDING), 0, (uint32_t)spatial, &opad, &nopad), A(OUTPUT_PADDING));
  for (uint32_t k = 0; k < nopad; ++k) {
    TM_ARG_CHECK(ctx, opad[k] == 0, A(OUTPUT_PADDING));
  }
  int32_t groups = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(GROUPS), 1, INT32_MAX, &groups) && (int64_t)groups * cpg == cin &&
                        cout % groups == 0,
               A(GROUPS));
  const int32_t oh = tm_conv_out_size(ih, kh, sh, ph, dh);
  const int32_t ow = tm_conv_out_size(iw, kw, sw, pw, dw);
  tm_tensor *out = tm_f32_arg(args, A(OUT), rank, rank);
  TM_ARG_CHECK(ctx, out != NULL && oh > 0 && ow > 0 && out->sizes[0] == batch && out->sizes[1] == cout &&
                        (rank == 3 || out->sizes[2] == oh) && out->sizes[rank - 1] == ow &&
                        tm_tensors_disjoint(in, out),
               A(OUT));

  int64_t si[4], swt[4], so[4];
  strides4(in, si);
  strides4(wt, swt);
  strides4(out, so);
  const float *x = (const float *)in->data;
  const float *w = (const float *)wt->data;
  float *o = (float *)out->data;
  const int32_t opg = cout / groups; /* output channels per group */
  for (int32_t n = 0; n < batch; ++n) {
    for (int32_t co = 0; co < cout; ++co) {
      const int32_t c0 = (co / opg) * cpg;
      const float *wc = w + co * swt[0];
      for (int32_t oy = 0; oy < oh; ++oy) {
        for (int32_t ox = 0; ox < ow; ++ox) {
          const int32_t y0 = oy * sh - ph;
          const int32_t x0 = ox * sw - pw;
          float acc = 0.0f;
          for (int32_t ci = 0; ci < cpg; ++ci) {
            const float *xc = x + n * si[0] + (c0 + ci) * si[1];
            for (int32_t ky = 0; ky < kh; ++ky) {
              const int32_t y = y0 + ky * dh;
              if (y < 0 || y >= ih) {
                continue;
              }
              for (int32_t kx = 0; kx < kw; ++kx) {
                const int32_t xx = x0 + kx * dw;
                if (xx >= 0 && xx < iw) {
                  acc += xc[y * si[2] + xx * si[3]] * wc[ci * swt[1] + ky * swt[2] + kx * swt[3]];
                }
              }
            }
          }
          if (bias != NULL) {
            acc += bias[co];
          }
          o[n * so[0] + co * so[1] + oy * so[2] + ox * so[3]] = acc;
        }
      }
    }
  }
  return TM_OK;
}
