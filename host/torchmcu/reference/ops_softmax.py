"""Reference semantics of cortex_m::softmax (CMSIS-NN's integer arm_softmax_s8), defined once
in torchmcu/ops/defs/softmax.py and re-exported here."""

from __future__ import annotations

from torchmcu.ops.defs.softmax import softmax

__all__ = ["softmax"]
