/* cortex_m::quantized_linear.out - int8 fully connected layer (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"

#include "linear_core.h"
#include "mve_gemm.h"
#include "mve_requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_LINEAR, x)
/* The kernel variants of this image (op_args.h: all unless a selective build leaves some out). */
#define HAS(v) TM_VARIANT_CORTEX_M_QUANTIZED_LINEAR_##v

#if TM_KERNELS_USE_MVE
/* Requantization parameters of four channels from the int64 lists: their low words, gathered
 * at byte offsets `at` (disabled lanes read 0). */
TM_MVE_INLINE tm_mve_requant linear_requant_gather(const int64_t *mults, const int64_t *shifts, uint32x4_t at,
                                                   bool tail, mve_pred16_t pred) {
  const int32_t *m = (const int32_t *)(const void *)mults;
  const int32_t *s = (const int32_t *)(const void *)shifts;
  const int32x4_t sh = tail ? vldrwq_gather_offset_z_s32(s, at, pred) : vldrwq_gather_offset_s32(s, at);
  tm_mve_requant rq;
  rq.multiplier = tail ? vldrwq_gather_offset_z_s32(m, at, pred) : vldrwq_gather_offset_s32(m, at);
  rq.left = vmaxq_s32(sh, vdupq_n_s32(0));
  rq.right_neg = vminq_s32(sh, vdupq_n_s32(0));
  return rq;
}

/*
 * The kernel_sum form (what ExecuTorch emits), row by row: per row the filter offset
 * term b*sum(x) is one scalar, per block of four channels the constant term is one
 * vector load, so the blocks run back to back with only the dot products between.
 * Per-channel and per-tensor parameters share the code: the gather offsets start at
 * 0, 8, 16, 24 and step 32 bytes per block, or stay 0 (the one item in every lane).
 */
TM_MVE_INLINE void linear_kernel_sum_rows(const linear_params *p, bool one_row) {
  const int32_t k = p->k, n = p->n;
  const size_t row = (size_t)k;
  const int32_t full = n & ~3;
  const uint32x4_t first = p->per_channel ? vidupq_n_u32(0u, 8) : vdupq_n_u32(0u);
  const uint32x4_t step = vdupq_n_u32(p->per_channel ? 32u : 0u);
  const int32_t out_offset = p->output_offset;
  const int32x4_t act_min = vdupq_n_s32(p->act_min), act_max = vdupq_n_s32(p->act_max);
  const int64_t *mults = p->mults, *shifts = p->shifts;
  const int8_t *x = p->input;
  int8_t *dst = p->out;
  const int32_t rows = one_row ? 1 : p->rows;
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t x_term =
        p->filter_offset != 0 ? (int32_t)((uint32_t)p->filter_offset * (uint32_t)tm_mve_sum_s8(x, k)) : 0;
    const int8_t *w = p->weights;
    const int32_t *ks = p->kernel_sum;
    uint32x4_t at = first;
    int8_t *d = dst;
    for (int32_t blocks = full >> 2; blocks > 0; --blocks) {
      int32x4_t acc = tm_mve_dot4_s8(x, w, w + row, w + 2u * row, w + 3u * row, k);
      acc = vaddq_s32(acc, vaddq_n_s32(vldrwq_s32(ks), x_term));
      const tm_mve_requant rq = linear_requant_gather(mults, shifts, at, false, 0);
      const int32x4_t q = vqaddq_n_s32(tm_mve_requantize(acc, rq), out_offset);
      vstrbq_s32(d, vminq_s32(vmaxq_s32(q, act_min), act_max));
      w += 4u * row;
      ks += 4;
      at = vaddq_u32(at, step);
      d += 4;
    }
    if (full < n) {
      /* Rows past the end repeat the last row; their lanes are not stored. */
      const int32_t left = n - full;
      const mve_pred16_t pred = vctp32q((uint32_t)left);
      const int8_t *w1 = left > 1 ? w + row : w;
      const int8_t *w2 = left > 2 ? w1 + row : w1;
      int32x4_t acc = tm_mve_dot4_s8(x, w, w1, w2, w2, k);
      acc = vaddq_s32(acc, vaddq_n_s32(vldrwq_z_s32(ks, pred), x_term));
      const tm_mve_requant rq = linear_requant_gather(mults, shifts, at, true, pred);
      const int32x4_t q = vqaddq_n_s32(tm_mve_requantize(acc, rq), out_offset);
      vstrbq_p_s32(d, vminq_s32(vmaxq_s32(q, act_min), act_max), pred);
    }
    x += row;
    dst += n;
  }
}

