/*
 * Helpers shared by the portable float32 kernels (header only: each kernel stays one
 * translation unit, so selective builds compile only what they use).
 *
 * Tensors are addressed through their logical sizes and dim order: the element stride of
 * each logical dim follows from the dim order, so a kernel that walks logical indices
 * reads contiguous NCHW and channels-last memory alike.
 */
#ifndef TORCHMCU_KERNELS_PORTABLE_FP32_UTIL_H
#define TORCHMCU_KERNELS_PORTABLE_FP32_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cortex_m/kernel_args.h"
#include "torchmcu/types.h"

/* Argument i as a float32 tensor with a rank in [min_rank, max_rank], or NULL. */
static inline tm_tensor *tm_f32_arg(tm_value *const *args, size_t i, int min_rank, int max_rank) {
  return tm_tensor_arg(args, i, TM_FLOAT, min_rank, max_rank);
}

/* A Scalar argument (Int, Double or Bool, as the emitter writes a Python number) as a
 * finite float. */
static inline bool tm_f32_scalar_arg(tm_value *const *args, size_t i, float *out) {
  const tm_value *v = args[i];
  double d;
  if (v->tag == TM_VALUE_INT) {
    d = (double)v->u.i;
  } else if (v->tag == TM_VALUE_DOUBLE) {
    d = v->u.d;
  } else if (v->tag == TM_VALUE_BOOL) {
    d = v->u.b ? 1.0 : 0.0;
  } else {
    return false;
  }
  if (!(d >= -3.4028234663852886e38 && d <= 3.4028234663852886e38)) {
    return false; /* NaN, infinite, or beyond float */
  }
  *out = (float)d;
  return true;
}

/* A dim argument in [-rank, rank) (rank 0 accepts -1 and 0) normalised to [0, rank). */
static inline bool tm_f32_dim(int64_t dim, int rank, int32_t *out) {
  const int64_t r = rank > 0 ? rank : 1;
  if (dim < -r || dim >= r) {
    return false;
  }
  *out = (int32_t)(dim < 0 ? dim + r : dim);
  return true;
}

/* Element stride of each logical dim of t. */
static inline void tm_f32_strides(const tm_tensor *t, int64_t strides[TM_MAX_DIMS]) {
  int64_t step = 1;
  for (int k = (int)t->dim - 1; k >= 0; --k) {
    strides[t->dim_order[k]] = step;
    step *= t->sizes[t->dim_order[k]];
  }
}

/*
 * The checked prologue of a copy kernel of schema (Tensor self, int[] dims, *, Tensor(a!) out)
 * (permute_copy, flip): nargs matches the schema's n_schema arguments, self at i_self is a
 * tensor of a handled dtype, and dims at i_dims holds min_len..max_len distinct dims of self
 * (negative ones count from the end), returned non-negative in dims[0..*len).
 */
static inline tm_status tm_copy_dims_args(tm_kernel_context *ctx, tm_value *const *args, size_t nargs,
                                          size_t n_schema, size_t i_self, size_t i_dims, bool all_dims,
                                          const tm_tensor **in, int32_t dims[TM_MAX_DIMS], uint32_t *len) {
  const tm_status st = tm_check_arg_count(ctx, args, nargs, n_schema);
  if (st != TM_OK) {
    return st;
  }
  *in = tm_tensor_arg(args, i_self, -1, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, *in != NULL && tm_element_size((*in)->scalar_type) != 0, i_self);
  const int64_t *items = NULL;
  const uint32_t rank = (*in)->dim;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, i_dims, all_dims ? rank : 0, all_dims || rank > 0 ? rank : 1, &items, len),
               i_dims);
  uint32_t seen = 0;
  for (uint32_t k = 0; k < *len; ++k) {
    TM_ARG_CHECK(ctx, tm_f32_dim(items[k], (int)rank, &dims[k]) && (seen & (1u << dims[k])) == 0, i_dims);
    seen |= 1u << dims[k];
  }
  return TM_OK;
}

/* Same logical sizes. */
static inline bool tm_f32_same_sizes(const tm_tensor *a, const tm_tensor *b) {
  if (a->dim != b->dim) {
    return false;
  }
  for (uint8_t k = 0; k < a->dim; ++k) {
    if (a->sizes[k] != b->sizes[k]) {
      return false;
    }
  }
  return true;
}

/*
 * Walks the logical indices of a `dim`-rank box of `sizes` in row-major order, keeping the
 * element offset of up to three tensors (stride 0 broadcasts a dim).
 */
typedef struct {
  int32_t idx[TM_MAX_DIMS];
  int32_t sizes[TM_MAX_DIMS];
  int64_t strides[3][TM_MAX_DIMS];
  int64_t off[3];
  int dim;
} tm_f32_walk;

