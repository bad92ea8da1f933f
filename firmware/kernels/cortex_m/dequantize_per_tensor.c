/* cortex_m::dequantize_per_tensor.out - int8/int16 to float32 (docs/operators.md). */
#include <math.h>

#include "cortex_m_kernels.h"
#include "kernel_args.h"

#include "mve_float.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_DEQUANTIZE_PER_TENSOR, x)
/* The kernel variants of this image (op_args.h: all unless a selective build leaves some out). */
#define HAS(v) TM_VARIANT_CORTEX_M_DEQUANTIZE_PER_TENSOR_##v

/* Helium builds: only for scales tm_mve_float_safe_factor rejects. */
static TM_MVE_FALLBACK void dequantize_scalar(const void *src, float *dst, uint32_t numel, float s, int32_t zp,
                                              bool from_int8) {
  for (uint32_t i = 0; i < numel; ++i) {
    const int32_t q = from_int8 ? ((const int8_t *)src)[i] : ((const int16_t *)src)[i];
    dst[i] = (float)(q - zp) * s;
  }
}

tm_status tm_cortex_m_dequantize_per_tensor_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_DEQUANTIZE_PER_TENSOR));
  if (st != TM_OK) {
    return st;
  }
  int32_t dtype = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(DTYPE), TM_CHAR, TM_SHORT, &dtype), A(DTYPE));
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), dtype, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  double scale = 0.0;
  TM_ARG_CHECK(ctx, tm_double_arg(args, A(SCALE), &scale) && isfinite(scale) && scale > 0.0, A(SCALE));
  int32_t zp = 0, qmin = 0, qmax = 0;
  st = tm_qparams_args(ctx, args, A(ZERO_POINT), dtype, &zp, &qmin, &qmax);
  if (st != TM_OK) {
    return st;
  }
  tm_tensor *out = tm_tensor_arg(args, A(OUT), TM_FLOAT, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, out != NULL && tm_same_layout(in, out), A(OUT));

  const float s = (float)scale;
  float *dst = (float *)out->data;
#if TM_MVE_FLOAT
  /* A path left out of the image (a selective build) is refused, naming what selects it. */
  const bool safe = tm_mve_float_safe_factor(s);
  if (safe ? !(dtype == TM_CHAR ? HAS(INT8) : HAS(INT16)) : !HAS(SCALAR)) {
    ctx->bad_argument = safe ? A(DTYPE) : A(SCALE);
    return TM_ERR_UNSUPPORTED;
  }
  if (safe) {
    if (dtype == TM_CHAR && HAS(INT8)) {
      tm_mve_dequantize_s8((const int8_t *)in->data, dst, in->numel, s, zp);
    } else if (HAS(INT16)) {
      tm_mve_dequantize_s16((const int16_t *)in->data, dst, in->numel, s, zp);
    }
    return TM_OK;
  }
  if (!HAS(SCALAR)) {
    return TM_OK; /* not reached: refused above */
  }
#endif
  dequantize_scalar(in->data, dst, in->numel, s, zp, dtype == TM_CHAR);
  return TM_OK;
}
