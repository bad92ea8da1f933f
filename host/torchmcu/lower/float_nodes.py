"""Which nodes run in float32 and why: the lowering driver and the program boundaries ask; the
float fallback's warnings."""

from __future__ import annotations

import os
import sys
import warnings

import torch.fx

from torchmcu import progress
from torchmcu.lower.context import Ctx
from torchmcu.lower.errors import FloatFallbackWarning, op_name, user_source_line
from torchmcu.pte.program import ScalarType
from torchmcu.quantize.annotation import read_annotation


def is_float_node(ctx: Ctx, node: torch.fx.Node) -> bool:
    """True when `node` must run in float32 (its record, or a float value as direct input, or
    its int8 rule refused it: the float fallback)."""
    if node in ctx.fallback:
        return True
    record = read_annotation(node)
    if record is not None and not record.quantized:
        return True
    return any(
        n in ctx.env and ctx.env[n].scalar_type == ScalarType.FLOAT for n in node.all_input_nodes
    )


REQUESTED = "kept in float32 by the float config"
NO_INT8_KERNEL = "no int8 Cortex-M kernel"
IN_FLOAT_REGION = "reads a float32 value of the fallback"


def float_reason(ctx: Ctx, node: torch.fx.Node) -> str:
    """Why the float32 node runs in float: REQUESTED (the float config: set_module_name,
    set_operator, --float-op ...), NO_INT8_KERNEL (no int8 pattern takes it, or its int8 rule
    refused it: the float fallback, refused when strict) or IN_FLOAT_REGION (it reads a value a
    fallback node made without a quantize between: a fused ReLU, a view)."""
    if node in ctx.fallback:
        return f"{NO_INT8_KERNEL}: {ctx.fallback[node]}" if ctx.fallback[node] else NO_INT8_KERNEL
    record = read_annotation(node)
    if record is not None and not record.quantized:
        return NO_INT8_KERNEL if record.role == "fallback" else REQUESTED
    inputs = [ctx.float_nodes.get(n) for n in node.all_input_nodes]
    if any(r is not None and r != REQUESTED for r in inputs):
        return IN_FLOAT_REGION
    return REQUESTED


def fallback_warnings(ctx: Ctx) -> list[str]:
    """One text per operator the fallback placed in float32, naming its source lines."""
    by_op: dict[str, list[torch.fx.Node]] = {}
    for node, reason in ctx.float_nodes.items():
        if reason.startswith(NO_INT8_KERNEL):
            by_op.setdefault(op_name(node), []).append(node)
    texts = []
    for name, nodes in by_op.items():
        lines = list(dict.fromkeys(user_source_line(n) or f"node '{n.name}'" for n in nodes))
        shown = "; ".join(lines[:3]) + (f"; and {len(lines) - 3} more" if len(lines) > 3 else "")
        why = ctx.float_nodes[nodes[0]].removeprefix(NO_INT8_KERNEL).removeprefix(": ")
        detail = f" ({why})" if why else ""
        calls = f"{len(nodes)} calls" if len(nodes) > 1 else "1 call"
        texts.append(
            f"{name} has no int8 Cortex-M kernel{detail}: {calls} placed in float32 (dequantize, "
            f"its portable fp32 kernel, quantize) at {shown}. Export with strict=True (--strict) "
            "to refuse it instead"
        )
    return texts


def warn_float_fallbacks(ctx: Ctx) -> None:
    """A FloatFallbackWarning per operator placed in float32 by the fallback, also shown in the
    progress output."""
    for text in fallback_warnings(ctx):
        warnings.warn(FloatFallbackWarning(text), stacklevel=_caller_level())
        progress.note(f"warning: {text}")


def _caller_level() -> int:
    """warnings.warn's stacklevel of the first frame outside the torchmcu package (the user's
    export call)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level
