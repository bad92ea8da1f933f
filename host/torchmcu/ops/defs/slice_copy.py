"""torchmcu::slice_copy: our operator (ExecuTorch's Cortex-M library has no slice), with the
argument list of the portable aten::slice_copy.Tensor_out, bounds resolved by the exporter."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, Npu, op

SLICE_COPY = op(
    "torchmcu::slice_copy.out(Tensor self, int dim, int start, int end, int step, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel("tm_torchmcu_slice_copy_out", "cortex_m/slice_copy.c", table_index=17),
    npu=Npu(doc="TOSA SLICE (step 1 only; other steps stay on the CPU)"),
)
