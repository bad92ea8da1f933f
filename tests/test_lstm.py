"""A one-layer nn.LSTM sequence model (examples.models "lstm") end to end.

torch.export keeps the LSTM as aten.lstm; export unrolls it (8 steps: linear, add, gate
slices, sigmoid/tanh as int8 lookup tables, mul, add). Checked here:
- the CPU-only program: the C host runtime equals the reference interpreter bit for bit, and
  both stay within a few output steps of torchao's fake-quantized graph (the float semantics
  the integer program approximates);
- ethos-u85-256 on corstone-320: everything but the program's input quantize / output
  dequantize runs in one EthosUBackend delegate; the C host runtime with the delegate on the
  TOSA reference model equals the CPU-only program in the reference interpreter; the bundled
  program passes `torchmcu run X.bpte --host`; the corstone-320 firmware with it links.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from torchmcu import native
from torchmcu.api import export_quantized
from torchmcu.examples import models
from torchmcu.npu.config import resolve_target
from torchmcu.pte import program as pm
from torchmcu.quantize import quantize
from torchmcu.quantize.annotation import read_annotation
from torchmcu.reference.interpreter import run_program

pytest.importorskip("tosa_reference_model")
pytest.importorskip("ethosu.vela")

BOUNDARY = {"cortex_m::quantize_per_tensor", "cortex_m::dequantize_per_tensor"}


def _numpy(sample: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    return [np.ascontiguousarray(x.numpy()) for x in sample]


@pytest.fixture(scope="module")
def lstm(tmp_path_factory):
    model, example = models.build("lstm")
    graph = quantize(model, example, models.calibration("lstm", 16))
    cpu = export_quantized(graph, board="corstone-320")
    npu = export_quantized(
        graph, board="corstone-320", npu_target=resolve_target("corstone-320", "ethos-u85-256")
    )
    return model, graph, cpu, npu, tmp_path_factory.mktemp("lstm")


def _ops(program: pm.Program) -> Counter:
    plan = program.execution_plan[0]
    return Counter(
        plan.operators[i.op_index].name if isinstance(i, pm.KernelCall) else "DelegateCall"
        for i in plan.chains[0].instructions
    )


def test_lstm_is_unrolled_into_table_activations(lstm):
    _, graph, cpu, _, _ = lstm
    targets = Counter(n.target for n in graph.graph.nodes if n.op == "call_function")
    aten = torch.ops.aten
    assert aten.lstm.input not in targets
    # 8 steps x (3 sigmoid, 2 tanh); the recurrent linear per step + the input projection + head
    assert targets[aten.sigmoid.default] == 24 and targets[aten.tanh.default] == 16
    assert targets[aten.linear.default] == 10
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target in (aten.sigmoid.default, aten.tanh.default):
            record = read_annotation(node)
            assert record is not None and record.quantized
            fixed = (1 / 256, -128) if node.target == aten.sigmoid.default else (1 / 128, 0)
            assert record.fixed_output_qparams == fixed
    ops = _ops(cpu.program)
    assert ops["cortex_m::quantized_activation"] == 40
    assert ops["torchmcu::slice_copy"] == 40  # 8 time steps + 8 x 4 gates
    assert ops["cortex_m::quantized_linear"] == 10


def test_cpu_program_bit_exact_on_host_and_close_to_fake_quant(lstm):
    _, graph, cpu, _, _ = lstm
    scale = cpu.report["outputs"][0]["scale"]
    steps = []
    for sample in models.calibration("lstm", 24, seed=3):
        x = _numpy(sample)
        ours = run_program(cpu.program, x)[0]
        host = native.run_program(cpu.pte_bytes, x)[0]
        np.testing.assert_array_equal(host, ours)
        fake = graph(*sample).detach().numpy()
        steps.append(np.abs(ours - fake).max() / scale)
    p99 = float(np.percentile(steps, 99))
    print(f"LSTM CPU program vs torchao fake-quant: p99 {p99:.2f} output steps, max {max(steps):.2f}")
    assert p99 <= 2.0


def test_u85_one_delegate_bit_exact_with_the_cpu_program(lstm):
    _, _, cpu, npu, tmp = lstm
    ops = _ops(npu.program)
    assert ops == Counter({"cortex_m::quantize_per_tensor": 3, "cortex_m::dequantize_per_tensor": 1,
                           "DelegateCall": 1})
    placement = npu.report["npu"]["placement"]
    table_ops = [p for p in placement if "(sigmoid)" in p["reason"] or "(tanh)" in p["reason"]]
    assert len(table_ops) == 40 and all(p["where"] == "npu" for p in table_ops)
    assert npu.report["npu"]["macs"]["fraction"] == 1.0
    assert npu.report["npu"]["estimate"]["cycles_npu"] > 0
    path = npu.save(tmp / "u85", "lstm")
    from torchmcu.api import run_on_host

    for sample in models.calibration("lstm", 4, seed=9):
        x = _numpy(sample)
        np.testing.assert_array_equal(run_on_host(path, x)[0], run_program(cpu.program, x)[0])


def test_bundled_lstm_checked_on_host(lstm, capsys):
    from torchmcu.cli import main

    _, _, _, npu, tmp = lstm
    samples = [_numpy(s) for s in models.calibration("lstm", 2, seed=11)]
    path = npu.save(tmp / "bundle", "lstm", bundle_samples=samples)
    assert main(["run", str(path.with_suffix(".bpte")), "--host"]) == 0
    assert "2/2 test cases pass" in capsys.readouterr().out


def test_corstone_320_firmware_links_the_lstm_program(lstm):
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.fail("arm-none-eabi-gcc is not installed")
    from torchmcu.device.build import build

    _, _, _, npu, tmp = lstm
    path = npu.save(tmp / "fw", "lstm")
    image = build(path, "corstone-320", tmp / "fw" / "build")
    nm = subprocess.run(["arm-none-eabi-nm", str(image.elf)], capture_output=True, text=True,
                        check=True)
    symbols = {line.split()[-1] for line in nm.stdout.splitlines()}
    assert {"tm_ethos_u_backend", "tm_ethosu_run", "tm_cortex_m_quantize_per_tensor_out"} <= symbols
    assert Path(image.elf).stat().st_size > 0


def test_cpu_program_on_cortex_m55_matches_the_host(lstm):
    """The CPU-only program on QEMU (Cortex-M55: the table kernel's Helium gather path and
    the slice copies) equals the host runtime bit for bit."""
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.fail("arm-none-eabi-gcc and qemu-system-arm are needed")
    from torchmcu import device

    _, _, cpu, _, tmp = lstm
    samples = [_numpy(s) for s in models.calibration("lstm", 2, seed=13)]
    outs, _ = device.run_samples(cpu.pte_bytes, "qemu-an547", samples, tmp / "m55", timeout=120)
    for sample, got in zip(samples, outs):
        np.testing.assert_array_equal(got[0], native.run_program(cpu.pte_bytes, sample)[0])


class _ZeroState(models.LSTMSequence):
    """The common form: `lstm(x)` with the zero initial state the module makes itself, the
    last step of the output sequence."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def test_zero_initial_state_and_last_output_step(lstm):
    """The zero state is folded (no zeros, no concatenated sequence left); CPU program on the
    host equals the interpreter and stays near fake-quant; on U85 one delegate, bit-exact."""
    model, _, _, _, tmp = lstm
    zero = _ZeroState()
    zero.load_state_dict(model.state_dict())
    zero.eval()
    calib = [(s[0],) for s in models.calibration("lstm", 16)]
    graph = quantize(zero, calib[0], calib)
    targets = {n.target for n in graph.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.zeros.default not in targets and torch.ops.aten.cat.default not in targets
    cpu = export_quantized(graph, board="corstone-320")
    npu = export_quantized(
        graph, board="corstone-320", npu_target=resolve_target("corstone-320", "ethos-u85-256")
    )
    assert _ops(npu.program)["DelegateCall"] == 1
    path = npu.save(tmp / "zero", "lstm_zero")
    from torchmcu.api import run_on_host

    scale = cpu.report["outputs"][0]["scale"]
    steps, off_float = [], []
    for (x,) in [(s[0],) for s in models.calibration("lstm", 12, seed=21)]:
        xs = [np.ascontiguousarray(x.numpy())]
        ours = run_program(cpu.program, xs)[0]
        np.testing.assert_array_equal(native.run_program(cpu.pte_bytes, xs)[0], ours)
        np.testing.assert_array_equal(run_on_host(path, xs)[0], ours)
        steps.append(np.abs(ours - graph(x).detach().numpy()).max() / scale)
        off_float.append(np.abs(ours - zero(x).detach().numpy()).max() / scale)
    print(f"zero-state LSTM: fake-quant p99 {np.percentile(steps, 99):.2f} steps, float median "
          f"{np.median(off_float):.1f} max {max(off_float):.1f} steps")
    assert float(np.percentile(steps, 99)) <= 2.0
    assert float(np.median(off_float)) <= 8.0  # int8 LSTM vs float: a few steps typically
