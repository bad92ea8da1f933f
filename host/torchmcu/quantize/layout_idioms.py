"""Layout idioms of model code made single ops before quantization.

ShuffleNet's channel shuffle is written `x.view(N, g, C // g, H, W).transpose(1, 2)
.contiguous().view(N, C, H, W)` (or `.flatten(1, 2)` at the end). Lowered op by op, each step
of that chain moves NHWC bytes: to contiguous for the 5-D view, the 5-D transpose, back to
NHWC for the next convolution. As one aten.channel_shuffle (the op F.channel_shuffle and
nn.ChannelShuffle export as) it is one transpose of the channel axis in memory order
(torchmcu/ops/defs/transpose.py).
"""

from __future__ import annotations

import torch
import torch.fx

from torchmcu.quantize.rewrite import rewrite_calls

_aten = torch.ops.aten

_VIEWS = (_aten.view.default, _aten.reshape.default, _aten._unsafe_view.default)
_COPIES = (_aten.contiguous.default, _aten.clone.default)


def _shape(node: object) -> list[int] | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return None if val is None else [int(s) for s in val.shape]


def _only_user(node: torch.fx.Node) -> torch.fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 and users[0].op == "call_function" else None


def _swaps_groups(node: torch.fx.Node) -> bool:
    """transpose(1, 2) or permute([0, 2, 1, 3, 4]) of a 5-D tensor."""
    if node.target == _aten.transpose.int:
        return sorted(int(d) % 5 for d in node.args[1:3]) == [1, 2]  # type: ignore[union-attr]
    if node.target == _aten.permute.default:
        return [int(d) % 5 for d in node.args[1]] == [0, 2, 1, 3, 4]  # type: ignore[union-attr]
    return False


def _shuffle_end(split: torch.fx.Node) -> torch.fx.Node | None:
    """The last node of the idiom starting at the 5-D view `split`, else None."""
    swap = _only_user(split)
    if swap is None or not _swaps_groups(swap):
        return None
    end = _only_user(swap)
    while end is not None and end.target in _COPIES and len(end.kwargs) <= 1:
        end = _only_user(end)
    if end is None or end.target not in (*_VIEWS, _aten.flatten.using_ints):
        return None
    return end


def fuse_channel_shuffle(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Each channel-shuffle chain of gm -> one aten.channel_shuffle (gm changed in place)."""

    def fuse(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
        x = node.args[0]
        before, split = _shape(x), _shape(node)
        if before is None or split is None or len(before) != 4 or len(split) != 5:
            return False
        n, c, h, w = before
        if split[0] != n or split[1] * split[2] != c or split[3:] != [h, w] or split[1] < 2:
            return False
        end = _shuffle_end(node)
        if end is None or _shape(end) != before:
            return False
        with graph.inserting_before(end):
            shuffle = graph.call_function(_aten.channel_shuffle.default, (x, split[1]))
        shuffle.meta.update(
            {k: v for k, v in end.meta.items() if k in ("stack_trace", "nn_module_stack", "val")}
        )
        end.replace_all_uses_with(shuffle)
        return True

    return rewrite_calls(gm, _VIEWS, fuse, drop_dead=True)
