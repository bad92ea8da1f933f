"""torch.cond / nested cond / torch.map lowered for the Ethos-U55-128 (corstone-300): the
branch and loop bodies' convs become EthosUBackend delegates *inside* the control flow, the
JumpFalseCall/MoveCall structure stays, and the delegated weights are consumed.

Bit-exactness: the NPU program on the host runtime (C runtime; the TOSA reference model stands in
for the NPU) equals the CPU-only program in the reference interpreter, for inputs that take each
branch (which branch a float input takes is told by the float model, test_control_flow.py).

"Every weight exactly once": the int8 OHWI weights of every conv are computed independently
(test_control_flow._int8_ohwi: per-channel max|w|/127) and
  - a delegated conv's weight bytes occur nowhere in the NPU .pte outside its blob: not in the
    constant segment, not anywhere in the file (Vela re-encodes weights - reordered into its
    brick layout and compressed - so the raw bytes do not occur in the blob either; the CPU-only
    .pte holds them exactly once, so the search can find them);
  - each delegated weight is an input of exactly one delegate: byte for byte among the constants of
    exactly one carved sub-Program (what was lowered to TOSA and compiled by Vela into that blob),
    that delegate sits in the branch that uses the weight, and its blob carries a non-empty Vela
    weight stream. Vela's encoded stream itself cannot be compared with the int8 bytes.
  - a weight shared by a delegated branch conv and a CPU conv elsewhere stays once in the constant
    segment (the CPU conv reads it) and is also an input of one delegate.
Size: the baseline "without consumption" is the same NPU program with the constants its delegated
calls read in the CPU program (weights, biases, requantization tables not read by any CPU call)
kept as constant tensors; the consuming .pte is smaller by at least their bytes, and its constant
segment is exactly the CPU program's constants less those.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from torchmcu.npu.blob import parse_blob
from torchmcu.pte import program as pm
from torchmcu.pte.reader import parse
from torchmcu.pte.writer import serialize
from torchmcu.reference.interpreter import run_program

pytest.importorskip("tosa_reference_model")
pytest.importorskip("ethosu.vela")
sys.path.insert(0, str(Path(__file__).parent))
from test_control_flow import (
    CondNet,
    MapNet,
    NestedCondNet,
    _batches,
    _conv,
    _identity_pre,
    _inputs,
    _int8_ohwi,
)

NPU = {"npu": "ethos-u55-128", "board": "corstone-300"}


class _Case:
    def __init__(self, name: str, model: torch.nn.Module, cal: list, tmp: Path) -> None:
        self.name, self.model = name, model.eval()
        self.cpu = torchmcu.export(self.model, cal[0], calibration=cal)
        self.npu = torchmcu.export(self.model, cal[0], calibration=cal, **NPU)
        self.path = self.npu.save(tmp)


@pytest.fixture(scope="module", params=["cond", "nested"])
def case(request, tmp_path_factory) -> _Case:
    model = CondNet() if request.param == "cond" else NestedCondNet()
    cal = [(x,) for s in range(3) for x in _inputs(100 + s)]
    return _Case(request.param, model, cal, tmp_path_factory.mktemp(request.param))


def _kinds(program: pm.Program) -> list[str]:
    plan = program.execution_plan[0]
    return [
        plan.operators[i.op_index].name.split("::")[1] if isinstance(i, pm.KernelCall)
        else type(i).__name__ + (f">{i.destination_instruction}"
                                 if isinstance(i, pm.JumpFalseCall) else "")
        for i in plan.chains[0].instructions
    ]


PREDICATE = ["quantize_per_tensor", "DelegateCall", "sum", "gt"]
EXPECTED = {
    # pre conv | predicate | JF -> false | true: delegate, move, JF -> end | false: delegate, move
    "cond": [*PREDICATE, "JumpFalseCall>8", "DelegateCall", "MoveCall", "JumpFalseCall>10",
             "DelegateCall", "MoveCall", "transpose", "dequantize_per_tensor"],
    "nested": [*PREDICATE, "JumpFalseCall>15", "sum", "gt", "JumpFalseCall>11", "DelegateCall",
               "MoveCall", "JumpFalseCall>13", "DelegateCall", "MoveCall", "MoveCall",
               "JumpFalseCall>17", "DelegateCall", "MoveCall", "transpose",
               "dequantize_per_tensor"],
}
# Which branch conv's weights each in-branch delegate (by instruction index) consumed.
BRANCH_OF = {"cond": {5: "a", 8: "b"}, "nested": {8: "c", 11: "a", 15: "b"}}


def test_control_flow_kept_with_delegates_inside_the_branches(case) -> None:
    assert _kinds(case.npu.program) == EXPECTED[case.name]
    # the CPU program has the same jumps and moves; every conv now runs in a delegate
    cpu_kinds = _kinds(case.cpu.program)
    for k in ("MoveCall", "JumpFalseCall"):
        assert sum(s.startswith(k) for s in cpu_kinds) == sum(
            s.startswith(k) for s in _kinds(case.npu.program))
    assert "quantized_conv2d" in cpu_kinds and "quantized_conv2d" not in _kinds(case.npu.program)
    plan = case.npu.program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["EthosUBackend"] * len(case.npu.npu.subgraphs)


def test_host_runtime_bit_exact_with_cpu_program_for_every_branch(case) -> None:
    taken = set()
    for x in _inputs(7):
        want = run_program(case.cpu.program, [x.numpy()])[0]
        got = torchmcu.run_on_host(case.path, [x.numpy()])[0]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), case.name
        ref = run_program(case.npu.program, [x.numpy()],
                          delegate_fn=case.npu.reference_delegate_fn())[0]
        assert ref.tobytes() == want.tobytes()
        with torch.no_grad():
            taken.add(case.model.taken(x))
    assert taken == ({"a", "b"} if case.name == "cond" else {"a", "b", "c"})


def _convs(model: torch.nn.Module) -> dict[str, torch.nn.Conv2d]:
    """pre, a, b(, c): each module's conv (a is conv + ReLU)."""
    result = {}
    for k in ("pre", "a", "b", "c"):
        m = getattr(model, k, None)
        if m is not None:
            result[k] = next(x for x in m.modules() if isinstance(x, torch.nn.Conv2d))
    return result


