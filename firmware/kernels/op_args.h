/* Argument positions of every operator: one enum per operator, named after its C entry point
 * (tm_cortex_m_pad_out -> CORTEX_M_PAD). TM_ARG(CORTEX_M_PAD, PRE_PAD) is the position of
 * pre_pad in a cortex_m::pad.out call, TM_NARGS(CORTEX_M_PAD) the number of schema arguments;
 * a KernelCall passes one returned value after them when the schema returns one.
 *
 * Generated from host/torchmcu/ops/defs by `python -m torchmcu.ops.generate`: do not edit.
 * tests/ops/test_generated.py fails when this copy is stale.
 */
#ifndef TM_OP_ARGS_H
#define TM_OP_ARGS_H

#define TM_ARG(op, a) TM_##op##_ARG_##a
#define TM_NARGS(op) TM_##op##_NARGS

/* cortex_m::quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
 *   int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZE_PER_TENSOR_ARG_INPUT,
  TM_CORTEX_M_QUANTIZE_PER_TENSOR_ARG_SCALE,
  TM_CORTEX_M_QUANTIZE_PER_TENSOR_ARG_ZERO_POINT,
  TM_CORTEX_M_QUANTIZE_PER_TENSOR_ARG_QUANT_MIN,
  TM_CORTEX_M_QUANTIZE_PER_TENSOR_ARG_QUANT_MAX,
  TM_CORTEX_M_QUANTIZE_PER_TENSOR_ARG_DTYPE,
  TM_CORTEX_M_QUANTIZE_PER_TENSOR_ARG_OUT,
  TM_CORTEX_M_QUANTIZE_PER_TENSOR_NARGS
};

/* cortex_m::dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
 *   int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_DEQUANTIZE_PER_TENSOR_ARG_INPUT,
  TM_CORTEX_M_DEQUANTIZE_PER_TENSOR_ARG_SCALE,
  TM_CORTEX_M_DEQUANTIZE_PER_TENSOR_ARG_ZERO_POINT,
  TM_CORTEX_M_DEQUANTIZE_PER_TENSOR_ARG_QUANT_MIN,
  TM_CORTEX_M_DEQUANTIZE_PER_TENSOR_ARG_QUANT_MAX,
  TM_CORTEX_M_DEQUANTIZE_PER_TENSOR_ARG_DTYPE,
  TM_CORTEX_M_DEQUANTIZE_PER_TENSOR_ARG_OUT,
  TM_CORTEX_M_DEQUANTIZE_PER_TENSOR_NARGS
};

/* cortex_m::quantized_add.out(Tensor self, int self_zero_point, int self_multiplier,
 *   int self_shift, Tensor other, int other_zero_point, int other_multiplier, int other_shift,
 *   int output_zero_point, int output_multiplier, int output_shift, int activation_min,
 *   int activation_max, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_ADD_ARG_SELF,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_SELF_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_SELF_MULTIPLIER,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_SELF_SHIFT,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_OTHER,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_OTHER_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_OTHER_MULTIPLIER,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_OTHER_SHIFT,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_OUTPUT_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_OUTPUT_MULTIPLIER,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_OUTPUT_SHIFT,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_ACTIVATION_MIN,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_ACTIVATION_MAX,
  TM_CORTEX_M_QUANTIZED_ADD_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_ADD_NARGS
};

/* cortex_m::quantized_mul.out(Tensor self, int self_zero_point, Tensor other,
 *   int other_zero_point, int output_zero_point, int output_multiplier, int output_shift, *,
 *   Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_MUL_ARG_SELF,
  TM_CORTEX_M_QUANTIZED_MUL_ARG_SELF_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_MUL_ARG_OTHER,
  TM_CORTEX_M_QUANTIZED_MUL_ARG_OTHER_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_MUL_ARG_OUTPUT_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_MUL_ARG_OUTPUT_MULTIPLIER,
  TM_CORTEX_M_QUANTIZED_MUL_ARG_OUTPUT_SHIFT,
  TM_CORTEX_M_QUANTIZED_MUL_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_MUL_NARGS
};

/* cortex_m::quantized_linear.out(Tensor input, Tensor weights, Tensor? bias,
 *   Tensor? kernel_sum, int input_offset, int filter_offset, int output_offset,
 *   int[] requantize_multipliers, int[] requantize_shifts, int activation_max,
 *   int activation_min, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_WEIGHTS,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_BIAS,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_KERNEL_SUM,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_INPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_FILTER_OFFSET,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_OUTPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_REQUANTIZE_MULTIPLIERS,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_REQUANTIZE_SHIFTS,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_ACTIVATION_MAX,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_ACTIVATION_MIN,
  TM_CORTEX_M_QUANTIZED_LINEAR_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_LINEAR_NARGS
};

/* cortex_m::quantized_conv2d.out(Tensor input, Tensor weight, Tensor? bias, int[] stride,
 *   int[] padding, int[] dilation, int input_offset, int output_offset,
 *   Tensor requantize_multipliers, Tensor requantize_shifts, int activation_min,
 *   int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_WEIGHT,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_BIAS,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_STRIDE,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_PADDING,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_DILATION,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_INPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_OUTPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_REQUANTIZE_MULTIPLIERS,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_REQUANTIZE_SHIFTS,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_ACTIVATION_MIN,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_ACTIVATION_MAX,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_SCRATCH,
  TM_CORTEX_M_QUANTIZED_CONV2D_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_CONV2D_NARGS
};

/* cortex_m::quantized_conv2d_nhwc.out(Tensor input, Tensor weight, Tensor? bias, int[] stride,
 *   int[] padding, int[] dilation, int input_offset, int output_offset,
 *   Tensor requantize_multipliers, Tensor requantize_shifts, int activation_min,
 *   int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_WEIGHT,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_BIAS,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_STRIDE,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_PADDING,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_DILATION,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_INPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_OUTPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_REQUANTIZE_MULTIPLIERS,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_REQUANTIZE_SHIFTS,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_ACTIVATION_MIN,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_ACTIVATION_MAX,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_SCRATCH,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_CONV2D_NHWC_NARGS
};

/* cortex_m::quantized_depthwise_conv2d.out(Tensor input, Tensor weight, Tensor? bias,
 *   int[] stride, int[] padding, int[] dilation, int depth_multiplier, int input_offset,
 *   int output_offset, Tensor requantize_multipliers, Tensor requantize_shifts,
 *   int activation_min, int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_WEIGHT,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_BIAS,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_STRIDE,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_PADDING,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_DILATION,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_DEPTH_MULTIPLIER,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_INPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_OUTPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_REQUANTIZE_MULTIPLIERS,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_REQUANTIZE_SHIFTS,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_ACTIVATION_MIN,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_ACTIVATION_MAX,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_SCRATCH,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NARGS
};

/* cortex_m::quantized_depthwise_conv2d_nhwc.out(Tensor input, Tensor weight, Tensor? bias,
 *   int[] stride, int[] padding, int[] dilation, int depth_multiplier, int input_offset,
 *   int output_offset, Tensor requantize_multipliers, Tensor requantize_shifts,
 *   int activation_min, int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_WEIGHT,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_BIAS,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_STRIDE,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_PADDING,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_DILATION,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_DEPTH_MULTIPLIER,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_INPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_OUTPUT_OFFSET,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_REQUANTIZE_MULTIPLIERS,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_REQUANTIZE_SHIFTS,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_ACTIVATION_MIN,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_ACTIVATION_MAX,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_SCRATCH,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_NHWC_NARGS
};

/* cortex_m::quantized_avg_pool2d.out(Tensor input, int[] kernel_size, int[] stride,
 *   int[] padding, bool ceil_mode, int zero_point, int multiplier, int shift, Tensor scratch,
 *   *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_KERNEL_SIZE,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_STRIDE,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_PADDING,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_CEIL_MODE,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_MULTIPLIER,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_SHIFT,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_SCRATCH,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NARGS
};

/* cortex_m::quantized_avg_pool2d_nhwc.out(Tensor input, int[] kernel_size, int[] stride,
 *   int[] padding, bool ceil_mode, int zero_point, int multiplier, int shift, Tensor scratch,
 *   *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_KERNEL_SIZE,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_STRIDE,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_PADDING,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_CEIL_MODE,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_MULTIPLIER,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_SHIFT,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_SCRATCH,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_AVG_POOL2D_NHWC_NARGS
};

/* cortex_m::quantized_max_pool2d.out(Tensor input, int[] kernel_size, int[] stride,
 *   int[] padding, int[] dilation, bool ceil_mode, int input_zero_point, int output_zero_point,
 *   int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_KERNEL_SIZE,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_STRIDE,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_PADDING,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_DILATION,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_CEIL_MODE,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_INPUT_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_OUTPUT_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_ACTIVATION_MIN,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_ACTIVATION_MAX,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NARGS
};

/* cortex_m::quantized_max_pool2d_nhwc.out(Tensor input, int[] kernel_size, int[] stride,
 *   int[] padding, int[] dilation, bool ceil_mode, int input_zero_point, int output_zero_point,
 *   int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_KERNEL_SIZE,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_STRIDE,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_PADDING,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_DILATION,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_CEIL_MODE,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_INPUT_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_OUTPUT_ZERO_POINT,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_ACTIVATION_MIN,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_ACTIVATION_MAX,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_MAX_POOL2D_NHWC_NARGS
};

/* cortex_m::softmax.out(Tensor input, int dim, int input_zero_point, int output_zero_point,
 *   int input_multiplier, int input_shift, int diff_min, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_SOFTMAX_ARG_INPUT,
  TM_CORTEX_M_SOFTMAX_ARG_DIM,
  TM_CORTEX_M_SOFTMAX_ARG_INPUT_ZERO_POINT,
  TM_CORTEX_M_SOFTMAX_ARG_OUTPUT_ZERO_POINT,
  TM_CORTEX_M_SOFTMAX_ARG_INPUT_MULTIPLIER,
  TM_CORTEX_M_SOFTMAX_ARG_INPUT_SHIFT,
  TM_CORTEX_M_SOFTMAX_ARG_DIFF_MIN,
  TM_CORTEX_M_SOFTMAX_ARG_OUT,
  TM_CORTEX_M_SOFTMAX_NARGS
};

/* cortex_m::pad.out(Tensor input, int[] pre_pad, int[] post_pad, int pad_value, *,
 *   Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_PAD_ARG_INPUT,
  TM_CORTEX_M_PAD_ARG_PRE_PAD,
  TM_CORTEX_M_PAD_ARG_POST_PAD,
  TM_CORTEX_M_PAD_ARG_PAD_VALUE,
  TM_CORTEX_M_PAD_ARG_OUT,
  TM_CORTEX_M_PAD_NARGS
};

/* cortex_m::transpose.out(Tensor input, int[] perm, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_TRANSPOSE_ARG_INPUT,
  TM_CORTEX_M_TRANSPOSE_ARG_PERM,
  TM_CORTEX_M_TRANSPOSE_ARG_OUT,
  TM_CORTEX_M_TRANSPOSE_NARGS
};

/* cortex_m::quantized_activation.out(Tensor input, Tensor lut, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_CORTEX_M_QUANTIZED_ACTIVATION_ARG_INPUT,
  TM_CORTEX_M_QUANTIZED_ACTIVATION_ARG_LUT,
  TM_CORTEX_M_QUANTIZED_ACTIVATION_ARG_OUT,
  TM_CORTEX_M_QUANTIZED_ACTIVATION_NARGS
};

/* torchmcu::slice_copy.out(Tensor self, int dim, int start, int end, int step, *,
 *   Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_TORCHMCU_SLICE_COPY_ARG_SELF,
  TM_TORCHMCU_SLICE_COPY_ARG_DIM,
  TM_TORCHMCU_SLICE_COPY_ARG_START,
  TM_TORCHMCU_SLICE_COPY_ARG_END,
  TM_TORCHMCU_SLICE_COPY_ARG_STEP,
  TM_TORCHMCU_SLICE_COPY_ARG_OUT,
  TM_TORCHMCU_SLICE_COPY_NARGS
};

/* dim_order_ops::_clone_dim_order.out(Tensor self, *, bool non_blocking=False,
 *   int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_CLONE_DIM_ORDER_ARG_SELF,
  TM_PORTABLE_CLONE_DIM_ORDER_ARG_NON_BLOCKING,
  TM_PORTABLE_CLONE_DIM_ORDER_ARG_DIM_ORDER,
  TM_PORTABLE_CLONE_DIM_ORDER_ARG_OUT,
  TM_PORTABLE_CLONE_DIM_ORDER_NARGS
};

/* aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1,
 *   Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_ADDMM_ARG_SELF,
  TM_PORTABLE_ADDMM_ARG_MAT1,
  TM_PORTABLE_ADDMM_ARG_MAT2,
  TM_PORTABLE_ADDMM_ARG_BETA,
  TM_PORTABLE_ADDMM_ARG_ALPHA,
  TM_PORTABLE_ADDMM_ARG_OUT,
  TM_PORTABLE_ADDMM_NARGS
};

/* aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_MM_ARG_SELF,
  TM_PORTABLE_MM_ARG_MAT2,
  TM_PORTABLE_MM_ARG_OUT,
  TM_PORTABLE_MM_NARGS
};

/* aten::convolution.out(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride,
 *   SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding,
 *   SymInt groups, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_CONVOLUTION_ARG_INPUT,
  TM_PORTABLE_CONVOLUTION_ARG_WEIGHT,
  TM_PORTABLE_CONVOLUTION_ARG_BIAS,
  TM_PORTABLE_CONVOLUTION_ARG_STRIDE,
  TM_PORTABLE_CONVOLUTION_ARG_PADDING,
  TM_PORTABLE_CONVOLUTION_ARG_DILATION,
  TM_PORTABLE_CONVOLUTION_ARG_TRANSPOSED,
  TM_PORTABLE_CONVOLUTION_ARG_OUTPUT_PADDING,
  TM_PORTABLE_CONVOLUTION_ARG_GROUPS,
  TM_PORTABLE_CONVOLUTION_ARG_OUT,
  TM_PORTABLE_CONVOLUTION_NARGS
};

/* aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_ADD_ARG_SELF,
  TM_PORTABLE_ADD_ARG_OTHER,
  TM_PORTABLE_ADD_ARG_ALPHA,
  TM_PORTABLE_ADD_ARG_OUT,
  TM_PORTABLE_ADD_NARGS
};

/* aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_MUL_ARG_SELF,
  TM_PORTABLE_MUL_ARG_OTHER,
  TM_PORTABLE_MUL_ARG_OUT,
  TM_PORTABLE_MUL_NARGS
};

/* aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_RELU_ARG_SELF,
  TM_PORTABLE_RELU_ARG_OUT,
  TM_PORTABLE_RELU_NARGS
};

/* aten::sigmoid.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_SIGMOID_ARG_SELF,
  TM_PORTABLE_SIGMOID_ARG_OUT,
  TM_PORTABLE_SIGMOID_NARGS
};

/* aten::tanh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_TANH_ARG_SELF,
  TM_PORTABLE_TANH_ARG_OUT,
  TM_PORTABLE_TANH_NARGS
};

/* aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_SOFTMAX_ARG_SELF,
  TM_PORTABLE_SOFTMAX_ARG_DIM,
  TM_PORTABLE_SOFTMAX_ARG_HALF_TO_FLOAT,
  TM_PORTABLE_SOFTMAX_ARG_OUT,
  TM_PORTABLE_SOFTMAX_NARGS
};

/* aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
 *   Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_MEAN_ARG_SELF,
  TM_PORTABLE_MEAN_ARG_DIM,
  TM_PORTABLE_MEAN_ARG_KEEPDIM,
  TM_PORTABLE_MEAN_ARG_DTYPE,
  TM_PORTABLE_MEAN_ARG_OUT,
  TM_PORTABLE_MEAN_NARGS
};

/* aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_VIEW_COPY_ARG_SELF,
  TM_PORTABLE_VIEW_COPY_ARG_SIZE,
  TM_PORTABLE_VIEW_COPY_ARG_OUT,
  TM_PORTABLE_VIEW_COPY_NARGS
};

/* aten::permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_PERMUTE_COPY_ARG_SELF,
  TM_PORTABLE_PERMUTE_COPY_ARG_DIMS,
  TM_PORTABLE_PERMUTE_COPY_ARG_OUT,
  TM_PORTABLE_PERMUTE_COPY_NARGS
};

/* aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_CAT_ARG_TENSORS,
  TM_PORTABLE_CAT_ARG_DIM,
  TM_PORTABLE_CAT_ARG_OUT,
  TM_PORTABLE_CAT_NARGS
};

/* aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *,
 *   ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_SUM_INTLIST_ARG_SELF,
  TM_PORTABLE_SUM_INTLIST_ARG_DIM,
  TM_PORTABLE_SUM_INTLIST_ARG_KEEPDIM,
  TM_PORTABLE_SUM_INTLIST_ARG_DTYPE,
  TM_PORTABLE_SUM_INTLIST_ARG_OUT,
  TM_PORTABLE_SUM_INTLIST_NARGS
};

/* aten::gt.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_GT_SCALAR_ARG_SELF,
  TM_PORTABLE_GT_SCALAR_ARG_OTHER,
  TM_PORTABLE_GT_SCALAR_ARG_OUT,
  TM_PORTABLE_GT_SCALAR_NARGS
};

/* aten::ge.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_GE_SCALAR_ARG_SELF,
  TM_PORTABLE_GE_SCALAR_ARG_OTHER,
  TM_PORTABLE_GE_SCALAR_ARG_OUT,
  TM_PORTABLE_GE_SCALAR_NARGS
};

/* aten::lt.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_LT_SCALAR_ARG_SELF,
  TM_PORTABLE_LT_SCALAR_ARG_OTHER,
  TM_PORTABLE_LT_SCALAR_ARG_OUT,
  TM_PORTABLE_LT_SCALAR_NARGS
};

/* aten::le.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_LE_SCALAR_ARG_SELF,
  TM_PORTABLE_LE_SCALAR_ARG_OTHER,
  TM_PORTABLE_LE_SCALAR_ARG_OUT,
  TM_PORTABLE_LE_SCALAR_NARGS
};

/* aten::sym_size.int(Tensor self, int dim) -> SymInt */
enum {
  TM_PRIM_SYM_SIZE_INT_ARG_SELF,
  TM_PRIM_SYM_SIZE_INT_ARG_DIM,
  TM_PRIM_SYM_SIZE_INT_NARGS
};

