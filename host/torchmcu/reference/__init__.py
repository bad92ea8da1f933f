"""Integer reference semantics of the cortex_m operators (the project's oracle).

See docs/operators.md for the contract. 4-D activations are numpy arrays in
NHWC (memory) order; the interpreter maps program tensors to these arrays.
"""

from torchmcu.reference.ops_elementwise import (
    dequantize_per_tensor,
    quantize_per_tensor,
    quantized_add,
    quantized_mul,
)
from torchmcu.reference.ops_layout import pad, transpose
from torchmcu.reference.ops_linear_conv import (
    quantized_conv2d,
    quantized_depthwise_conv2d,
    quantized_linear,
)
from torchmcu.reference.ops_pool import quantized_avg_pool2d, quantized_max_pool2d
from torchmcu.reference.ops_softmax import softmax
from torchmcu.reference.quant import quantize_multiplier, requantize, single_rounding_multiplier

__all__ = [
    "dequantize_per_tensor",
    "pad",
    "quantize_multiplier",
    "single_rounding_multiplier",
    "quantize_per_tensor",
    "quantized_add",
    "quantized_avg_pool2d",
    "quantized_conv2d",
    "quantized_depthwise_conv2d",
    "quantized_linear",
    "quantized_max_pool2d",
    "quantized_mul",
    "requantize",
    "softmax",
    "transpose",
]
