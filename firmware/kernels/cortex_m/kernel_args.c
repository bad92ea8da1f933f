/* Argument checking shared by the cortex_m kernels (see kernel_args.h). */
#include "kernel_args.h"

#include <string.h>

tm_status tm_check_arg_count(tm_kernel_context *ctx, tm_value *const *args, size_t nargs,
                             size_t schema_args) {
  if (nargs != schema_args + 1) {
    ctx->bad_argument = (uint16_t)(nargs < schema_args + 1 ? nargs : schema_args + 1);
    return TM_ERR_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < nargs; ++i) {
    TM_ARG_CHECK(ctx, args[i] != NULL, i);
  }
  const tm_value *out = args[nargs - 2];
  const tm_value *ret = args[nargs - 1];
  TM_ARG_CHECK(ctx, out->tag == TM_VALUE_TENSOR && out->u.tensor != NULL, nargs - 2);
  TM_ARG_CHECK(ctx, ret->tag == TM_VALUE_TENSOR && ret->u.tensor == out->u.tensor, nargs - 1);
  return TM_OK;
}

static bool valid_dim_order(const tm_tensor *t) {
  uint32_t seen = 0;
  for (uint8_t k = 0; k < t->dim; ++k) {
    const uint8_t d = t->dim_order[k];
    if (d >= t->dim || (seen & (1u << d)) != 0) {
      return false;
    }
    seen |= 1u << d;
  }
  return true;
}

tm_tensor *tm_tensor_arg(tm_value *const *args, size_t i, int scalar_type, int min_rank, int max_rank) {
  const tm_value *v = args[i];
  if (v->tag != TM_VALUE_TENSOR || v->u.tensor == NULL) {
    return NULL;
  }
  tm_tensor *t = v->u.tensor;
  if (scalar_type >= 0 && t->scalar_type != (uint8_t)scalar_type) {
    return NULL;
  }
  if ((int)t->dim < min_rank || (int)t->dim > max_rank || t->dim > TM_MAX_DIMS || !valid_dim_order(t)) {
    return NULL;
  }
  uint64_t numel = 1;
  for (uint8_t k = 0; k < t->dim; ++k) {
    if (t->sizes[k] < 0) {
      return NULL;
    }
    numel *= (uint64_t)t->sizes[k];
  }
  if (numel != t->numel || (t->data == NULL && t->nbytes != 0)) {
    return NULL;
  }
  return t;
}

bool tm_tensors_disjoint(const tm_tensor *a, const tm_tensor *b) {
  const uint64_t a_bytes = (uint64_t)a->numel * tm_element_size(a->scalar_type);
  const uint64_t b_bytes = (uint64_t)b->numel * tm_element_size(b->scalar_type);
  if (a_bytes == 0 || b_bytes == 0) {
    return true;
  }
  const uint64_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
  return a0 + a_bytes <= b0 || b0 + b_bytes <= a0;
}

bool tm_is_none(tm_value *const *args, size_t i) { return args[i]->tag == TM_VALUE_NONE; }

bool tm_int_arg(tm_value *const *args, size_t i, int64_t lo, int64_t hi, int32_t *out) {
  const tm_value *v = args[i];
  if (v->tag != TM_VALUE_INT || v->u.i < lo || v->u.i > hi) {
    return false;
  }
  *out = (int32_t)v->u.i;
  return true;
}

bool tm_bool_arg(tm_value *const *args, size_t i, bool *out) {
  const tm_value *v = args[i];
  if (v->tag != TM_VALUE_BOOL) {
    return false;
  }
  *out = v->u.b;
  return true;
}

bool tm_double_arg(tm_value *const *args, size_t i, double *out) {
  const tm_value *v = args[i];
  if (v->tag != TM_VALUE_DOUBLE) {
    return false;
  }
  *out = v->u.d;
  return true;
}

bool tm_int_list_arg(tm_value *const *args, size_t i, uint32_t min_len, uint32_t max_len,
                     const int64_t **items, uint32_t *len) {
  const tm_value *v = args[i];
  if (v->tag != TM_VALUE_INT_LIST || v->u.int_list.length < min_len || v->u.int_list.length > max_len ||
      (v->u.int_list.items == NULL && v->u.int_list.length != 0)) {
    return false;
  }
  *items = v->u.int_list.items;
  *len = v->u.int_list.length;
  return true;
}

/* Element strides implied by a dim order. */
static void strides_for(const tm_tensor *t, const uint8_t *order, int64_t strides[TM_MAX_DIMS]) {
  int64_t step = 1;
  for (int k = (int)t->dim - 1; k >= 0; --k) {
    strides[order[k]] = step;
    step *= t->sizes[order[k]];
  }
}

