"""Export for the Ethos-U NPUs, end to end: placement, delegates, report, host runs.

The integer reference is the CPU-only export of the same quantized graph run by the reference
interpreter (our integer semantics). The NPU program runs on the C host runtime, its delegates
through the TOSA reference model on the TOSA graph export saved beside the .pte; both must agree
bit for bit. Each model is quantized once per module (small calibration sets) and lowered for
every target from that one graph.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from torch import nn
from torchmcu.api import export_quantized
from torchmcu.boards import get_board
from torchmcu.examples import models
from torchmcu.npu.config import NpuConfigError, resolve_target
from torchmcu.npu.partition import PartitionError
from torchmcu.pte import program as pm
from torchmcu.pte.reader import parse
from torchmcu.quantize import quantize
from torchmcu.quantize.annotation import META_KEY
from torchmcu.reference.interpreter import run_program

pytest.importorskip("tosa_reference_model")
pytest.importorskip("ethosu.vela")

MLPERF = ("ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder")
TARGETS = (
    ("ethos-u55-128", "corstone-300"),
    ("ethos-u65-256", "corstone-300"),
    ("ethos-u85-256", "corstone-320"),
)
BOUNDARY = {"cortex_m::quantize_per_tensor", "cortex_m::dequantize_per_tensor"}


def _numpy(sample: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    return [np.ascontiguousarray(x.numpy()) for x in sample]


class _Exports:
    """One model: quantized once, its CPU-only reference result, NPU exports made on demand."""

    def __init__(self, name: str, tmp: Path) -> None:
        model, example = models.build(name)
        self.graph = quantize(model, example, models.calibration(name, 2))
        self.cpu = export_quantized(self.graph)
        self.x = _numpy(models.calibration(name, 3, seed=7)[2])
        self.expected = run_program(self.cpu.program, self.x)
        self.tmp = tmp
        self._npu: dict[str, tuple[torchmcu.ExportedModel, Path]] = {}

    def npu(self, accelerator: str, board: str) -> tuple[torchmcu.ExportedModel, Path]:
        if accelerator not in self._npu:
            exported = export_quantized(
                self.graph, board=board, npu_target=resolve_target(board, accelerator)
            )
            path = exported.save(self.tmp / accelerator)
            self._npu[accelerator] = (exported, path)
        return self._npu[accelerator]


_CACHE: dict[str, _Exports] = {}


def _exports(name: str, tmp_path_factory) -> _Exports:
    if name not in _CACHE:
        _CACHE[name] = _Exports(name, tmp_path_factory.mktemp(name))
    return _CACHE[name]


@pytest.fixture(scope="module", params=MLPERF)
def exports(request, tmp_path_factory) -> _Exports:
    return _exports(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def ds_cnn(tmp_path_factory) -> _Exports:
    return _exports("ds_cnn", tmp_path_factory)


@pytest.mark.parametrize("accelerator,board", TARGETS, ids=[t[0] for t in TARGETS])
def test_mlperf_tiny_one_delegate_bit_exact_on_host(exports, accelerator, board):
    exported, path = exports.npu(accelerator, board)
    program = parse(exported.pte_bytes)
    plan = program.execution_plan[0]
    instrs = plan.chains[0].instructions
    # Only the input quantize and output dequantize stay on the CPU, around one delegate.
    assert [type(i).__name__ for i in instrs] == ["KernelCall", "DelegateCall", "KernelCall"]
    assert [plan.operators[i.op_index].name for i in instrs if isinstance(i, pm.KernelCall)] == [
        "cortex_m::quantize_per_tensor",
        "cortex_m::dequantize_per_tensor",
    ]
    assert [d.id for d in plan.delegates] == ["EthosUBackend"]
    npu = exported.report["npu"]
    cpu_ops = [p for p in npu["placement"] if p["where"] != "npu"]
    assert [set(p["ops"]) <= BOUNDARY for p in cpu_ops] == [True, True], cpu_ops
    assert npu["macs"]["fraction"] == 1.0
    assert npu["operators"]["npu"] == npu["operators"]["total"] - 2
    assert npu["target"]["accelerator"] == accelerator
    assert npu["estimate"]["cycles_total"] > 0 and npu["estimate"]["delegates"] == 1
    # the report's per-instruction entries describe the partitioned program
    assert [n["op"] for n in exported.report["nodes"]] == [
        "cortex_m::quantize_per_tensor",
        "delegate:EthosUBackend",
        "cortex_m::dequantize_per_tensor",
    ]
    # Host run: C runtime for the CPU part, the TOSA reference model on the saved graph for
    # the delegate; equal to the CPU-only program in the reference interpreter.
    got = torchmcu.run_on_host(path, exports.x)
    assert len(got) == len(exports.expected)
    for a, b in zip(got, exports.expected):
        np.testing.assert_array_equal(a, b)


def test_reference_interpreter_runs_the_delegate_as_its_subprogram(exports):
    exported, _ = exports.npu("ethos-u55-128", "corstone-300")
    got = run_program(exported.program, exports.x, delegate_fn=exported.reference_delegate_fn())
    for a, b in zip(got, exports.expected):
        np.testing.assert_array_equal(a, b)


class _StridedInTheMiddle(nn.Module):
    """conv -> conv stride 4 (beyond U55's convolution stride limit of 3) -> conv -> linear ->
    softmax (no TOSA lowering): U55 gets two delegates around the CPU strided conv."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.strided = nn.Conv2d(8, 8, 4, stride=4)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c2(self.strided(torch.relu(self.c1(x))))
        return torch.softmax(self.fc(torch.flatten(torch.relu(y), 1)), dim=-1)


@pytest.fixture(scope="module")
def strided_graph() -> tuple[torch.fx.GraphModule, list[np.ndarray]]:
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16)
    graph = quantize(
        _StridedInTheMiddle().eval(), (x,), [(torch.randn(1, 3, 16, 16),) for _ in range(3)]
    )
    return graph, [torch.randn(1, 3, 16, 16).numpy()]


