/*
 * aten::permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out), any handled dtype
 * (self and out the same): out[i_0, .., i_r-1] = self[j] with j[dims[k]] = i_k, so
 * out.sizes[k] = self.sizes[dims[k]]. dims is a permutation of the dims (negative
 * entries count from the end). Any dim orders of self and out; they must not share memory.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_PERMUTE_COPY, x)

tm_status tm_portable_permute_copy_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_PERMUTE_COPY));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(SELF), -1, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_element_size(in->scalar_type) != 0, A(SELF));
  const int64_t *items = NULL;
  uint32_t len = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(DIMS), in->dim, in->dim, &items, &len), A(DIMS));
  int32_t perm[TM_MAX_DIMS];
  uint32_t seen = 0;
  for (uint32_t k = 0; k < len; ++k) {
    TM_ARG_CHECK(ctx, tm_f32_dim(items[k], in->dim, &perm[k]) && (seen & (1u << perm[k])) == 0, A(DIMS));
    seen |= 1u << perm[k];
  }
  tm_tensor *out = tm_tensor_arg(args, A(OUT), in->scalar_type, in->dim, in->dim);
  bool ok = out != NULL && tm_tensors_disjoint(in, out);
  for (uint32_t k = 0; ok && k < len; ++k) {
    ok = out->sizes[k] == in->sizes[perm[k]];
  }
  TM_ARG_CHECK(ctx, ok, A(OUT));

  /* Walk out's logical indices; self's offset moves by its stride of dim perm[k]. */
  tm_f32_walk w = {0};
  int64_t in_strides[TM_MAX_DIMS];
  tm_f32_strides(in, in_strides);
  tm_f32_strides(out, w.strides[2]);
  w.dim = out->dim;
  for (uint32_t k = 0; k < len; ++k) {
    w.sizes[k] = out->sizes[k];
    w.strides[0][k] = in_strides[perm[k]];
  }
  tm_f32_walk_copy(&w, in->data, out->data, out->numel, tm_element_size(in->scalar_type));
  return TM_OK;
}
