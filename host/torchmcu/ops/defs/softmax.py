"""cortex_m::softmax: int8 softmax along the last dimension (CMSIS-NN arm_softmax_s8)."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, op

SOFTMAX = op(
    "cortex_m::softmax.out(Tensor input, int dim, int input_zero_point, int output_zero_point,"
    " int input_multiplier, int input_shift, int diff_min, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel("tm_cortex_m_softmax_out", "cortex_m/softmax.c", table_index=13),
)
