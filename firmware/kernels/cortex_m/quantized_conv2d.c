/* cortex_m::quantized_conv2d.out and quantized_conv2d_nhwc.out - int8 (grouped) 2-D convolution,
 * NHWC activations, OHWI weights (docs/operators.md). */
#include "op_args.h"

/* The kernel variants of this image (op_args.h: all unless a selective build leaves some out). */
#define HAS(v) TM_VARIANT_CORTEX_M_QUANTIZED_CONV2D_##v
#define TM_CONV_MVE_POINTWISE HAS(POINTWISE)
#define TM_CONV_MVE_WINDOW HAS(WINDOW)
#define TM_CONV_MVE_WINDOW_CHUNKS HAS(WINDOW_CHUNKS)
#define TM_CONV_MVE_SHIFT_RIGHT HAS(SHIFT_RIGHT)
#define TM_CONV_MVE_SHIFT_ANY HAS(SHIFT_ANY)

#include "cortex_m_kernels.h"
#include "conv_mve.h"
#include "kernel_args.h"
#include "mve_gemm.h"
#include "mve_requantize.h"
#include "requantize.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_CONV2D, x)

typedef tm_conv_params conv_params;

/*
 * What the Helium path uses (the same figure on every build, because the exporter plans it for
 * the target; tm_conv_mve_scratch_bytes). The scalar path needs none and any scratch is
 * accepted; with less than this in `scratch` the Helium build takes it from the method's shared
 * scratch (tm_kernel_scratch).
 */
size_t tm_quantized_conv2d_scratch_bytes(const int32_t input_nhwc[4], const int32_t weight_ohwi[4]) {
  (void)input_nhwc;
  return tm_conv_mve_scratch_bytes((size_t)weight_ohwi[0], (size_t)weight_ohwi[1], (size_t)weight_ohwi[2],
                                   (size_t)weight_ohwi[3]);
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
/* The image holds every path (no selection left one out): no call needs the variant check.
 * After the prepare step the method's shared scratch holds what the Helium path needs, so the
 * scalar loop is never reached on Helium. Such an image keeps it anyway: with the call beside
 * it GCC 12 allocates the Helium path's registers better (1x1 convolutions 0.5-2.3 % fewer
 * instructions, bench/README.md); a selective image, whose size counts, drops it and refuses a
 * call without its scratch. */
#define CONV_EVERY_VARIANT \
  (HAS(POINTWISE) && HAS(WINDOW) && HAS(WINDOW_CHUNKS) && HAS(SHIFT_RIGHT) && HAS(SHIFT_ANY))

/* The Helium path of p is compiled in (a selective image leaves out the variants its programs
 * never take): false with the argument that decides which path is missing. */
TM_ONCE_PER_CALL static bool conv_path_compiled(const conv_params *p, uint16_t *arg) {
  *arg = A(WEIGHT);
  if (tm_conv_pointwise(p) ? !HAS(POINTWISE) : !HAS(WINDOW)) {
    return false;
  }
  *arg = A(REQUANTIZE_SHIFTS);
  return HAS(SHIFT_ANY) || tm_mve_right_shifts_only(p->q.shifts, p->out_dims[3]);
}
#endif

/* The kernel, or with `prepare` its prepare step (the checks, then what the Helium path needs of
 * the shared scratch). */
static tm_status conv_entry(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes,
                            bool prepare) {
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
   * tm_quantized_conv2d_scratch_bytes, from this argument or the method's shared scratch. */
  TM_ARG_CHECK(ctx, tm_scratch_arg(args, A(SCRATCH), 0), A(SCRATCH));
  const tm_tensor *scratch = args[A(SCRATCH)]->u.tensor;
  tm_tensor *out = tm_activation_arg(args, A(OUT), nhwc_sizes, p.out_dims);
  const int32_t oh = tm_conv_out_size(p.in_dims[1], p.kh, p.win.stride_h, p.win.pad_h, p.win.dil_h);
  const int32_t ow = tm_conv_out_size(p.in_dims[2], p.kw, p.win.stride_w, p.win.pad_w, p.win.dil_w);
  TM_ARG_CHECK(ctx, out != NULL && tm_window_out_dims(p.out_dims, p.in_dims[0], oh, ow, cout), A(OUT));
  p.input = (const int8_t *)in->data;
  p.weight = (const int8_t *)wt->data;
  p.out = (int8_t *)out->data;
  const size_t need = tm_quantized_conv2d_scratch_bytes(p.in_dims, weight_dims);
#if TM_KERNELS_USE_MVE
  /* Before the arguments are verified: in the prepare step, or on the first execution of a
   * call that the prepare step refused. */
  if (!CONV_EVERY_VARIANT && !ctx->arguments_verified && !conv_path_compiled(&p, &ctx->bad_argument)) {
    return TM_ERR_UNSUPPORTED;
  }
#endif
  if (prepare) {
    return tm_prepared(ctx, scratch, need);
  }

#if TM_KERNELS_USE_MVE
  /* Scratch is a byte tensor: its start aligned for the int32 table. After the prepare step
   * the method's shared scratch holds `need` when the argument does not: no scalar fallback. */
  uint8_t *aligned = tm_kernel_scratch(ctx, scratch, need);
  if (aligned != NULL) {
    tm_conv_mve(&p, aligned);
    return TM_OK;
  }
  if (!CONV_EVERY_VARIANT) {
    ctx->bad_argument = A(SCRATCH);
    return TM_ERR_OUT_OF_MEMORY;
  }
#else
  (void)scratch;
#endif
  conv_scalar(&p);
  return TM_OK;
}

tm_status tm_cortex_m_quantized_conv2d_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return conv_entry(ctx, args, nargs, false, false);
}

tm_status tm_cortex_m_quantized_conv2d_nhwc_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return conv_entry(ctx, args, nargs, true, false);
}

static tm_status conv_prepare(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, bool nhwc_sizes) {
  return conv_entry(ctx, args, nargs, nhwc_sizes, true);
}

TM_PREPARE_ENTRIES(tm_cortex_m_quantized_conv2d, conv_prepare)
