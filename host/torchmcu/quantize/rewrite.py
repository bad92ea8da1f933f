"""The driver the export's graph passes share (noops, layout_idioms, pool_values): visit each
call of some aten targets, let the pass rewrite it, and leave the module consistent."""

from __future__ import annotations

from collections.abc import Callable, Collection

import torch


def rewrite_calls(
    gm: torch.fx.GraphModule,
    targets: Collection[object],
    rewrite: Callable[[torch.fx.Graph, torch.fx.Node], bool],
    *,
    drop_dead: bool = False,
) -> torch.fx.GraphModule:
    """rewrite(graph, node) for every call_function node of gm whose target is in `targets`
    (over a snapshot of the nodes, so a rewrite may add or erase nodes); it returns whether it
    changed the graph. After any change the graph is linted and gm recompiled (dead nodes
    eliminated first with `drop_dead`). gm is changed in place and returned."""
    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in targets:
            changed |= rewrite(graph, node)
    if changed:
        if drop_dead:
            graph.eliminate_dead_code()
        graph.lint()
        gm.recompile()
    return gm
