"""Constant subgraphs of the exported graph evaluated once, before quantization.

A model may build a table from its buffers or from shapes alone: a causal mask
(`torch.tril(torch.ones(T, T))`, `self.mask[:T, :T] == 0`) or positions (`torch.arange(T)`).
torch.export keeps those as ops on constants, which then need kernels they would never use at
run time. Each op whose inputs are all constants (buffers and lifted constants, not parameters:
the quantizer quantizes those) is evaluated here, and the values the rest of the graph reads
become constants (buffers `_folded_<i>` of the module); export's metadata asserts on such values
(`.float()` of one) are dropped, having held when they were evaluated. Random and
uninitialised-memory ops are never folded.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

_NOT_FOLDED = ("rand", "normal", "bernoulli", "uniform", "dropout", "empty", "multinomial")


def _foldable(target: object) -> bool:
    name = getattr(target, "__name__", str(target))
    return not any(word in name for word in _NOT_FOLDED)


def _attr(gm: torch.fx.GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def fold_constants(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Evaluate gm's constant subgraphs (in place); returns gm."""
    parameters = {name for name, _ in gm.named_parameters()}
    values: dict[torch.fx.Node, Any] = {}
    checks: list[torch.fx.Node] = []  # export's metadata asserts on a folded value: they held
    for node in gm.graph.nodes:
        if node.op == "get_attr" and node.target not in parameters:
            value = _attr(gm, str(node.target))
            if isinstance(value, torch.Tensor):
                values[node] = value
        elif node.op == "call_function" and _foldable(node.target):
            inputs = node.all_input_nodes
            if all(n in values for n in inputs):
                args = torch.fx.node.map_arg(node.args, lambda n: values[n])
                kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: values[n])
                with torch.no_grad():
                    result = node.target(*args, **kwargs)  # type: ignore[operator]
                if isinstance(result, torch.Tensor):
                    values[node] = result
                elif result is None and "_assert" in getattr(node.target, "__name__", ""):
                    checks.append(node)
    folded = 0
    for node, value in values.items():
        if node.op != "call_function" or all(u in values for u in node.users):
            continue
        name = f"_folded_{folded}"
        folded += 1
        gm.register_buffer(name, value.detach().clone())
        with gm.graph.inserting_before(node):
            constant = gm.graph.get_attr(name)
        constant.meta = dict(node.meta)
        node.replace_all_uses_with(constant)
    for node in checks:
        gm.graph.erase_node(node)
    if folded or checks:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return gm
