"""Reference semantics of cortex_m::pad and cortex_m::transpose, defined once in
torchmcu/ops/defs/pad.py and transpose.py and re-exported here with the layout helpers
(torchmcu/ops/layout.py).

pad works on the tensor's bytes viewed by its "pad dims" (pad_dims: ExecuTorch
1.5.1's rule, NHWC for a channels-last 4-D tensor, else the sizes): its pre/post
amounts are given per pad dim, right-aligned to 4-D. pad_tensor applies that
rule to a tensor given by bytes, sizes and dim order. transpose works on the
logical array (sizes order); the caller maps memory to logical order and back.
"""

from __future__ import annotations

from torchmcu.ops.defs.pad import pad, pad_tensor
from torchmcu.ops.defs.transpose import transpose
from torchmcu.ops.layout import is_channels_last, laid_out_as, pad_dims

__all__ = ["is_channels_last", "laid_out_as", "pad", "pad_dims", "pad_tensor", "transpose"]
