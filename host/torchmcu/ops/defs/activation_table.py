"""cortex_m::quantized_activation: an int8 activation as a 256-entry lookup table."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, Npu, op

QUANTIZED_ACTIVATION = op(
    "cortex_m::quantized_activation.out(Tensor input, Tensor lut, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel(
        "tm_cortex_m_quantized_activation_out", "cortex_m/quantized_activation.c", table_index=16
    ),
    npu=Npu(doc="TOSA TABLE (int8, exact)"),
)
