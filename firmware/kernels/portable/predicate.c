/*
 * The integer kernels a torch.cond predicate lowers to (ExecuTorch portable operator names):
 *   aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype,
 *                         Tensor(a!) out)
 *     whole-tensor sum only: dim None (or empty), keepdim False, dtype Long; self int8, int32 or
 *     int64; out a one-element int64 tensor. Wraps modulo 2^64 like torch's int64 sum.
 *   aten::{gt,ge,lt,le}.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
 *     self int8, int32 or int64, other an Int, out Bool with self's element count (elementwise;
 *     equal layouts, so element k of out is element k of self in memory).
 */
#include "cortex_m/kernel_args.h"
#include "portable_kernels.h"
#include "op_args.h"

#define SUM(x) TM_ARG(PORTABLE_SUM_INTLIST, x)
/* gt, ge, lt and le share compare(), so one set of positions: gt's. */
#define CMP(x) TM_ARG(PORTABLE_GT_SCALAR, x)
#define SAME_AS_GT(op)                                                                                          \
  _Static_assert((int)TM_NARGS(op) == (int)TM_NARGS(PORTABLE_GT_SCALAR) &&                                      \
                     (int)TM_ARG(op, SELF) == (int)CMP(SELF) && (int)TM_ARG(op, OTHER) == (int)CMP(OTHER) &&    \
                     (int)TM_ARG(op, OUT) == (int)CMP(OUT),                                                     \
                 #op " has gt.Scalar_out's arguments")
SAME_AS_GT(PORTABLE_GE_SCALAR);
SAME_AS_GT(PORTABLE_LT_SCALAR);
SAME_AS_GT(PORTABLE_LE_SCALAR);

/* Element k of an integer tensor of type st (TM_CHAR, TM_INT or TM_LONG). */
static int64_t element(const tm_tensor *t, uint32_t k) {
  switch (t->scalar_type) {
    case TM_CHAR: return ((const int8_t *)t->data)[k];
    case TM_INT: return ((const int32_t *)t->data)[k];
    default: return ((const int64_t *)t->data)[k];
  }
}

static const tm_tensor *integer_self(tm_value *const *args, size_t i) {
  const tm_tensor *t = tm_tensor_arg(args, i, -1, 0, TM_MAX_DIMS);
  if (t == NULL || (t->scalar_type != TM_CHAR && t->scalar_type != TM_INT && t->scalar_type != TM_LONG)) {
    return NULL;
  }
  return t;
}

static tm_status bad(tm_kernel_context *ctx, size_t i) {
  ctx->bad_argument = (uint16_t)i;
  return TM_ERR_INVALID_ARGUMENT;
}

tm_status tm_portable_sum_intlist_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_SUM_INTLIST));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = integer_self(args, SUM(SELF));
  tm_tensor *out = tm_tensor_arg(args, SUM(OUT), TM_LONG, 0, TM_MAX_DIMS);
  const int64_t *dims = NULL;
  uint32_t ndims = 0;
  bool keepdim = true;
  int32_t dtype = 0;
  if (in == NULL) {
    return bad(ctx, SUM(SELF));
  }
  if (!tm_is_none(args, SUM(DIM)) && !(tm_int_list_arg(args, SUM(DIM), 0, 0, &dims, &ndims))) {
    return bad(ctx, SUM(DIM));
  }
  if (!tm_bool_arg(args, SUM(KEEPDIM), &keepdim) || keepdim) {
    return bad(ctx, SUM(KEEPDIM));
  }
  if (!tm_int_arg(args, SUM(DTYPE), TM_LONG, TM_LONG, &dtype)) {
    return bad(ctx, SUM(DTYPE));
  }
  if (out == NULL || out->numel != 1u || out->data == NULL) {
    return bad(ctx, SUM(OUT));
  }
  uint64_t total = 0; /* unsigned: wraps like two's complement without undefined behaviour */
  for (uint32_t k = 0; k < in->numel; ++k) {
    total += (uint64_t)element(in, k);
  }
  *(int64_t *)out->data = (int64_t)total;
  return TM_OK;
}

typedef enum { CMP_GT, CMP_GE, CMP_LT, CMP_LE } compare_kind;

static tm_status compare(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, compare_kind kind) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_GT_SCALAR));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = integer_self(args, CMP(SELF));
  tm_tensor *out = tm_tensor_arg(args, CMP(OUT), TM_BOOL, 0, TM_MAX_DIMS);
  if (in == NULL) {
    return bad(ctx, CMP(SELF));
  }
  if (args[CMP(OTHER)]->tag != TM_VALUE_INT) {
    return bad(ctx, CMP(OTHER));
  }
  if (out == NULL || out->numel != in->numel || (out->numel != 0u && out->data == NULL) ||
      (in->dim == out->dim && !tm_same_layout(in, out))) {
    return bad(ctx, CMP(OUT));
  }
  const int64_t other = args[CMP(OTHER)]->u.i;
  uint8_t *o = (uint8_t *)out->data;
  for (uint32_t k = 0; k < in->numel; ++k) {
    const int64_t x = element(in, k);
    bool r;
    switch (kind) {
      case CMP_GT: r = x > other; break;
      case CMP_GE: r = x >= other; break;
      case CMP_LT: r = x < other; break;
      default: r = x <= other; break;
    }
    o[k] = r ? 1u : 0u;
  }
  return TM_OK;
}

tm_status tm_portable_gt_scalar_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return compare(ctx, args, nargs, CMP_GT);
}

tm_status tm_portable_ge_scalar_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return compare(ctx, args, nargs, CMP_GE);
}

tm_status tm_portable_lt_scalar_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return compare(ctx, args, nargs, CMP_LT);
}

tm_status tm_portable_le_scalar_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return compare(ctx, args, nargs, CMP_LE);
}
