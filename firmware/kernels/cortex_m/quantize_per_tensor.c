/* cortex_m::quantize_per_tensor.out - float32 to int8/int16 (docs/operators.md). */
#include <math.h>

#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"

#include "mve_float.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZE_PER_TENSOR, x)
/* The kernel variants of this image (op_args.h: all unless a selective build leaves some out). */
#define HAS(v) TM_VARIANT_CORTEX_M_QUANTIZE_PER_TENSOR_##v

/* round(v) to nearest, ties to even; |v| <= 2^24 so float holds every step exactly. */
static int32_t round_half_even(float v) {
  const int32_t i = (int32_t)v; /* truncates towards zero */
  const float frac = v - (float)i;
  if (frac > 0.5f || (frac == 0.5f && (i & 1) != 0)) {
    return i + 1;
  }
  if (frac < -0.5f || (frac == -0.5f && (i & 1) != 0)) {
    return i - 1;
  }
  return i;
}

/* The exact loop: every element in a portable build; in a Helium one only for scales
 * tm_mve_float_safe_factor rejects, so it is kept small there (one loop for both types). */
static TM_MVE_FALLBACK void quantize_scalar(const float *src, void *dst, uint32_t numel, float inv, int32_t zp,
                                         int32_t qmin, int32_t qmax, bool to_int8) {
  const float limit = 16777216.0f; /* 2^24: beyond it every value saturates anyway */
  for (uint32_t i = 0; i < numel; ++i) {
    float v = src[i] * inv;
    if (v != v) {
      v = 0.0f; /* NaN maps to the zero point */
    }
    v = v < -limit ? -limit : (v > limit ? limit : v);
    const int64_t q = tm_clamp64((int64_t)round_half_even(v) + zp, qmin, qmax);
    if (to_int8) {
      ((int8_t *)dst)[i] = (int8_t)q;
    } else {
      ((int16_t *)dst)[i] = (int16_t)q;
    }
  }
}

tm_status tm_cortex_m_quantize_per_tensor_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZE_PER_TENSOR));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), TM_FLOAT, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  double scale = 0.0;
  TM_ARG_CHECK(ctx, tm_double_arg(args, A(SCALE), &scale) && isfinite(scale) && scale > 0.0 &&
                        isfinite((float)scale) && (float)scale > 0.0f,
               A(SCALE));
  int32_t dtype = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(DTYPE), TM_CHAR, TM_SHORT, &dtype), A(DTYPE));
  int32_t zp = 0, qmin = 0, qmax = 0;
  st = tm_qparams_args(ctx, args, A(ZERO_POINT), dtype, &zp, &qmin, &qmax);
  if (st != TM_OK) {
    return st;
  }
  tm_tensor *out = tm_tensor_arg(args, A(OUT), dtype, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, out != NULL && tm_same_layout(in, out), A(OUT));

  const float inv = 1.0f / (float)scale;
  const float *src = (const float *)in->data;
#if TM_MVE_FLOAT
  /* A path left out of the image (a selective build) is refused, naming what selects it. */
  const bool safe = tm_mve_float_safe_factor(inv);
  if (safe ? !(dtype == TM_CHAR ? HAS(INT8) : HAS(INT16)) : !HAS(SCALAR)) {
    ctx->bad_argument = safe ? A(DTYPE) : A(SCALE);
    return TM_ERR_UNSUPPORTED;
  }
  if (safe) {
    if (dtype == TM_CHAR && HAS(INT8)) {
      tm_mve_quantize_s8(src, (int8_t *)out->data, in->numel, inv, zp, qmin, qmax);
    } else if (HAS(INT16)) {
      tm_mve_quantize_s16(src, (int16_t *)out->data, in->numel, inv, zp, qmin, qmax);
    }
    return TM_OK;
  }
  if (!HAS(SCALAR)) {
    return TM_OK; /* not reached: refused above */
  }
#endif
  quantize_scalar(src, out->data, in->numel, inv, zp, qmin, qmax, dtype == TM_CHAR);
  return TM_OK;
}
