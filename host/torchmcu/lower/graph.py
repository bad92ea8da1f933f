"""Reading the converted PT2E graph: q/dq qparams and frozen constants (the q/dq nodes
themselves: torchmcu.quantize.qdq)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.fx

from torchmcu.lower.errors import LoweringError, describe_node, unsupported
from torchmcu.ops.layout import pair as layout_pair
from torchmcu.quantize.qdq import DQ_PER_CHANNEL, is_dq


@dataclass(frozen=True)
class QParams:
    scale: float
    zero_point: int
    quant_min: int
    quant_max: int

    @property
    def int16(self) -> bool:
        """An int16 tensor's qparams (the residual stream), not an int8 one's."""
        return self.quant_min < -128 or self.quant_max > 127


def _scalar(gm: torch.fx.GraphModule, arg: object) -> float:
    if isinstance(arg, torch.fx.Node):
        return float(attr_tensor(gm, arg).reshape(-1)[0])
    return float(arg)  # type: ignore[arg-type]


def qparams_of(gm: torch.fx.GraphModule, node: torch.fx.Node) -> QParams:
    """Per-tensor qparams of a quantize/dequantize_per_tensor node (int8, or int16 with
    zero point 0: the residual stream)."""
    args = node.args
    dtype = args[5] if len(args) > 5 else node.kwargs.get("dtype")
    if dtype not in (torch.int8, torch.int16):
        raise LoweringError(
            f"{describe_node(node)}: only int8 (and int16) activations are supported, got {dtype}"
        )
    return QParams(_scalar(gm, args[1]), int(_scalar(gm, args[2])), int(args[3]), int(args[4]))


def attr_tensor(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.Tensor:
    """The tensor a get_attr node refers to."""
    if node.op != "get_attr":
        raise LoweringError(f"{describe_node(node)}: expected a constant (get_attr) node")
    obj: object = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, torch.Tensor):
        raise LoweringError(f"constant {node.target} is not a tensor")
    return obj.detach()


@dataclass
class QuantizedConstant:
    """An int8/int32 constant with its (per-tensor or per-channel) scale."""

    values: np.ndarray
    scales: np.ndarray  # 1 element (per tensor) or one per channel along `axis`
    zero_points: np.ndarray
    axis: int | None


def quantized_constant(gm: torch.fx.GraphModule, node: object, what: str) -> QuantizedConstant:
    """Read a frozen quantized weight/bias: dequantize(get_attr) as convert_pt2e leaves it."""
    if not is_dq(node):
        raise LoweringError(f"{what}: expected a dequantized constant, got {node}")
    assert isinstance(node, torch.fx.Node)
    src = node.args[0]
    if not isinstance(src, torch.fx.Node) or src.op != "get_attr":
        raise LoweringError(f"{describe_node(node)}: {what} is not a constant")
    values = attr_tensor(gm, src).numpy()
    if node.target in DQ_PER_CHANNEL:
        scales = attr_tensor(gm, node.args[1]).double().numpy().reshape(-1)
        zps = attr_tensor(gm, node.args[2]).numpy().astype(np.int64).reshape(-1)
        axis = int(node.args[3])
        return QuantizedConstant(values, scales, zps, axis)
    scale = _scalar(gm, node.args[1])
    zp = int(_scalar(gm, node.args[2]))
    return QuantizedConstant(values, np.array([scale]), np.array([zp]), None)


def int8_weights(
    gm: torch.fx.GraphModule, node: torch.fx.Node, w_node: object, cout: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight values, one scale per output channel) of a weighted op (conv2d, linear;
    cout None: the weight's first dim, an embedding's rows); rejects what the kernels can't
    run."""
    if not is_dq(w_node):
        raise unsupported(node, "its weight is not an int8 quantized constant")
    qc = quantized_constant(gm, w_node, "weight")
    if qc.values.dtype != np.int8:
        raise unsupported(node, f"weight dtype {qc.values.dtype} (int8 required)")
    if np.any(qc.zero_points != 0):
        raise unsupported(node, "asymmetric weights (weight zero point must be 0)")
    if qc.axis is not None and qc.axis != 0:
        raise unsupported(node, f"per-channel weight scales along axis {qc.axis}")
    cout = int(qc.values.shape[0]) if cout is None else cout
    scales = qc.scales if qc.scales.size == cout else np.full(cout, qc.scales[0])
    return qc.values, scales


def bias_int32(
    gm: torch.fx.GraphModule,
    node: torch.fx.Node,
    bias_node: object,
    acc_scales: np.ndarray,
    cout: int,
) -> np.ndarray:
    """A weighted op's bias as int32 at the accumulator scale (zeros when it has none)."""
    if bias_node is None:
        return np.zeros(cout, dtype=np.int32)
    if is_dq(bias_node):
        qc = quantized_constant(gm, bias_node, "bias")
        if qc.values.dtype == np.int32 and np.allclose(
                np.broadcast_to(qc.scales, acc_scales.shape), acc_scales, rtol=1e-6, atol=0):
            return qc.values.reshape(-1).astype(np.int32)
        # A bias shared by several calls (an LSTM's recurrent linear at every step) is
        # quantized once, at the first call's scale: re-round it to this call's.
        real = (qc.values.astype(np.float64) - qc.zero_points) * qc.scales
    elif isinstance(bias_node, torch.fx.Node) and bias_node.op == "get_attr":
        real = attr_tensor(gm, bias_node).double().numpy()
    else:
        raise unsupported(node, "bias is not a constant")
    q = np.round(real.reshape(-1) / acc_scales)
    return np.clip(q, -(2**31), 2**31 - 1).astype(np.int32)


def arg(node: torch.fx.Node, index: int, name: str, default: object) -> object:
    """Positional-or-keyword argument of an aten call with its schema default."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def named_arg(node: torch.fx.Node, name: str, default: object = None) -> object:
    """Argument `name` of an aten call (positional or keyword), found by its schema."""
    schema = node.target._schema  # type: ignore[union-attr]
    for index, a in enumerate(schema.arguments):
        if a.name == name:
            return arg(node, index, name, default)
    raise LoweringError(f"{schema.name} has no argument {name!r}")


def pair(value: object, default: tuple[int, int]) -> tuple[int, int]:
    """An aten int or int-list argument as (h, w) (ops/layout.py's rule); `default` when it is
    None or empty."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return default
    return layout_pair(value)  # type: ignore[arg-type]


def shape_of(node: torch.fx.Node) -> list[int]:
    val = node.meta.get("val")
    if val is None or not hasattr(val, "shape"):
        raise LoweringError(f"{describe_node(node)}: no shape information (meta['val'])")
    return [int(s) for s in val.shape]