/* One input row (the common fully connected layer) needs none of the per-row bookkeeping. */
static void linear_mve_kernel_sum(const linear_params *p) {
  if (p->rows == 1 && HAS(KERNEL_SUM)) {
    linear_kernel_sum_rows(p, true);
  } else if (HAS(KERNEL_SUM_ROWS)) {
    linear_kernel_sum_rows(p, false);
  }
}

#endif

/* tm_tensor_arg of a contiguous tensor. */
static const tm_tensor *contiguous_tensor(tm_value *const *args, size_t i, uint8_t type, uint8_t lo, uint8_t hi) {
  const tm_tensor *t = tm_tensor_arg(args, i, type, lo, hi);
  return t != NULL && tm_has_layout(t, TM_LAYOUT_CONTIGUOUS) ? t : NULL;
}

/*
 * What the compute needs, read without checks: only for arguments that passed
 * check_arguments in an earlier call (ctx->arguments_verified), which fixes their tags,
 * types, shapes and ranges; so this yields exactly the params that check would.
 */
static inline void verified_params(tm_value *const *args, linear_params *p) {
  const tm_tensor *in = args[A(INPUT)]->u.tensor;
  const tm_tensor *w = args[A(WEIGHTS)]->u.tensor;
  p->k = w->sizes[1];
  p->n = w->sizes[0];
  p->rows = (int32_t)(in->numel / (uint32_t)p->k);
  p->bias = args[A(BIAS)]->tag == TM_VALUE_NONE ? NULL : (const int32_t *)args[A(BIAS)]->u.tensor->data;
  p->kernel_sum =
      args[A(KERNEL_SUM)]->tag == TM_VALUE_NONE ? NULL : (const int32_t *)args[A(KERNEL_SUM)]->u.tensor->data;
  p->input_offset = (int32_t)args[A(INPUT_OFFSET)]->u.i;
  p->filter_offset = (int32_t)args[A(FILTER_OFFSET)]->u.i;
  p->output_offset = (int32_t)args[A(OUTPUT_OFFSET)]->u.i;
  p->mults = args[A(REQUANTIZE_MULTIPLIERS)]->u.int_list.items;
  p->shifts = args[A(REQUANTIZE_SHIFTS)]->u.int_list.items;
  p->per_channel = args[A(REQUANTIZE_MULTIPLIERS)]->u.int_list.length > 1 ? 1u : 0u;
  p->act_min = (int32_t)args[A(ACTIVATION_MIN)]->u.i;
  p->act_max = (int32_t)args[A(ACTIVATION_MAX)]->u.i;
  p->input = (const int8_t *)in->data;
  p->weights = (const int8_t *)w->data;
  p->out = (int8_t *)args[A(OUT)]->u.tensor->data;
}

/* The full contract check of every argument (TM_ARG_CHECK names the one at fault); fills p.
 * Out of line and small: the prepare step runs it once, so the entry point only needs it on
 * a call without one. */