def test_unsupported_ops_fall_back_to_the_cpu(strided_graph, tmp_path):
    graph, x = strided_graph
    expected = run_program(export_quantized(graph).program, x)
    exported = export_quantized(graph, npu_target=resolve_target("corstone-300", "ethos-u55-128"))
    placement = {p["node"]: p for p in exported.report["npu"]["placement"]}
    assert placement["conv2d_1"]["where"] == "cpu"
    assert "stride 4" in placement["conv2d_1"]["reason"]
    assert placement["softmax"]["where"] == "cpu"
    assert "no TOSA lowering" in placement["softmax"]["reason"]
    assert placement["conv2d"]["subgraph"] == 0 and placement["conv2d_2"]["subgraph"] == 1
    assert placement["linear"]["subgraph"] == 1
    plan = exported.program.execution_plan[0]
    kinds = [type(i).__name__ for i in plan.chains[0].instructions]
    assert kinds.count("DelegateCall") == 2
    path = exported.save(tmp_path)
    for a, b in zip(torchmcu.run_on_host(path, x), expected):
        np.testing.assert_array_equal(a, b)
    # U85 takes the stride-4 convolution: one delegate, softmax still on the CPU.
    u85 = export_quantized(
        graph, board="corstone-320", npu_target=resolve_target("corstone-320", "ethos-u85-256")
    )
    placement = {p["node"]: p for p in u85.report["npu"]["placement"]}
    assert placement["conv2d_1"]["where"] == "npu"
    assert len(u85.npu.subgraphs) == 1