static bool same_strides_where_it_matters(const tm_tensor *t, const uint8_t *order_a,
                                          const uint8_t *order_b) {
  int64_t sa[TM_MAX_DIMS];
  int64_t sb[TM_MAX_DIMS];
  strides_for(t, order_a, sa);
  strides_for(t, order_b, sb);
  for (uint8_t d = 0; d < t->dim; ++d) {
    if (t->sizes[d] > 1 && sa[d] != sb[d]) {
      return false;
    }
  }
  return true;
}

bool tm_has_layout(const tm_tensor *t, tm_layout layout) {
  static const uint8_t kContiguous[TM_MAX_DIMS] = {0, 1, 2, 3, 4, 5};
  static const uint8_t kNhwc[4] = {0, 2, 3, 1};
  if (layout == TM_LAYOUT_NHWC_LEGACY) {
    return t->dim == 4 && same_strides_where_it_matters(t, t->dim_order, kNhwc);
  }
  return same_strides_where_it_matters(t, t->dim_order, kContiguous);
}

bool tm_same_layout(const tm_tensor *a, const tm_tensor *b) {
  if (a->dim != b->dim) {
    return false;
  }
  for (uint8_t d = 0; d < a->dim; ++d) {
    if (a->sizes[d] != b->sizes[d]) {
      return false;
    }
  }
  return same_strides_where_it_matters(a, a->dim_order, b->dim_order);
}

void tm_physical_sizes(const tm_tensor *t, int32_t phys[TM_MAX_DIMS]) {
  for (uint8_t k = 0; k < t->dim; ++k) {
    phys[k] = t->sizes[t->dim_order[k]];
  }
}

bool tm_activation_dims(const tm_tensor *t, bool nhwc_sizes, int32_t dims[4]) {
  if (t->dim != 4 || t->scalar_type != TM_CHAR) {
    return false;
  }
  if (nhwc_sizes) {
    if (!tm_has_layout(t, TM_LAYOUT_CONTIGUOUS)) {
      return false;
    }
    dims[0] = t->sizes[0];
    dims[1] = t->sizes[1];
    dims[2] = t->sizes[2];
    dims[3] = t->sizes[3];
  } else {
    if (!tm_has_layout(t, TM_LAYOUT_NHWC_LEGACY)) {
      return false;
    }
    dims[0] = t->sizes[0];
    dims[1] = t->sizes[2];
    dims[2] = t->sizes[3];
    dims[3] = t->sizes[1];
  }
  return true;
}

tm_tensor *tm_activation_arg(tm_value *const *args, size_t i, bool nhwc_sizes, int32_t dims[4]) {
  tm_tensor *t = tm_tensor_arg(args, i, TM_CHAR, 4, 4);
  return t != NULL && tm_activation_dims(t, nhwc_sizes, dims) ? t : NULL;
}

bool tm_window_out_dims(const int32_t dims[4], int32_t n, int32_t oh, int32_t ow, int32_t c) {
  return oh > 0 && ow > 0 && dims[0] == n && dims[1] == oh && dims[2] == ow && dims[3] == c;
}

tm_status tm_qparams_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, int32_t dtype, int32_t *zp,
                          int32_t *qmin, int32_t *qmax) {
  const int64_t lo = dtype == TM_CHAR ? INT8_MIN : INT16_MIN;
  const int64_t hi = dtype == TM_CHAR ? INT8_MAX : INT16_MAX;
  TM_ARG_CHECK(ctx, tm_int_arg(args, i, lo, hi, zp), i);
  TM_ARG_CHECK(ctx, tm_int_arg(args, i + 1, lo, hi, qmin), i + 1);
  TM_ARG_CHECK(ctx, tm_int_arg(args, i + 2, *qmin, hi, qmax), i + 2);
  return TM_OK;
}

static bool is_channel_vector(const tm_tensor *t, int32_t channels) {
  return t->dim == 4 && t->sizes[1] == channels && t->numel == (uint32_t)channels;
}

/* Operand t of a general broadcast to out: out's rank, each size out's or 1, its bytes in
 * out's dim order; step[d] its element stride along dim d (0 where it is broadcast). */