TM_ONCE_PER_CALL static tm_status check_arguments(tm_kernel_context *ctx, tm_value *const *args,
                                                           size_t nargs, linear_params *p) {
  const tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_LINEAR));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = contiguous_tensor(args, A(INPUT), TM_CHAR, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && in->sizes[in->dim - 1] > 0, A(INPUT));
  const tm_tensor *w = contiguous_tensor(args, A(WEIGHTS), TM_CHAR, 2, 2);
  TM_ARG_CHECK(ctx, w != NULL && w->sizes[1] == in->sizes[in->dim - 1] && w->sizes[0] > 0, A(WEIGHTS));
  p->k = w->sizes[1];
  p->n = w->sizes[0];
  p->rows = (int32_t)(in->numel / (uint32_t)p->k);
  TM_ARG_CHECK(ctx, tm_bias_arg(args, A(BIAS), p->n, &p->bias), A(BIAS));
  TM_ARG_CHECK(ctx, tm_bias_arg(args, A(KERNEL_SUM), p->n, &p->kernel_sum), A(KERNEL_SUM));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(INPUT_OFFSET), -INT8_MAX, -INT8_MIN, &p->input_offset), A(INPUT_OFFSET));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(FILTER_OFFSET), -INT8_MAX, -INT8_MIN, &p->filter_offset),
               A(FILTER_OFFSET));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_OFFSET), INT8_MIN, INT8_MAX, &p->output_offset), A(OUTPUT_OFFSET));
  uint32_t n_mults = 0, n_shifts = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(REQUANTIZE_MULTIPLIERS), 1, (uint32_t)p->n, &p->mults, &n_mults) &&
                        (n_mults == 1 || n_mults == (uint32_t)p->n),
               A(REQUANTIZE_MULTIPLIERS));
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(REQUANTIZE_SHIFTS), n_mults, n_mults, &p->shifts, &n_shifts),
               A(REQUANTIZE_SHIFTS));
  /* Multipliers fit int32, shifts lie in [-31, 31]; a bad multiplier is named first. */
  for (uint32_t i = 0; i < n_mults; ++i) {
    TM_ARG_CHECK(ctx, (int64_t)(int32_t)p->mults[i] == p->mults[i], A(REQUANTIZE_MULTIPLIERS));
  }
  for (uint32_t i = 0; i < n_mults; ++i) {
    TM_ARG_CHECK(ctx, (uint64_t)p->shifts[i] + 31u <= 62u, A(REQUANTIZE_SHIFTS));
  }
  p->per_channel = n_mults > 1 ? 1u : 0u;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ACTIVATION_MIN), INT8_MIN, INT8_MAX, &p->act_min), A(ACTIVATION_MIN));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(ACTIVATION_MAX), p->act_min, INT8_MAX, &p->act_max), A(ACTIVATION_MAX));
  const tm_tensor *out = contiguous_tensor(args, A(OUT), TM_CHAR, in->dim, in->dim);
  bool out_ok = out != NULL && out->sizes[out->dim - 1] == p->n;
  for (uint8_t d = 0; out_ok && d + 1 < in->dim; ++d) {
    out_ok = out->sizes[d] == in->sizes[d];
  }
  TM_ARG_CHECK(ctx, out_ok, A(OUT));
#if TM_KERNELS_USE_MVE
  /* The call's Helium path is compiled in (a selective image leaves out the others). */
  if (p->kernel_sum == NULL ? !HAS(BIAS) : !(p->rows == 1 ? HAS(KERNEL_SUM) : HAS(KERNEL_SUM_ROWS))) {
    ctx->bad_argument = A(KERNEL_SUM);
    return TM_ERR_UNSUPPORTED;
  }
#endif
  p->input = (const int8_t *)in->data;
  p->weights = (const int8_t *)w->data;
  p->out = (int8_t *)out->data;
  return TM_OK;
}

tm_status tm_cortex_m_quantized_linear_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  linear_params p;
  if (ctx->arguments_verified) {
    verified_params(args, &p);
  } else {
    const tm_status st = check_arguments(ctx, args, nargs, &p);
    if (st != TM_OK) {
      return st;
    }
  }
#if TM_KERNELS_USE_MVE
  if (p.kernel_sum != NULL) {
    linear_mve_kernel_sum(&p);
  } else if (HAS(BIAS)) {
    linear_mve(&p);
  }
#else
  linear_scalar(&p);
#endif
  return TM_OK;
}


/* The prepare step (tm_kernel_entry.prepare): the full check once, so every call of the method
 * takes the short path; no scratch. */
tm_status tm_cortex_m_quantized_linear_prepare(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  linear_params p;
  return check_arguments(ctx, args, nargs, &p);
}
