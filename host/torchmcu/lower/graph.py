"""Reading the converted PT2E graph: q/dq qparams and frozen constants (the q/dq nodes
themselves: torchmcu.quantize.qdq)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.fx

from torchmcu.lower.errors import LoweringError, describe_node
from torchmcu.quantize.qdq import DQ_PER_CHANNEL, is_dq


@dataclass(frozen=True)
class QParams:
    scale: float
    zero_point: int
    quant_min: int
    quant_max: int


def _scalar(gm: torch.fx.GraphModule, arg: object) -> float:
    if isinstance(arg, torch.fx.Node):
        return float(attr_tensor(gm, arg).reshape(-1)[0])
    return float(arg)  # type: ignore[arg-type]


def qparams_of(gm: torch.fx.GraphModule, node: torch.fx.Node) -> QParams:
    """Per-tensor qparams of a quantize/dequantize_per_tensor node (int8 only)."""
    args = node.args
    dtype = args[5] if len(args) > 5 else node.kwargs.get("dtype")
    if dtype != torch.int8:
        raise LoweringError(
            f"{describe_node(node)}: only int8 activations are supported, got {dtype}"
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
    if value is None:
        return default
    if isinstance(value, int):
        return (value, value)
    items = [int(v) for v in value]  # type: ignore[union-attr]
    if not items:
        return default
    if len(items) == 1:
        return (items[0], items[0])
    return (items[0], items[1])


def shape_of(node: torch.fx.Node) -> list[int]:
    val = node.meta.get("val")
    if val is None or not hasattr(val, "shape"):
        raise LoweringError(f"{describe_node(node)}: no shape information (meta['val'])")
    return [int(s) for s in val.shape]
