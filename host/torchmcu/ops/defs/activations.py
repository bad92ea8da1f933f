"""The clamping activations: relu, relu6, hardtanh and clamp (and their in-place forms).

They emit no kernel of their own: after a conv2d, linear, add or max pool the quantizer fuses
them into that producer (annotate "activation": the activation's output qparams become the
producer's) and the producer's rule turns the clamp into activation_min/max, quantized with
the output's qparams (lower/requant.py's activation_range). Each pattern's `bounds` gives the
real bounds, (min, max) with None for an open side: `bounds(arg, node)` reads an aten
argument by its schema name as `arg(node, name, default)` (node a torch.fx.Node; torch-free
here)."""

from __future__ import annotations

from typing import Any

from torchmcu.ops.core import Annotate, pattern

Bounds = tuple[Any, Any]


def _relu(arg: Any, node: Any) -> Bounds:
    return 0.0, None


def _relu6(arg: Any, node: Any) -> Bounds:
    return 0.0, 6.0


def _hardtanh(arg: Any, node: Any) -> Bounds:
    return arg(node, "min_val", -1.0), arg(node, "max_val", 1.0)


def _clamp(arg: Any, node: Any) -> Bounds:
    return arg(node, "min", None), arg(node, "max", None)


for _targets, _bounds in (
    (("aten::relu.default", "aten::relu_.default"), _relu),
    (("aten::relu6.default",), _relu6),
    (("aten::hardtanh.default", "aten::hardtanh_.default"), _hardtanh),
    (("aten::clamp.default", "aten::clamp_.default"), _clamp),
):
    pattern(*_targets, annotate=Annotate("activation"), params={"bounds": _bounds})
