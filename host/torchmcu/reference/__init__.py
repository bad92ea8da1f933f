"""Integer reference semantics of the int8 operators (the project's oracle).

Each operator's numpy function is its definition's (torchmcu/ops/defs), found here through the
registry: `torchmcu.reference.quantized_conv2d`, `torchmcu.reference.slice_copy`... (one per
int8 operator, named after it), beside the requantization helpers of torchmcu/ops/intmath.py.
See docs/operators.md for the contracts. 4-D activations are numpy arrays in NHWC (memory)
order; the interpreter (reference/interpreter.py) maps program tensors to these arrays.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from torchmcu import ops
from torchmcu.ops.intmath import quantize_multiplier as quantize_multiplier
from torchmcu.ops.intmath import requantize as requantize
from torchmcu.ops.intmath import single_rounding_multiplier as single_rounding_multiplier


def _operator_functions() -> dict[str, Callable[..., Any]]:
    """op name -> the numpy function its definition module names after it."""
    found: dict[str, Callable[..., Any]] = {}
    for o in ops.ops("int8"):
        if o.variant_of is None and o.reference is not None:
            module = importlib.import_module(o.reference.__module__)
            found[o.schema.name] = getattr(module, o.schema.name)
    return found


OPERATORS = _operator_functions()
globals().update(OPERATORS)

__all__ = sorted(
    ["OPERATORS", *OPERATORS, "quantize_multiplier", "requantize", "single_rounding_multiplier"]
)