/* aten::select_copy.int_out(Tensor self, int dim, SymInt index, *,
 *   Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_SELECT_COPY_INT_ARG_SELF,
  TM_PORTABLE_SELECT_COPY_INT_ARG_DIM,
  TM_PORTABLE_SELECT_COPY_INT_ARG_INDEX,
  TM_PORTABLE_SELECT_COPY_INT_ARG_OUT,
  TM_PORTABLE_SELECT_COPY_INT_NARGS
};

/* executorch_prim::et_copy_index.tensor(Tensor(a!) self, Tensor copy_from, SymInt index) -> () */
enum {
  TM_PRIM_ET_COPY_INDEX_TENSOR_ARG_SELF,
  TM_PRIM_ET_COPY_INDEX_TENSOR_ARG_COPY_FROM,
  TM_PRIM_ET_COPY_INDEX_TENSOR_ARG_INDEX,
  TM_PRIM_ET_COPY_INDEX_TENSOR_NARGS
};

/* executorch_prim::add.Scalar(Scalar a, Scalar b) -> Scalar */
enum {
  TM_PRIM_ADD_SCALAR_ARG_A,
  TM_PRIM_ADD_SCALAR_ARG_B,
  TM_PRIM_ADD_SCALAR_NARGS
};

/* executorch_prim::sub.Scalar(Scalar a, Scalar b) -> Scalar */
enum {
  TM_PRIM_SUB_SCALAR_ARG_A,
  TM_PRIM_SUB_SCALAR_ARG_B,
  TM_PRIM_SUB_SCALAR_NARGS
};

