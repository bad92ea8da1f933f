"""The clamping activations: relu, relu6, hardtanh and clamp (and their in-place forms).

After a conv2d, linear, add or max pool the quantizer fuses them into that producer (annotate
"activation": the activation's output qparams become the producer's) and the producer's rule
turns the clamp into activation_min/max, quantized with the output's qparams
(lower/requant.py's activation_range). Anywhere else (after an avg pool, a mul, a table
activation, a model input) they keep their input's qparams and the rule below emits the
clamp as a cortex_m::quantized_activation table, `lut[q + 128] = clamp(requantize(q), lo, hi)`
with the same bounds: the Ethos-U runs it as TOSA CLAMP (activation_table.py's lowering). Each pattern's `bounds` gives the
real bounds, (min, max) with None for an open side: `bounds(arg, node)` reads an aten
argument by its schema name as `arg(node, name, default)` (node a torch.fx.Node; torch-free
here)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from torchmcu.ops.core import Annotate, pattern
from torchmcu.ops.defs.activation_table import INT8_MAX, INT8_MIN, QUANTIZED_ACTIVATION

Bounds = tuple[Any, Any]


def _relu(arg: Any, node: Any) -> Bounds:
    return 0.0, None


def _relu6(arg: Any, node: Any) -> Bounds:
    return 0.0, 6.0


def _hardtanh(arg: Any, node: Any) -> Bounds:
    return arg(node, "min_val", -1.0), arg(node, "max_val", 1.0)


def _clamp(arg: Any, node: Any) -> Bounds:
    return arg(node, "min", None), arg(node, "max", None)


def _clamp_min(arg: Any, node: Any) -> Bounds:
    return arg(node, "min", None), None


def _clamp_max(arg: Any, node: Any) -> Bounds:
    return None, arg(node, "max", None)


def lower_standalone(k: Any, node: Any) -> None:
    """A clamp no producer fused: a table of the int8 clamp. The input's levels requantized
    to the output's qparams (the same ones: the quantizer shares them, so that is the
    identity), then clamped to the bounds quantized with them."""
    x = k.input_value(node.args[0])
    if k.quantized(node):
        qs, act, qp = k.output_quant(node, allow_activation=False)
    else:  # PT2E puts no quantize between ops that share qparams (relu -> flatten)
        qs, act = [], None
        qp = SimpleNamespace(
            scale=float(x.scale),
            zero_point=int(x.zero_point),
            quant_min=INT8_MIN,
            quant_max=INT8_MAX,
        )
    lo, hi = k.activation_range(node, qp)
    levels = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.float64)
    if k.same_qparams(x.scale, x.zero_point, qp):
        requantized = [int(v) for v in levels]
    else:
        requantized = [k.q8(float((v - x.zero_point) * x.scale), qp) for v in levels]
    lut = np.clip(np.array(requantized), lo, hi).astype(np.int8)
    out = k.new_int8(node.name, x.sizes, qp, nhwc=x.nhwc)
    k.call(QUANTIZED_ACTIVATION, node, input=x.vi, lut=k.constant(lut), out=out.vi)
    k.bind_shared(node, qs, act, out)


for _targets, _bounds in (
    (("aten::relu.default", "aten::relu_.default"), _relu),
    (("aten::relu6.default", "aten::relu6_.default"), _relu6),
    (("aten::hardtanh.default", "aten::hardtanh_.default"), _hardtanh),
    (("aten::clamp.default", "aten::clamp_.default"), _clamp),
    (("aten::clamp_min.default", "aten::clamp_min_.default"), _clamp_min),
    (("aten::clamp_max.default", "aten::clamp_max_.default"), _clamp_max),
):
    pattern(
        *_targets,
        annotate=Annotate("activation"),
        lower=lower_standalone,
        emits=(QUANTIZED_ACTIVATION,),
        params={"bounds": _bounds},
    )
