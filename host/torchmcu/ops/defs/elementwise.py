"""cortex_m::quantized_add / quantized_mul: int8 elementwise with channel broadcast."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, Npu, op

QUANTIZED_ADD = op(
    "cortex_m::quantized_add.out(Tensor self, int self_zero_point, int self_multiplier,"
    " int self_shift, Tensor other, int other_zero_point, int other_multiplier, int other_shift,"
    " int output_zero_point, int output_multiplier, int output_shift, int activation_min,"
    " int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel("tm_cortex_m_quantized_add_out", "cortex_m/quantized_add.c", table_index=2),
    npu=Npu(),
)

QUANTIZED_MUL = op(
    "cortex_m::quantized_mul.out(Tensor self, int self_zero_point, Tensor other,"
    " int other_zero_point, int output_zero_point, int output_multiplier, int output_shift, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel("tm_cortex_m_quantized_mul_out", "cortex_m/quantized_mul.c", table_index=3),
    npu=Npu(),
)
