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

enum { S_SELF, S_DIM, S_KEEPDIM, S_DTYPE, S_OUT, N_SUM };
enum { C_SELF, C_OTHER, C_OUT, N_CMP };

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
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_SUM);
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = integer_self(args, S_SELF);
  tm_tensor *out = tm_tensor_arg(args, S_OUT, TM_LONG, 0, TM_MAX_DIMS);
  const int64_t *dims = NULL;
  uint32_t ndims = 0;
  bool keepdim = true;
  int32_t dtype = 0;
  if (in == NULL) {
    return bad(ctx, S_SELF);
  }
  if (!tm_is_none(args, S_DIM) && !(tm_int_list_arg(args, S_DIM, 0, 0, &dims, &ndims))) {
    return bad(ctx, S_DIM);
  }
  if (!tm_bool_arg(args, S_KEEPDIM, &keepdim) || keepdim) {
    return bad(ctx, S_KEEPDIM);
  }
  if (!tm_int_arg(args, S_DTYPE, TM_LONG, TM_LONG, &dtype)) {
    return bad(ctx, S_DTYPE);
  }
  if (out == NULL || out->numel != 1u || out->data == NULL) {
    return bad(ctx, S_OUT);
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
  tm_status st = tm_check_arg_count(ctx, args, nargs, N_CMP);
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = integer_self(args, C_SELF);
  tm_tensor *out = tm_tensor_arg(args, C_OUT, TM_BOOL, 0, TM_MAX_DIMS);
  if (in == NULL) {
    return bad(ctx, C_SELF);
  }
  if (args[C_OTHER]->tag != TM_VALUE_INT) {
    return bad(ctx, C_OTHER);
  }
  if (out == NULL || out->numel != in->numel || (out->numel != 0u && out->data == NULL) ||
      (in->dim == out->dim && !tm_same_layout(in, out))) {
    return bad(ctx, C_OUT);
  }
  const int64_t other = args[C_OTHER]->u.i;
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