static bool broadcast_operand(const tm_tensor *t, const tm_tensor *out, int64_t step[TM_MAX_DIMS]) {
  if (t->dim != out->dim || t->dim == 0) {
    return false;
  }
  for (uint8_t d = 0; d < t->dim; ++d) {
    if (t->sizes[d] != out->sizes[d] && t->sizes[d] != 1) {
      return false;
    }
  }
  if (!same_strides_where_it_matters(t, t->dim_order, out->dim_order)) {
    return false;
  }
  strides_for(t, out->dim_order, step);
  for (uint8_t d = 0; d < t->dim; ++d) {
    if (t->sizes[d] != out->sizes[d]) {
      step[d] = 0;
    }
  }
  return true;
}

/* The general broadcast's loops (see tm_binary_shape); false when out's sizes are not the
 * operands' broadcast. */
static bool general_broadcast(const tm_tensor *a, const tm_tensor *b, const tm_tensor *out, const int64_t sa[TM_MAX_DIMS],
                              const int64_t sb[TM_MAX_DIMS], tm_binary_shape *shape) {
  uint32_t dims = 0;
  for (uint8_t k = 0; k < out->dim; ++k) {
    const uint8_t d = out->dim_order[k];
    const uint32_t size = (uint32_t)out->sizes[d];
    if (size != (uint32_t)a->sizes[d] && size != (uint32_t)b->sizes[d]) {
      return false;
    }
    if (size == 1) {
      continue;
    }
    if (dims > 0 && shape->a_step[dims - 1] == (uint32_t)sa[d] * size &&
        shape->b_step[dims - 1] == (uint32_t)sb[d] * size) {
      shape->size[dims - 1] *= size; /* the outer neighbour continues this dim */
    } else {
      shape->size[dims++] = size;
    }
    shape->a_step[dims - 1] = (uint32_t)sa[d];
    shape->b_step[dims - 1] = (uint32_t)sb[d];
  }
  if (dims == 0) {
    shape->size[0] = 1;
    shape->a_step[0] = 1;
    shape->b_step[0] = 1;
    dims = 1;
  }
  shape->dims = dims;
  shape->numel = out->numel;
  shape->a_period = out->numel;
  shape->b_period = out->numel;
  return true;
}

tm_binary_status tm_binary_broadcast(const tm_tensor *a, const tm_tensor *b, const tm_tensor *out,
                                     tm_binary_shape *shape) {
  shape->dims = 0;
  if (tm_same_layout(a, b)) {
    if (!tm_same_layout(a, out)) {
      return TM_BINARY_BAD_OUT;
    }
    shape->numel = out->numel;
    shape->a_period = out->numel;
    shape->b_period = out->numel;
    return TM_BINARY_OK;
  }
  const bool a_full = tm_same_layout(a, out);
  const bool b_full = tm_same_layout(b, out);
  if (a_full && b->numel == 1) {
    shape->a_period = out->numel;
    shape->b_period = 1;
    shape->numel = out->numel;
    return TM_BINARY_OK;
  }
  if (b_full && a->numel == 1) {
    shape->a_period = 1;
    shape->b_period = out->numel;
    shape->numel = out->numel;
    return TM_BINARY_OK;
  }
  const bool nhwc_out = out->dim == 4 && tm_has_layout(out, TM_LAYOUT_NHWC_LEGACY);
  const int32_t channels = out->dim == 4 ? out->sizes[1] : 0;
  if (nhwc_out && a_full && is_channel_vector(b, channels)) {
    shape->a_period = out->numel;
    shape->b_period = (uint32_t)channels;
    shape->numel = out->numel;
    return TM_BINARY_OK;
  }
  if (nhwc_out && b_full && is_channel_vector(a, channels)) {
    shape->a_period = (uint32_t)channels;
    shape->b_period = out->numel;
    shape->numel = out->numel;
    return TM_BINARY_OK;
  }
  int64_t sa[TM_MAX_DIMS];
  int64_t sb[TM_MAX_DIMS];
  const bool a_fits = broadcast_operand(a, out, sa);
  const bool b_fits = broadcast_operand(b, out, sb);
  if (a_fits && b_fits) {
    return general_broadcast(a, b, out, sa, sb, shape) ? TM_BINARY_OK : TM_BINARY_BAD_OUT;
  }
  if (!a_full && !b_full) {
    return a_fits != b_fits ? (a_fits ? TM_BINARY_BAD_OTHER : TM_BINARY_BAD_SELF) : TM_BINARY_BAD_OUT;
  }
  return a_full ? TM_BINARY_BAD_OTHER : TM_BINARY_BAD_SELF;
}

