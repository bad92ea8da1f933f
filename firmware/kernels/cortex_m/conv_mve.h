/*
 * The int8 convolution's Helium (MVE) path, shared by quantized_conv2d and by the depthwise
 * kernel's single-input-channel form (a depthwise convolution of one input channel with
 * depth multiplier Cout is a convolution with Cin = 1). A common source of every image
 * (torchmcu.ops.generate's common sources): unused, --gc-sections drops it.
 */
#ifndef TORCHMCU_KERNELS_CONV_MVE_H
#define TORCHMCU_KERNELS_CONV_MVE_H

#include "kernel_args.h"
#include "mve_requantize.h" /* TM_KERNELS_USE_MVE */

typedef struct {
  const int8_t *input;
  const int8_t *weight;
  int8_t *out;
  int32_t in_dims[4];  /* N, H, W, C */
  int32_t out_dims[4]; /* N, OH, OW, Cout */
  int32_t kh, kw, cin_g, groups;
  tm_window win;
  tm_conv_quant q;
} tm_conv_params;

/* Columns (output pixels) the Helium path computes at once. */
#define TM_CONV_COLS 4

static inline size_t tm_round_up(size_t v, size_t a) { return (v + a - 1u) / a * a; }

/* Scratch of the Helium path (tm_quantized_conv2d_scratch_bytes): 16 bytes of alignment slack,
 * the int32 constant term per output channel, TM_CONV_COLS interleaved columns and, for
 * kernels larger than 1x1, one im2col staging column, of KH*KW*Cin_g bytes each rounded to 16. */
static inline size_t tm_conv_mve_scratch_bytes(size_t cout, size_t kh, size_t kw, size_t cin_g) {
  const size_t k = kh * kw * cin_g;
  return 16u + 4u * tm_round_up(cout, 4u) + (TM_CONV_COLS + (kh * kw > 1 ? 1u : 0u)) * tm_round_up(k, 16u);
}

#if TM_KERNELS_USE_MVE
/* The convolution p on Helium, with tm_conv_mve_scratch_bytes of 16-byte aligned scratch. */
void tm_conv_mve(const tm_conv_params *p, uint8_t *scratch);
#endif

#endif
