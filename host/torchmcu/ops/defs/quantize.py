"""cortex_m::quantize_per_tensor / dequantize_per_tensor: the float <-> int8 boundaries."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, op

_FLOAT = "works on float tensors; no Ethos-U runs float"

QUANTIZE = op(
    "cortex_m::quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,"
    " int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel(
        "tm_cortex_m_quantize_per_tensor_out", "cortex_m/quantize_per_tensor.c", table_index=0
    ),
    no_npu=_FLOAT,
)

DEQUANTIZE = op(
    "cortex_m::dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,"
    " int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel(
        "tm_cortex_m_dequantize_per_tensor_out", "cortex_m/dequantize_per_tensor.c", table_index=1
    ),
    no_npu=_FLOAT,
)
