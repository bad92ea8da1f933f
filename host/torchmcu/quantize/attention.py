"""scaled_dot_product_attention made the ops it is made of, before quantization.

`F.scaled_dot_product_attention(q, k, v)` (and nn.MultiheadAttention, which calls it) exports
as one aten node. Decomposed, each step is an int8 kernel with qparams of its own:
`softmax(matmul(q, k.transpose(-2, -1)) * scale, -1)` then `matmul(., v)`. A causal call
(`is_causal=True`: torch's top-left aligned lower triangle) or one with a constant mask (bool:
true takes part; float: 0 takes part, -inf or <= -1e4 is left out) puts
`masked_fill(scores, left_out, -inf)` before the softmax, with `left_out` a new bool buffer:
the pair is one int8 masked softmax. Any other form (dropout, GQA, a mask computed at run
time or with other float values) stays one node, which the lowering then names as
unsupported.
"""

from __future__ import annotations

import math

import torch
import torch.fx

from torchmcu.quantize.rewrite import rewrite_calls

_aten = torch.ops.aten


def _arg(node: torch.fx.Node, index: int, name: str, default: object) -> object:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _call(graph: torch.fx.Graph, src: torch.fx.Node, target: object, args: tuple) -> torch.fx.Node:
    """A call of target before src, with src's source-line metadata and its fake value."""
    node = graph.call_function(target, args)  # type: ignore[arg-type]
    node.meta.update({k: v for k, v in src.meta.items() if k in ("stack_trace", "nn_module_stack")})
    vals = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
    node.meta["val"] = target(*vals)  # type: ignore[operator]
    return node


FILL_MAX = -1e4  # a float mask value at or below this leaves its score out (exp gives 0)


def _left_out(gm: torch.fx.GraphModule, node: torch.fx.Node, rows: int, cols: int) -> object:
    """The bool mask of the scores an SDPA call leaves out (true: left out), None when it
    leaves none out, or False when its mask is of a form the int8 kernels cannot take."""
    mask = _arg(node, 3, "attn_mask", None)
    causal = bool(_arg(node, 5, "is_causal", False))
    if mask is not None and causal:
        return False  # torch refuses both at once
    if causal:
        return ~torch.ones(rows, cols, dtype=torch.bool).tril()
    if mask is None:
        return None
    if not (isinstance(mask, torch.fx.Node) and mask.op == "get_attr"):
        return False  # computed at run time
    values = getattr(gm, str(mask.target)).detach()
    if values.dtype == torch.bool:
        return ~values
    left_out = values <= FILL_MAX
    if not torch.all(left_out | (values == 0)):
        return False  # an additive bias (ALiBi, relative positions), not a mask
    return left_out


def _views_become_reshapes(out: torch.fx.Node) -> None:
    """SDPA's own output is strided so that `y.transpose(1, 2).view(b, t, c)` is a view; the
    matmul's is contiguous, so each view behind transposes of it becomes a reshape (which
    copies in eager runs, as calibration's; the lowering treats both alike)."""
    stack = [out]
    while stack:
        for user in stack.pop().users:
            if user.target in (_aten.transpose.int, _aten.permute.default):
                stack.append(user)
            elif user.target == _aten.view.default:
                user.target = _aten.reshape.default


def decompose_attention(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Each plain, causal or constant-masked scaled_dot_product_attention of gm -> matmul,
    mul, (masked_fill,) softmax, matmul."""
    masks = 0

    def decompose(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
        nonlocal masks
        q, k, v = node.args[:3]
        if not all(isinstance(t, torch.fx.Node) and "val" in t.meta for t in (q, k, v)):
            return False
        if _arg(node, 4, "dropout_p", 0.0) or node.kwargs.get("enable_gqa", False):
            return False
        assert isinstance(q, torch.fx.Node) and isinstance(k, torch.fx.Node)
        if q.meta["val"].shape[:-2] != k.meta["val"].shape[:-2]:
            return False
        left_out = _left_out(gm, node, int(q.meta["val"].shape[-2]), int(k.meta["val"].shape[-2]))
        if left_out is False:
            return False
        scale = node.kwargs.get("scale")
        if scale is None:
            scale = 1.0 / math.sqrt(int(q.meta["val"].shape[-1]))
        with graph.inserting_before(node):
            kt = _call(graph, node, _aten.transpose.int, (k, -2, -1))
            scores = _call(graph, node, _aten.matmul.default, (q, kt))
            scaled = _call(graph, node, _aten.mul.Tensor, (scores, float(scale)))
            if isinstance(left_out, torch.Tensor):
                name = f"_sdpa_mask_{masks}"
                masks += 1
                gm.register_buffer(name, left_out)
                mask = graph.get_attr(name)
                mask.meta["val"] = left_out
                scaled = _call(graph, node, _aten.masked_fill.Scalar, (scaled, mask, float("-inf")))
            weights = _call(graph, node, _aten.softmax.int, (scaled, -1))
            out = _call(graph, node, _aten.matmul.default, (weights, v))
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        _views_become_reshapes(out)
        return True

    return rewrite_calls(gm, (_aten.scaled_dot_product_attention.default,), decompose)
