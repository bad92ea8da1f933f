"""adaptive_max_pool1d/2d as single-tensor ops the quantizer and lowering know.

aten's adaptive max pools return (values, indices), read through getitem; annotating a tuple
output is awkward for PT2E, and models use the values only. Where the indices are unused (a getitem 1 without users at most),
export_model replaces `getitem(aten.adaptive_max_pool{1,2}d(x, size), 0)` by
`torchmcu::adaptive_max_pool(x, size)`, defined here: the values, computed by aten (so the
fake-quantized model runs it), and lowered by ops/defs/pool.py."""

from __future__ import annotations

import operator

import torch
import torch.fx
import torch.nn.functional as F

from torchmcu.quantize.rewrite import rewrite_calls

_aten = torch.ops.aten
_LIBRARY = "torchmcu"  # the op's namespace; ops/defs/pool.py's pattern names it in full


@torch.library.custom_op(f"{_LIBRARY}::adaptive_max_pool", mutates_args=())
def adaptive_max_pool(x: torch.Tensor, output_size: list[int]) -> torch.Tensor:
    """The values of adaptive_max_pool1d ([N, C, L] x) or adaptive_max_pool2d ([N, C, H, W])."""
    pool = F.adaptive_max_pool1d if x.dim() == 3 else F.adaptive_max_pool2d
    return pool(x, output_size).contiguous()


@adaptive_max_pool.register_fake
def _(x: torch.Tensor, output_size: list[int]) -> torch.Tensor:
    return x.new_empty([*x.shape[: x.dim() - len(output_size)], *output_size])


_TUPLE_POOLS = (_aten.adaptive_max_pool1d.default, _aten.adaptive_max_pool2d.default)


def single_output_pools(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Replace each adaptive max pool whose only user is getitem 0 (see module doc)."""

    def replace(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
        users = list(node.users)
        if not all(u.target is operator.getitem and (u.args[1] == 0 or not u.users) for u in users):
            return False  # the indices are used: leave it (the lowering names the op)
        values = [u for u in users if u.args[1] == 0]
        x, size = node.args[0], [int(s) for s in node.args[1]]  # type: ignore[union-attr]
        with graph.inserting_before(node):
            new = graph.call_function(torch.ops.torchmcu.adaptive_max_pool.default, (x, size))
        new.meta = dict(node.meta)  # the source line, module stack
        if values:
            new.meta["val"] = values[0].meta.get("val")
        for u in users:
            u.replace_all_uses_with(new)
            graph.erase_node(u)
        graph.erase_node(node)
        return True

    return rewrite_calls(gm, _TUPLE_POOLS, replace)
