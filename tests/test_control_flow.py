"""torch.cond and torch.map end to end: quantized branch/loop bodies, JumpFalseCall/MoveCall in one instruction list,
the host runtime and QEMU bit-exact with the reference interpreter for inputs taking each
branch; load-time rejection of bad control-flow instructions; clear errors for what is not
supported.

Which branch ran is checked against the float model independently of the program: the int8
output must be close to the float output of the branch the float predicate picks and far from
the other branch's.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from torch._higher_order_ops.map import map as tmap
from torchmcu import native
from torchmcu.lower.errors import UnsupportedOpError
from torchmcu.pte import program as pm
from torchmcu.pte import writer
from torchmcu.pte.validate import ProgramError
from torchmcu.reference.interpreter import run_program

SHAPE = (1, 3, 8, 8)


def _conv(seed: int, relu: bool = False) -> torch.nn.Module:
    torch.manual_seed(seed)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    return torch.nn.Sequential(conv, torch.nn.ReLU()) if relu else conv


def _identity_pre() -> torch.nn.Conv2d:
    pre = torch.nn.Conv2d(3, 3, 1)
    with torch.no_grad():
        pre.weight.copy_(torch.eye(3).reshape(3, 3, 1, 1))
        pre.bias.zero_()
    return pre


class CondNet(torch.nn.Module):
    """Two conv branches of different weights, picked by the mean of the (int8) activation."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = _identity_pre()
        self.a = _conv(1, relu=True)
        self.b = _conv(2)

    def branches(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        x = self.pre(x)
        return {"a": self.a(x), "b": self.b(x)}

    def taken(self, x: torch.Tensor) -> str:
        return "a" if self.pre(x).mean() > 0 else "b"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        return torch.cond(x.mean() > 0, lambda t: self.a(t), lambda t: self.b(t), (x,))


class NestedCondNet(torch.nn.Module):
    """Outer cond on mean > 0; its true branch is another cond on mean > 0.8."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = _identity_pre()
        self.a = _conv(1, relu=True)
        self.b = _conv(2)
        self.c = _conv(3)

    def branches(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        x = self.pre(x)
        return {"a": self.a(x), "b": self.b(x), "c": self.c(x)}

    def taken(self, x: torch.Tensor) -> str:
        m = self.pre(x).mean()
        return ("c" if m > 0.8 else "a") if m > 0 else "b"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)

        def inner(t: torch.Tensor) -> torch.Tensor:
            return torch.cond(t.mean() > 0.8, lambda u: self.c(u), lambda u: self.a(u), (t,))

        return torch.cond(x.mean() > 0, inner, lambda t: self.b(t), (x,))


class MapNet(torch.nn.Module):
    """torch.map of a conv + ReLU body over the batch (dim 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = _identity_pre()
        self.a = _conv(1, relu=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        return tmap(lambda t: self.a(t.unsqueeze(0)).squeeze(0), x)


def _inputs(seed: int) -> list[torch.Tensor]:
    """Inputs whose means are far from the thresholds: ~-0.8, ~0.4 and ~1.6."""
    g = torch.Generator().manual_seed(seed)
    base = [torch.rand(SHAPE, generator=g) for _ in range(3)]
    return [-0.3 - base[0], base[1] * 0.6 + 0.1, base[2] + 1.1]


@pytest.fixture(scope="module", params=["cond", "nested"])
def case(request):
    model = (CondNet() if request.param == "cond" else NestedCondNet()).eval()
    cal = [(x,) for s in range(3) for x in _inputs(100 + s)]
    exp = torchmcu.export(model, (cal[0][0],), calibration=cal)
    return request.param, model, exp


def _batches(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn((3, *SHAPE[1:]), generator=g) for _ in range(2)]


@pytest.fixture(scope="module")
def mapped():
    model = MapNet().eval()
    cal = [(x,) for x in _batches(11)]
    return model, torchmcu.export(model, cal[0], calibration=cal)


def test_map_loop_form_and_bit_exact(mapped) -> None:
    model, exp = mapped
    plan = exp.program.execution_plan[0]
    ins = plan.chains[0].instructions
    names = [f"{plan.operators[i.op_index].name}.{plan.operators[i.op_index].overload}"
             if isinstance(i, pm.KernelCall) else type(i).__name__ for i in ins]
    start = names.index("aten::select_copy.int_out")
    assert names[start - 1] == "aten::sym_size.int"
    k = names.index("executorch_prim::et_copy_index.tensor")
    assert names[k:k + 5] == ["executorch_prim::et_copy_index.tensor", "executorch_prim::add.Scalar",
                              "executorch_prim::eq.Scalar", "JumpFalseCall", "executorch_prim::sub.Scalar"]
    assert ins[k + 3].destination_instruction == start  # back to the slice of the next item
    for x in _batches(12):
        ref = run_program(exp.program, [x.numpy()])[0]
        for _ in range(2):  # the counter is reset: a second run gives the same bytes
            assert _same_bits(ref, native.run_program(exp.pte_bytes, [x.numpy()])[0])
        with torch.no_grad():
            want = torch.stack([model.a(model.pre(x[i:i + 1]))[0] for i in range(x.shape[0])]).numpy()
        assert np.abs(ref - want).max() < 0.1  # every item went through the body


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_program_uses_executorch_control_flow_form(case) -> None:
    name, _, exp = case
    plan = exp.program.execution_plan[0]
    ins = plan.chains[0].instructions
    jumps = [i for i in ins if isinstance(i, pm.JumpFalseCall)]
    moves = [i for i in ins if isinstance(i, pm.MoveCall)]
    conds = 1 if name == "cond" else 2
    assert len(jumps) == 2 * conds and len(moves) == 2 * conds
    for j in jumps:
        cond = plan.values[j.cond_value_index]
        assert isinstance(cond, pm.Bool) and cond.value is False or (
            isinstance(cond, pm.Tensor) and cond.scalar_type == pm.ScalarType.BOOL)
        assert 0 < j.destination_instruction < len(ins)
    ops = {f"{o.name}.{o.overload}" for o in plan.operators}
    assert {"aten::sum.IntList_out", "aten::gt.Scalar_out"} <= ops
    # the three (or two) branch convs have different weights: all kept, once each
    assert sum(1 for o in plan.operators if o.name == "cortex_m::quantized_conv2d") == 1
    n_convs = sum(1 for i in ins if isinstance(i, pm.KernelCall)
                  and plan.operators[i.op_index].name == "cortex_m::quantized_conv2d")
    assert n_convs == (3 if name == "cond" else 4)  # pre + one per branch body


def test_each_branch_taken_and_host_runtime_bit_exact(case) -> None:
    name, model, exp = case
    taken = set()
    for x in _inputs(7):
        ref = run_program(exp.program, [x.numpy()])[0]
        got = native.run_program(exp.pte_bytes, [x.numpy()])[0]
        assert _same_bits(ref, got), f"{name}: host runtime differs from the reference interpreter"
        with torch.no_grad():
            want = model.taken(x)
            outs = {k: v.numpy() for k, v in model.branches(x).items()}
        err = {k: float(np.abs(ref - v).max()) for k, v in outs.items()}
        assert err[want] < 0.1, (name, want, err)
        assert all(err[k] > 3 * err[want] for k in err if k != want), (name, want, err)
        taken.add(want)
    assert taken == ({"a", "b"} if name == "cond" else {"a", "b", "c"})


@pytest.mark.needs("arm-gcc", "newlib", "qemu")
def test_qemu_bit_exact_with_reference(case, tmp_path_factory) -> None:
    name, _, exp = case
    _qemu(name, exp, [[x.numpy()] for x in _inputs(7)], tmp_path_factory)


@pytest.mark.needs("arm-gcc", "newlib", "qemu")
def test_qemu_map_bit_exact_with_reference(mapped, tmp_path_factory) -> None:
    _qemu("map", mapped[1], [[x.numpy()] for x in _batches(12)], tmp_path_factory)


def _qemu(name: str, exp, samples: list, tmp_path_factory) -> None:
    from torchmcu import device

    root = Path(tmp_path_factory.getbasetemp()) / "cf-an547"
    outs, result = device.run_samples(exp.pte_bytes, "qemu-an547", samples, root, timeout=120)
    assert f"TM_END status=OK samples={len(samples)}" in result.console
    for s, dev in zip(samples, outs):
        assert _same_bits(dev[0], run_program(exp.program, s)[0]), f"{name}: QEMU differs"


# ---- hostile programs: rejected at load -----------------------------------------------------

def _cond_program() -> pm.Program:
    model = CondNet().eval()
    cal = [(x,) for x in _inputs(5)]
    return copy.deepcopy(torchmcu.export(model, (cal[0][0],), calibration=cal).program)


@pytest.fixture(scope="module")
def base_program() -> pm.Program:
    return _cond_program()


def _first(program: pm.Program, kind: type) -> int:
    ins = program.execution_plan[0].chains[0].instructions
    return next(i for i, x in enumerate(ins) if isinstance(x, kind))


def _load_error(program: pm.Program, shape: tuple[int, ...] = SHAPE) -> str:
    data = writer.serialize(program)
    x = np.zeros(shape, np.float32)
    with pytest.raises(native.NativeError) as err:
        native.run_program(data, [x])
    return str(err.value)


def test_jump_destination_out_of_range_rejected(base_program, monkeypatch) -> None:
    p = copy.deepcopy(base_program)
    ins = p.execution_plan[0].chains[0].instructions
    k = _first(p, pm.JumpFalseCall)
    ins[k] = pm.JumpFalseCall(ins[k].cond_value_index, len(ins) + 1)  # len(ins): ends the method
    with pytest.raises(ProgramError, match="destination"):
        writer.serialize(p)  # our own writer refuses it too
    monkeypatch.setattr(writer, "validate", lambda program: None)
    msg = _load_error(p)
    assert "jump condition or destination out of range" in msg and f"instruction {k}" in msg, msg


def test_jump_condition_of_wrong_kind_rejected(base_program) -> None:
    p = copy.deepcopy(base_program)
    plan = p.execution_plan[0]
    ins = plan.chains[0].instructions
    k = _first(p, pm.JumpFalseCall)
    plan.values.append(pm.Int(1))
    ins[k] = pm.JumpFalseCall(len(plan.values) - 1, ins[k].destination_instruction)
    msg = _load_error(p)
    assert "jump condition is not a Bool" in msg and f"instruction {k}" in msg, msg


@pytest.mark.parametrize("what", ["int_to_tensor", "other_sizes"])
def test_move_of_mismatched_kinds_rejected(base_program, what: str) -> None:
    p = copy.deepcopy(base_program)
    plan = p.execution_plan[0]
    ins = plan.chains[0].instructions
    k = _first(p, pm.MoveCall)
    move = ins[k]
    if what == "int_to_tensor":
        plan.values.append(pm.Int(3))
        ins[k] = pm.MoveCall(len(plan.values) - 1, move.move_to)
    else:
        t = copy.deepcopy(plan.values[move.move_from])
        assert isinstance(t, pm.Tensor)
        t.sizes = [t.sizes[0], t.sizes[1], t.sizes[2] // 2, t.sizes[3]]
        plan.values.append(t)
        ins[k] = pm.MoveCall(len(plan.values) - 1, move.move_to)
    msg = _load_error(p)
    assert "move between values of different kinds" in msg and f"instruction {k}" in msg, msg


# ---- unsupported constructs: clear errors naming the construct and the source line ----------

class WhileNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre = _identity_pre()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        return torch._higher_order_ops.while_loop(  # the user's line
            lambda i, t: i < 3, lambda i, t: (i + 1, t * 0.5), (torch.tensor(0), x))[1]


class BadPredicateNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre = _identity_pre()
        self.a, self.b = _conv(1), _conv(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        return torch.cond(x.amax() > 0, lambda t: self.a(t), lambda t: self.b(t), (x,))


def test_unsupported_predicate_names_construct_and_line() -> None:
    x = _inputs(3)[1]
    with pytest.raises(UnsupportedOpError) as err:
        torchmcu.export(BadPredicateNet().eval(), (x,), calibration=[(x,)])
    msg = str(err.value)  # amax has an int8 kernel now: the predicate's rule is what refuses
    assert "torch.cond predicate must be x.mean() or x.sum()" in msg, msg
    assert "test_control_flow.py:" in msg and "x.amax() > 0" in msg, msg


def test_while_loop_names_construct_and_line() -> None:
    x = _inputs(3)[1]
    try:
        torch.export.export(WhileNet().eval(), (x,))
    except Exception as exc:  # noqa: BLE001 - torch cannot export it here: nothing to lower
        pytest.skip(f"torch.export cannot capture this while_loop: {type(exc).__name__}")
    with pytest.raises(UnsupportedOpError) as err:
        torchmcu.export(WhileNet().eval(), (x,), calibration=[(x,)])
    msg = str(err.value)
    assert "while_loop" in msg and "test_control_flow.py" in msg, msg


def _op_index(plan: pm.ExecutionPlan, name: str) -> int:
    ins = plan.chains[0].instructions
    return next(k for k, i in enumerate(ins) if isinstance(i, pm.KernelCall)
                and plan.operators[i.op_index].name == name)


def test_loop_counter_used_by_a_kernel_rejected(mapped) -> None:
    p = copy.deepcopy(mapped[1].program)
    plan = p.execution_plan[0]
    ins = plan.chains[0].instructions
    counter = ins[_op_index(plan, "executorch_prim::add")].args[2]
    k = _op_index(plan, "cortex_m::dequantize_per_tensor")
    zp = next(j for j, a in enumerate(ins[k].args) if isinstance(plan.values[a], pm.Int))
    ins[k].args[zp] = counter  # a kernel that skips its checks once verified must not see it change
    msg = _load_error(p, shape=(3, *SHAPE[1:]))
    assert "loop counter or condition is used outside the loop kernels" in msg and f"instruction {k}" in msg


def test_copy_index_into_a_constant_rejected(mapped) -> None:
    p = copy.deepcopy(mapped[1].program)
    plan = p.execution_plan[0]
    ins = plan.chains[0].instructions
    k = _op_index(plan, "executorch_prim::et_copy_index")
    const = copy.deepcopy(plan.values[ins[k].args[0]])
    const.allocation, const.data_buffer_idx = None, len(p.constants)
    p.constants.append(bytes(const.nbytes))
    plan.values.append(const)
    ins[k].args[0] = len(plan.values) - 1
    msg = _load_error(p, shape=(3, *SHAPE[1:]))
    assert "loop kernel result is not a planned tensor" in msg and f"instruction {k}" in msg, msg


# ---- weights stored once ----------------------------------------------------------------------

class SharedWeightCondNet(torch.nn.Module):
    """Both branches use conv `a` (one after a ReLU): its weights must be stored once."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = _identity_pre()
        self.a = _conv(1)
        self.b = _conv(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        return torch.cond(x.mean() > 0, lambda t: self.a(t), lambda t: self.b(torch.relu(self.a(t))[:, :3]),
                          (x,))


def _int8_ohwi(conv: torch.nn.Conv2d) -> bytes:
    """Per-output-channel symmetric int8 weights in OHWI order (independent of the code under test:
    only the quantization rule, max|w|/127 per channel, is assumed)."""
    w = conv.weight.detach().double()
    scale = w.abs().amax(dim=(1, 2, 3), keepdim=True) / 127.0
    q = torch.clamp(torch.round(w / scale), -127, 127).to(torch.int8)
    return q.permute(0, 2, 3, 1).contiguous().numpy().tobytes()


def test_every_weight_stored_once(case) -> None:
    name, model, exp = case
    consts = exp.program.constants
    blob = b"".join(consts)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    for conv in convs:
        want = _int8_ohwi(conv)
        assert sum(c == want for c in consts) == 1, f"{name}: a conv's int8 weights not stored once"
        assert conv.weight.detach().numpy().tobytes() not in blob  # no float copy of the weights
    weight_bytes = sum(m.weight.numel() for m in convs)
    # int8 weights once each + per-channel bias/requantization tables (12 bytes a channel at most)
    assert sum(len(c) for c in consts) <= weight_bytes + sum(12 * m.out_channels for m in convs)


def test_weight_shared_by_both_branches_stored_once() -> None:
    model = SharedWeightCondNet().eval()
    cal = [(x,) for x in _inputs(5)]
    exp = torchmcu.export(model, (cal[0][0],), calibration=cal)
    a = _int8_ohwi(model.a)
    assert sum(c == a for c in exp.program.constants) == 1
    for x in _inputs(9):
        assert _same_bits(run_program(exp.program, [x.numpy()])[0],
                          native.run_program(exp.pte_bytes, [x.numpy()])[0])


class LinearCondNet(torch.nn.Module):
    """Branches end in linear layers: with int8 I/O the cond is the program's last instruction
    range and its final jump goes to the instruction count (the end of the method)."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = _identity_pre()
        torch.manual_seed(4)
        self.a, self.b = torch.nn.Linear(192, 5), torch.nn.Linear(192, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x).flatten(1)
        return torch.cond(x.mean() > 0, lambda t: self.a(t), lambda t: self.b(t), (x,))


def test_cond_at_the_end_jumps_to_the_instruction_count() -> None:
    cal = [(x,) for s in range(2) for x in _inputs(20 + s)]
    model = LinearCondNet().eval()
    exp = torchmcu.export(model, cal[0], calibration=cal, int8_io=True)
    ins = exp.program.execution_plan[0].chains[0].instructions
    assert isinstance(ins[-1], pm.MoveCall)
    assert max(j.destination_instruction for j in ins if isinstance(j, pm.JumpFalseCall)) == len(ins)
    qin, qout = exp.report["inputs"][0], exp.report["outputs"][0]
    taken = set()
    for x in _inputs(21):
        q = np.clip(np.round(x.numpy() / qin["scale"]) + qin["zero_point"], -128, 127).astype(np.int8)
        ref = run_program(exp.program, [q])[0]
        assert _same_bits(ref, native.run_program(exp.pte_bytes, [q])[0])
        with torch.no_grad():
            h = model.pre(x).flatten(1)
            want, other = (model.a, model.b) if h.mean() > 0 else (model.b, model.a)
            taken.add(want is model.a)
            w, o = want(h).numpy(), other(h).numpy()
        got = (ref.astype(np.float32) - qout["zero_point"]) * qout["scale"]
        assert 3 * np.abs(got - w).max() < np.abs(got - o).max()
    assert taken == {True, False}


def test_selected_operators_list_the_control_flow_kernels(case, mapped, tmp_path) -> None:
    import yaml

    _, _, exp = case
    exp.save(tmp_path / "cond", "m")
    doc = yaml.safe_load((tmp_path / "cond" / "selected_operators.yaml").read_text())
    # 0-d int64 sum and 0-d Bool predicate: empty dim orders in the kernel key
    assert doc["et_kernel_metadata"]["aten::gt.Scalar_out"] == ["v1/4;|11;|11;"]
    mapped[1].save(tmp_path / "map", "m")
    doc = yaml.safe_load((tmp_path / "map" / "selected_operators.yaml").read_text())
    assert {"aten::sym_size.int", "aten::select_copy.int_out", "executorch_prim::et_copy_index.tensor",
            "executorch_prim::add.Scalar", "executorch_prim::eq.Scalar",
            "executorch_prim::sub.Scalar"} <= set(doc["operators"])
