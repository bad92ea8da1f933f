/*
 * The loop kernels of a torch.map program, as ExecuTorch's emitter names them:
 *   aten::sym_size.int(Tensor self, int dim) -> SymInt          args: self, dim, out Int
 *   aten::select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out)
 *       dim 0 of a contiguous self into a contiguous out of the remaining sizes
 *   executorch_prim::et_copy_index.tensor(Tensor(a!) self, Tensor copy_from, SymInt index)
 *       copy_from (contiguous) into slot `index` of dim 0 of a contiguous self (sizes static)
 *   executorch_prim::{add,sub}.Scalar(Int a, Int b) -> Int        args: a, b, out Int
 *   executorch_prim::eq.Scalar(Int a, Int b) -> Bool              args: a, b, out Bool
 * The runtime runs these as loop instructions: the Int index changes between calls, so every
 * call checks all of its arguments (arguments_verified is never set for them).
 */
#include <string.h>

#include "cortex_m/kernel_args.h"
#include "portable_kernels.h"
#include "op_args.h"

#define SIZE(x) TM_ARG(PRIM_SYM_SIZE_INT, x)
#define SIZE_RETURNED TM_NARGS(PRIM_SYM_SIZE_INT) /* the Int after the schema's arguments */
#define SELECT(x) TM_ARG(PORTABLE_SELECT_COPY_INT, x)
#define COPY(x) TM_ARG(PRIM_ET_COPY_INDEX_TENSOR, x)
/* add, sub and eq share one body, so one set of positions. */
#define SCALAR(x) TM_ARG(PRIM_ADD_SCALAR, x)
#define SCALAR_RETURNED TM_NARGS(PRIM_ADD_SCALAR)
#define SAME_AS_ADD(op)                                                                                         \
  _Static_assert((int)TM_NARGS(op) == (int)SCALAR_RETURNED && (int)TM_ARG(op, A) == (int)SCALAR(A) &&           \
                     (int)TM_ARG(op, B) == (int)SCALAR(B),                                                      \
                 #op " has add.Scalar's arguments")
SAME_AS_ADD(PRIM_SUB_SCALAR);
SAME_AS_ADD(PRIM_EQ_SCALAR);

static tm_status bad(tm_kernel_context *ctx, size_t i) {
  ctx->bad_argument = (uint16_t)i;
  return TM_ERR_INVALID_ARGUMENT;
}

static bool contiguous(const tm_tensor *t) {
  for (uint8_t k = 0; k < t->dim; ++k) {
    if (t->dim_order[k] != k) {
      return false;
    }
  }
  return true;
}

/* Bytes of one slot of dim 0 (self of rank >= 1); false when sizes[0] is 0. */
static bool slot_bytes(const tm_tensor *t, uint32_t *bytes) {
  if (t->dim == 0 || t->sizes[0] <= 0) {
    return false;
  }
  *bytes = t->nbytes / (uint32_t)t->sizes[0];
  return true;
}

/* copy_from/out: the sizes of self without dim 0, same element type. */
static bool is_slot_of(const tm_tensor *whole, const tm_tensor *slot) {
  if (slot->dim + 1u != whole->dim || slot->scalar_type != whole->scalar_type) {
    return false;
  }
  for (uint8_t k = 0; k < slot->dim; ++k) {
    if (slot->sizes[k] != whole->sizes[k + 1u]) {
      return false;
    }
  }
  return true;
}

static bool index_in(const tm_value *v, const tm_tensor *whole) {
  return v->tag == TM_VALUE_INT && v->u.i >= 0 && v->u.i < (int64_t)whole->sizes[0];
}

tm_status tm_prim_sym_size_int(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  int32_t dim = 0;
  if (nargs != SIZE_RETURNED + 1u) {
    return bad(ctx, nargs);
  }
  const tm_tensor *t = tm_tensor_arg(args, SIZE(SELF), -1, 1, TM_MAX_DIMS);
  if (t == NULL) {
    return bad(ctx, SIZE(SELF));
  }
  if (!tm_int_arg(args, SIZE(DIM), 0, (int64_t)t->dim - 1, &dim)) {
    return bad(ctx, SIZE(DIM));
  }
  if (args[SIZE_RETURNED]->tag != TM_VALUE_INT) {
    return bad(ctx, SIZE_RETURNED);
  }
  args[SIZE_RETURNED]->u.i = t->sizes[dim];
  return TM_OK;
}

tm_status tm_portable_select_copy_int_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_SELECT_COPY_INT));
  int32_t dim = 0;
  uint32_t bytes = 0;
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, SELECT(SELF), -1, 1, TM_MAX_DIMS);
  tm_tensor *out = tm_tensor_arg(args, SELECT(OUT), -1, 0, TM_MAX_DIMS - 1);
  if (in == NULL || !contiguous(in) || !slot_bytes(in, &bytes)) {
    return bad(ctx, SELECT(SELF));
  }
  if (!tm_int_arg(args, SELECT(DIM), 0, 0, &dim)) {
    return bad(ctx, SELECT(DIM)); /* only dim 0 (the map dimension) */
  }
  if (!index_in(args[SELECT(INDEX)], in)) {
    return bad(ctx, SELECT(INDEX));
  }
  if (out == NULL || !contiguous(out) || !is_slot_of(in, out) || out->nbytes != bytes) {
    return bad(ctx, SELECT(OUT));
  }
  memmove(out->data, (const uint8_t *)in->data + (size_t)args[SELECT(INDEX)]->u.i * bytes, bytes);
  return TM_OK;
}

