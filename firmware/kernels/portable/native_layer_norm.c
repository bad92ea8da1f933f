/*
 * aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight,
 * Tensor? bias, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2), float32.
 * normalized_shape (1..rank items) equals input's trailing sizes; each row of
 * N = prod(normalized_shape) trailing elements is normalised:
 *   mean = sum(x) / N, var = sum((x - mean)^2) / N (biased), rstd = 1 / sqrt(var + eps),
 *   out0 = (x - mean) * rstd * weight + bias   (weight/bias None: 1/0)
 *   out1 = mean, out2 = rstd                   (sizes: input's, trailing N dims set to 1)
 * weight and bias, when given, have sizes normalized_shape. input and out0 contiguous with
 * the same sizes; eps finite and >= 0. As ExecuTorch emits a multi-output call, the three
 * outs are followed by one TensorList value (the returned tuple): if its items are
 * resolved they must be out0, out1, out2 in order.
 */
#include <math.h>

#include "fp32_util.h"
#include "portable_kernels.h"
#include "op_args.h"

#define A(x) TM_ARG(PORTABLE_NATIVE_LAYER_NORM, x)
/* The returned TensorList follows the schema's arguments. */
#define RETURNED TM_NARGS(PORTABLE_NATIVE_LAYER_NORM)
#define N_CALL (RETURNED + 1u)

/* An optional per-element tensor with sizes `shape` (None gives NULL). */
static bool affine_arg(tm_value *const *args, size_t i, const int64_t *shape, uint32_t len, const float **data) {
  *data = NULL;
  if (tm_is_none(args, i)) {
    return true;
  }
  const tm_tensor *t = tm_f32_arg(args, i, (int)len, (int)len);
  if (t == NULL || !tm_has_layout(t, TM_LAYOUT_CONTIGUOUS)) {
    return false;
  }
  for (uint32_t k = 0; k < len; ++k) {
    if (t->sizes[k] != shape[k]) {
      return false;
    }
  }
  *data = (const float *)t->data;
  return true;
}

/* out1/out2: input's sizes with the last `len` set to 1, `rows` elements, contiguous. */
static bool stat_arg(tm_value *const *args, size_t i, const tm_tensor *in, uint32_t len, uint32_t rows,
                     tm_tensor **t) {
  *t = tm_f32_arg(args, i, in->dim, in->dim);
  if (*t == NULL || (*t)->numel != rows || !tm_has_layout(*t, TM_LAYOUT_CONTIGUOUS)) {
    return false;
  }
  for (uint8_t d = 0; d < in->dim; ++d) {
    if ((*t)->sizes[d] != (d + len >= in->dim ? 1 : in->sizes[d])) {
      return false;
    }
  }
  return true;
}

tm_status tm_portable_native_layer_norm_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  if (nargs != N_CALL) {
    ctx->bad_argument = (uint16_t)(nargs < N_CALL ? nargs : N_CALL);
    return TM_ERR_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < nargs; ++i) {
    TM_ARG_CHECK(ctx, args[i] != NULL, i);
  }
  const tm_tensor *in = tm_f32_arg(args, A(INPUT), 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_has_layout(in, TM_LAYOUT_CONTIGUOUS), A(INPUT));
  const int64_t *shape = NULL;
  uint32_t len = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(NORMALIZED_SHAPE), 1, in->dim, &shape, &len), A(NORMALIZED_SHAPE));
  uint32_t row = 1;
  for (uint32_t k = 0; k < len; ++k) {
    TM_ARG_CHECK(ctx, shape[k] == in->sizes[in->dim - len + k], A(NORMALIZED_SHAPE));
    row *= (uint32_t)shape[k];
  }
  uint32_t rows = 1; /* product of the leading sizes (not numel / row: row may be 0) */
  for (uint32_t d = 0; d + len < in->dim; ++d) {
    rows *= (uint32_t)in->sizes[d];
  }
  const float *weight = NULL;
  const float *bias = NULL;
  TM_ARG_CHECK(ctx, affine_arg(args, A(WEIGHT), shape, len, &weight), A(WEIGHT));
  TM_ARG_CHECK(ctx, affine_arg(args, A(BIAS), shape, len, &bias), A(BIAS));
  double eps_d = 0.0;
  TM_ARG_CHECK(ctx, tm_double_arg(args, A(EPS), &eps_d) && eps_d >= 0.0 && eps_d <= 3.4e38, A(EPS));
  tm_tensor *out0 = tm_f32_arg(args, A(OUT0), in->dim, in->dim);
  TM_ARG_CHECK(ctx, out0 != NULL && tm_f32_same_sizes(in, out0) && tm_has_layout(out0, TM_LAYOUT_CONTIGUOUS),
               A(OUT0));
  tm_tensor *out1 = NULL;
  tm_tensor *out2 = NULL;
  TM_ARG_CHECK(ctx, stat_arg(args, A(OUT1), in, len, rows, &out1), A(OUT1));
  TM_ARG_CHECK(ctx, stat_arg(args, A(OUT2), in, len, rows, &out2), A(OUT2));
  const tm_value *ret = args[RETURNED];
  bool ret_ok = ret->tag == TM_VALUE_TENSOR_LIST && ret->u.list.length == 3;
  for (uint32_t k = 0; ret_ok && ret->u.list.items != NULL && k < 3; ++k) {
    const tm_value *item = ret->u.list.items[k];
    ret_ok = item != NULL && item->tag == TM_VALUE_TENSOR && item->u.tensor == args[A(OUT0) + k]->u.tensor;
  }
  TM_ARG_CHECK(ctx, ret_ok, RETURNED);

  const float eps = (float)eps_d;
  const float n = (float)row;
  const float *x = (const float *)in->data;
  float *y = (float *)out0->data;
  float *means = (float *)out1->data;
  float *rstds = (float *)out2->data;
  for (uint32_t r = 0; r < rows; ++r) {
    const float *xr = x + (size_t)r * row;
    float *yr = y + (size_t)r * row;
    float sum = 0.0f;
    for (uint32_t k = 0; k < row; ++k) {
      sum += xr[k];
    }
    const float mean = sum / n;
    float sq = 0.0f;
    for (uint32_t k = 0; k < row; ++k) {
      const float dlt = xr[k] - mean;
      sq += dlt * dlt;
    }
    const float rstd = 1.0f / sqrtf(sq / n + eps);
    for (uint32_t k = 0; k < row; ++k) {
      float v = (xr[k] - mean) * rstd;
      if (weight != NULL) {
        v *= weight[k];
      }
      if (bias != NULL) {
        v += bias[k];
      }
      yr[k] = v;
    }
    means[r] = mean;
    rstds[r] = rstd;
  }
  return TM_OK;
}
