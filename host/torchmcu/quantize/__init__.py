"""PT2E int8 quantization for the cortex_m kernels (our own quantizer)."""

from torchmcu.quantize.annotation import (
    META_KEY,
    TorchmcuAnnotation,
    read_annotation,
    write_annotation,
)
from torchmcu.quantize.api import export_model, quantize
from torchmcu.quantize.quantizer import TorchmcuQuantizer

__all__ = [
    "META_KEY",
    "TorchmcuAnnotation",
    "TorchmcuQuantizer",
    "export_model",
    "quantize",
    "read_annotation",
    "write_annotation",
]
