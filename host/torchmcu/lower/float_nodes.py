"""Which nodes run in float32: the lowering driver and the program boundaries both ask."""

from __future__ import annotations

import torch.fx

from torchmcu.lower.context import Ctx
from torchmcu.pte.program import ScalarType
from torchmcu.quantize.annotation import read_annotation


def is_float_node(ctx: Ctx, node: torch.fx.Node) -> bool:
    """True when `node` must run in float32 (its record, or a float value as direct input)."""
    record = read_annotation(node)
    if record is not None and not record.quantized:
        return True
    return any(
        n in ctx.env and ctx.env[n].scalar_type == ScalarType.FLOAT for n in node.all_input_nodes
    )