tm_status tm_prim_et_copy_index_tensor(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  uint32_t bytes = 0;
  if (nargs != TM_NARGS(PRIM_ET_COPY_INDEX_TENSOR)) { /* returns (): no value after them */
    return bad(ctx, nargs);
  }
  tm_tensor *self = tm_tensor_arg(args, COPY(SELF), -1, 1, TM_MAX_DIMS);
  const tm_tensor *from = tm_tensor_arg(args, COPY(COPY_FROM), -1, 0, TM_MAX_DIMS - 1);
  if (self == NULL || !contiguous(self) || !slot_bytes(self, &bytes)) {
    return bad(ctx, COPY(SELF));
  }
  if (from == NULL || !contiguous(from) || !is_slot_of(self, from) || from->nbytes != bytes) {
    return bad(ctx, COPY(COPY_FROM));
  }
  if (!index_in(args[COPY(INDEX)], self)) {
    return bad(ctx, COPY(INDEX));
  }
  memmove((uint8_t *)self->data + (size_t)args[COPY(INDEX)]->u.i * bytes, from->data, bytes);
  return TM_OK;
}

typedef enum { PRIM_ADD, PRIM_SUB, PRIM_EQ } prim_kind;

static tm_status prim_scalar(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, prim_kind kind) {
  if (nargs != SCALAR_RETURNED + 1u) {
    return bad(ctx, nargs);
  }
  if (args[SCALAR(A)]->tag != TM_VALUE_INT) {
    return bad(ctx, SCALAR(A));
  }
  if (args[SCALAR(B)]->tag != TM_VALUE_INT) {
    return bad(ctx, SCALAR(B));
  }
  tm_value *ret = args[SCALAR_RETURNED];
  if (ret->tag != (kind == PRIM_EQ ? TM_VALUE_BOOL : TM_VALUE_INT)) {
    return bad(ctx, SCALAR_RETURNED);
  }
  /* unsigned arithmetic: wraps like two's complement without undefined behaviour */
  const uint64_t a = (uint64_t)args[SCALAR(A)]->u.i, b = (uint64_t)args[SCALAR(B)]->u.i;
  switch (kind) {
    case PRIM_ADD: ret->u.i = (int64_t)(a + b); break;
    case PRIM_SUB: ret->u.i = (int64_t)(a - b); break;
    default: ret->u.b = a == b; break;
  }
  return TM_OK;
}

tm_status tm_prim_add_scalar(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return prim_scalar(ctx, args, nargs, PRIM_ADD);
}

tm_status tm_prim_sub_scalar(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return prim_scalar(ctx, args, nargs, PRIM_SUB);
}

tm_status tm_prim_eq_scalar(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  return prim_scalar(ctx, args, nargs, PRIM_EQ);
}
