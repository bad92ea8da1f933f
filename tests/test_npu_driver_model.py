"""NPU programs through the firmware's own path on the host: the EthosUBackend delegate, the blob
parser and our Ethos-U driver, with the Ethos-U functional model behind the driver's register
block (issue 20, item 2; firmware/host_ext/host_npu.c). The MLPerf Tiny models and the
MobileNetV2-like net run on ethos-u55-128, ethos-u65-256 (Shared_Sram) and ethos-u85-256, the
LSTM on ethos-u85-256 too.

The references are independent of that path: the same .pte with its delegates run by the TOSA
reference model on the saved TOSA graphs, and the CPU-only program in the reference
interpreter. Faults (a bad opcode, an address outside a region) must come back through the
driver's error path, with the failing STATUS word named.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from torch import nn
from torchmcu.api import export_quantized
from torchmcu.examples import models
from torchmcu.native import NativeError
from torchmcu.npu.blob import pack_blob, parse_blob
from torchmcu.npu.config import resolve_target
from torchmcu.npu.model.decode import command_stream, decode
from torchmcu.quantize import quantize
from torchmcu.reference.interpreter import run_program

pytest.importorskip("tosa_reference_model")
pytest.importorskip("ethosu.vela")

TARGET = ("corstone-300", "ethos-u55-128")
MODELS = ("ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder", "mobilenet_v2_like")
# The Ethos-U65 with its memory in shared SRAM (no dedicated fast scratch): one 256-MAC core,
# Vela writes NPU_SET_PARALLEL_MODE 0 and one weight/scale stream per operation.
U65 = resolve_target(None, "ethos-u65-256", memory_mode="Shared_Sram")
# The Ethos-U85 (its own command set: CONFIG.product 2) on corstone-320's default memory.
U85 = resolve_target("corstone-320", "ethos-u85-256")
U85_BOARD = ("corstone-320", U85)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_models_through_driver_and_model_bit_exact(name, tmp_path):
    model, example = models.build(name)
    graph = quantize(model, example, models.calibration(name, 2))
    x = [np.ascontiguousarray(t.numpy()) for t in models.calibration(name, 3, seed=7)[2]]
    cpu_only = run_program(export_quantized(graph).program, x)
    for board, target in ((TARGET[0], resolve_target(*TARGET)), (TARGET[0], U65), U85_BOARD):
        exported = export_quantized(graph, board=board, npu_target=target)
        assert exported.npu.subgraphs, target.accelerator
        path = exported.save(tmp_path / target.accelerator)
        tosa = torchmcu.run_on_host(path, x)
        jobs: list = []
        driver = torchmcu.run_on_host(exported.pte_bytes, x, npu_trace=jobs)  # no .npu/ needed
        assert len(driver) == len(tosa) == len(cpu_only)
        for d, t, c in zip(driver, tosa, cpu_only):
            np.testing.assert_array_equal(d, t, err_msg=target.accelerator)
            np.testing.assert_array_equal(d, c, err_msg=target.accelerator)
        # the trace's MACs per NPU job add up to Vela's nn_macs for that delegate
        vela = [s.vela.estimate["nn_macs"] for s in exported.npu.subgraphs]
        assert [j.delegate for j in jobs] == list(range(len(vela)))
        assert [sum(op.macs for op in j.operations) for j in jobs] == vela, target.accelerator


@pytest.mark.slow
def test_lstm_on_u85_through_driver_and_model_bit_exact(tmp_path):
    """examples.models' LSTM (fully connected gates, elementwise MUL/ADD chained into LUT
    sigmoids and tanhs) on the Ethos-U85."""
    model, example = models.build("lstm")
    graph = quantize(model, example, models.calibration("lstm", 2))
    x = [np.ascontiguousarray(t.numpy()) for t in models.calibration("lstm", 3, seed=7)[2]]
    cpu_only = run_program(export_quantized(graph).program, x)
    exported = export_quantized(graph, board=U85_BOARD[0], npu_target=U85)
    tosa = torchmcu.run_on_host(exported.save(tmp_path), x)
    jobs: list = []
    driver = torchmcu.run_on_host(exported.pte_bytes, x, npu_trace=jobs)
    for d, t, c in zip(driver, tosa, cpu_only, strict=True):
        np.testing.assert_array_equal(d, t)
        np.testing.assert_array_equal(d, c)
    vela = [s.vela.estimate["nn_macs"] for s in exported.npu.subgraphs]
    assert [sum(op.macs for op in j.operations) for j in jobs] == vela


class _Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.c(x))


@dataclass
class _Program:
    exported: torchmcu.ExportedModel
    x: list[np.ndarray]
    stream: bytes  # the delegate's register command stream

    @property
    def pte(self) -> bytes:
        return self.exported.pte_bytes


@pytest.fixture(scope="module")
def conv() -> _Program:
    """A one-conv NPU program and an input."""
    torch.manual_seed(0)
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    graph = quantize(_Conv().eval(), cal[0], cal)
    exported = export_quantized(graph, npu_target=resolve_target(*TARGET))
    stream = command_stream(parse_blob(exported.npu.subgraphs[0].vela.blob).command_stream)
    return _Program(exported, [torch.randn(1, 3, 8, 8).numpy()], stream)


def _patched(p: _Program, word: int, value: int) -> bytes:
    """The .pte with word `word` of its (only) command stream set to `value`."""
    at = p.pte.index(p.stream)
    assert p.pte.find(p.stream, at + 1) == -1
    at += 4 * word
    return p.pte[:at] + value.to_bytes(4, "little") + p.pte[at + 4 :]


def test_one_conv_bit_exact_with_the_tosa_reference(conv, tmp_path):
    path = conv.exported.save(tmp_path)  # with conv.npu/: the TOSA reference runs the delegate
    want = torchmcu.run_on_host(path, conv.x)
    got = torchmcu.run_on_host(conv.pte, conv.x, npu_model=True)
    np.testing.assert_array_equal(got[0], want[0])
    # without a saved .npu/ folder the driver + model path is the default
    np.testing.assert_array_equal(torchmcu.run_on_host(conv.pte, conv.x)[0], want[0])


class _TwoCores(nn.Module):
    """Odd OFM depths (uneven core splits), a depthwise and a fully connected layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 21, 3, padding=1)
        self.dw = nn.Conv2d(21, 21, 3, padding=1, groups=21)
        self.c2 = nn.Conv2d(21, 13, 1)
        self.fc = nn.Linear(13 * 6 * 6, 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.c2(torch.relu(self.dw(torch.relu(self.c1(x))))))
        return self.fc(torch.flatten(x, 1))


