"""Scratch bytes each kernel needs: what the memory planner reserves for `scratch` arguments.

Mirrors the tm_<op>_scratch_bytes functions beside the C kernels: each definition's
scratch_bytes (the convolutions' and the pools': torchmcu/ops/defs/conv.py, pool.py). The scalar kernels need none and accept any scratch; the Helium (MVE) paths want these
sizes and fall back to the scalar path with less, so the planner reserves them for every
target (one .pte runs on host and device).
"""

from __future__ import annotations

from collections.abc import Callable

from torchmcu.ops import views
from torchmcu.ops.defs.conv import (  # noqa: F401 (the stages and tests read them here)
    CONV_MVE_COLUMNS,
    quantized_conv2d_scratch_bytes,
    quantized_depthwise_conv2d_scratch_bytes,
)


# Every operator with a scratch argument sizes it in its definition (tm_<op>_scratch_bytes).
SCRATCH_BYTES: dict[str, Callable[..., int]] = views.scratch_bytes()
