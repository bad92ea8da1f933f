/*
 * cortex_m::pad.out - constant padding of an int8 tensor (docs/operators.md, pad.out).
 *
 * The pads refer to the input's "pad dims", following ExecuTorch 1.5.1's rule:
 * a 4-D input whose sizes N,C,H,W have C == 1, or H == W == 1, or whose dim
 * order is 0,2,3,1 is channels-last and its pad dims are N,H,W,C (its bytes must
 * be NHWC, dims of size 1 ignored); any other input's pad dims are its sizes
 * right-aligned to 4-D (its bytes must be contiguous). The out tensor holds the
 * padded pad dims in the same memory layout.
 */
#include <string.h>

#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_PAD, x)

static const uint8_t kNhwcOrder[4] = {0, 2, 3, 1};

static bool channels_last(const tm_tensor *t) {
  if (t->dim != 4) {
    return false;
  }
  if (t->sizes[1] == 1 || (t->sizes[2] == 1 && t->sizes[3] == 1)) {
    return true;
  }
  return memcmp(t->dim_order, kNhwcOrder, sizeof kNhwcOrder) == 0;
}

/* Pad dims of t (4 items, right-aligned) under the layout chosen for the input. */
static void pad_dims(const tm_tensor *t, bool nhwc, int32_t dims[4]) {
  const int lead = 4 - t->dim;
  for (int k = 0; k < 4; ++k) {
    if (nhwc) {
      dims[k] = t->sizes[kNhwcOrder[k]];
    } else {
      dims[k] = k < lead ? 1 : t->sizes[k - lead];
    }
  }
}

tm_status tm_cortex_m_pad_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_PAD));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), TM_CHAR, 1, 4);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  const bool nhwc = channels_last(in);
  const tm_layout layout = nhwc ? TM_LAYOUT_NHWC_LEGACY : TM_LAYOUT_CONTIGUOUS;
  TM_ARG_CHECK(ctx, tm_has_layout(in, layout), A(INPUT));
  const int lead = 4 - in->dim;
  const int64_t *pre = NULL, *post = NULL;
  uint32_t len = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(PRE_PAD), 4, 4, &pre, &len), A(PRE_PAD));
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(POST_PAD), 4, 4, &post, &len), A(POST_PAD));
  int32_t in_dims[4], out_dims[4], got[4];
  pad_dims(in, nhwc, in_dims);
  for (int k = 0; k < 4; ++k) {
    TM_ARG_CHECK(ctx, pre[k] >= 0 && pre[k] <= INT16_MAX && (k >= lead || pre[k] == 0), A(PRE_PAD));
    TM_ARG_CHECK(ctx, post[k] >= 0 && post[k] <= INT16_MAX && (k >= lead || post[k] == 0), A(POST_PAD));
    out_dims[k] = in_dims[k] + (int32_t)pre[k] + (int32_t)post[k];
  }
  int32_t value = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(PAD_VALUE), INT8_MIN, INT8_MAX, &value), A(PAD_VALUE));
  tm_tensor *out = tm_tensor_arg(args, A(OUT), TM_CHAR, in->dim, in->dim);
  /* out is filled with the pad value before the rows are copied: it must not overlap in */
  bool out_ok = out != NULL && tm_has_layout(out, layout) && tm_tensors_disjoint(in, out);
  if (out_ok) {
    pad_dims(out, nhwc, got);
    for (int k = 0; k < 4; ++k) {
      out_ok = out_ok && got[k] == out_dims[k];
    }
  }
  TM_ARG_CHECK(ctx, out_ok, A(OUT));

  const int8_t *src = (const int8_t *)in->data;
  int8_t *dst = (int8_t *)out->data;
  memset(dst, (int)(int8_t)value, out->numel);
  /* Copy each innermost input row into place. */
  const size_t row = (size_t)in_dims[3];
  for (int32_t a = 0; a < in_dims[0]; ++a) {
    for (int32_t b = 0; b < in_dims[1]; ++b) {
      for (int32_t c = 0; c < in_dims[2]; ++c) {
        const size_t src_off = (((size_t)a * (size_t)in_dims[1] + (size_t)b) * (size_t)in_dims[2] + (size_t)c) * row;
        const size_t dst_off = ((((size_t)a + (size_t)pre[0]) * (size_t)out_dims[1] + (size_t)b + (size_t)pre[1]) *
                                    (size_t)out_dims[2] +
                                (size_t)c + (size_t)pre[2]) *
                                   (size_t)out_dims[3] +
                               (size_t)pre[3];
        if (row != 0) {
          memcpy(dst + dst_off, src + src_off, row);
        }
      }
    }
  }
  return TM_OK;
}