static inline void tm_f32_walk_next(tm_f32_walk *w) {
  for (int k = w->dim - 1; k >= 0; --k) {
    if (++w->idx[k] < w->sizes[k]) {
      for (int t = 0; t < 3; ++t) {
        w->off[t] += w->strides[t][k];
      }
      return;
    }
    w->idx[k] = 0;
    for (int t = 0; t < 3; ++t) {
      w->off[t] -= w->strides[t][k] * (int64_t)(w->sizes[k] - 1);
    }
  }
}

/* Copies n elements of esize bytes from src to dst at the offsets the walk yields
 * (tensor 0: source, tensor 2: destination); 4-byte elements move as words. */
static inline void tm_f32_walk_copy(tm_f32_walk *w, const void *src, void *dst, uint32_t n, size_t esize) {
  if (esize == 4) {
    const uint32_t *s4 = (const uint32_t *)src;
    uint32_t *d4 = (uint32_t *)dst;
    for (uint32_t i = 0; i < n; ++i) {
      d4[w->off[2]] = s4[w->off[0]];
      tm_f32_walk_next(w);
    }
  } else {
    const uint8_t *s = (const uint8_t *)src;
    uint8_t *d = (uint8_t *)dst;
    for (uint32_t i = 0; i < n; ++i) {
      memcpy(d + (size_t)w->off[2] * esize, s + (size_t)w->off[0] * esize, esize);
      tm_f32_walk_next(w);
    }
  }
}

/*
 * Broadcast of two operands to out (torch rules: sizes aligned from the last dim, a dim
 * of 1 or a missing dim stretches). out's rank and sizes must be exactly the broadcast
 * ones. Fills w (tensor 0: a, 1: b, 2: out) for the walk over out's logical indices.
 * Returns 0, or 1/2/3 naming the operand at fault (a, b, out).
 */
static inline int tm_f32_broadcast(const tm_tensor *a, const tm_tensor *b, const tm_tensor *out, tm_f32_walk *w) {
  const int rank = a->dim > b->dim ? a->dim : b->dim;
  if (out->dim != rank) {
    return 3;
  }
  const tm_tensor *ops[2] = {a, b};
  int64_t own[TM_MAX_DIMS];
  for (int k = 0; k < TM_MAX_DIMS; ++k) {
    w->idx[k] = 0;
    w->sizes[k] = 1;
    w->strides[0][k] = w->strides[1][k] = w->strides[2][k] = 0;
  }
  w->off[0] = w->off[1] = w->off[2] = 0;
  w->dim = rank;
  for (int k = 0; k < rank; ++k) {
    int32_t size = 1;
    for (int t = 0; t < 2; ++t) {
      const int d = k - (rank - ops[t]->dim);
      const int32_t s = d >= 0 ? ops[t]->sizes[d] : 1;
      if (s != 1) {
        if (size != 1 && size != s) {
          return t + 1;
        }
        size = s;
      }
    }
    if (out->sizes[k] != size) {
      return 3;
    }
    w->sizes[k] = size;
  }
  for (int t = 0; t < 2; ++t) {
    tm_f32_strides(ops[t], own);
    for (int d = 0; d < ops[t]->dim; ++d) {
      const int k = d + (rank - ops[t]->dim);
      w->strides[t][k] = ops[t]->sizes[d] == 1 ? 0 : own[d];
    }
  }
  tm_f32_strides(out, w->strides[2]);
  return 0;
}

/* The checked prologue of an elementwise float32 kernel: nargs matches the schema's
 * n_schema arguments, then the input at i_in and out at i_out have the same sizes and out
 * places every element where the input has it (any dim order, the same for both). */
static inline tm_status tm_f32_unary_args(tm_kernel_context *ctx, tm_value *const *args, size_t nargs,
                                          size_t n_schema, size_t i_in, size_t i_out, const tm_tensor **in,
                                          tm_tensor **out) {
  const tm_status st = tm_check_arg_count(ctx, args, nargs, n_schema);
  if (st != TM_OK) {
    return st;
  }
  *in = tm_f32_arg(args, i_in, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, *in != NULL, i_in);
  *out = tm_f32_arg(args, i_out, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, *out != NULL && tm_same_layout(*in, *out), i_out);
  return TM_OK;
}

/* out[i] = f(in[i]) over the memory of two tensors of the same layout. Static inline with
 * a constant f, so each kernel's loop compiles with its own function inlined. */
static inline void tm_f32_map(const tm_tensor *in, tm_tensor *out, float (*f)(float)) {
  const float *x = (const float *)in->data;
  float *o = (float *)out->data;
  for (uint32_t i = 0; i < in->numel; ++i) {
    o[i] = f(x[i]);
  }
}

/* A whole kernel of schema (Tensor self, *, Tensor(a!) out): out = f(self) elementwise. The
 * kernel gives its op_args.h positions: n_schema arguments, self at i_self, out at i_out. */
