"""cortex_m::pad: constant padding of up to four pad dims."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, Npu, op

PAD = op(
    "cortex_m::pad.out(Tensor input, int[] pre_pad, int[] post_pad, int pad_value, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel("tm_cortex_m_pad_out", "cortex_m/pad.c", table_index=14),
    npu=Npu(),
)
