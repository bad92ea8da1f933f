"""Planner quality on the activation lifetimes of real CNN graphs.

Requests come from torch.export graphs of the example models (one int8 byte
per element, every op output is a buffer live until its last reader), which is
close to what the exporter asks for. The planner must stay within 2% of the
live-bytes lower bound, which this test recomputes by brute force.
"""

from __future__ import annotations

import pytest
import torch

from torchmcu.examples import MODELS, build
from torchmcu.plan import BufferRequest, plan_memory


def activation_requests(name: str) -> list[BufferRequest]:
    model, inputs = build(name)
    ep = torch.export.export(model, inputs)
    user_inputs = set(ep.graph_signature.user_inputs)
    nodes = [
        n for n in ep.graph.nodes
        if n.op == "call_function" or (n.op == "placeholder" and n.name in user_inputs)
    ]
    index = {n: i for i, n in enumerate(nodes)}
    reqs = []
    for n in nodes:
        val = n.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        readers = [index[u] for u in n.users if u in index]
        last = len(nodes) if any(u.op == "output" for u in n.users) else max(readers + [index[n]])
        reqs.append(BufferRequest(n.name, val.numel(), index[n], last))
    return reqs


@pytest.mark.parametrize("name", list(MODELS))
def test_plan_close_to_bound_on_model_graphs(name: str) -> None:
    reqs = activation_requests(name)
    plan = plan_memory(reqs)
    times = range(0, max(r.last_use for r in reqs) + 1)
    bound = max(
        sum(-(-r.nbytes // 16) * 16 for r in reqs if r.first_use <= t <= r.last_use) for t in times
    )
    assert plan.lower_bound == bound
    assert plan.arena_bytes <= 1.02 * bound, (name, plan.arena_bytes, bound)
    for i, a in enumerate(reqs):
        for b in reqs[i + 1:]:
            if a.nbytes and b.nbytes and a.first_use <= b.last_use and b.first_use <= a.last_use:
                oa, ob = plan.offsets[a.key], plan.offsets[b.key]
                assert oa + a.nbytes <= ob or ob + b.nbytes <= oa
