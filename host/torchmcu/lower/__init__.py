"""Lowering of a quantized GraphModule to a memory-planned cortex_m Program."""

from torchmcu.lower.errors import FloatFallbackWarning, LoweringError, UnsupportedOpError
from torchmcu.lower.lowering import lower_to_program
from torchmcu.lower.report import LoweringReport, NodeReport
from torchmcu.reference.quant import quantize_multiplier

__all__ = [
    "FloatFallbackWarning",
    "LoweringError",
    "LoweringReport",
    "NodeReport",
    "UnsupportedOpError",
    "lower_to_program",
    "quantize_multiplier",
]
