/* torchmcu::quantized_cat.out(tensors, dim, input_zero_points, input_multipliers, input_shifts,
 * output_zero_point) - int8 tensors placed one after another along dim, each requantized to
 * out's qparams (docs/operators.md): out = clamp(output_zero_point + requantize(q - zp_i, m_i,
 * s_i), -128, 127). Every tensor has out's rank and dim order; the tensors' bytes do not
 * overlap out's. An input with out's qparams (zp_i == output_zero_point, m_i = 2^30, s_i = 1:
 * the identity) is copied. */
#include <string.h>

#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "mve_requantize.h"
#include "op_args.h"
#include "requantize.h"

#define A(x) TM_ARG(TORCHMCU_QUANTIZED_CAT, x)

#define IDENTITY_MULTIPLIER (1 << 30)
#define LUT_MIN_NUMEL 256 /* below this, requantizing lane by lane costs less than the table */

typedef struct {
  int32_t zp, mult, shift, out_zp;
} cat_requant;

TM_MAYBE_UNUSED static int8_t requant_one(int8_t q, const cat_requant *r) {
  const int64_t v = tm_requantize((int64_t)q - r->zp, r->mult, r->shift) + r->out_zp;
  return (int8_t)tm_clamp64(v, INT8_MIN, INT8_MAX);
}

#if TM_KERNELS_USE_MVE
/* Four lanes: widen, subtract the input zero point, requantize, add the output zero point
 * with saturation, clamp to int8 (the multiplier is never INT32_MIN: the check refuses it). */
static inline __attribute__((always_inline)) int32x4_t requant4(int32x4_t q, const cat_requant *r, int32_t left,
                                                                int32_t right) {
  const int32x4_t v = tm_mve_requantize_n(vsubq_n_s32(q, r->zp), r->mult, left, right);
  const int32x4_t o = vqaddq_n_s32(v, r->out_zp);
  return vminq_s32(vmaxq_s32(o, vdupq_n_s32(INT8_MIN)), vdupq_n_s32(INT8_MAX));
}

static void requant_run_lanes(const int8_t *src, int8_t *dst, uint32_t n, const cat_requant *r) {
  const int32_t left = r->shift > 0 ? r->shift : 0;
  const int32_t right = r->shift < 0 ? r->shift : 0;
  for (int32_t rest = (int32_t)n; rest > 0; rest -= 4) {
    const mve_pred16_t pred = vctp32q((uint32_t)rest);
    vstrbq_p_s32(dst, requant4(vldrbq_z_s32(src, pred), r, left, right), pred);
    src += 4;
    dst += 4;
  }
}

/* The 256 results, indexed by the input byte as unsigned (4 lanes at a time). */
static void build_lut(int8_t lut[256], const cat_requant *r) {
  const int32_t left = r->shift > 0 ? r->shift : 0;
  const int32_t right = r->shift < 0 ? r->shift : 0;
  const uint32_t first[4] = {0, 1, 2, 3};
  uint32x4_t u = vldrwq_u32(first);
  for (uint32_t i = 0; i < 256u; i += 4) {
    const int32x4_t q = vshrq_n_s32(vreinterpretq_s32_u32(vshlq_n_u32(u, 24)), 24); /* the int8 value */
    vstrbq_s32(lut + i, requant4(q, r, left, right));
    u = vaddq_n_u32(u, 4);
  }
}

/* 16 bytes per step through the table: one load, one gather, one store. */
static void lut_run(const int8_t *lut, const int8_t *src, int8_t *dst, uint32_t n) {
  for (int32_t rest = (int32_t)n; rest > 0; rest -= 16) {
    const mve_pred16_t pred = vctp8q((uint32_t)rest);
    const uint8x16_t idx = vldrbq_z_u8((const uint8_t *)src, pred);
    vstrbq_p_s8(dst, vldrbq_gather_offset_z_s8(lut, idx, pred), pred);
    src += 16;
    dst += 16;
  }
}
#endif

/* One input's rows into out: `outer` rows of `row` bytes, `stride` bytes apart in out. */
static void place(const int8_t *src, int8_t *dst, size_t outer, size_t row, size_t stride, const cat_requant *r) {
  const bool identity = r->zp == r->out_zp && r->mult == IDENTITY_MULTIPLIER && r->shift == 1;
  if (identity) {
    for (size_t o = 0; o < outer; ++o) {
      memcpy(dst + o * stride, src + o * row, row);
    }
    return;
  }
#if TM_KERNELS_USE_MVE
  if (outer * row >= LUT_MIN_NUMEL) {
    int8_t lut[256];
    build_lut(lut, r);
    for (size_t o = 0; o < outer; ++o) {
      lut_run(lut, src + o * row, dst + o * stride, (uint32_t)row);
    }
    return;
  }
  for (size_t o = 0; o < outer; ++o) {
    requant_run_lanes(src + o * row, dst + o * stride, (uint32_t)row, r);
  }
#else
  for (size_t o = 0; o < outer; ++o) {
    for (size_t j = 0; j < row; ++j) {
      dst[o * stride + j] = requant_one(src[o * row + j], r);
    }
  }
#endif
}

