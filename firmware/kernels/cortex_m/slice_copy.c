/* torchmcu::slice_copy.out(self, dim, start, end, step) - copies self[..., start:end:step, ...]
 * along dim (the argument list of ExecuTorch's portable aten::slice_copy.Tensor_out, with
 * 0 <= start <= end <= size already resolved by the exporter), any element type, contiguous
 * tensors whose bytes do not overlap (docs/operators.md). */
#include <string.h>

#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "op_args.h"

#define A(x) TM_ARG(TORCHMCU_SLICE_COPY, x)

tm_status tm_torchmcu_slice_copy_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(TORCHMCU_SLICE_COPY));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(SELF), -1, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_element_size(in->scalar_type) != 0 && tm_has_layout(in, TM_LAYOUT_CONTIGUOUS),
               A(SELF));
  const int rank = in->dim;
  int32_t dim = 0, start = 0, end = 0, step = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(DIM), 0, rank - 1, &dim), A(DIM));
  const int32_t size = in->sizes[dim];
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(START), 0, size, &start), A(START));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(END), start, size, &end), A(END));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(STEP), 1, INT32_MAX, &step), A(STEP));
  const int32_t count = (int32_t)(((int64_t)end - start + step - 1) / step);
  tm_tensor *out = tm_tensor_arg(args, A(OUT), in->scalar_type, rank, rank);
  bool out_ok = out != NULL && tm_has_layout(out, TM_LAYOUT_CONTIGUOUS);
  for (int k = 0; out_ok && k < rank; ++k) {
    out_ok = out->sizes[k] == (k == dim ? count : in->sizes[k]);
  }
  TM_ARG_CHECK(ctx, out_ok && tm_tensors_disjoint(in, out), A(OUT)); /* memcpy: no overlap */

  size_t outer = 1, inner = tm_element_size(in->scalar_type);
  for (int k = 0; k < dim; ++k) {
    outer *= (size_t)in->sizes[k];
  }
  for (int k = dim + 1; k < rank; ++k) {
    inner *= (size_t)in->sizes[k];
  }
  const uint8_t *src = (const uint8_t *)in->data;
  uint8_t *dst = (uint8_t *)out->data;
  for (size_t o = 0; o < outer; ++o) {
    const uint8_t *row = src + o * (size_t)size * inner;
    for (int32_t j = 0; j < count; ++j) {
      memcpy(dst, row + ((size_t)start + (size_t)j * (size_t)step) * inner, inner);
      dst += inner;
    }
  }
  return TM_OK;
}