def test_u65_512_two_cores_through_the_driver():
    """ethos-u65-512 is two 256-MAC cores: Vela writes PARALLEL_MODE 1 and a second weight
    and scale stream (WEIGHT1/SCALE1) per convolution, half the OFM channels each."""
    torch.manual_seed(2)
    cal = [(torch.randn(1, 3, 6, 6),) for _ in range(4)]
    graph = quantize(_TwoCores().eval(), cal[0], cal)
    target = resolve_target(None, "ethos-u65-512", memory_mode="Shared_Sram")
    exported = export_quantized(graph, npu_target=target)
    stream = command_stream(parse_blob(exported.npu.subgraphs[0].vela.blob).command_stream)
    names = {c.name: c.param for c in decode(stream)}
    assert names["NPU_SET_PARALLEL_MODE"] == 1 and "NPU_SET_WEIGHT1_BASE" in names
    samples = [[torch.randn(1, 3, 6, 6).numpy()] for _ in range(2)]
    _tosa_and_driver_agree(exported, samples, cpu_only=True)


def test_one_conv_on_u85_bit_exact_through_the_driver():
    """The Ethos-U85's command set (CONFIG.product 2): its opcodes, precision and scale fields,
    weight order and scale entries, the output stage's transposes (Vela turns the NCHW
    input and output round with them) through the real driver."""
    torch.manual_seed(0)
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    graph = quantize(_Conv().eval(), cal[0], cal)
    exported = export_quantized(graph, board="corstone-320", npu_target=U85)
    samples = [[torch.randn(1, 3, 8, 8).numpy()] for _ in range(2)]
    _tosa_and_driver_agree(exported, samples, cpu_only=True)


