/* cortex_m::transpose.out - permutes the logical dims of a tensor of any element size
 * (docs/operators.md). Both tensors are addressed through their own dim orders. */
#include <string.h>

#include "cortex_m_kernels.h"
#include "kernel_args.h"
#include "mve_requantize.h" /* TM_KERNELS_USE_MVE */
#include "op_args.h"

#if TM_KERNELS_USE_MVE
#include <arm_mve.h>
#endif

#define A(x) TM_ARG(CORTEX_M_TRANSPOSE, x)

/* Element strides of each logical dim. */
static void logical_strides(const tm_tensor *t, int64_t strides[TM_MAX_DIMS]) {
  int64_t step = 1;
  for (int k = (int)t->dim - 1; k >= 0; --k) {
    strides[t->dim_order[k]] = step;
    step *= t->sizes[t->dim_order[k]];
  }
}

#if TM_KERNELS_USE_MVE
/* The run's loop with LANES lanes of element type T (intrinsic suffix SFX, lane predicate VCTP). */
#define TRANSPOSE_RUN_LOOP(LANES, T, SFX, VCTP)                                                      \
  do {                                                                                             \
    const T lane = vidupq_n_##SFX(0u, 1);                                                          \
    const T at_s = vmulq_n_##SFX(lane, (uint32_t)ss), at_d = vmulq_n_##SFX(lane, (uint32_t)ds);    \
    for (int32_t j = 0; j < run; j += LANES, src += LANES * ss, dst += LANES * ds) {               \
      const mve_pred16_t p = VCTP((uint32_t)(run - j));                                            \
      const T v = ss == 1 ? vldrbq_z_##SFX(src, p) : vldrbq_gather_offset_z_##SFX(src, at_s, p);   \
      if (ds == 1) {                                                                               \
        vstrbq_p_##SFX(dst, v, p);                                                                 \
      } else {                                                                                     \
        vstrbq_scatter_offset_p_##SFX(dst, at_d, v, p);                                            \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* One run of `run` int8 elements, source `ss` and destination `ds` elements apart, on Helium:
 * each side loaded/stored contiguously when its step is 1, else gathered/scattered, 16 lanes
 * with byte offsets when 15 steps of both sides fit in a byte, else 4 lanes with word
 * offsets. Layout changes around a model (NCHW <-> NHWC) have one side contiguous:
 * MobileNet's 3x96x96 input 5.5 -> 0.7 instructions per byte. */
static void transpose_run_s8(uint8_t *dst, const uint8_t *src, int32_t run, int32_t ss, int32_t ds) {
  if (ss * 15 <= 255 && ds * 15 <= 255) {
    TRANSPOSE_RUN_LOOP(16, uint8x16_t, u8, vctp8q);
  } else {
    TRANSPOSE_RUN_LOOP(4, uint32x4_t, u32, vctp32q);
  }
}
#endif

/* Whether transpose_run_s8 takes runs of this element size and these steps (word offsets). */
static bool transpose_vector_run(size_t esize, int64_t ss, int64_t ds) {
  return TM_KERNELS_USE_MVE && esize == 1 && ss > 0 && ds > 0 && ss <= INT32_MAX / 16 && ds <= INT32_MAX / 16;
}

tm_status tm_cortex_m_transpose_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(CORTEX_M_TRANSPOSE));
  if (st != TM_OK) {
    return st;
  }
  const tm_tensor *in = tm_tensor_arg(args, A(INPUT), -1, 1, TM_MAX_DIMS);
  TM_ARG_CHECK(ctx, in != NULL && tm_element_size(in->scalar_type) != 0, A(INPUT));
  const int rank = in->dim;
  const int64_t *items = NULL;
  uint32_t len = 0;
  TM_ARG_CHECK(ctx, tm_int_list_arg(args, A(PERM), (uint32_t)rank, (uint32_t)rank, &items, &len), A(PERM));
  int perm[TM_MAX_DIMS];
  uint32_t seen = 0;
  for (int k = 0; k < rank; ++k) {
    TM_ARG_CHECK(ctx, items[k] >= -rank && items[k] < rank, A(PERM));
    perm[k] = (int)((items[k] + rank) % rank);
    TM_ARG_CHECK(ctx, (seen & (1u << perm[k])) == 0, A(PERM));
    seen |= 1u << perm[k];
  }
  tm_tensor *out = tm_tensor_arg(args, A(OUT), in->scalar_type, rank, rank);
  bool out_ok = out != NULL && tm_tensors_disjoint(in, out); /* element copies: no overlap */
  for (int k = 0; out_ok && k < rank; ++k) {
    out_ok = out->sizes[k] == in->sizes[perm[k]];
  }
  TM_ARG_CHECK(ctx, out_ok, A(OUT));

  const size_t esize = tm_element_size(in->scalar_type);
  int64_t in_strides[TM_MAX_DIMS], out_strides[TM_MAX_DIMS];
  logical_strides(in, in_strides);
  logical_strides(out, out_strides);
  /* The output's logical dims with each one's source step, size-1 dims dropped and
   * neighbours merged where both sides step uniformly across them (NCHW -> NHWC is then
   * three runs of H*W, not 3H runs of W). */
  int32_t size[TM_MAX_DIMS];
  int64_t ss_of[TM_MAX_DIMS], ds_of[TM_MAX_DIMS];
  int dims = 0;
  for (int k = 0; k < rank; ++k) {
    const int32_t n = out->sizes[k];
    const int64_t ss = in_strides[perm[k]], ds = out_strides[k];
    if (n == 1) {
      continue;
    }
    if (dims > 0 && ss_of[dims - 1] == ss * n && ds_of[dims - 1] == ds * n) {
      size[dims - 1] *= n;
      ss_of[dims - 1] = ss;
      ds_of[dims - 1] = ds;
      continue;
    }
    size[dims] = n;
    ss_of[dims] = ss;
    ds_of[dims] = ds;
    ++dims;
  }
  if (dims == 0) { /* one element (or every dim 1) */
    size[0] = 1;
    ss_of[0] = ds_of[0] = 1;
    dims = 1;
  }
  /* Walk the rest with the longest dim as the inner run (a channel shuffle's out
   * [N*H*W, C/g, g] runs along N*H*W, not along g) or, on Helium, the longest with one side
   * contiguous if it holds two vectors (shorter runs cost more overhead than they save). The
   * offsets move with the index (odometer) instead of being recomputed per element. */
  int inner = dims - 1;
  for (int k = 0; k < dims; ++k) {
    inner = size[k] > size[inner] ? k : inner;
  }
#if TM_KERNELS_USE_MVE
  if (esize == 1) {
    int best = -1;
    for (int k = 0; k < dims; ++k) {
      const bool contiguous = ss_of[k] == 1 || ds_of[k] == 1;
      if (contiguous && size[k] >= 32 && (best < 0 || size[k] > size[best])) {
        best = k;
      }
    }
    inner = best >= 0 ? best : inner;
  }
#endif
  const int32_t run = size[inner];
  const int64_t ss = ss_of[inner], ds = ds_of[inner];
  int32_t idx[TM_MAX_DIMS] = {0};
  const uint8_t *src = (const uint8_t *)in->data;
  uint8_t *dst = (uint8_t *)out->data;
  int64_t s = 0, d = 0;
  const bool vector_run = transpose_vector_run(esize, ss, ds);
  for (uint32_t n = 0; n < out->numel; n += (uint32_t)run) {
    if (vector_run) {
#if TM_KERNELS_USE_MVE
      transpose_run_s8(dst + d, src + s, run, (int32_t)ss, (int32_t)ds);
#endif
    } else if (esize == 1) {
      for (int32_t j = 0; j < run; ++j) {
        dst[d + j * ds] = src[s + j * ss];
      }
    } else {
      for (int32_t j = 0; j < run; ++j) {
        memcpy(dst + (size_t)(d + j * ds) * esize, src + (size_t)(s + j * ss) * esize, esize);
      }
    }
    for (int k = dims - 1; k >= 0; --k) {
      if (k == inner) {
        continue;
      }
      s += ss_of[k];
      d += ds_of[k];
      if (++idx[k] < size[k]) {
        break;
      }
      s -= ss_of[k] * size[k];
      d -= ds_of[k] * size[k];
      idx[k] = 0;
    }
  }
  return TM_OK;
}