/* The item of the tensor list, or NULL when it is not an int8 tensor of rank 1..6. */
static const tm_tensor *item_tensor(const tm_value *list, uint32_t n) {
  const tm_value *item = list->u.list.items[n];
  if (item == NULL || item->tag != TM_VALUE_TENSOR) {
    return NULL;
  }
  tm_value *const one[1] = {(tm_value *)item};
  return tm_tensor_arg(one, 0, TM_CHAR, 1, TM_MAX_DIMS);
}

/* A list argument of `count` ints, each in [lo, hi]. */
static bool int_items(tm_value *const *args, size_t i, uint32_t count, int64_t lo, int64_t hi,
                      const int64_t **items) {
  uint32_t len = 0;
  if (!tm_int_list_arg(args, i, count, count, items, &len)) {
    return false;
  }
  for (uint32_t k = 0; k < count; ++k) {
    if ((*items)[k] < lo || (*items)[k] > hi) {
      return false;
    }
  }
  return true;
}

/* The length of a tensor list whose items are all int8 tensors of rank 1..6, else 0. */
static uint32_t int8_items(const tm_value *list) {
  if (list->tag != TM_VALUE_TENSOR_LIST || list->u.list.items == NULL) {
    return 0;
  }
  for (uint32_t n = 0; n < list->u.list.length; ++n) {
    if (item_tensor(list, n) == NULL) {
      return 0;
    }
  }
  return list->u.list.length;
}

tm_status tm_torchmcu_quantized_cat_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_QUANTIZED_CAT));
  if (st != TM_OK) {
    return st;
  }
  const tm_value *list = args[A(TENSORS)];
  const uint32_t count = int8_items(list);
  TM_ARG_CHECK(ctx, count >= 1, A(TENSORS));
  const int rank = item_tensor(list, 0)->dim;
  int32_t dim = 0, out_zp = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(DIM), 0, rank - 1, &dim), A(DIM));
  const int64_t *zps = NULL, *mults = NULL, *shifts = NULL;
  TM_ARG_CHECK(ctx, int_items(args, A(INPUT_ZERO_POINTS), count, INT8_MIN, INT8_MAX, &zps), A(INPUT_ZERO_POINTS));
  TM_ARG_CHECK(ctx, int_items(args, A(INPUT_MULTIPLIERS), count, 0, INT32_MAX, &mults), A(INPUT_MULTIPLIERS));
  TM_ARG_CHECK(ctx, int_items(args, A(INPUT_SHIFTS), count, -31, 31, &shifts), A(INPUT_SHIFTS));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), INT8_MIN, INT8_MAX, &out_zp), A(OUTPUT_ZERO_POINT));
  tm_tensor *out = tm_tensor_arg(args, A(OUT), TM_CHAR, rank, rank);
  TM_ARG_CHECK(ctx, out != NULL, A(OUT));

  int64_t total = 0;
  for (uint32_t n = 0; n < count; ++n) {
    const tm_tensor *t = item_tensor(list, n);
    bool ok = t->dim == out->dim && tm_tensors_disjoint(t, out);
    for (int d = 0; ok && d < rank; ++d) {
      ok = t->dim_order[d] == out->dim_order[d] && (d == dim || t->sizes[d] == out->sizes[d]);
    }
    TM_ARG_CHECK(ctx, ok, A(TENSORS));
    total += t->sizes[dim];
  }
  TM_ARG_CHECK(ctx, total == out->sizes[dim], A(OUT));

  /* In memory order the cat axis is at position `axis`: `outer` rows, each input's row is its
   * size along dim times `inner`. */
  int axis = 0;
  while (out->dim_order[axis] != dim) {
    ++axis;
  }
  size_t outer = 1, inner = 1;
  for (int k = 0; k < rank; ++k) {
    const size_t s = (size_t)out->sizes[out->dim_order[k]];
    if (k < axis) {
      outer *= s;
    } else if (k > axis) {
      inner *= s;
    }
  }
  const size_t stride = (size_t)out->sizes[dim] * inner;
  int8_t *dst = (int8_t *)out->data;
  for (uint32_t n = 0; n < count; ++n) {
    const tm_tensor *t = item_tensor(list, n);
    const cat_requant r = {(int32_t)zps[n], (int32_t)mults[n], (int32_t)shifts[n], out_zp};
    const size_t row = (size_t)t->sizes[dim] * inner;
    place((const int8_t *)t->data, dst, outer, row, stride, &r);
    dst += row;
  }
  return TM_OK;
}
