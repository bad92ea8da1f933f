/* cortex_m::quantized_linear.out - int8 fully connected layer (docs/operators.md). */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "requantize.h"

#include "linear_core.h"
#include "mve_gemm.h"
#include "mve_requantize.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_LINEAR, x)

#if TM_KERNELS_USE_MVE
/* Requantization parameters of four channels from the int64 lists: their low words,
 * 8 bytes apart, gathered (disabled lanes read 0). */
TM_MVE_INLINE tm_mve_requant linear_requant_gather(const int64_t *mults, const int64_t *shifts, bool tail,
                                                   mve_pred16_t pred) {
  const uint32x4_t offsets = vidupq_n_u32(0u, 8);
  const int32_t *m = (const int32_t *)(const void *)mults;
  const int32_t *s = (const int32_t *)(const void *)shifts;
  const int32x4_t sh = tail ? vldrwq_gather_offset_z_s32(s, offsets, pred) : vldrwq_gather_offset_s32(s, offsets);
  tm_mve_requant rq;
  rq.multiplier = tail ? vldrwq_gather_offset_z_s32(m, offsets, pred) : vldrwq_gather_offset_s32(m, offsets);
  rq.left = vmaxq_s32(sh, vdupq_n_s32(0));
  rq.right_neg = vminq_s32(sh, vdupq_n_s32(0));
  return rq;
}

/*
 * The kernel_sum form (what ExecuTorch emits), row by row: per row the filter offset
 * term b*sum(x) is one scalar, per block of four channels the constant term is one
 * vector load, so the blocks run back to back with only the dot products between.
 * per_channel is a constant in each of the two expansions.
 */
TM_MVE_INLINE void linear_kernel_sum_rows(const linear_params *p, bool per_channel, bool one_row) {
  const int32_t k = p->k, n = p->n;
  const size_t row = (size_t)k;
  const int32_t full = n & ~3;
  const mve_pred16_t pred = vctp32q((uint32_t)(n - full));
  const tm_mve_requant per_tensor = tm_mve_requant_dup((int32_t)p->mults[0], (int32_t)p->shifts[0]);
  const int32_t out_offset = p->output_offset;
  const int32x4_t act_min = vdupq_n_s32(p->act_min), act_max = vdupq_n_s32(p->act_max);
  const int8_t *x = p->input;
  int8_t *dst = p->out;
  const int32_t rows = one_row ? 1 : p->rows;
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t x_term =
        p->filter_offset != 0 ? (int32_t)((uint32_t)p->filter_offset * (uint32_t)tm_mve_sum_s8(x, k)) : 0;
    const int8_t *w = p->weights;
    const int32_t *ks = p->kernel_sum;
    const int64_t *mults = p->mults, *shifts = p->shifts;
    int8_t *d = dst;
    for (int32_t blocks = full >> 2; blocks > 0; --blocks) {
      int32x4_t acc = tm_mve_dot4_s8(x, w, w + row, w + 2u * row, w + 3u * row, k);
      acc = vaddq_s32(acc, vaddq_n_s32(vldrwq_s32(ks), x_term));
      const tm_mve_requant rq = per_channel ? linear_requant_gather(mults, shifts, false, pred) : per_tensor;
      const int32x4_t q = vqaddq_n_s32(tm_mve_requantize(acc, rq), out_offset);
      vstrbq_s32(d, vminq_s32(vmaxq_s32(q, act_min), act_max));
      w += 4u * row;
      ks += 4;
      mults += 4;
      shifts += 4;
      d += 4;
    }
    if (full < n) {
      /* Rows past the end repeat the last row; their lanes are not stored. */
      const int32_t left = n - full;
      const int8_t *w1 = left > 1 ? w + row : w;
      const int8_t *w2 = left > 2 ? w1 + row : w1;
      int32x4_t acc = tm_mve_dot4_s8(x, w, w1, w2, w2, k);
      acc = vaddq_s32(acc, vaddq_n_s32(vldrwq_z_s32(ks, pred), x_term));
      const tm_mve_requant rq = per_channel ? linear_requant_gather(mults, shifts, true, pred) : per_tensor;
      const int32x4_t q = vqaddq_n_s32(tm_mve_requantize(acc, rq), out_offset);
      vstrbq_p_s32(d, vminq_s32(vmaxq_s32(q, act_min), act_max), pred);
    }
    x += row;
    dst += n;
  }
}

