/*
 * Argument checking shared by the cortex_m kernels. Each helper returns false
 * when argument `i` breaks the contract; TM_ARG_CHECK then records the index
 * in ctx->bad_argument and returns TM_ERR_INVALID_ARGUMENT.
 */
#ifndef TORCHMCU_KERNELS_KERNEL_ARGS_H
#define TORCHMCU_KERNELS_KERNEL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "torchmcu/types.h"

#define TM_ARG_CHECK(ctx, cond, index)            \
  do {                                            \
    if (!(cond)) {                                \
      (ctx)->bad_argument = (uint16_t)(index);    \
      return TM_ERR_INVALID_ARGUMENT;             \
    }                                             \
  } while (0)

/* Memory layouts a kernel can ask for (see tm_has_layout). */
typedef enum {
  TM_LAYOUT_CONTIGUOUS = 0, /* dim order 0, 1, 2, ... */
  TM_LAYOUT_NHWC_LEGACY = 1 /* 4-D, sizes N,C,H,W, dim order 0,2,3,1 */
} tm_layout;

/* Checks nargs == schema_args + 1 and that the last two values are the same
 * out tensor; on failure sets ctx->bad_argument (to nargs or the index). */
tm_status tm_check_arg_count(tm_kernel_context *ctx, tm_value *const *args, size_t nargs,
                             size_t schema_args);

/* The tensor of argument i, or NULL if it is not a tensor of `scalar_type`
 * (pass -1 for any type) with a rank in [min_rank, max_rank] and valid data. */
tm_tensor *tm_tensor_arg(tm_value *const *args, size_t i, int scalar_type, int min_rank, int max_rank);

/* Argument i is None (for optional tensors). */
bool tm_is_none(tm_value *const *args, size_t i);

/* Int argument in [lo, hi]. */
bool tm_int_arg(tm_value *const *args, size_t i, int64_t lo, int64_t hi, int32_t *out);

bool tm_bool_arg(tm_value *const *args, size_t i, bool *out);

bool tm_double_arg(tm_value *const *args, size_t i, double *out);

/* Int list argument with a length in [min_len, max_len]. */
bool tm_int_list_arg(tm_value *const *args, size_t i, uint32_t min_len, uint32_t max_len,
                     const int64_t **items, uint32_t *len);

/* The tensor's bytes are laid out as `layout` demands (dims of size 1 ignored). */
bool tm_has_layout(const tm_tensor *t, tm_layout layout);

/* The element bytes of a and b do not overlap (true when either has none). A kernel that
 * reads one while writing the other needs this, not only different start addresses: a
 * planned offset one byte off makes a partial overlap. */
bool tm_tensors_disjoint(const tm_tensor *a, const tm_tensor *b);

/* Two tensors of equal sizes place every element at the same offset. */
bool tm_same_layout(const tm_tensor *a, const tm_tensor *b);

/* Memory-order (physical) sizes of a tensor: phys[k] = sizes[dim_order[k]]. */
void tm_physical_sizes(const tm_tensor *t, int32_t phys[TM_MAX_DIMS]);

/* A 4-D int8 activation in NHWC memory: legacy sizes N,C,H,W (dim order
 * 0,2,3,1) when nhwc_sizes is false, else sizes N,H,W,C (contiguous).
 * Writes N,H,W,C to dims. */
bool tm_activation_dims(const tm_tensor *t, bool nhwc_sizes, int32_t dims[4]);

/* Argument i as such a 4-D int8 NHWC activation (dims as above), or NULL. */
tm_tensor *tm_activation_arg(tm_value *const *args, size_t i, bool nhwc_sizes, int32_t dims[4]);

/* Output dims N, OH, OW, C of a convolution or pooling equal n, oh, ow, c, with oh, ow > 0. */
bool tm_window_out_dims(const int32_t dims[4], int32_t n, int32_t oh, int32_t ow, int32_t c);

/* zero_point, quant_min, quant_max at arguments i, i+1, i+2, in the range of
 * `dtype` (TM_CHAR or TM_SHORT) with quant_min <= quant_max. */
tm_status tm_qparams_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, int32_t dtype, int32_t *zp,
                          int32_t *qmin, int32_t *qmax);