def _delegate_of(case: _Case, weight: bytes) -> list[int]:
    return [s.index for s in case.npu.npu.subgraphs
            if sum(c == weight for c in s.subprogram.constants) == 1]


def test_every_weight_once_and_delegated_weights_only_in_their_blob(case) -> None:
    cpu_pte, npu_pte = case.cpu.pte_bytes, case.npu.pte_bytes
    consts = parse(npu_pte).constants
    plan = case.npu.program.execution_plan[0]
    ins = plan.chains[0].instructions
    for name, conv in _convs(case.model).items():
        w = _int8_ohwi(conv)
        assert cpu_pte.count(w) == 1, name  # the search finds them where they are stored raw
        assert all(w not in c for c in consts), name  # not in the constant segment
        if name != "pre":  # 9 bytes of an identity kernel may occur by chance elsewhere
            assert npu_pte.count(w) == 0, name
        owners = _delegate_of(case, w)
        assert len(owners) == 1, (name, owners)  # the input of exactly one delegate
        blob = parse_blob(case.npu.program.segments_data[plan.delegates[owners[0]].segment_index])
        assert len(blob.weights) > 0
        if name != "pre":  # that delegate runs inside the branch that uses the conv
            where = [i for i, x in enumerate(ins)
                     if isinstance(x, pm.DelegateCall) and x.delegate_index == owners[0]]
            assert [BRANCH_OF[case.name].get(i) for i in where] == [name]
    # one segment per delegate, none shared
    segs = [d.segment_index for d in plan.delegates]
    assert len(set(segs)) == len(segs) == len(case.npu.program.segments_data)


def _consumed_constants(cpu: pm.Program, groups: list[list[int]]) -> set[int]:
    """Constant buffers the delegated calls read in the CPU program and no CPU call reads."""
    plan = cpu.execution_plan[0]
    delegated = {i for g in groups for i in g}

    def consts(i: int) -> set[int]:
        x = plan.chains[0].instructions[i]
        args = x.args if isinstance(x, pm.KernelCall) else []
        return {plan.values[v].data_buffer_idx for v in args
                if isinstance(plan.values[v], pm.Tensor) and plan.values[v].data_buffer_idx > 0}

    n = len(plan.chains[0].instructions)
    used_by_cpu = set().union(*(consts(i) for i in range(n) if i not in delegated))
    return set().union(*(consts(i) for i in delegated)) - used_by_cpu


