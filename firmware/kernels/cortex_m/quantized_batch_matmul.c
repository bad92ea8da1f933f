/* cortex_m::quantized_batch_matmul.out - int8 activation x int8 activation, batch by batch
 * (docs/operators.md): quantized_linear's matrix product (linear_core.h) per batch, the
 * right-hand side's offset as the filter offset. */
#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "linear_core.h"
#include "op_args.h"

#define A(x) TM_ARG(CORTEX_M_QUANTIZED_BATCH_MATMUL, x)

static bool contiguous3(const tm_tensor *t) { return t != NULL && tm_has_layout(t, TM_LAYOUT_CONTIGUOUS); }

tm_status tm_cortex_m_quantized_batch_matmul_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  const tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_QUANTIZED_BATCH_MATMUL));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *lhs = tm_tensor_arg(args, A(LHS), TM_CHAR, 3, 3);
  TM_ARG_CHECK(ctx, contiguous3(lhs) && lhs->sizes[0] > 0 && lhs->sizes[1] > 0 && lhs->sizes[2] > 0, A(LHS));
  const int32_t batch = lhs->sizes[0], rows = lhs->sizes[1], inner = lhs->sizes[2];
  int32_t lhs_offset = 0, rhs_offset = 0, out_offset = 0, mult = 0, shift = 0;
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(LHS_ZERO_POINT), -INT8_MAX, -INT8_MIN, &lhs_offset), A(LHS_ZERO_POINT));
  const tm_tensor *rhs = tm_tensor_arg(args, A(RHS_TRANSPOSED), TM_CHAR, 3, 3);
  TM_ARG_CHECK(ctx,
               contiguous3(rhs) && rhs->sizes[0] == batch && rhs->sizes[2] == inner && rhs->sizes[1] > 0,
               A(RHS_TRANSPOSED));
  const int32_t cols = rhs->sizes[1];
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(RHS_ZERO_POINT), -INT8_MAX, -INT8_MIN, &rhs_offset), A(RHS_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_ZERO_POINT), INT8_MIN, INT8_MAX, &out_offset), A(OUTPUT_ZERO_POINT));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_MULTIPLIER), 1, INT32_MAX, &mult), A(OUTPUT_MULTIPLIER));
  TM_ARG_CHECK(ctx, tm_int_arg(args, A(OUTPUT_SHIFT), -31, 31, &shift), A(OUTPUT_SHIFT));
  TM_ARG_CHECK(ctx, tm_scratch_arg(args, A(SCRATCH), 0), A(SCRATCH));
  const tm_tensor *out = tm_tensor_arg(args, A(OUT), TM_CHAR, 3, 3);
  TM_ARG_CHECK(ctx,
               contiguous3(out) && out->sizes[0] == batch && out->sizes[1] == rows && out->sizes[2] == cols,
               A(OUT));
  const int64_t mults[1] = {mult};
  const int64_t shifts[1] = {shift};
  linear_params p;
  p.bias = NULL;
  p.kernel_sum = NULL;
  p.mults = mults;
  p.shifts = shifts;
  p.per_channel = 0u;
  p.rows = rows;
  p.k = inner;
  p.n = cols;
  p.input_offset = lhs_offset;
  p.filter_offset = rhs_offset;
  p.output_offset = out_offset;
  p.act_min = INT8_MIN;
  p.act_max = INT8_MAX;
  for (int32_t b = 0; b < batch; ++b) {
    p.input = (const int8_t *)lhs->data + (size_t)b * (size_t)rows * (size_t)inner;
    p.weights = (const int8_t *)rhs->data + (size_t)b * (size_t)cols * (size_t)inner;
    p.out = (int8_t *)out->data + (size_t)b * (size_t)rows * (size_t)cols;
#if TM_KERNELS_USE_MVE
    linear_mve(&p);
#else
    linear_scalar(&p);
#endif
  }
  return TM_OK;
}