/*
 * Shape rule of the int8 binary ops (quantized_add, quantized_mul, maximum,
 * minimum): equal sizes with the same memory layout, one operand a single
 * element (period 1) of any rank, or a 4-D NHWC channel broadcast where one
 * operand holds one value per channel. Output element i (in memory order)
 * reads a[i % a_period] and b[i % b_period].
 *
 * Otherwise the general broadcast (dims > 0; the periods unused): self, other
 * and out of one rank, each operand's size out's or 1 along every dim, out's
 * size one of theirs, and each operand's bytes in out's dim order (dims of
 * size 1 free). Out's memory is then `dims` nested loops of size[k] (the
 * innermost last, size-1 dims dropped, mergeable neighbours merged), each
 * operand advancing a_step[k] / b_step[k] elements per step (0 where it is
 * broadcast); the innermost steps are 0 or 1.
 */
typedef struct {
  uint32_t numel;
  uint32_t a_period;
  uint32_t b_period;
  uint32_t dims;
  uint32_t size[TM_MAX_DIMS];
  uint32_t a_step[TM_MAX_DIMS];
  uint32_t b_step[TM_MAX_DIMS];
} tm_binary_shape;

typedef enum { TM_BINARY_OK = 0, TM_BINARY_BAD_SELF = 1, TM_BINARY_BAD_OTHER = 2, TM_BINARY_BAD_OUT = 3 } tm_binary_status;

tm_binary_status tm_binary_broadcast(const tm_tensor *a, const tm_tensor *b, const tm_tensor *out,
                                     tm_binary_shape *shape);

/* The int8 out tensor (argument i_out) of a binary op whose operands are the
 * already checked tensors at i_self and i_other, with their broadcast shape;
 * on failure names the operand at fault. */
tm_status tm_binary_out_arg(tm_kernel_context *ctx, tm_value *const *args, size_t i_self, size_t i_other,
                            size_t i_out, tm_tensor **out, tm_binary_shape *shape);
/* The same with an out tensor of scalar_type (int16: quantized_add16). */
tm_status tm_binary_out_arg_typed(tm_kernel_context *ctx, tm_value *const *args, size_t i_self, size_t i_other,
                                  size_t i_out, int scalar_type, tm_tensor **out, tm_binary_shape *shape);

/* Rows of the period shapes are min(a_period, b_period) elements, after a broadcast
 * operand of a short period (a single element, or a channel vector of at most
 * TM_BINARY_ROW / 2 channels) is repeated as often as it fits into a TM_BINARY_ROW-byte
 * row (its period then that multiple): tm_binary_row_len(shape, i) long (the last one may
 * be shorter). */
#define TM_BINARY_ROW 64u

/* The repetition above, applied to *a or *b and the shape (nothing for the general broadcast). */
void tm_binary_widen_short(const int8_t **a, const int8_t **b, tm_binary_shape *shape, int8_t *row);

static inline uint32_t tm_binary_row_len(const tm_binary_shape *shape, uint32_t i) {
  const uint32_t row = shape->a_period < shape->b_period ? shape->a_period : shape->b_period;
  return shape->numel - i < row ? shape->numel - i : row;
}

/* out[j] = op(a[j], b[j]) for j < n, all three contiguous (a kernel's row loop). */
typedef void (*tm_binary_row_fn)(const int8_t *a, const int8_t *b, int8_t *out, uint32_t n, const void *params);

/* Runs fn over every element of out in rows: the period rows (tm_binary_row_len, after the
 * short-period repetition), or the general broadcast's inner loop, where an operand
 * broadcast along it (inner step 0) is one value repeated into a TM_BINARY_ROW-byte row and
 * the inner loop runs in pieces of at most TM_BINARY_ROW elements. Inline, with one call of
 * fn, so that a kernel's row function (a constant) is inlined into the loop. */
