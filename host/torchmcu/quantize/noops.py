"""Remove the no-ops of an eval graph before annotation: dropout (train=False), alias, clone,
contiguous, detach (the registry's patterns with params["noop"], torchmcu/ops/defs/views.py).

Each one's result is its first argument's values, so its users read that argument instead.
Gone before the quantizer runs, they cannot separate a conv from the ReLU fused into it, add a
quantize/dequantize pair, or leave an op in float for want of a kernel."""

from __future__ import annotations

import torch
import torch.fx

from torchmcu.fx_source import describe_node
from torchmcu.ops import views
from torchmcu.quantize.rewrite import rewrite_calls
from torchmcu.quantize.targets import resolve_target

# aten target -> noop(arg, node): whether this node is the identity
NOOPS = views.noops(resolve_target)


def _arg(node: torch.fx.Node, name: str, default: object = None) -> object:
    """Argument `name` of an aten call, positional or keyword, by its schema."""
    for index, a in enumerate(node.target._schema.arguments):  # type: ignore[union-attr]
        if a.name == name:
            return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)
    return default


def remove_noops(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Bypass and erase every no-op node of gm (in place); returns gm."""

    def bypass(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
        source = node.args[0] if node.args else None
        if not isinstance(source, torch.fx.Node):
            return False
        if not NOOPS[node.target](_arg, node):
            if _arg(node, "train") is True:  # a dropout: say so before calibration, not after
                raise ValueError(
                    f"{describe_node(node)}: dropout with train=True zeroes random values "
                    "at inference too; call it with training=self.training (F.dropout) or use "
                    "nn.Dropout, which eval mode turns off"
                )
            return False
        for user in node.users:  # `x.transpose(...).contiguous().view(...)`: a view of the
            if user.target == torch.ops.aten.view.default:  # strided source needs a copy
                user.target = torch.ops.aten.reshape.default
        node.replace_all_uses_with(source)
        graph.erase_node(node)
        return True

    return rewrite_calls(gm, NOOPS, bypass)