static void linear_mve_kernel_sum(const linear_params *p) {
  /* Expansions with constant flags: one input row (the common fully connected layer) needs
   * none of the per-row bookkeeping. */
  if (p->rows == 1) {
    if (p->per_channel) {
      linear_kernel_sum_rows(p, true, true);
    } else {
      linear_kernel_sum_rows(p, false, true);
    }
  } else if (p->per_channel) {
    linear_kernel_sum_rows(p, true, false);
  } else {
    linear_kernel_sum_rows(p, false, false);
  }
}

#endif

/* Multipliers fit int32 and shifts lie in [-31, 31] (an int64 fits int32 iff its high
 * word is its low word's sign). */
#if TM_KERNELS_USE_MVE
/* Four channels per step: low and high words gathered (8 bytes apart), violations
 * collected in vectors and reduced once; the tail step is predicated (disabled lanes read
 * 0, which is valid). */
TM_MVE_INLINE void requant_step(const int32_t *m, const int32_t *s, bool tail, mve_pred16_t p, int32x4_t *bad,
                                int32x4_t *s_max, int32x4_t *s_min) {
  const uint32x4_t lo = vidupq_n_u32(0u, 8);
  const uint32x4_t hi = vaddq_n_u32(lo, 4u);
  const int32x4_t m_lo = tail ? vldrwq_gather_offset_z_s32(m, lo, p) : vldrwq_gather_offset_s32(m, lo);
  const int32x4_t m_hi = tail ? vldrwq_gather_offset_z_s32(m, hi, p) : vldrwq_gather_offset_s32(m, hi);
  const int32x4_t s_lo = tail ? vldrwq_gather_offset_z_s32(s, lo, p) : vldrwq_gather_offset_s32(s, lo);
  const int32x4_t s_hi = tail ? vldrwq_gather_offset_z_s32(s, hi, p) : vldrwq_gather_offset_s32(s, hi);
  *bad = vorrq_s32(*bad, veorq_s32(m_hi, vshrq_n_s32(m_lo, 31)));
  *bad = vorrq_s32(*bad, veorq_s32(s_hi, vshrq_n_s32(s_lo, 31)));
  *s_max = vmaxq_s32(*s_max, s_lo);
  *s_min = vminq_s32(*s_min, s_lo);
}

static bool valid_requant(const int64_t *mults, const int64_t *shifts, uint32_t len) {
  const int32_t *m = (const int32_t *)(const void *)mults;
  const int32_t *s = (const int32_t *)(const void *)shifts;
  int32x4_t bad = vdupq_n_s32(0), s_max = bad, s_min = bad;
  for (uint32_t steps = len >> 2; steps > 0; --steps) {
    requant_step(m, s, false, 0, &bad, &s_max, &s_min);
    m += 8;
    s += 8;
  }
  if ((len & 3u) != 0) {
    requant_step(m, s, true, vctp32q(len & 3u), &bad, &s_max, &s_min);
  }
  return vmaxvq_u32(0u, vreinterpretq_u32_s32(bad)) == 0u && vmaxvq_s32(INT32_MIN, s_max) <= 31 &&
         vminvq_s32(INT32_MAX, s_min) >= -31;
}
#else
static bool valid_requant(const int64_t *mults, const int64_t *shifts, uint32_t len) {
  for (uint32_t i = 0; i < len; ++i) {
    const int64_t m = mults[i];
    const int64_t s = shifts[i];
    if ((int64_t)(int32_t)m != m || (uint64_t)s + 31u > 62u) {
      return false;
    }
  }
  return true;
}
#endif

/*
 * Argument checks, kept cheap because a small layer's call is dominated by them
 * (fc_small: 768 MACs). Each fast check below accepts exactly a subset of what the
 * general kernel_args check accepts (the common, plain case); when it fails, the general
 * check runs and decides, so verdicts and the reported argument are unchanged.
 */

/* Count, non-NULL arguments, out tensor given twice: the common case of
 * tm_check_arg_count. */