static inline tm_status tm_f32_unary_kernel(tm_kernel_context *ctx, tm_value *const *args, size_t nargs,
                                            size_t n_schema, size_t i_self, size_t i_out, float (*f)(float)) {
  const tm_tensor *in = NULL;
  tm_tensor *out = NULL;
  const tm_status st = tm_f32_unary_args(ctx, args, nargs, n_schema, i_self, i_out, &in, &out);
  if (st != TM_OK) {
    return st;
  }
  tm_f32_map(in, out, f);
  return TM_OK;
}

/* tm_f32_binary_kernel's i_alpha when the schema has no alpha. */
#define TM_F32_NO_ALPHA SIZE_MAX

/*
 * A whole broadcasting kernel of schema (Tensor self, Tensor other, [Scalar alpha,]
 * *, Tensor(a!) out): out = f(self, other, alpha) elementwise with torch broadcasting
 * (alpha 1 when the schema has none: i_alpha TM_F32_NO_ALPHA). The kernel gives its
 * op_args.h positions. Same-layout operands and a single-value other take flat loops;
 * anything else walks out's logical indices.
 */
static inline tm_status tm_f32_binary_kernel(tm_kernel_context *ctx, tm_value *const *args, size_t nargs,
                                             size_t n_schema, size_t i_a, size_t i_b, size_t i_alpha, size_t i_out,
                                             float (*f)(float, float, float)) {
  const bool has_alpha = i_alpha != TM_F32_NO_ALPHA;
  const tm_status st = tm_check_arg_count(ctx, args, nargs, n_schema);
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *a = tm_f32_arg(args, i_a, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, a != NULL, i_a);
  const tm_tensor *b = tm_f32_arg(args, i_b, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, b != NULL, i_b);
  float alpha = 1.0f;
  if (has_alpha) {
    TM_ARG_CHECK(ctx, tm_f32_scalar_arg(args, i_alpha, &alpha), i_alpha);
  }
  tm_tensor *out = tm_f32_arg(args, i_out, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, out != NULL, i_out);
  tm_f32_walk w;
  const int bad = tm_f32_broadcast(a, b, out, &w);
  TM_ARG_CHECK(ctx, bad == 0, bad == 1 ? i_a : (bad == 2 ? i_b : i_out));

  const float *x = (const float *)a->data;
  const float *y = (const float *)b->data;
  float *o = (float *)out->data;
  if (tm_same_layout(a, out) && tm_same_layout(b, out)) {
    for (uint32_t i = 0; i < out->numel; ++i) {
      o[i] = f(x[i], y[i], alpha);
    }
  } else if (tm_same_layout(a, out) && b->numel == 1) {
    const float v = y[0];
    for (uint32_t i = 0; i < out->numel; ++i) {
      o[i] = f(x[i], v, alpha);
    }
  } else {
    for (uint32_t i = 0; i < out->numel; ++i) {
      o[w.off[2]] = f(x[w.off[0]], y[w.off[1]], alpha);
      tm_f32_walk_next(&w);
    }
  }
  return TM_OK;
}

/* out is a [M, N] result of m1 [M, K] @ m2 [K, N] and does not share memory with them. */
static inline bool tm_f32_matmul_out_ok(const tm_tensor *m1, const tm_tensor *m2, const tm_tensor *out) {
  return out != NULL && out->sizes[0] == m1->sizes[0] && out->sizes[1] == m2->sizes[1] &&
         tm_tensors_disjoint(m1, out) && tm_tensors_disjoint(m2, out);
}

/*
 * out = alpha * (m1 @ m2) + beta * c for rank-2 m1 [M, K], m2 [K, N], out [M, N] in any
 * dim orders; c is read at i * c_row + j * c_col, and not at all when beta == 0 (NaN does
 * not propagate, as torch). Products summed in float32 in k order.
 */
static inline void tm_f32_matmul(const tm_tensor *m1, const tm_tensor *m2, tm_tensor *out, float alpha, float beta,
                                 const float *c, int64_t c_row, int64_t c_col) {
  int64_t s1[TM_MAX_DIMS], s2[TM_MAX_DIMS], so[TM_MAX_DIMS];
  tm_f32_strides(m1, s1);
  tm_f32_strides(m2, s2);
  tm_f32_strides(out, so);
  const int32_t M = out->sizes[0];
  const int32_t N = out->sizes[1];
  const int32_t K = m1->sizes[1];
  const float *a = (const float *)m1->data;
  const float *b = (const float *)m2->data;
  float *o = (float *)out->data;
  for (int32_t i = 0; i < M; ++i) {
    for (int32_t j = 0; j < N; ++j) {
      const float *ai = a + i * s1[0];
      const float *bj = b + j * s2[1];
      float acc = 0.0f;
      for (int32_t k = 0; k < K; ++k) {
        acc += ai[k * s1[1]] * bj[k * s2[0]];
      }
      float v = alpha * acc;
      if (beta != 0.0f) {
        v += beta * c[i * c_row + j * c_col];
      }
      o[i * so[0] + j * so[1]] = v;
    }
  }
}

#endif /* TORCHMCU_KERNELS_PORTABLE_FP32_UTIL_H */
