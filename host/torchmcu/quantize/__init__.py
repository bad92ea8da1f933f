"""PT2E int8 quantization for the cortex_m kernels (our own quantizer)."""

import torchmcu.quantize._torchao  # noqa: F401  (first: imports torchao without its CPU-only noise)

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