void tm_binary_widen_short(const int8_t **a, const int8_t **b, tm_binary_shape *shape, int8_t *row) {
  const bool a_short = shape->a_period < shape->b_period;
  const uint32_t period = a_short ? shape->a_period : shape->b_period;
  if (shape->dims > 0 || shape->numel <= period || period * 2u > TM_BINARY_ROW) {
    return;
  }
  const int8_t *src = a_short ? *a : *b;
  const uint32_t copies = TM_BINARY_ROW / period;
  for (uint32_t k = 0; k < copies; ++k) {
    memcpy(row + k * period, src, period);
  }
  if (a_short) {
    *a = row;
    shape->a_period = copies * period;
  } else {
    *b = row;
    shape->b_period = copies * period;
  }
}

tm_status tm_binary_out_arg(tm_kernel_context *ctx, tm_value *const *args, size_t i_self, size_t i_other,
                            size_t i_out, tm_tensor **out, tm_binary_shape *shape) {
  return tm_binary_out_arg_typed(ctx, args, i_self, i_other, i_out, TM_CHAR, out, shape);
}

tm_status tm_binary_out_arg_typed(tm_kernel_context *ctx, tm_value *const *args, size_t i_self, size_t i_other,
                                  size_t i_out, int scalar_type, tm_tensor **out, tm_binary_shape *shape) {
  *out = tm_tensor_arg(args, i_out, scalar_type, 0, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, *out != NULL, i_out);
  const tm_binary_status bs = tm_binary_broadcast(args[i_self]->u.tensor, args[i_other]->u.tensor, *out, shape);
  TM_ARG_CHECK(ctx, bs == TM_BINARY_OK,
               bs == TM_BINARY_BAD_SELF ? i_self : (bs == TM_BINARY_BAD_OTHER ? i_other : i_out));
  return TM_OK;
}

bool tm_pair_arg(tm_value *const *args, size_t i, bool allow_single, int64_t lo, int64_t hi, int32_t *h,
                 int32_t *w) {
  const int64_t *items = NULL;
  uint32_t len = 0;
  if (!tm_int_list_arg(args, i, allow_single ? 1u : 2u, 2u, &items, &len)) {
    return false;
  }
  const int64_t vh = items[0];
  const int64_t vw = items[len - 1];
  if (vh < lo || vh > hi || vw < lo || vw > hi) {
    return false;
  }
  *h = (int32_t)vh;
  *w = (int32_t)vw;
  return true;
}

static bool per_channel_tensor(tm_value *const *args, size_t i, int32_t channels, const int32_t **data) {
  const tm_tensor *t = tm_tensor_arg(args, i, TM_INT, 1, TM_MAX_DIMS);
  if (t == NULL || t->numel != (uint32_t)channels) {
    return false;
  }
  *data = (const int32_t *)t->data;
  return true;
}

bool tm_per_channel_mults(tm_value *const *args, size_t i, int32_t channels, const int32_t **data) {
  return per_channel_tensor(args, i, channels, data);
}

bool tm_per_channel_shifts(tm_value *const *args, size_t i, int32_t channels, const int32_t **data) {
  if (!per_channel_tensor(args, i, channels, data)) {
    return false;
  }
  for (int32_t c = 0; c < channels; ++c) {
    if ((*data)[c] < -31 || (*data)[c] > 31) {
      return false;
    }
  }
  return true;
}

tm_status tm_conv_window_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, tm_window *win) {
  TM_ARG_CHECK(ctx, tm_pair_arg(args, i, false, 1, INT16_MAX, &win->stride_h, &win->stride_w), i);
  TM_ARG_CHECK(ctx, tm_pair_arg(args, i + 1, false, 0, INT16_MAX, &win->pad_h, &win->pad_w), i + 1);
  TM_ARG_CHECK(ctx, tm_pair_arg(args, i + 2, false, 1, INT16_MAX, &win->dil_h, &win->dil_w), i + 2);
  return TM_OK;
}

tm_status tm_pool_window_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, int32_t *kh, int32_t *kw,
                              tm_window *win) {
  TM_ARG_CHECK(ctx, tm_pair_arg(args, i, true, 1, INT16_MAX, kh, kw), i);
  TM_ARG_CHECK(ctx, tm_pair_arg(args, i + 1, true, 1, INT16_MAX, &win->stride_h, &win->stride_w), i + 1);
  TM_ARG_CHECK(ctx, tm_pair_arg(args, i + 2, true, 0, INT16_MAX, &win->pad_h, &win->pad_w) &&
                        win->pad_h <= *kh / 2 && win->pad_w <= *kw / 2,
               i + 2);
  return TM_OK;
}