/* executorch_prim::eq.Scalar(Scalar a, Scalar b) -> bool */
enum {
  TM_PRIM_EQ_SCALAR_ARG_A,
  TM_PRIM_EQ_SCALAR_ARG_B,
  TM_PRIM_EQ_SCALAR_NARGS
};

/* aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight,
 *   Tensor? bias, float eps, *, Tensor(a!) out0, Tensor(b!) out1,
 *   Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!)) */
enum {
  TM_PORTABLE_NATIVE_LAYER_NORM_ARG_INPUT,
  TM_PORTABLE_NATIVE_LAYER_NORM_ARG_NORMALIZED_SHAPE,
  TM_PORTABLE_NATIVE_LAYER_NORM_ARG_WEIGHT,
  TM_PORTABLE_NATIVE_LAYER_NORM_ARG_BIAS,
  TM_PORTABLE_NATIVE_LAYER_NORM_ARG_EPS,
  TM_PORTABLE_NATIVE_LAYER_NORM_ARG_OUT0,
  TM_PORTABLE_NATIVE_LAYER_NORM_ARG_OUT1,
  TM_PORTABLE_NATIVE_LAYER_NORM_ARG_OUT2,
  TM_PORTABLE_NATIVE_LAYER_NORM_NARGS
};

/* aten::gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out) -> Tensor(a!) */
enum {
  TM_PORTABLE_GELU_ARG_SELF,
  TM_PORTABLE_GELU_ARG_APPROXIMATE,
  TM_PORTABLE_GELU_ARG_OUT,
  TM_PORTABLE_GELU_NARGS
};

#endif