static inline __attribute__((always_inline)) void tm_binary_rows(const tm_binary_shape *shape, const int8_t *a,
                                                                  const int8_t *b, int8_t *out, tm_binary_row_fn fn,
                                                                  const void *params) {
  int8_t row[TM_BINARY_ROW];
  tm_binary_shape rows = *shape;
  tm_binary_widen_short(&a, &b, &rows, row); /* nothing for the general broadcast */
  const bool general = rows.dims > 0;
  const uint32_t inner = general ? rows.dims - 1 : 0;
  const uint32_t len = rows.size[inner];
  const bool a_one = general && rows.a_step[inner] == 0;
  const bool b_one = general && rows.b_step[inner] == 0;
  uint32_t index[TM_MAX_DIMS] = {0};
  uint32_t j = 0; /* the general broadcast: the position in the current inner loop */
  for (uint32_t i = 0, n; i < rows.numel; i += n) {
    const int8_t *pa = a + i % rows.a_period;
    const int8_t *pb = b + i % rows.b_period;
    n = tm_binary_row_len(&rows, i);
    if (general) {
      if (j == 0 && (a_one || b_one)) {
        memset(row, a_one ? *a : *b, len < TM_BINARY_ROW ? len : TM_BINARY_ROW);
      }
      n = a_one || b_one ? (len - j < TM_BINARY_ROW ? len - j : TM_BINARY_ROW) : len;
      pa = a_one ? row : a + j;
      pb = b_one ? row : b + j;
    }
    fn(pa, pb, out + i, n, params);
    if (general && (j += n) == len) {
      j = 0;
      for (uint32_t k = inner; k-- > 0;) { /* the next inner loop: an odometer over the outer ones */
        a += rows.a_step[k];
        b += rows.b_step[k];
        if (++index[k] < rows.size[k]) {
          break;
        }
        index[k] = 0;
        a -= (size_t)rows.a_step[k] * rows.size[k];
        b -= (size_t)rows.b_step[k] * rows.size[k];
      }
    }
  }
}


/* Spatial geometry of a convolution or pooling window (h, w pairs). */
typedef struct {
  int32_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
} tm_window;

/* Reads a list argument of exactly 2 items (or 1 or 2 if allow_single) into
 * (*h, *w), each in [lo, hi]. */
bool tm_pair_arg(tm_value *const *args, size_t i, bool allow_single, int64_t lo, int64_t hi, int32_t *h,
                 int32_t *w);

/* Per-channel requantization tensors: int32, numel == channels, shifts in [-31, 31]. */
bool tm_per_channel_mults(tm_value *const *args, size_t i, int32_t channels, const int32_t **data);
bool tm_per_channel_shifts(tm_value *const *args, size_t i, int32_t channels, const int32_t **data);

/* stride, padding, dilation of a convolution: pairs at arguments i, i+1, i+2. */
tm_status tm_conv_window_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, tm_window *win);

/* kernel_size, stride, padding of a pooling: pairs (or single values) at
 * arguments i, i+1, i+2, padding at most half the kernel. */
tm_status tm_pool_window_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, int32_t *kh, int32_t *kw,
                              tm_window *win);

/* Per-output-channel requantization of a convolution. */
typedef struct {
  const int32_t *bias; /* NULL when the bias is None */
  const int32_t *mults;
  const int32_t *shifts;
  int32_t input_offset, output_offset, act_min, act_max;
} tm_conv_quant;

/* Optional int32 bias of `channels` items at argument i (None gives NULL). */
bool tm_bias_arg(tm_value *const *args, size_t i, int32_t channels, const int32_t **bias);

/* input_offset, output_offset, multipliers, shifts, activation_min,
 * activation_max at arguments i .. i+5 (bias is read by tm_bias_arg). */
tm_status tm_conv_quant_args(tm_kernel_context *ctx, tm_value *const *args, size_t i, int32_t channels,
                             tm_conv_quant *q);

/* Output size of a convolution along one axis; 0 if empty. */
int32_t tm_conv_out_size(int32_t size, int32_t kernel, int32_t stride, int32_t pad, int32_t dilation);

/* The first 16-byte aligned byte of a checked scratch tensor holding `need` bytes (16 of
 * them slack for the alignment), or NULL when it holds fewer (the caller's Helium path then
 * falls back to its scalar path). */
static inline uint8_t *tm_aligned_scratch(const tm_tensor *scratch, size_t need) {
  uint8_t *base = (uint8_t *)scratch->data;
  return scratch->nbytes >= need ? base + ((16u - ((uintptr_t)base & 15u)) & 15u) : NULL;
}

