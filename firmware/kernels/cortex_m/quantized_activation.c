/* cortex_m::quantized_activation.out - int8 table activation: out[i] = lut[in[i] + 128]
 * (ExecuTorch's operator; the 256-entry table is built on the host from the float function
 * and the qparams, docs/operators.md). Elementwise, so any layout works as long as input and
 * output share it. */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "op_args.h"
#include "mve_requantize.h" /* TM_KERNELS_USE_MVE, TM_MAYBE_UNUSED, <arm_mve.h> on Helium */

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_ACTIVATION, x)

TM_MAYBE_UNUSED static void table_scalar(const int8_t *in, const int8_t *lut, int8_t *out, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    out[i] = lut[(int32_t)in[i] + 128];
  }
}

#if TM_KERNELS_USE_MVE
/* Sixteen lookups per step: flipping the sign bit of an int8 gives the unsigned index
 * in + 128, which a byte gather loads from the table; whole vectors unpredicated, then
 * one predicated tail. */
static void table_mve(const int8_t *in, const int8_t *lut, int8_t *out, uint32_t n) {
  const uint8x16_t sign = vdupq_n_u8(0x80u);
  for (uint32_t blocks = n >> 4; blocks > 0; --blocks) {
    const uint8x16_t idx = veorq_u8(vldrbq_u8((const uint8_t *)in), sign);
    vstrbq_s8(out, vldrbq_gather_offset_s8(lut, idx));
    in += 16;
    out += 16;
  }
  const uint32_t rest = n & 15u;
  if (rest != 0) {
    const mve_pred16_t p = vctp8q(rest);
    const uint8x16_t idx = veorq_u8(vldrbq_z_u8((const uint8_t *)in, p), sign);
    vstrbq_p_s8(out, vldrbq_gather_offset_z_s8(lut, idx, p), p);
  }
}
#endif

tm_status tm_cortex_m_quantized_activation_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_ACTIVATION));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), TM_CHAR, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL, A(INPUT));
  const tm_tensor *lut = tm_tensor_arg(args, A(LUT), TM_CHAR, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, lut != NULL && lut->numel == 256, A(LUT));
  tm_tensor *out = tm_tensor_arg(args, A(OUT), TM_CHAR, in->dim, in->dim);
  bool same = out != NULL && tm_same_layout(in, out);
  for (int k = 0; same && k < in->dim; ++k) {
    same = out->sizes[k] == in->sizes[k];
  }
  TM_ARG_CHECK(ctx, same, A(OUT));
#if TM_KERNELS_USE_MVE
  table_mve((const int8_t *)in->data, (const int8_t *)lut->data, (int8_t *)out->data, in->numel);
  return TM_OK;
#endif
  table_scalar((const int8_t *)in->data, (const int8_t *)lut->data, (int8_t *)out->data, in->numel);
  return TM_OK;
}