def test_u85_corrupted_opcode_and_outside_its_region_through_the_driver():
    """The U85's faults through the same error path: an opcode the U85 lacks (the U55's
    NPU_SET_IFM_IB_END, 0x10D) is a parse error at its word; an OFM base 16 MB into the scratch
    a bus error on region 1."""
    torch.manual_seed(0)
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    graph = quantize(_Conv().eval(), cal[0], cal)
    exported = export_quantized(graph, board=U85_BOARD[0], npu_target=U85)
    stream = command_stream(parse_blob(exported.npu.subgraphs[0].vela.blob).command_stream)
    p = _Program(exported, [cal[0][0].numpy()], stream)
    with pytest.raises(NativeError) as e:
        torchmcu.run_on_host(_patched(p, 5, 0x10D), p.x, npu_model=True)
    msg = e.value.message
    assert "STATUS 0x00000012 [irq_raised|cmd_parse_error]" in msg, msg
    assert f"QREAD 20 of QSIZE {len(stream)}" in msg and "opcode 0x10d" in msg, msg
    ofm = next(c for c in decode(stream, 2) if c.name == "NPU_SET_OFM_BASE0")
    with pytest.raises(NativeError) as e:
        torchmcu.run_on_host(_patched(p, ofm.offset + 1, 1 << 24), p.x, npu_model=True)
    msg = e.value.message
    assert "STATUS 0x00000006 [irq_raised|bus_error] NPU bus error (AXI abort)" in msg, msg
    assert "OFM: bytes" in msg and "of region 1" in msg, msg


def test_a_corrupted_opcode_is_a_parse_error_through_the_driver(conv):
    bad = _patched(conv, 5, 0x3FE)  # no such cmd0 opcode
    with pytest.raises(NativeError) as e:
        torchmcu.run_on_host(bad, conv.x, npu_model=True)
    assert e.value.status == "DELEGATE"
    msg = e.value.message
    assert "NPU reported an error: STATUS 0x00000012 [irq_raised|cmd_parse_error]" in msg
    assert "NPU command stream parse error" in msg and "word 5" in msg, msg
    # the NPU stopped reading at the bad word: QREAD is its byte offset
    assert f"QREAD 20 of QSIZE {len(conv.stream)}" in msg, msg


def test_an_address_outside_its_region_is_a_bus_error_through_the_driver(conv):
    ofm = next(c for c in decode(conv.stream) if c.name == "NPU_SET_OFM_BASE0")
    bad = _patched(conv, ofm.offset + 1, 1 << 24)  # 16 MB into the scratch region
    with pytest.raises(NativeError) as e:
        torchmcu.run_on_host(bad, conv.x, npu_model=True)
    msg = e.value.message
    assert "STATUS 0x00000006 [irq_raised|bus_error] NPU bus error (AXI abort)" in msg, msg
    assert "region 1" in msg
    # QREAD: the stream read up to and including the first operation after the bad base
    op = next(
        c for c in decode(conv.stream) if c.offset > ofm.offset and c.name.startswith("NPU_OP")
    )
    assert f"QREAD {4 * (op.offset + 1)} of QSIZE {len(conv.stream)}: {op.name} at" in msg, msg


