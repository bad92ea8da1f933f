"""Fold inference BatchNorm into the preceding conv2d / conv1d / conv_transpose2d / linear.

Runs before annotation (Quantizer.transform_for_annotation) so the weights
that get observed and quantized are the folded ones, as on the device where
BatchNorm does not exist as a separate op.
"""

from __future__ import annotations

import operator

import torch
import torch.fx

from torchmcu.quantize.annotation import mark_folded

_aten = torch.ops.aten
_WEIGHTED = (
    _aten.conv2d.default,
    _aten.conv1d.default,
    _aten.conv_transpose2d.input,
    _aten.linear.default,
)
_BN_PLAIN = (_aten.batch_norm.default,)
_BN_TUPLE = (_aten._native_batch_norm_legit_no_training.default,)


def _get_attr_tensor(gm: torch.fx.GraphModule, node: object) -> torch.Tensor | None:
    if not isinstance(node, torch.fx.Node) or node.op != "get_attr":
        return None
    obj: object = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part)
    return obj if isinstance(obj, torch.Tensor) else None


def _bn_params(gm: torch.fx.GraphModule, bn: torch.fx.Node):
    """(gamma, beta, mean, var, eps) of an inference batch norm, or None."""
    args = list(bn.args)
    if bn.target in _BN_PLAIN:
        # batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)
        if len(args) < 8 or args[5]:
            return None
        eps = float(args[7])
    else:
        # _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps)
        eps = float(args[6])
    mean = _get_attr_tensor(gm, args[3])
    var = _get_attr_tensor(gm, args[4])
    if mean is None or var is None:
        return None
    n = mean.numel()
    gamma = _get_attr_tensor(gm, args[1]) if args[1] is not None else torch.ones(n)
    beta = _get_attr_tensor(gm, args[2]) if args[2] is not None else torch.zeros(n)
    if gamma is None or beta is None:
        return None
    return gamma, beta, mean, var, eps


def _register(gm: torch.fx.GraphModule, base: str, value: torch.Tensor) -> str:
    name = base
    i = 0
    while hasattr(gm, name):
        i += 1
        name = f"{base}_{i}"
    gm.register_buffer(name, value.detach().clone().contiguous())
    return name


def fold_batch_norm(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Fold every inference BatchNorm whose input is a conv2d/linear used only by it."""
    graph = gm.graph
    changed = False
    for bn in list(graph.nodes):
        if bn.op != "call_function" or bn.target not in _BN_PLAIN + _BN_TUPLE:
            continue
        producer = bn.args[0]
        if (
            not isinstance(producer, torch.fx.Node)
            or producer.op != "call_function"
            or producer.target not in _WEIGHTED
            or len(producer.users) != 1
        ):
            continue
        params = _bn_params(gm, bn)
        weight = _get_attr_tensor(gm, producer.args[1])
        if params is None or weight is None:
            continue
        if producer.target == _aten.linear.default and weight.dim() != 2:
            continue
        # a transposed conv's weight is [Cin, Cout / groups, KH, KW]: its output channels on
        # axis 1 (groups 1 only: the lowering takes no other)
        transposed = producer.target == _aten.conv_transpose2d.input
        if transposed and (len(producer.args) > 6 and producer.args[6] != 1):
            continue
        bias_node = producer.args[2] if len(producer.args) > 2 else None
        bias = _get_attr_tensor(gm, bias_node) if bias_node is not None else None
        if bias_node is not None and bias is None:
            continue
        gamma, beta, mean, var, eps = params
        with torch.no_grad():
            factor = gamma.double() / torch.sqrt(var.double() + eps)
            shape = [1, -1, 1, 1] if transposed else [-1] + [1] * (weight.dim() - 1)
            new_w = (weight.double() * factor.reshape(shape)).to(weight.dtype)
            b0 = bias.double() if bias is not None else torch.zeros_like(mean, dtype=torch.float64)
            new_b = ((b0 - mean.double()) * factor + beta.double()).to(weight.dtype)
        prefix = str(producer.name)
        w_name = _register(gm, f"{prefix}_bn_folded_weight", new_w)
        b_name = _register(gm, f"{prefix}_bn_folded_bias", new_b)
        with graph.inserting_before(producer):
            w_node = graph.get_attr(w_name)
            b_node = graph.get_attr(b_name)
        w_node.meta["val"] = new_w
        b_node.meta["val"] = new_b
        args = list(producer.args)
        while len(args) < 3:
            args.append(None)
        args[1] = w_node
        args[2] = b_node
        producer.args = tuple(args)
        if bn.target in _BN_TUPLE:
            for user in list(bn.users):
                if user.target is operator.getitem and user.args[1] == 0:
                    user.replace_all_uses_with(producer)
        else:
            bn.replace_all_uses_with(producer)
        mark_folded(producer, "batch_norm")
        changed = True
    if changed:
        graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
    return gm
