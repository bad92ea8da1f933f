"""Lowering errors that point at the user's model source."""

from __future__ import annotations

import torch.fx

# Where a node came from, for every message that names one (re-exported for the lowering).
from torchmcu.fx_source import describe_node, module_of, op_name, user_source_line  # noqa: F401


class LoweringError(ValueError):
    """The quantized graph cannot be lowered to the cortex_m kernels."""


class UnsupportedOpError(LoweringError):
    """An op (or an op configuration) without a cortex_m int8 kernel. `node` is the graph node
    named (the lowering places it in float32 instead when it can: the float fallback)."""

    def __init__(self, message: str, node: torch.fx.Node | None = None, why: str = "") -> None:
        super().__init__(message)
        self.node = node
        self.why = why  # what the int8 kernels cannot do ("softmax over dim 0 ..."), or ""


class FloatFallbackWarning(UserWarning):
    """Operators export placed in float32 because they have no int8 Cortex-M kernel."""


_SUPPORTED_INT8 = (
    "conv2d, linear, add, mul, max/avg pooling, softmax, ReLU/ReLU6/clamp, flatten/reshape"
)


def _module_path(node: torch.fx.Node) -> str:
    """The nn.Module path (e.g. 'head.1') that produced `node`, '' for the root or unknown."""
    stack = node.meta.get("nn_module_stack") or {}
    return str(list(stack.values())[-1][0]) if stack else ""


def has_float_rule(target: object) -> bool:
    """The registry has an fp32 rule (a Pattern's lower_float) for the aten target."""
    from torchmcu.ops import views
    from torchmcu.quantize.targets import resolve_target

    return target in views.float_emitters(resolve_target, lambda p: p)


def float_advice(node: torch.fx.Node) -> str:
    """How to get past an op without an int8 kernel: keep it in float32 where a portable fp32
    kernel exists for it (the advice then works), otherwise say that none exists."""
    from torchmcu.quantize.annotation import read_annotation

    name = op_name(node)
    record = read_annotation(node)
    # kept in float32 on request (float_config); a "fallback" record is float only by default
    already_float = record is not None and not record.quantized and record.role != "fallback"
    replace = f"replace it with supported operators ({_SUPPORTED_INT8})"
    if not has_float_rule(node.target):
        return (
            f"There is neither an int8 Cortex-M kernel nor a portable fp32 kernel for {name}, so "
            f"keeping it in float (--float-op/--float-module) cannot help: {replace}, or compute "
            "it outside the exported model (before its inputs or after its outputs)."
        )
    if already_float:
        return (
            f"It is already kept in float32 and its fp32 kernel cannot take it either: {replace}."
        )
    packet = name.removeprefix("aten.").split(".")[0]
    module = _module_path(node)
    flags = f"--float-op {packet}" + (f" or --float-module {module}" if module else "")
    api = f"TorchmcuQuantizer().set_operator(torch.ops.{name}, None)" + (
        f" / .set_module_name({module!r}, None)" if module else ""
    )
    return (
        f"It has a portable fp32 kernel: keep it in float32 with {flags} (torchmcu export) or "
        f"{api} (README, Mixed precision), or {replace}."
    )


def unsupported(node: torch.fx.Node, why: str = "") -> UnsupportedOpError:
    """The error for an op we cannot run as int8 on the cortex_m kernels, with advice that
    works for this op (float_advice)."""
    detail = f": {why}" if why else ""
    return UnsupportedOpError(
        f"unsupported op {op_name(node)} for the int8 Cortex-M kernels{detail}; "
        f"{describe_node(node)}. {float_advice(node)}",
        node,
        why,
    )
