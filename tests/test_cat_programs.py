"""Programs whose aten::cat joins several tensors (issue 15, bug 2.1).

cat reads its inputs through one TensorList value; the buffer lifetimes once missed those
reads, so the planner gave cat's inputs the bytes of its output and the runtime refused the
program (`INVALID_ARGUMENT ... operator aten::cat.out`). Checked here, for three Linear
outputs joined by torch.cat and for an nn.LSTM returning its whole output sequence (the
decomposition concatenates the steps): the C host runtime and the qemu-an547 firmware equal
the reference interpreter bit for bit, and the reference equals torchao's fake-quantized
graph (cat of dequantized int8 tensors is exact in float). And: a plan that lets two live
buffers share bytes is refused at export, naming the instruction, and nothing is written.

The cat is kept in float here (the quantizer's set_operator, the CLI's --float-op cat): that is
the portable aten::cat of the bug. An int8 cat is torchmcu::quantized_cat
(tests/ops/test_quantized_cat.py, tests/ops/test_layout_models.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from torch import nn
from torchmcu import device, native
from torchmcu.plan.check import PlanError
from torchmcu.pte import program as pm
from torchmcu.quantize import TorchmcuQuantizer
from torchmcu.reference.interpreter import run_program


class CatOfLinears(nn.Module):
    """The model of the issue: three Linear(8, 8) of the same input joined along dim 1."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.a(x), self.b(x), self.c(x)], dim=1)


class LSTMWholeSequence(nn.Module):
    """nn.LSTM(16, 16) over 6 steps returning the whole output sequence y (not y[:, -1])."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 16, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return y


SHAPES = {"cat": (1, 8), "lstm_sequence": (1, 6, 16)}


def _model(name: str) -> nn.Module:
    torch.manual_seed(5)
    return (CatOfLinears() if name == "cat" else LSTMWholeSequence()).eval()


def _samples(name: str, n: int, seed: int) -> list[tuple[torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(SHAPES[name], generator=gen),) for _ in range(n)]


@pytest.fixture(scope="module")
def exported():
    cache: dict[str, torchmcu.ExportedModel] = {}

    def get(name: str):
        if name not in cache:
            model = _model(name)
            quantizer = TorchmcuQuantizer().set_operator(torch.ops.aten.cat.default, None)
            cache[name] = torchmcu.export(
                model,
                _samples(name, 1, 0)[0],
                calibration=_samples(name, 16, 1),
                quantizer=quantizer,
            )
        return cache[name]

    return get


@pytest.mark.parametrize("name", ["cat", "lstm_sequence"])
def test_cat_inputs_and_output_do_not_share_arena_bytes(name: str, exported) -> None:
    exp = exported(name)
    plan = exp.program.execution_plan[0]
    cats = [
        ins
        for ins in plan.chains[0].instructions
        if isinstance(ins, pm.KernelCall) and plan.operators[ins.op_index].name == "aten::cat"
    ]
    assert len(cats) == 1
    tensors, out = plan.values[cats[0].args[0]].items, plan.values[cats[0].args[-1]]
    ranges = [
        (plan.values[i].allocation.offset, plan.values[i].allocation.offset + plan.values[i].nbytes)
        for i in [*tensors, cats[0].args[-1]]
    ]
    assert len(tensors) == (3 if name == "cat" else 6)
    assert out.nbytes == sum(plan.values[i].nbytes for i in tensors)
    for k, (a0, a1) in enumerate(ranges):
        for b0, b1 in ranges[k + 1 :]:
            assert a1 <= b0 or b1 <= a0, f"{name}: cat's tensors overlap: {ranges}"


@pytest.mark.parametrize("name", ["cat", "lstm_sequence"])
def test_host_runtime_bit_exact_with_reference_and_fake_quant(name: str, exported) -> None:
    exp = exported(name)
    graph = exp.quantized_model
    for (x,) in _samples(name, 8, seed=3):
        ours = run_program(exp.program, [x.numpy()])[0]
        host = native.run_program(exp.pte_bytes, [x.numpy()])[0]
        assert host.dtype == np.float32 and host.shape == tuple(graph(x).shape)
        np.testing.assert_array_equal(host, ours)
        fake = graph(x).detach().numpy()
        if name == "cat":  # dequantize + cat in float: exactly torchao's graph
            np.testing.assert_array_equal(ours, fake)
        else:  # integer LSTM against fake-quant float: a few steps of the output grid
            step = float(np.min(np.diff(np.unique(ours)))) if np.unique(ours).size > 1 else 1.0
            assert np.abs(ours - fake).max() <= 4 * step + 1e-6


@pytest.mark.needs("arm-gcc", "newlib", "qemu")
def test_qemu_firmware_bit_exact_with_reference(exported, tmp_path_factory) -> None:
    # One build directory: the libraries compile once, the second program is a relink.
    build_dir = tmp_path_factory.mktemp("cat_fw")
    for name in ("cat", "lstm_sequence"):
        exp = exported(name)
        samples = [[x.numpy()] for (x,) in _samples(name, 3, seed=4)]
        outs, result = device.run_samples(
            exp.pte_bytes, "qemu-an547", samples, build_dir, timeout=120
        )
        assert "TM_END status=OK samples=3" in result.console
        for sample, on_device in zip(samples, outs):
            ref = run_program(exp.program, sample)[0]
            assert on_device[0].dtype == ref.dtype and on_device[0].tobytes() == ref.tobytes(), name


def _cat_on_its_inputs(real):
    """The planner fed the old lifetimes: cat's float inputs dead right after their dequantize."""

    def planner(requests):
        return real(
            [
                dataclasses.replace(r, last_use=r.first_use) if r.key.endswith(".f32") else r
                for r in requests
            ]
        )

    return planner


def test_export_refuses_a_plan_that_aliases_live_buffers(monkeypatch, exported) -> None:
    import torchmcu.plan

    graph = exported("cat").quantized_model
    monkeypatch.setattr(torchmcu.plan, "plan_memory", _cat_on_its_inputs(torchmcu.plan.plan_memory))
    from torchmcu.api import export_quantized

    with pytest.raises(PlanError) as err:
        export_quantized(graph)
    message = str(err.value)
    assert err.value.instruction == 7
    assert "instruction 7 (aten::cat.out)" in message
    assert "uses buffer 'linear.f32'" in message
    assert "node cat (aten.cat)" in message


def test_cli_export_writes_nothing_for_a_refused_plan(monkeypatch, tmp_path: Path, capsys) -> None:
    import torchmcu.plan
    from torchmcu.cli import main

    src = tmp_path / "m.py"
    src.write_text(
        "import torch\n"
        "from torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)\n\n"
        "    def forward(self, x):\n"
        "        return torch.cat([self.a(x), self.b(x), self.c(x)], dim=1)\n\n"
        "def build():\n"
        "    return M().eval(), (torch.randn(1, 8),)\n\n"
        "def calibration_samples():\n"
        "    g = torch.Generator().manual_seed(1)\n"
        "    return [(torch.randn(1, 8, generator=g),) for _ in range(4)]\n"
    )
    monkeypatch.setattr(torchmcu.plan, "plan_memory", _cat_on_its_inputs(torchmcu.plan.plan_memory))
    out = tmp_path / "out"
    assert main(["export", f"{src}:build", "--float-op", "cat", "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert "instruction 7 (aten::cat.out)" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())
