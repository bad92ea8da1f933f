"""cortex_m::transpose: a permutation of the dims, any element size."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, Npu, op

TRANSPOSE = op(
    "cortex_m::transpose.out(Tensor input, int[] perm, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel("tm_cortex_m_transpose_out", "cortex_m/transpose.c", table_index=15),
    npu=Npu(),
)
