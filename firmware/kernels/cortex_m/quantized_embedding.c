/* torchmcu::quantized_embedding.out - int8 row gather (docs/operators.md): for each index
 * v = indices[i] (int64 or int32, memory order) the D values of weight row v are requantized
 * with the row's (multipliers[v], shifts[v]) and offset by output_zero_point:
 * out[i, d] = clamp(requantize(weight[v, d], m[v], s[v]) + output_zero_point, -128, 127).
 * Every index is checked against [0, V) before anything is written; one out of range fails
 * the call naming `indices`. */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "op_args.h"
#include "requantize.h"
#include "mve_requantize.h" /* TM_KERNELS_USE_MVE, TM_MAYBE_UNUSED, <arm_mve.h> on Helium */

#define A(x) TM_ARG(TORCHMCU_QUANTIZED_EMBEDDING, x)

typedef struct {
  const int8_t *weight;
  const int32_t *mults;
  const int32_t *shifts;
  int32_t rows, cols, out_zp;
} embedding_params;

/* Every index lies in [0, rows): one unsigned comparison each (a negative one wraps high). */
static bool indices_in_range(const tm_tensor *indices, int32_t rows) {
  if (indices->scalar_type == TM_LONG) {
    const int64_t *p = (const int64_t *)indices->data;
    for (uint32_t i = 0; i < indices->numel; ++i) {
      if ((uint64_t)p[i] >= (uint64_t)rows) {
        return false;
      }
    }
    return true;
  }
  const int32_t *p = (const int32_t *)indices->data;
  for (uint32_t i = 0; i < indices->numel; ++i) {
    if ((uint32_t)p[i] >= (uint32_t)rows) {
      return false;
    }
  }
  return true;
}

TM_MAYBE_UNUSED static void row_scalar(const int8_t *w, int8_t *out, int32_t cols, int32_t m, int32_t s,
                                       int32_t zp) {
  for (int32_t d = 0; d < cols; ++d) {
    out[d] = (int8_t)tm_clamp64(tm_requantize(w[d], m, s) + zp, -128, 127);
  }
}

#if TM_KERNELS_USE_MVE
/* Four columns a step: widening byte loads, the row's requantization with scalar operands,
 * the offset added with saturation, a clamp and a narrowing store; the last 1-3 columns
 * predicated (nothing beyond the row is read or written). */
static void row_mve(const int8_t *w, int8_t *out, int32_t cols, int32_t m, int32_t s, int32_t zp) {
  const int32_t left = s > 0 ? s : 0;
  const int32_t right_neg = s < 0 ? s : 0;
  const int32x4_t lo = vdupq_n_s32(-128), hi = vdupq_n_s32(127);
  int32_t d = 0;
  for (; d + 4 <= cols; d += 4) {
    const int32x4_t y = vqaddq_n_s32(tm_mve_requantize_n(vldrbq_s32(w + d), m, left, right_neg), zp);
    vstrbq_s32(out + d, vminq_s32(vmaxq_s32(y, lo), hi));
  }
  if (d < cols) {
    const mve_pred16_t tail = vctp32q((uint32_t)(cols - d));
    const int32x4_t y = vqaddq_n_s32(tm_mve_requantize_n(vldrbq_z_s32(w + d, tail), m, left, right_neg), zp);
    vstrbq_p_s32(out + d, vminq_s32(vmaxq_s32(y, lo), hi), tail);
  }
}
#endif

static void gather(const tm_tensor *indices, int8_t *out, const embedding_params *p) {
  const bool wide = indices->scalar_type == TM_LONG;
  const int64_t *i64 = (const int64_t *)indices->data;
  const int32_t *i32 = (const int32_t *)indices->data;
  for (uint32_t i = 0; i < indices->numel; ++i) {
    const int32_t v = wide ? (int32_t)i64[i] : i32[i]; /* checked: 0 <= v < rows */
    const int8_t *row = p->weight + (size_t)v * (size_t)p->cols;
#if TM_KERNELS_USE_MVE
    row_mve(row, out, p->cols, p->mults[v], p->shifts[v], p->out_zp);
#else
    row_scalar(row, out, p->cols, p->mults[v], p->shifts[v], p->out_zp);
#endif
    out += p->cols;
  }
}

tm_status tm_torchmcu_quantized_embedding_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_QUANTIZED_EMBEDDING));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *weight = tm_tensor_arg(args, A(WEIGHT), TM_CHAR, 2, 2);
  TM_ARG_CHECK(ctx,
               weight != NULL && tm_has_layout(weight, TM_LAYOUT_CONTIGUOUS) && weight->sizes[0] > 0 &&
                   weight->sizes[1] > 0,
               A(WEIGHT));
  embedding_params p;
  p.weight = (const int8_t *)weight->data;
  p.rows = weight->sizes[0];
  p.cols = weight->sizes[1];
  const tm_tensor *indices = tm_tensor_arg(args, A(INDICES), -1, 1, 5);
  TM_ARG_CHECK(ctx,
               indices != NULL && (indices->scalar_type == TM_LONG || indices->scalar_type == TM_INT) &&
                   tm_has_layout(indices, TM_LAYOUT_CONTIGUOUS),
               A(INDICES));
  TM_ARG_CHECK(ctx, tm_per_channel_mults(args, A(MULTIPLIERS), p.rows, &p.mults), A(MULTIPLIERS));
  TM_ARG_CHECK(ctx, tm_per_channel_shifts(args, A(SHIFTS), p.rows, &p.shifts), A(SHIFTS));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), -128, 127, &p.out_zp), A(OUTPUT_ZERO_POINT));
  tm_tensor *out = tm_tensor_arg(args, A(OUT), TM_CHAR, indices->dim + 1, indices->dim + 1);
  bool out_ok = out != NULL && tm_has_layout(out, TM_LAYOUT_CONTIGUOUS) && out->sizes[indices->dim] == p.cols &&
                tm_tensors_disjoint(indices, out) && tm_tensors_disjoint(weight, out);
  for (uint8_t d = 0; out_ok && d < indices->dim; ++d) {
    out_ok = out->sizes[d] == indices->sizes[d];
  }
  TM_ARG_CHECK(ctx, out_ok, A(OUT));
  /* the data rule, on every call (indices change between runs): nothing is written before */
  TM_ARG_CHECK(ctx, indices_in_range(indices, p.rows), A(INDICES));
  gather(indices, (int8_t *)out->data, &p);
  return TM_OK;
}