def _without_consumption(npu: pm.Program, cpu: pm.Program, consumed: set[int]) -> pm.Program:
    """The NPU program with the consumed constants kept (as constant tensor values)."""
    plan = npu.execution_plan[0]
    constants = list(npu.constants)
    values = list(plan.values)
    for idx in sorted(consumed):
        constants.append(cpu.constants[idx])
        n = len(cpu.constants[idx])
        values.append(pm.Tensor(pm.ScalarType.CHAR, [n], [0], data_buffer_idx=len(constants) - 1))
    return dataclasses.replace(
        npu, constants=constants,
        execution_plan=[dataclasses.replace(plan, values=values)])


def test_consuming_pte_smaller_by_the_consumed_weights(case) -> None:
    groups = [s.instructions for s in case.npu.npu.subgraphs]
    consumed = _consumed_constants(case.cpu.program, groups)
    consumed_bytes = sum(len(case.cpu.program.constants[i]) for i in consumed)
    weights = sum(len(_int8_ohwi(conv)) for conv in _convs(case.model).values())
    assert consumed_bytes >= weights  # every conv's weights among them (plus biases, tables)
    npu_consts = parse(case.npu.pte_bytes).constants
    cpu_consts = parse(case.cpu.pte_bytes).constants
    assert sum(map(len, npu_consts)) == sum(map(len, cpu_consts)) - consumed_bytes
    baseline = serialize(_without_consumption(case.npu.program, case.cpu.program, consumed))
    assert len(baseline) - len(case.npu.pte_bytes) >= consumed_bytes
    assert sum(map(len, parse(baseline).constants)) == sum(map(len, cpu_consts))


class SharedCpuNpuNet(torch.nn.Module):
    """Conv `a` runs in the true branch (NPU) and, with stride 4 (beyond U55: CPU), after the
    cond: one weight read by a delegate and by a CPU call."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = _identity_pre()
        self.a = _conv(1)
        self.b = _conv(2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.pre(x)
        y = torch.cond(x.mean() > 0, lambda t: self.a(t), lambda t: self.b(t), (x,))
        z = torch.nn.functional.conv2d(x, self.a.weight, self.a.bias, stride=4, padding=1)
        return y, z


def test_weight_shared_by_a_delegate_and_a_cpu_call_stored_once(tmp_path) -> None:
    cal = [(x,) for s in range(2) for x in _inputs(200 + s)]
    c = _Case("shared", SharedCpuNpuNet(), cal, tmp_path)
    w = _int8_ohwi(c.model.a)
    consts = parse(c.npu.pte_bytes).constants
    assert sum(x == w for x in consts) == 1 and c.npu.pte_bytes.count(w) == 1
    assert len(_delegate_of(c, w)) == 1
    for x in _inputs(8):
        want = run_program(c.cpu.program, [x.numpy()])
        got = torchmcu.run_on_host(c.path, [x.numpy()])
        assert [g.tobytes() for g in got] == [v.tobytes() for v in want]


def test_map_body_delegated_inside_the_loop(tmp_path) -> None:
    model = MapNet().eval()
    cal = [(x,) for x in _batches(11)]
    c = _Case("map", model, cal, tmp_path)
    kinds = _kinds(c.npu.program)
    start = kinds.index("select_copy")
    assert kinds[start:] == ["select_copy", "DelegateCall", "et_copy_index", "add", "eq",
                             f"JumpFalseCall>{start}", "sub", "dequantize_per_tensor"]
    w = _int8_ohwi(_convs(model)["a"])
    assert c.cpu.pte_bytes.count(w) == 1 and c.npu.pte_bytes.count(w) == 0
    for x in _batches(12):
        want = run_program(c.cpu.program, [x.numpy()])[0]
        for _ in range(2):  # the loop counter is reset between runs
            got = torchmcu.run_on_host(c.path, [x.numpy()])[0]
            assert got.tobytes() == want.tobytes()
    assert np.abs(want).max() > 0
