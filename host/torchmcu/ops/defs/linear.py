"""cortex_m::quantized_linear (note activation_max before activation_min, as ExecuTorch)."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, Npu, op

QUANTIZED_LINEAR = op(
    "cortex_m::quantized_linear.out(Tensor input, Tensor weights, Tensor? bias,"
    " Tensor? kernel_sum, int input_offset, int filter_offset, int output_offset,"
    " int[] requantize_multipliers, int[] requantize_shifts, int activation_max,"
    " int activation_min, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel("tm_cortex_m_quantized_linear_out", "cortex_m/quantized_linear.c", table_index=4),
    npu=Npu(),
)
