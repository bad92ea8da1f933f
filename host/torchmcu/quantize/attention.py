"""scaled_dot_product_attention made the ops it is made of, before quantization.

`F.scaled_dot_product_attention(q, k, v)` (and nn.MultiheadAttention, which calls it) exports
as one aten node. Decomposed, each step is an int8 kernel with qparams of its own:
`softmax(matmul(q, k.transpose(-2, -1)) * scale, -1)` then `matmul(., v)`. Only the plain form
is rewritten (no mask, no dropout, not causal, no GQA); any other stays one node, which the
lowering then names as unsupported.
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


def decompose_attention(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Each plain scaled_dot_product_attention of gm -> matmul, mul, softmax, matmul."""

    def decompose(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
        q, k, v = node.args[:3]
        if not all(isinstance(t, torch.fx.Node) and "val" in t.meta for t in (q, k, v)):
            return False
        if (
            _arg(node, 3, "attn_mask", None) is not None
            or _arg(node, 4, "dropout_p", 0.0)
            or _arg(node, 5, "is_causal", False)
            or node.kwargs.get("enable_gqa", False)
        ):
            return False
        assert isinstance(q, torch.fx.Node) and isinstance(k, torch.fx.Node)
        if q.meta["val"].shape[:-2] != k.meta["val"].shape[:-2]:
            return False
        scale = node.kwargs.get("scale")
        if scale is None:
            scale = 1.0 / math.sqrt(int(q.meta["val"].shape[-1]))
        with graph.inserting_before(node):
            kt = _call(graph, node, _aten.transpose.int, (k, -2, -1))
            scores = _call(graph, node, _aten.matmul.default, (q, kt))
            scaled = _call(graph, node, _aten.mul.Tensor, (scores, float(scale)))
            weights = _call(graph, node, _aten.softmax.int, (scaled, -1))
            out = _call(graph, node, _aten.matmul.default, (weights, v))
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        return True

    return rewrite_calls(gm, (_aten.scaled_dot_product_attention.default,), decompose)