def test_a_scratch_smaller_than_vela_asked_for_is_a_bus_error_through_the_driver(monkeypatch):
    """A delegate whose scratch is cut to the end of its inputs and outputs (the blob's
    scratch_size and the planned tensor agree, so the delegate accepts the call) while the
    command stream still uses Vela's whole scratch: the NPU faults on region 1."""
    from torchmcu.npu import vela

    compile_tosa, cut = vela.compile_tosa, {}

    def short_scratch(*args, **kwargs):
        r = compile_tosa(*args, **kwargs)
        io_end = max(t.offset + t.nbytes for t in (*r.inputs, *r.outputs))
        small = -(-io_end // 16) * 16
        assert small < r.scratch_size, "Vela's scratch holds only the I/O: nothing to cut"
        cut.update(vela=r.scratch_size, small=small)
        blob = pack_blob(r.command_stream, r.weights, small, r.inputs, r.outputs)
        return dataclasses.replace(r, blob=blob, scratch_size=small)

    monkeypatch.setattr(vela, "compile_tosa", short_scratch)
    torch.manual_seed(0)
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    # 32 intermediate channels: Vela plans them in scratch beyond the input and the output
    wide = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 4, 1))
    graph = quantize(wide.eval(), cal[0], cal)
    exported = export_quantized(graph, npu_target=resolve_target(*TARGET))
    assert parse_blob(exported.npu.subgraphs[0].vela.blob).scratch_size == cut["small"]
    with pytest.raises(NativeError) as e:
        torchmcu.run_on_host(exported.pte_bytes, [cal[0][0].numpy()], npu_model=True)
    msg = e.value.message
    assert e.value.status == "DELEGATE"
    assert "STATUS 0x00000006 [irq_raised|bus_error] NPU bus error (AXI abort)" in msg, msg
    assert f"of region 1, which maps {cut['small']} bytes" in msg, msg


def test_cli_runs_an_npu_program_through_the_driver(conv, tmp_path: Path, capsys):
    from torchmcu.cli import main

    path = conv.exported.save(tmp_path)
    assert main(["run", str(path), "--host"]) == 0  # TOSA reference on the saved graph
    via_tosa = capsys.readouterr().out
    assert main(["run", str(path), "--host", "--npu-model"]) == 0
    via_driver = capsys.readouterr().out
    assert via_driver.startswith("output 0:") and via_driver == via_tosa, via_driver