static inline bool plain_arg_list(tm_value *const *args, size_t nargs) {
  if (nargs != TM_NARGS(CORTEX_M_QUANTIZED_LINEAR) + 1) {
    return false;
  }
  for (size_t i = 0; i < TM_NARGS(CORTEX_M_QUANTIZED_LINEAR) + 1; ++i) {
    if (args[i] == NULL) {
      return false;
    }
  }
  const tm_value *out = args[A(OUT)];
  return out->tag == TM_VALUE_TENSOR && out->u.tensor != NULL && args[A(OUT) + 1]->tag == TM_VALUE_TENSOR &&
         args[A(OUT) + 1]->u.tensor == out->u.tensor;
}

/* A tensor of `type` and rank lo..hi (hi <= TM_MAX_DIMS) with the identity dim order,
 * so valid and contiguous, sizes >= 0 multiplying to numel, data present: what
 * tm_tensor_arg + tm_has_layout(CONTIGUOUS) accept in the plain case. NULL otherwise. */
static inline const tm_tensor *plain_tensor(tm_value *const *args, size_t i, uint8_t type, uint8_t lo, uint8_t hi) {
  const tm_value *v = args[i];
  if (v->tag != TM_VALUE_TENSOR) {
    return NULL;
  }
  const tm_tensor *t = v->u.tensor;
  if (t == NULL || t->scalar_type != type || t->dim < lo || t->dim > hi) {
    return NULL;
  }
  uint64_t numel = 1;
  for (uint8_t d = 0; d < t->dim; ++d) {
    if (t->dim_order[d] != d || t->sizes[d] < 0) {
      return NULL;
    }
    numel *= (uint32_t)t->sizes[d];
  }
  return numel == t->numel && (t->data != NULL || t->nbytes == 0) ? t : NULL;
}

/* tm_tensor_arg + contiguity, plain case first. */
static inline const tm_tensor *contiguous_tensor(tm_value *const *args, size_t i, uint8_t type, uint8_t lo,
                                                 uint8_t hi) {
  const tm_tensor *t = plain_tensor(args, i, type, lo, hi);
  if (t == NULL) {
    t = tm_tensor_arg(args, i, type, lo, hi);
    if (t != NULL && !tm_has_layout(t, TM_LAYOUT_CONTIGUOUS)) {
      t = NULL;
    }
  }
  return t;
}

/* The out tensor in the plain case: int8, the input's rank and identity dim order,
 * the input's sizes with the last one n, numel rows * n (the product of those sizes,
 * as the input's numel is checked), data present. */
static inline bool plain_out(const tm_tensor *out, const tm_tensor *in, int32_t rows, int32_t n) {
  if (out->scalar_type != TM_CHAR || out->dim != in->dim) {
    return false;
  }
  const uint8_t last = (uint8_t)(out->dim - 1u);
  for (uint8_t d = 0; d < last; ++d) {
    if (out->dim_order[d] != d || out->sizes[d] != in->sizes[d]) {
      return false;
    }
  }
  return out->dim_order[last] == last && out->sizes[last] == n &&
         (uint64_t)out->numel == (uint64_t)(uint32_t)rows * (uint32_t)n && (out->data != NULL || out->nbytes == 0);
}

/* tm_int_arg, inline. */
static inline bool int_in(tm_value *const *args, size_t i, int32_t lo, int32_t hi, int32_t *out) {
  const tm_value *v = args[i];
  if (v->tag != TM_VALUE_INT || v->u.i < lo || v->u.i > hi) {
    return false;
  }
  *out = (int32_t)v->u.i;
  return true;
}

