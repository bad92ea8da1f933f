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
  const tm_tensor *in = NULL;
  int32_t perm[TM_MAX_DIMS];
  uint32_t len = 0;
  const tm_status st = tm_copy_dims_args(ctx, args, nargs, TM_NARGS(PORTABLE_PERMUTE_COPY), A(SELF), A(DIMS), true,
                                         &in, perm, &len);
  if (st != TM_OK) {
    return st;
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
