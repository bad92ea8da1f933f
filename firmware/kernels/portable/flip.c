/*
 * aten::flip.out(Tensor self, int[] dims, *, Tensor(a!) out), any handled dtype (self and out
 * the same): out[i] = self[j] with j_d = sizes[d] - 1 - i_d for each d in dims and j_d = i_d
 * otherwise. dims are distinct (negative entries count from the end), possibly none. Any dim
 * orders of self and out; they must not share memory.
 */
#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_FLIP, x)

tm_status tm_portable_flip_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  const tm_tensor *in = NULL;
  int32_t dims[TM_MAX_DIMS];
  uint32_t len = 0;
  const tm_status st = tm_copy_dims_args(ctx, args, nargs, TM_NARGS(PORTABLE_FLIP), A(SELF), A(DIMS), false, &in,
                                         dims, &len);
  if (st != TM_OK) {
    return st;
  }
  uint32_t flipped = 0;
  for (uint32_t k = 0; k < len; ++k) {
    flipped |= 1u << dims[k];
  }
  tm_tensor *out = tm_tensor_arg(args, A(OUT), in->scalar_type, in->dim, in->dim);
  TM_ARG_CHECK(ctx, out != NULL && tm_f32_same_sizes(in, out) && tm_tensors_disjoint(in, out), A(OUT));

  /* Walk out's logical indices; along a flipped dim self's offset starts at its last element
   * and steps backwards (a negative stride). */
  tm_f32_walk w = {0};
  int64_t in_strides[TM_MAX_DIMS];
  tm_f32_strides(in, in_strides);
  tm_f32_strides(out, w.strides[2]);
  w.dim = out->dim;
  for (int k = 0; k < (int)out->dim; ++k) {
    w.sizes[k] = out->sizes[k];
    if ((flipped & (1u << k)) != 0) {
      w.strides[0][k] = -in_strides[k];
      w.off[0] += in_strides[k] * (int64_t)(in->sizes[k] - 1);
    } else {
      w.strides[0][k] = in_strides[k];
    }
  }
  tm_f32_walk_copy(&w, in->data, out->data, out->numel, tm_element_size(in->scalar_type));
  return TM_OK;
}
