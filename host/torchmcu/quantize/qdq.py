"""The quantize/dequantize nodes convert_pt2e inserts, named once for the quantizer and lowering.

It sits at the bottom of the quantize package (it imports no other torchmcu module but the
torchao import) so that lowering can read q/dq nodes without the quantizer reading lowering.
"""

from __future__ import annotations

import torch
import torch.fx

import torchmcu.quantize._torchao  # noqa: F401  (registers the quantized_decomposed ops, quietly)

_qd = torch.ops.quantized_decomposed

Q_PER_TENSOR = (_qd.quantize_per_tensor.default, _qd.quantize_per_tensor.tensor)
DQ_PER_TENSOR = (_qd.dequantize_per_tensor.default, _qd.dequantize_per_tensor.tensor)
DQ_PER_CHANNEL = (_qd.dequantize_per_channel.default,)


def _calls(node: object, targets: tuple[object, ...]) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def is_q(node: object) -> bool:
    return _calls(node, Q_PER_TENSOR)


def is_dq(node: object) -> bool:
    """A dequantize per tensor or per channel (a weight's)."""
    return _calls(node, DQ_PER_TENSOR + DQ_PER_CHANNEL)


def is_dq_per_tensor(node: object) -> bool:
    """A dequantize of an activation: the per-tensor forms only."""
    return _calls(node, DQ_PER_TENSOR)
