/*
 * aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out), any handled dtype (all
 * the same): out is the tensors placed one after another along dim. dim in
 * [-rank, rank) of out; every listed tensor has out's rank and sizes except along dim,
 * and those sizes add up to out's. As torch, a 1-D tensor with 0 elements is skipped
 * whatever out's rank. Any dim orders; no input may share a byte with out. The
 * list must be resolved (tm_value_list items set).
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_CAT, x)

static bool skipped(const tm_tensor *t) { return t->dim == 1 && t->numel == 0; }

tm_status tm_portable_cat_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_CAT));
  if (st != TM_OK) {
    return st;
  }
  const tm_value *list = args[A(TENSORS)];
  TM_ARG_CHECK(ctx, list->tag == TM_VALUE_TENSOR_LIST && list->u.list.length >= 1 && list->u.list.items != NULL,
               A(TENSORS));
  tm_tensor *out = tm_tensor_arg(args, A(OUT), -1, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, out != NULL && tm_element_size(out->scalar_type) != 0, A(OUT));
  TM_ARG_CHECK(ctx, args[A(DIM)]->tag == TM_VALUE_INT, A(DIM));
  int32_t dim = 0;
  TM_ARG_CHECK(ctx, tm_f32_dim(args[A(DIM)]->u.i, out->dim, &dim), A(DIM));

  const uint32_t count = list->u.list.length;
  int64_t total = 0;
  for (uint32_t n = 0; n < count; ++n) {
    const tm_value *item = list->u.list.items[n];
    const tm_tensor *t = NULL;
    if (item != NULL && item->tag == TM_VALUE_TENSOR) {
      tm_value *const one[1] = {(tm_value *)item};
      t = tm_tensor_arg(one, 0, out->scalar_type, 1, TM_MAX_DIMS);
    }
    TM_ARG_CHECK(ctx, t != NULL && tm_tensors_disjoint(t, out), A(TENSORS));
    if (skipped(t)) {
      continue;
    }
    bool ok = t->dim == out->dim;
    for (uint8_t d = 0; ok && d < out->dim; ++d) {
      ok = d == dim || t->sizes[d] == out->sizes[d];
    }
    TM_ARG_CHECK(ctx, ok, A(TENSORS));
    total += t->sizes[dim];
  }
  TM_ARG_CHECK(ctx, total == out->sizes[dim], A(OUT));

  /* Each input is a box of out, shifted by `at` along dim: walk its logical indices. */
  const size_t esize = tm_element_size(out->scalar_type);
  int64_t out_strides[TM_MAX_DIMS];
  tm_f32_strides(out, out_strides);
  int64_t at = 0;
  for (uint32_t n = 0; n < count; ++n) {
    const tm_tensor *t = list->u.list.items[n]->u.tensor;
    if (skipped(t)) {
      continue;
    }
    tm_f32_walk w = {0};
    tm_f32_strides(t, w.strides[0]);
    w.dim = t->dim;
    for (uint8_t d = 0; d < t->dim; ++d) {
      w.sizes[d] = t->sizes[d];
      w.strides[2][d] = out_strides[d];
    }
    w.off[2] = at * out_strides[dim];
    tm_f32_walk_copy(&w, t->data, out->data, t->numel, esize);
    at += t->sizes[dim];
  }
  return TM_OK;
}