class _TwoByTwo(nn.Module):
    """Two NPU convs whose outputs both leave for stride-4 convs on the CPU (U55), joined again
    by an add: the first delegate has two outputs, the second two inputs (distinct scales, so a
    swapped I/O order shows in the numbers)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.s1 = nn.Conv2d(8, 8, 4, stride=4)
        self.s2 = nn.Conv2d(8, 8, 4, stride=4)
        self.fc = nn.Linear(8 * 4 * 4, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c1(x))
        z = torch.relu(self.c2(y))
        return self.fc(torch.flatten(torch.relu(self.s1(y) + self.s2(z)), 1))


def test_delegates_with_several_inputs_and_outputs(tmp_path):
    torch.manual_seed(1)
    x = torch.randn(1, 3, 16, 16)
    graph = quantize(_TwoByTwo().eval(), (x,), [(torch.randn(1, 3, 16, 16),) for _ in range(3)])
    sample = [torch.randn(1, 3, 16, 16).numpy()]
    expected = run_program(export_quantized(graph).program, sample)
    exported = export_quantized(graph, npu_target=resolve_target("corstone-300", "ethos-u55-128"))
    subgraphs = exported.npu.subgraphs
    assert [(len(s.inputs), len(s.outputs)) for s in subgraphs] == [(1, 2), (2, 1)]
    plan = exported.program.execution_plan[0]
    kinds = [type(i).__name__ for i in plan.chains[0].instructions]
    assert kinds == [
        "KernelCall",
        "DelegateCall",
        "KernelCall",
        "KernelCall",
        "DelegateCall",
        "KernelCall",
    ]
    path = exported.save(tmp_path)
    for a, b in zip(torchmcu.run_on_host(path, sample), expected):
        np.testing.assert_array_equal(a, b)
    got = run_program(exported.program, sample, delegate_fn=exported.reference_delegate_fn())
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_graph_without_annotation_records_is_refused(strided_graph):
    graph, _ = strided_graph
    node = next(n for n in graph.graph.nodes if n.name == "conv2d_1")
    saved = node.meta["custom"].pop(META_KEY)
    try:
        with pytest.raises(PartitionError, match="node 'conv2d_1'.*no torchmcu annotation record"):
            export_quantized(graph, npu_target=resolve_target("corstone-300", "ethos-u55-128"))
    finally:
        node.meta["custom"][META_KEY] = saved


@pytest.mark.parametrize(
    "kwargs,choices",
    [
        (
            {"npu": "ethos-u55-128", "system_config": "Ethos_U85_SYS_DRAM_Mid"},
            "Ethos_U55_High_End_Embedded",
        ),
        ({"npu": "ethos-u55-128", "memory_mode": "Fastest_Ever"}, "Shared_Sram"),
        ({"npu": "ethos-u99-1"}, "ethos-u55-128"),
        ({"npu": "ethos-u85-256"}, "ethos-u65-256"),  # not on corstone-300
        ({"npu": "ethos-u55-128", "board": "qemu-an547"}, "corstone-320"),  # a board without an NPU
    ],
)
def test_invalid_npu_configs_list_the_valid_choices(kwargs, choices):
    model, example = models.mlp()
    kwargs = {"board": "corstone-300", **kwargs}
    with pytest.raises(NpuConfigError, match="valid choices") as info:
        torchmcu.export(model, example, calibration=[example], **kwargs)
    assert choices in str(info.value)


def test_cli_export_explain_and_saved_subgraphs(tmp_path, capsys):
    from torchmcu.cli import main

    samples = torch.stack([s[0][0] for s in models.calibration("small_cnn", 2)]).numpy()
    np.savez(tmp_path / "cal.npz", x=samples)
    out = tmp_path / "out"
    rc = main(
        [
            "export",
            "torchmcu.examples.models:small_cnn",
            "-o",
            str(out),
            "--calibration",
            str(tmp_path / "cal.npz"),
            "--npu",
            "ethos-u55-128",
            "--explain",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "NPU target ethos-u55-128 (Ethos_U55_High_End_Embedded, Shared_Sram)" in text
    assert "program input quantize (float32 -> int8) runs on the CPU" in text
    assert "NPU subgraph 0" in text and "Vela estimate:" in text
    assert "fused into conv2d (its output range)" in text  # nodes without a kernel call too
    assert "no kernel call (a view of avg_pool2d's bytes)" in text
    report = json.loads((out / "model.report.json").read_text())
    assert report["npu"]["operators"]["npu"] == report["npu"]["operators"]["total"] - 2
    meta = json.loads((out / "model.npu" / "delegate0.json").read_text())
    assert meta["backend"] == "EthosUBackend" and meta["inputs"][0]["dtype"] == "int8"
    tosa = (out / "model.npu" / "delegate0.tosa").read_bytes()
    assert tosa and tosa not in (out / "model.pte").read_bytes()  # beside the .pte, never in it
    rc = main(["run", str(out / "model.pte"), "--host"])
    assert rc == 0 and "output 0: shape [1, 10] float32" in capsys.readouterr().out
    # On the board the program needs the NPU: the FVP when it is on PATH, never QEMU.
    fvp = get_board("corstone-300").config["run"]["fvp"]["binary"]
    if shutil.which(fvp) is None:
        rc = main(
            [
                "run",
                str(out / "model.pte"),
                "--board",
                "corstone-300",
                "--build-dir",
                str(tmp_path / "fw"),
            ]
        )
        err = capsys.readouterr().err
        assert rc != 0 and "uses the NPU, which QEMU does not model" in err and fvp in err


def test_bundle_of_an_npu_program_checked_on_host(ds_cnn, tmp_path, capsys):
    from torchmcu.cli import main
    from torchmcu.pte.bundled import parse_bundled

    exports = ds_cnn
    exported, _ = exports.npu("ethos-u55-128", "corstone-300")
    path = exported.save(tmp_path, bundle_samples=[exports.x])
    bpte = path.with_suffix(".bpte")
    case = parse_bundled(bpte.read_bytes()).method_test_suites[0].test_cases[0]
    # expected outputs: the CPU-only program in the reference interpreter
    np.testing.assert_array_equal(case.expected_outputs[0].to_numpy(), exports.expected[0])
    assert main(["run", str(bpte), "--host"]) == 0
    assert "1/1 test cases pass" in capsys.readouterr().out
    # a changed expected value is caught
    from torchmcu.npu.hostrun import check_bundle
    from torchmcu.pte.bundled import serialize_bundled

    bp = parse_bundled(bpte.read_bytes())
    t = bp.method_test_suites[0].test_cases[0].expected_outputs[0]
    data = bytearray(t.data)
    data[0] ^= 0x40
    t.data = bytes(data)
    assert check_bundle(serialize_bundled(bp), path.with_suffix(".npu")) == [
        "forward case 0 output 0: 1 mismatch"
    ]
