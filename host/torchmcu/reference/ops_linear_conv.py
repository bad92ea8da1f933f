"""Reference semantics of quantized_linear, quantized_conv2d and quantized_depthwise_conv2d,
defined in torchmcu/ops/defs/linear.py and conv.py; the stages import them from here.

4-D activations are numpy arrays in NHWC order (their memory layout, for both
the legacy and the `_nhwc` operator names); conv weights are OHWI
[Cout, KH, KW, Cin/groups], depthwise weights [1, KH, KW, Cout], linear weights
[Cout, Cin]. Accumulation is exact (int64).
"""

from torchmcu.ops.defs.conv import (  # noqa: F401
    conv_output_size,
    quantized_conv2d,
    quantized_depthwise_conv2d,
)
from torchmcu.ops.defs.linear import quantized_linear  # noqa: F401