def test_cli_npu_trace_lists_operations_and_velas_macs(conv, tmp_path: Path, capsys):
    """--npu-trace: the outputs, then each operation of each NPU job with its IFM/OFM shapes
    and addresses and MACs, which add up to Vela's nn_macs (from the saved report)."""
    from torchmcu.cli import main

    path = conv.exported.save(tmp_path)
    assert main(["run", str(path), "--host", "--npu-trace"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("output 0:")
    lines = out.splitlines()
    assert "delegate 0, NPU job 0: 3 operations" in lines, out
    # _Conv: 3 -> 8 channels, 3x3 with padding 1 on 8x8, between Vela's input and output
    # transposes (1x1 pools, no MACs)
    (conv_line,) = [line for line in lines if "NPU_OP_CONV" in line]
    assert "8x8x3@r1+0x" in conv_line and "-> 8x8x8@r1+0x" in conv_line, conv_line
    assert conv_line.endswith(f" {8 * 8 * 8 * 3 * 3 * 3} MACs"), conv_line
    b = parse_blob(conv.exported.npu.subgraphs[0].vela.blob)
    ops = [line for line in lines if " NPU_OP_" in line]
    assert f"@r1+0x{b.inputs[0].offset:x} ->" in ops[0], ops[0]  # reads the delegate's input
    assert ops[-1].split("->")[1].split()[0].endswith(f"@r1+0x{b.outputs[0].offset:x}")
    nn_macs = conv.exported.npu.subgraphs[0].vela.estimate["nn_macs"]
    assert lines[-1] == f"  {nn_macs} MACs (Vela's nn_macs {nn_macs})", out
    assert main(["run", str(path), "--npu-trace"]) == 2  # no board run: needs --host
    assert "add --host" in capsys.readouterr().err


def _tosa_and_driver_agree(
    exported: torchmcu.ExportedModel, samples, cpu_only: bool = False
) -> None:
    """The program through the driver on the model, bit-exact with its delegates run by the
    TOSA reference model; with cpu_only, also with the CPU-only program the same export
    lowered before partitioning (in the reference interpreter)."""
    from torchmcu import native
    from torchmcu.npu.hostrun import SavedDelegate, delegate_io, tosa_native_fn

    subs = exported.npu.subgraphs
    tosa = tosa_native_fn([SavedDelegate(s.tosa, *delegate_io(s.subprogram)) for s in subs])
    for x in samples:
        want = native.run_program(exported.pte_bytes, x, delegate_fn=tosa)
        got = native.run_program(exported.pte_bytes, x, npu_model=True)
        cpu = run_program(exported.npu.cpu_program, x) if cpu_only else want
        for g, w, c in zip(got, want, cpu, strict=True):
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(g, c)


def test_several_delegates_through_the_driver():
    """test_npu_export's two-delegate programs (CPU work between them, several inputs and
    outputs): one NPU device per delegate. (The control-flow programs go through the driver
    in test_npu_model.py::test_delegates_inside_control_flow.)"""
    from test_npu_export import _StridedInTheMiddle, _TwoByTwo

    for module in (_TwoByTwo(), _StridedInTheMiddle()):
        torch.manual_seed(1)
        cal = [(torch.randn(1, 3, 16, 16),) for _ in range(4)]
        graph = quantize(module.eval(), cal[0], cal)
        exported = export_quantized(graph, npu_target=resolve_target(*TARGET))
        assert len(exported.npu.subgraphs) == 2
        _tosa_and_driver_agree(exported, [[torch.randn(1, 3, 16, 16).numpy()]], cpu_only=True)


ROOT = Path(__file__).resolve().parents[1]
# Runs this module's one-conv and fault tests on an ASan + UBSan build of _native.
_SANITIZED_CHILD = """
import importlib.util, sys
import torchmcu
spec = importlib.util.spec_from_file_location("torchmcu._native", sys.argv[1])
native = importlib.util.module_from_spec(spec)
sys.modules["torchmcu._native"] = native  # before torchmcu.native imports it
spec.loader.exec_module(native)
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[2:]]))
"""


def _gcc_runtime(name: str) -> str | None:
    if shutil.which("gcc") is None:
        return None
    r = subprocess.run(
        ["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=False
    )
    path = r.stdout.strip()
    return path if r.returncode == 0 and Path(path).is_absolute() else None


@pytest.mark.slow
@pytest.mark.needs("cmake")
def test_faults_through_the_driver_clean_under_sanitizers(tmp_path):
    """The fault paths (and a good run) on _native built with ASan + UBSan, no recovery: a
    model fault must end in the driver's error path, never in a memory error."""
    runtimes = [_gcc_runtime("libasan.so"), _gcc_runtime("libubsan.so")]
    if None in runtimes:
        pytest.skip("gcc's ASan/UBSan runtimes are not installed")
    build = tmp_path / "asan"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    for cmd in (
        ["cmake", "-S", str(ROOT), "-B", str(build), *gen, "-DCMAKE_C_COMPILER=gcc",
         "-DCMAKE_BUILD_TYPE=Debug", "-DTORCHMCU_SANITIZE=ON", "-DTORCHMCU_HOST_EXTENSION=ON",
         "-DTORCHMCU_HOST_TOOLS=OFF", f"-DPython_EXECUTABLE={sys.executable}"],
        ["cmake", "--build", str(build), "--target", "torchmcu_native"],
    ):  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    (ext,) = (build / "firmware" / "host_ext").glob("_native*.so")
    env = dict(os.environ, LD_PRELOAD=" ".join(runtimes), ASAN_OPTIONS="detect_leaks=0")
    r = subprocess.run(
        [sys.executable, "-c", _SANITIZED_CHILD, str(ext), __file__,
         "-k", "one_conv or corrupted_opcode or outside_its_region or scratch_smaller"],
        capture_output=True, text=True, env=env, check=False, cwd=ROOT,
    )  # fmt: skip
    # the U55 and U85 one-conv runs, the three U55 faults and the U85 faults
    assert r.returncode == 0 and "6 passed" in r.stdout, (r.stdout + r.stderr)[-4000:]
