"""The NPU partitioner's decisions: annotation records, grouping, ordering, value compaction.

Placement is checked against what the quantizer recorded (a node stripped of its record is an
error naming it; a node recorded as float stays on the CPU) and against hand-derived groupings
of small dependency graphs; the rewritten programs are checked by running them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torchmcu.examples import models
from torchmcu.lower.lowering import finish_lowering, lower_graph
from torchmcu.npu.partition import PartitionError, compact_values, decide, group, schedule
from torchmcu.pte import program as pm
from torchmcu.quantize import quantize
from torchmcu.quantize.annotation import META_KEY
from torchmcu.reference.interpreter import run_program


class _Head(nn.Module):
    """conv -> relu -> flatten -> linear -> softmax: softmax is what the test's support rejects."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(torch.flatten(torch.relu(self.conv(x)), 1)), dim=-1)


@pytest.fixture(scope="module")
def head_graph() -> torch.fx.GraphModule:
    torch.manual_seed(0)
    model = _Head().eval()
    x = (torch.randn(1, 2, 4, 4),)
    return quantize(model, x, [(torch.randn(1, 2, 4, 4),) for _ in range(3)])


def _no_softmax(plan: pm.ExecutionPlan, i: int, family: str) -> str | None:
    ins = plan.chains[0].instructions[i]
    assert isinstance(ins, pm.KernelCall)
    return "softmax is not offered here" if "softmax" in plan.operators[ins.op_index].name else None


def _decide(gm: torch.fx.GraphModule):
    ctx = lower_graph(gm)
    cpu = lower_graph(gm)  # a second, planned copy for the support checks
    program, _ = finish_lowering(cpu)
    return decide(ctx, program, "u55", _no_softmax)


def test_placement_follows_records_and_support(head_graph):
    placements, where = _decide(head_graph)
    by_where = {p.node: (p.where, p.reason) for p in placements}
    assert by_where["conv2d"][0] == "npu"
    assert by_where["linear"][0] == "npu"
    assert by_where["softmax"] == ("cpu", "cortex_m::softmax: softmax is not offered here")
    first, last = placements[0], placements[-1]
    assert first.ops == ["cortex_m::quantize_per_tensor"] and first.where == "cpu"
    assert "program input quantize" in first.reason
    assert last.ops == ["cortex_m::dequantize_per_tensor"] and last.where == "cpu"
    # every instruction is placed exactly once
    assert sorted(i for p in placements for i in p.instructions) == sorted(where)


def test_node_recorded_as_float_stays_on_cpu(head_graph):
    conv = next(n for n in head_graph.graph.nodes if n.name == "conv2d")
    record = conv.meta["custom"][META_KEY]
    saved = dict(record)
    record["quantized"] = False
    try:
        placements, _ = _decide(head_graph)
    finally:
        conv.meta["custom"][META_KEY] = saved
    p = next(p for p in placements if p.node == "conv2d")
    assert p.where == "float" and "not quantized" in p.reason


def test_missing_record_is_an_error_naming_the_node(head_graph):
    linear = next(n for n in head_graph.graph.nodes if n.name == "linear")
    saved = linear.meta["custom"].pop(META_KEY)
    try:
        with pytest.raises(
            PartitionError,
            match=r"node 'linear' \(linear\.default\) has no torchmcu "
            r"annotation record",
        ):
            _decide(head_graph)
    finally:
        linear.meta["custom"][META_KEY] = saved


def test_grouping_keeps_the_program_acyclic():
    # 0 npu -> 1 cpu -> 2 npu, and 0 -> 2 directly: {0, 2} as one delegate would both feed
    # and consume instruction 1, so they stay apart. 3 npu reads 2: joins 2's group.
    preds = [set(), {0}, {0, 1}, {2}]
    where = {0: "npu", 1: "cpu", 2: "npu", 3: "npu"}
    assert group(where, preds) == [[0], [2, 3]]
    assert schedule(4, [[0], [2, 3]], preds) == [("npu", 0), ("cpu", 1), ("npu", 1)]


def test_grouping_merges_branches_joined_later():
    # 0 cpu feeds two NPU branches 1 and 2 (siblings), 3 npu joins them; 4 cpu reads 3.
    preds = [set(), {0}, {0}, {1, 2}, {3}]
    where = {0: "cpu", 1: "npu", 2: "npu", 3: "npu", 4: "cpu"}
    assert group(where, preds) == [[1, 2, 3]]
    assert schedule(5, [[1, 2, 3]], preds) == [("cpu", 0), ("npu", 0), ("cpu", 4)]


def test_residual_block_with_a_cpu_branch_splits_at_the_join():
    # 0 npu feeds 1 (cpu branch) and 2 (npu branch); 3 npu adds 1 and 2. {0, 2, 3} would feed
    # and consume 1: 0 and 2 form one delegate, the add runs as a second one after the CPU call.
    preds = [set(), {0}, {0}, {1, 2}]
    where = {0: "npu", 1: "cpu", 2: "npu", 3: "npu"}
    groups = group(where, preds)
    assert groups == [[0, 2], [3]]
    assert schedule(4, groups, preds) == [("npu", 0), ("cpu", 1), ("npu", 1)]


def test_schedule_moves_a_cpu_call_after_the_delegate_it_reads():
    # 1 (cpu) sits between NPU calls 0 and 2 in program order but reads 2's output.
    preds = [set(), {2}, {0}]
    where = {0: "npu", 1: "cpu", 2: "npu"}
    groups = group(where, preds)
    assert groups == [[0, 2]]
    assert schedule(3, groups, preds) == [("npu", 0), ("cpu", 1)]


def test_compact_values_drops_unreferenced_values_and_constants():
    model, example = models.mlp()
    gm = quantize(model, example, models.calibration("mlp", 2))
    program, _ = finish_lowering(lower_graph(gm))
    plan = program.execution_plan[0]
    x = np.asarray(models.calibration("mlp", 3)[2][0].numpy())
    expected = run_program(program, [x])
    # Unreferenced extras: a constant tensor and an Int, spliced in at the front.
    extra_const = len(program.constants)
    program.constants.append(b"\x01\x02")
    shift = 2
    plan.values = [
        pm.Tensor(pm.ScalarType.CHAR, [2], [0], data_buffer_idx=extra_const),
        pm.Int(7),
    ] + [_shifted(v, shift) for v in plan.values]
    plan.inputs = [i + shift for i in plan.inputs]
    plan.outputs = [i + shift for i in plan.outputs]
    for c in plan.chains:
        c.inputs = [i + shift for i in c.inputs]
        c.outputs = [i + shift for i in c.outputs]
        c.instructions = [
            pm.KernelCall(k.op_index, [a + shift for a in k.args]) for k in c.instructions
        ]
    compacted = compact_values(program)
    cplan = compacted.execution_plan[0]
    assert len(cplan.values) == len(plan.values) - 2
    assert len(compacted.constants) == len(program.constants) - 1
    got = run_program(compacted, [x])
    assert all(np.array_equal(a, b) for a, b in zip(expected, got))


def _shifted(v: pm.EValue, shift: int) -> pm.EValue:
    if isinstance(v, pm.IntList):
        return pm.IntList([i + shift for i in v.items])
    return v