/* tm_int_list_arg, inline. */
static inline bool int_list(tm_value *const *args, size_t i, uint32_t min_len, uint32_t max_len,
                            const int64_t **items, uint32_t *len) {
  const tm_value *v = args[i];
  if (v->tag != TM_VALUE_INT_LIST || v->u.int_list.length < min_len || v->u.int_list.length > max_len ||
      (v->u.int_list.items == NULL && v->u.int_list.length != 0)) {
    return false;
  }
  *items = v->u.int_list.items;
  *len = v->u.int_list.length;
  return true;
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

/* The full contract check of every argument (TM_ARG_CHECK names the one at fault); fills p. */
TM_ENTRY_BODY tm_status check_arguments(tm_kernel_context *ctx, tm_value *const *args, size_t nargs,
                                 linear_params *p) {
  if (!plain_arg_list(args, nargs)) {
    const tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_LINEAR));
    if (st != TM_OK) {
      return st;
    }
  }
  const tm_tensor *in = contiguous_tensor(args, A(INPUT), TM_CHAR, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && in->sizes[in->dim - 1] > 0, A(INPUT));
  const tm_tensor *w = contiguous_tensor(args, A(WEIGHTS), TM_CHAR, 2, 2);
  TM_ARG_CHECK(ctx, w != NULL && w->sizes[1] == in->sizes[in->dim - 1] && w->sizes[0] > 0, A(WEIGHTS));
  p->k = w->sizes[1];
  p->n = w->sizes[0];
  p->rows = (int32_t)(in->numel / (uint32_t)p->k);
  p->bias = NULL;
  if (!(args[A(BIAS)]->tag == TM_VALUE_NONE)) {
    const tm_tensor *b = plain_tensor(args, A(BIAS), TM_INT, 1, TM_MAX_DIMS);
    if (b == NULL) {
      b = tm_tensor_arg(args, A(BIAS), TM_INT, 1, TM_MAX_DIMS);
    }
    TM_ARG_CHECK(ctx, b != NULL && b->numel == (uint32_t)p->n, A(BIAS));
    p->bias = (const int32_t *)b->data;
  }
  p->kernel_sum = NULL;
  if (!(args[A(KERNEL_SUM)]->tag == TM_VALUE_NONE)) {
    const tm_tensor *ks = plain_tensor(args, A(KERNEL_SUM), TM_INT, 1, TM_MAX_DIMS);
    if (ks == NULL) {
      ks = tm_tensor_arg(args, A(KERNEL_SUM), TM_INT, 1, TM_MAX_DIMS);
    }
    TM_ARG_CHECK(ctx, ks != NULL && ks->numel == (uint32_t)p->n, A(KERNEL_SUM));
    p->kernel_sum = (const int32_t *)ks->data;
  }
  TM_ARG_CHECK(ctx, int_in(args, A(INPUT_OFFSET), -INT8_MAX, -INT8_MIN, &p->input_offset), A(INPUT_OFFSET));
  TM_ARG_CHECK(ctx, int_in(args, A(FILTER_OFFSET), -INT8_MAX, -INT8_MIN, &p->filter_offset), A(FILTER_OFFSET));
  TM_ARG_CHECK(ctx, int_in(args, A(OUTPUT_OFFSET), INT8_MIN, INT8_MAX, &p->output_offset), A(OUTPUT_OFFSET));
  uint32_t n_mults = 0, n_shifts = 0;
  TM_ARG_CHECK(ctx, int_list(args, A(REQUANTIZE_MULTIPLIERS), 1, (uint32_t)p->n, &p->mults, &n_mults) &&
                        (n_mults == 1 || n_mults == (uint32_t)p->n),
               A(REQUANTIZE_MULTIPLIERS));
  TM_ARG_CHECK(ctx, int_list(args, A(REQUANTIZE_SHIFTS), n_mults, n_mults, &p->shifts, &n_shifts),
               A(REQUANTIZE_SHIFTS));
  if (!valid_requant(p->mults, p->shifts, n_mults)) {
    /* Name the list at fault. */
    for (uint32_t i = 0; i < n_mults; ++i) {
      TM_ARG_CHECK(ctx, (int64_t)(int32_t)p->mults[i] == p->mults[i], A(REQUANTIZE_MULTIPLIERS));
    }
    TM_ARG_CHECK(ctx, false, A(REQUANTIZE_SHIFTS));
  }
  p->per_channel = n_mults > 1 ? 1u : 0u;
  TM_ARG_CHECK(ctx, int_in(args, A(ACTIVATION_MIN), INT8_MIN, INT8_MAX, &p->act_min), A(ACTIVATION_MIN));
  TM_ARG_CHECK(ctx, int_in(args, A(ACTIVATION_MAX), p->act_min, INT8_MAX, &p->act_max), A(ACTIVATION_MAX));
  const tm_tensor *out = args[A(OUT)]->u.tensor; /* a tensor: checked with the argument list */
  if (!plain_out(out, in, p->rows, p->n)) {
    out = contiguous_tensor(args, A(OUT), TM_CHAR, in->dim, in->dim);
    bool out_ok = out != NULL && out->sizes[out->dim - 1] == p->n;
    for (uint8_t d = 0; out_ok && d + 1 < in->dim; ++d) {
      out_ok = out->sizes[d] == in->sizes[d];
    }
    TM_ARG_CHECK(ctx, out_ok, A(OUT));
  }
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
  } else {
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