bool tm_bias_arg(tm_value *const *args, size_t i, int32_t channels, const int32_t **bias) {
  *bias = NULL;
  if (tm_is_none(args, i)) {
    return true;
  }
  const tm_tensor *b = tm_tensor_arg(args, i, TM_INT, 1, TM_MAX_DIMS);
  if (b == NULL || b->numel != (uint32_t)channels) {
    return false;
  }
  *bias = (const int32_t *)b->data;
  return true;
}

tm_status tm_conv_quant_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, int32_t channels,
                             tm_conv_quant *q) {
  TM_ARG_CHECK(ctx, tm_int_arg(args, i, -INT8_MAX, -INT8_MIN, &q->input_offset), i);
  TM_ARG_CHECK(ctx, tm_int_arg(args, i + 1, INT8_MIN, INT8_MAX, &q->output_offset), i + 1);
  TM_ARG_CHECK(ctx, tm_per_channel_mults(args, i + 2, channels, &q->mults), i + 2);
  TM_ARG_CHECK(ctx, tm_per_channel_shifts(args, i + 3, channels, &q->shifts), i + 3);
  TM_ARG_CHECK(ctx, tm_int_arg(args, i + 4, INT8_MIN, INT8_MAX, &q->act_min), i + 4);
  TM_ARG_CHECK(ctx, tm_int_arg(args, i + 5, q->act_min, INT8_MAX, &q->act_max), i + 5);
  return TM_OK;
}

uint32_t tm_udiv64_32_wide(uint32_t hi, uint32_t lo, uint32_t d) {
  /* Long division in chunks of clz(d) >= 1 bits: the remainder stays below d, so shifting it
   * by that many bits cannot overflow. */
  const int step = __builtin_clz(d);
  uint32_t q = 0, r = hi;
  for (int bits = 32; bits > 0;) {
    const int t = step < bits ? step : bits;
    r = (r << t) | (lo >> (32 - t));
    lo <<= t;
    q = (q << t) | (r / d);
    r %= d;
    bits -= t;
  }
  return q;
}

int32_t tm_conv_out_size(int32_t size, int32_t kernel, int32_t stride, int32_t pad, int32_t dilation) {
  const int64_t span = (int64_t)size + 2 * (int64_t)pad - (int64_t)dilation * (kernel - 1) - 1;
  /* a non-negative span is below 2^32 (size, pad and dilation are bounded), so 32-bit division */
  return span < 0 ? 0 : (int32_t)((uint32_t)span / (uint32_t)stride + 1u);
}

bool tm_scratch_arg(tm_value *const *args, size_t i, size_t needed) {
  const tm_tensor *t = tm_tensor_arg(args, i, -1, 1, 1);
  return t != NULL && (t->scalar_type == TM_BYTE || t->scalar_type == TM_CHAR) && t->nbytes >= needed;
}

int32_t tm_pool_out_size(int32_t size, int32_t kernel, int32_t stride, int32_t pad, bool ceil_mode) {
  const int64_t num = (int64_t)size + 2 * (int64_t)pad - kernel + (ceil_mode ? stride - 1 : 0);
  /* floor division: the numerator may be negative when the kernel exceeds the padded input */
  const uint32_t s = (uint32_t)stride; /* |num| < 2^32 for the documented ranges: 32-bit division */
  int64_t out = (num >= 0 ? (int64_t)((uint32_t)num / s) : -(int64_t)(((uint32_t)-num + s - 1u) / s)) + 1;
  if (ceil_mode && (out - 1) * stride >= (int64_t)size + pad) {
    --out;
  }
  return out < 0 ? 0 : (int32_t)out;
}

tm_status tm_adaptive_pool_args(tm_kernel_context *ctx, tm_value *const *args, size_t i_input, size_t i_out,
                                int32_t in_dims[4], int32_t out_dims[4], const int8_t **in, int8_t **out) {
  const tm_tensor *x = tm_activation_arg(args, i_input, false, in_dims);
  TM_ARG_CHECK(ctx, x != NULL && in_dims[1] > 0 && in_dims[2] > 0, i_input);
  tm_tensor *y = tm_activation_arg(args, i_out, false, out_dims);
  TM_ARG_CHECK(ctx,
               y != NULL && out_dims[0] == in_dims[0] && out_dims[3] == in_dims[3] && out_dims[1] > 0 &&
                   out_dims[2] > 0,
               i_out);
  *in = (const int8_t *)x->data;
  *out = (int8_t *)y->data;
  return TM_OK;
}
