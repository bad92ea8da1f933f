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
  if (nargs != 3u) {
    return bad(ctx, nargs);
  }
  const tm_tensor *t = tm_tensor_arg(args, 0, -1, 1, TM_MAX_DIMS);
  if (t == NULL) {
    return bad(ctx, 0);
  }
  if (!tm_int_arg(args, 1, 0, (int64_t)t->dim - 1, &dim)) {
    return bad(ctx, 1);
  }
  if (args[2]->tag != TM_VALUE_INT) {
    return bad(ctx, 2);
  }
  args[2]->u.i = t->sizes[dim];
  return TM_OK;
}

tm_status tm_portable_select_copy_int_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, 4u);
  int32_t dim = 0;
  uint32_t bytes = 0;
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, 0, -1, 1, TM_MAX_DIMS);
  tm_tensor *out = tm_tensor_arg(args, 3, -1, 0, TM_MAX_DIMS - 1);
  if (in == NULL || !contiguous(in) || !slot_bytes(in, &bytes)) {
    return bad(ctx, 0);
  }
  if (!tm_int_arg(args, 1, 0, 0, &dim)) {
    return bad(ctx, 1); /* only dim 0 (the map dimension) */
  }
  if (!index_in(args[2], in)) {
    return bad(ctx, 2);
  }
  if (out == NULL || !contiguous(out) || !is_slot_of(in, out) || out->nbytes != bytes) {
    return bad(ctx, 3);
  }
  memmove(out->data, (const uint8_t *)in->data + (size_t)args[2]->u.i * bytes, bytes);
  return TM_OK;
}

tm_status tm_prim_et_copy_index_tensor(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  uint32_t bytes = 0;
  if (nargs != 3u) {
    return bad(ctx, nargs);
  }
  tm_tensor *self = tm_tensor_arg(args, 0, -1, 1, TM_MAX_DIMS);
  const tm_tensor *from = tm_tensor_arg(args, 1, -1, 0, TM_MAX_DIMS - 1);
  if (self == NULL || !contiguous(self) || !slot_bytes(self, &bytes)) {
    return bad(ctx, 0);
  }
  if (from == NULL || !contiguous(from) || !is_slot_of(self, from) || from->nbytes != bytes) {
    return bad(ctx, 1);
  }
  if (!index_in(args[2], self)) {
    return bad(ctx, 2);
  }
  memmove((uint8_t *)self->data + (size_t)args[2]->u.i * bytes, from->data, bytes);
  return TM_OK;
}

typedef enum { PRIM_ADD, PRIM_SUB, PRIM_EQ } prim_kind;

static tm_status prim_scalar(tm_kernel_context *ctx, tm_value *const *args, size_t nargs, prim_kind kind) {
  if (nargs != 3u) {
    return bad(ctx, nargs);
  }
  if (args[0]->tag != TM_VALUE_INT) {
    return bad(ctx, 0);
  }
  if (args[1]->tag != TM_VALUE_INT) {
    return bad(ctx, 1);
  }
  if (args[2]->tag != (kind == PRIM_EQ ? TM_VALUE_BOOL : TM_VALUE_INT)) {
    return bad(ctx, 2);
  }
  /* unsigned arithmetic: wraps like two's complement without undefined behaviour */
  const uint64_t a = (uint64_t)args[0]->u.i, b = (uint64_t)args[1]->u.i;
  switch (kind) {
    case PRIM_ADD: args[2]->u.i = (int64_t)(a + b); break;
    case PRIM_SUB: args[2]->u.i = (int64_t)(a - b); break;
    default: args[2]->u.b = a == b; break;
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