/* The scratch of a kernel's Helium path: its `scratch` argument (16-byte aligned start) when
 * that holds `need` bytes, else the method's shared scratch (tm_kernel_context.scratch) when
 * that does, else NULL (the caller then runs its scalar path; tm_method_init sized the shared
 * scratch from the prepare steps, so that happens only where the caller gave too little). */
static inline uint8_t *tm_kernel_scratch(const tm_kernel_context *ctx, const tm_tensor *scratch, size_t need) {
  uint8_t *own = tm_aligned_scratch(scratch, need);
  if (own != NULL) {
    return own;
  }
  return ctx->scratch != NULL && ctx->scratch_bytes >= need ? ctx->scratch : NULL;
}

/* A prepare step's report (arguments checked): what the kernel asks of the shared scratch -
 * nothing when its `scratch` argument holds the `need` bytes of its Helium path, else `need`. */
static inline tm_status tm_prepared(tm_kernel_context *ctx, const tm_tensor *scratch, size_t need) {
  ctx->scratch_bytes = scratch->nbytes >= need ? 0u : need > UINT32_MAX ? UINT32_MAX : (uint32_t)need;
  return TM_OK;
}

/* The prepare entry points of an operator and its _nhwc alias, NAME##_prepare and
 * NAME##_nhwc_prepare (registered by the generated registry), calling fn(ctx, args, nargs, nhwc). */
#define TM_PREPARE_ENTRIES(name, fn)                                                             \
  tm_status name##_prepare(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {        \
    return fn(ctx, args, nargs, false);                                                          \
  }                                                                                              \
  tm_status name##_nhwc_prepare(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {   \
    return fn(ctx, args, nargs, true);                                                           \
  }

/* A body shared by a kernel's entry point and its prepare step, inlined into both (the entry
 * point's code stays what it was without a prepare step). */
#if defined(__GNUC__)
#define TM_ENTRY_BODY static inline __attribute__((always_inline))
#else
#define TM_ENTRY_BODY static inline
#endif

/* A scratch tensor (1-D bytes) with at least `needed` bytes. */
bool tm_scratch_arg(tm_value *const *args, size_t i, size_t needed);

/* torch's pooling output size (dilation 1) including its ceil_mode rule; 0 if empty. For
 * kernel >= 1 and pad, stride in [0, INT16_MAX] / [1, INT16_MAX] (what the callers check). */
int32_t tm_pool_out_size(int32_t size, int32_t kernel, int32_t stride, int32_t pad, bool ceil_mode);

/* torch's adaptive pooling window of output o of `out` over `size`: [lo, hi) with
 * lo = floor(o * size / out), hi = ceil((o + 1) * size / out). */
/* An adaptive pool's input (argument i_input, H and W >= 1) and out (i_out: the input's N and
 * C, H and W >= 1), both legacy-size activations with NHWC memory; dims as tm_activation_arg. */
tm_status tm_adaptive_pool_args(tm_kernel_context *ctx, tm_value *const *args, size_t i_input, size_t i_out,
                                int32_t in_dims[4], int32_t out_dims[4], const int8_t **in, int8_t **out);

/* n / d for 0 < d < 2^31 and a quotient that fits 32 bits (n >> 32 < d), by 32-bit divisions:
 * a 64-bit division would link libgcc's (about 900 bytes) for these few quotients. */
uint32_t tm_udiv64_32_wide(uint32_t hi, uint32_t lo, uint32_t d);
static inline uint32_t tm_udiv64_32(uint64_t n, uint32_t d) {
  const uint32_t hi = (uint32_t)(n >> 32);
  return hi == 0 ? (uint32_t)n / d : tm_udiv64_32_wide(hi, (uint32_t)n, d);
}

static inline void tm_adaptive_span(int32_t o, int32_t out, int32_t size, int32_t *lo, int32_t *hi) {
  *lo = (int32_t)tm_udiv64_32((uint64_t)(uint32_t)o * (uint32_t)size, (uint32_t)out);
  *hi = (int32_t)tm_udiv64_32((uint64_t)(uint32_t)(o + 1) * (uint32_t)size + (uint32_t)out - 1u, (uint32_t)out);
}

#endif /* TORCHMCU_KERNELS_KERNEL_ARGS_H */
