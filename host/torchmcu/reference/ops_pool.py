"""Reference semantics of quantized_avg_pool2d and quantized_max_pool2d (NHWC arrays): defined
in torchmcu/ops/defs/pool.py, re-exported here."""

from __future__ import annotations

from torchmcu.ops.defs.pool import quantized_avg_pool2d, quantized_max_pool2d, windows
from torchmcu.ops.layout import pair, pool_output_size

__all__ = ["pair", "pool_output_size", "quantized_avg_pool2d", "quantized_max_pool2d", "windows"]
