"""Mixed int8/fp32 programs: parts kept in float32 by the quantizer run ExecuTorch's portable
aten:: kernels, with quantize/dequantize exactly at the int8 <-> float boundaries.

Two models: DS-CNN with its classifier and a softmax head kept in float (a float tail), and a
small CNN with LayerNorm + GELU in float between int8 convs (a float middle). Each is lowered
into a *probe* program: the same kernel calls, with every boundary tensor (int8 entering a
float region, float entering it, float leaving it) also made a program output. The probe runs
on the host runtime and under QEMU (one image per model) and in the reference interpreter:
- int8 tensors are bit-exact between the runtimes and the interpreter (reference semantics);
- each float region's output is within 1e-5 relative of PyTorch running the same float modules
  on the float values our runtime handed to the region;
- agreement with torchao's fake-quantized model is reported (and loosely bounded).
The annotation record is on every node after export, deepcopy and re-export; the Ethos-U
partitioner leaves the float region on the CPU ("float"); a graph without records is refused.
"""

# ruff: noqa: I001  (torchmcu.quantize is imported before torchmcu.lower on purpose: either order
# must work, and this one keeps working while the two packages import each other)
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchmcu
from torchmcu.quantize import META_KEY, TorchmcuQuantizer, read_annotation
from torchmcu import native
from torchmcu.examples import models
from torchmcu.lower.lowering import finish_lowering, lower_graph
from torchmcu.pte import program as pm
from torchmcu.pte.writer import serialize
from torchmcu.reference.interpreter import run_program

RTOL = 1e-5


class DsCnnSoftmax(nn.Module):
    """DS-CNN with a softmax head module."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net
        self.head = nn.Softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.net(x))


class FloatMiddle(nn.Module):
    """conv-relu (int8) -> LayerNorm -> GELU (float) -> conv-relu -> pool -> linear (int8)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.LayerNorm([8, 6, 6])
        self.act = nn.GELU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.norm(torch.relu(self.conv1(x))))
        y = F.adaptive_avg_pool2d(torch.relu(self.conv2(y)), 1)
        return self.fc(torch.flatten(y, 1))


@dataclass
class Case:
    name: str
    model: nn.Module
    gm: torch.fx.GraphModule
    exported: torchmcu.ExportedModel
    probe: bytes
    probe_program: pm.Program
    # probe output positions: the program's own outputs, then per boundary
    int8_in: list[int] = field(default_factory=list)  # int8 entering a float region
    float_in: list[int] = field(default_factory=list)  # its dequantized float values
    float_out: list[int] = field(default_factory=list)  # float leaving a region (to quantize)
    samples: list[list[np.ndarray]] = field(default_factory=list)


def _probe(gm: torch.fx.GraphModule) -> tuple[pm.Program, dict[str, list[int]]]:
    """The program of gm with the boundary tensors of its float regions as extra outputs."""
    ctx = lower_graph(gm)
    plan_ops = ctx.b.operators
    marks: dict[str, list[int]] = {"int8_in": [], "float_in": [], "float_out": []}
    for ins in ctx.b.instructions:
        op = plan_ops[ins.op_index].name
        src, out = ins.args[0], ins.args[-2]
        if op == "cortex_m::dequantize_per_tensor" and out not in ctx.outputs:
            for key, vi in (("int8_in", src), ("float_in", out)):
                marks[key].append(len(ctx.outputs))
                ctx.outputs.append(vi)
        if op == "cortex_m::quantize_per_tensor" and src not in ctx.inputs:
            marks["float_out"].append(len(ctx.outputs))
            ctx.outputs.append(src)
    program, _ = finish_lowering(ctx)
    return program, marks


def _build(name: str) -> Case:
    torch.manual_seed(0)
    if name == "ds_cnn":
        net, example = models.build("ds_cnn")
        model = DsCnnSoftmax(net).eval()
        calib = models.calibration("ds_cnn", 8, seed=1)
        samples = [[x.numpy() for x in s] for s in models.calibration("ds_cnn", 3, seed=77)]
        quantizer = TorchmcuQuantizer().set_module_name("net.classifier", None)
        quantizer.set_module_type(nn.Softmax, None)
    else:
        model = FloatMiddle().eval()
        gen = torch.Generator().manual_seed(3)
        example = (torch.randn(1, 3, 6, 6, generator=gen),)
        calib = [(torch.randn(1, 3, 6, 6, generator=gen),) for _ in range(8)]
        samples = [[torch.randn(1, 3, 6, 6, generator=gen).numpy()] for _ in range(3)]
        quantizer = TorchmcuQuantizer().set_module_type(nn.LayerNorm, None)
        quantizer.set_operator(torch.ops.aten.gelu.default, None)
    exported = torchmcu.export(model, example, calibration=calib, board="qemu-an547",
                               quantizer=quantizer)
    program, marks = _probe(exported.quantized_model)
    return Case(name, model, exported.quantized_model, exported, serialize(program), program,
                samples=samples, **marks)


_CACHE: dict[str, Case] = {}


@pytest.fixture(params=["ds_cnn", "float_middle"])
def case(request: pytest.FixtureRequest) -> Case:
    if request.param not in _CACHE:
        _CACHE[request.param] = _build(request.param)
    return _CACHE[request.param]


def _region_torch(c: Case, k: int, x: np.ndarray) -> np.ndarray:
    """PyTorch running float region k of the model on x (the values our runtime handed it)."""
    t = torch.from_numpy(np.array(x))
    with torch.no_grad():
        if c.name == "ds_cnn":
            y = c.model.head(c.model.net.classifier(t))
        else:
            y = c.model.act(c.model.norm(t))
    return y.numpy()


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """|got - want| <= RTOL |want|, with a floor of 1e-2 RTOL max|want| for values near 0."""
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-2 * RTOL * float(np.abs(want).max()),
                               err_msg=what)


def _check_outputs(c: Case, outs: list[np.ndarray], ref: list[np.ndarray], where: str) -> None:
    """int8 boundaries bit-exact with the interpreter; float regions vs PyTorch."""
    for i in c.int8_in:
        assert outs[i].dtype == np.int8 and outs[i].tobytes() == ref[i].tobytes(), f"{where}: int8 {i}"
    regions_out = c.float_out if c.float_out else [0]  # a float tail ends at the program output
    assert len(c.float_in) == len(regions_out) >= 1
    for k, (i, o) in enumerate(zip(c.float_in, regions_out)):
        np.testing.assert_allclose(outs[i], ref[i], rtol=RTOL, err_msg=f"{where}: dequantized {i}")
        _close(outs[o], _region_torch(c, k, outs[i]), f"{where}: float region {k}")
    if c.float_out:  # the int8 tail after the region (dequantized output): bit-exact
        np.testing.assert_array_equal(outs[0], ref[0], err_msg=f"{where}: program output")


def test_lowered_program_has_portable_ops_and_boundaries(case: Case) -> None:
    plan = case.exported.program.execution_plan[0]
    ops = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    float_ops = [o for o in ops if o.startswith("aten::")]
    if case.name == "ds_cnn":
        assert float_ops == ["aten::addmm", "aten::_softmax"]
        assert ops[-3:] == ["cortex_m::dequantize_per_tensor", "aten::addmm", "aten::_softmax"]
    else:
        assert float_ops == ["aten::native_layer_norm", "aten::gelu"]
        k = ops.index("aten::native_layer_norm")
        # int8 NHWC -> contiguous on the int8 side, then dequantize; quantize after the region
        assert ops[k - 2:k] == ["cortex_m::transpose", "cortex_m::dequantize_per_tensor"]
        assert ops[k + 2] == "cortex_m::quantize_per_tensor"
    # inside int8 regions no separate q/dq: exactly the program input quantize + region edges
    assert ops.count("cortex_m::quantize_per_tensor") == 1 + len(case.float_out)
    assert ops.count("cortex_m::dequantize_per_tensor") == len(case.float_in) + (0 if case.name == "ds_cnn" else 1)
    # float tensors are contiguous (NCHW for 4-D)
    for ins in plan.chains[0].instructions:
        if plan.operators[ins.op_index].name.startswith("aten::"):
            for a in ins.args:
                v = plan.values[a]
                if isinstance(v, pm.Tensor) and v.scalar_type == pm.ScalarType.FLOAT:
                    assert v.dim_order == list(range(len(v.sizes)))


def test_host_runtime_int8_bit_exact_float_regions_match_torch(case: Case) -> None:
    for s in case.samples:
        ref = run_program(case.probe_program, s)
        outs = native.run_program(case.probe, s)
        _check_outputs(case, outs, ref, "host")
        # the real program computes the same as the probe
        real = native.run_program(case.exported.pte_bytes, s)
        assert real[0].tobytes() == outs[0].tobytes()


def test_agreement_with_fake_quant_reported(case: Case) -> None:
    ours = np.concatenate([native.run_program(case.exported.pte_bytes, s)[0].ravel() for s in case.samples])
    with torch.no_grad():
        fq = np.concatenate([case.gm(*(torch.from_numpy(x) for x in s)).numpy().ravel() for s in case.samples])
    out = case.exported.report["outputs"][0]
    if out["scale"] is None:  # float output (softmax probabilities)
        d = np.abs(ours - fq)
        print(f"\n{case.name}: float output vs fake-quant: max abs {d.max():.3g}, p99 {np.percentile(d, 99):.3g}")
        assert d.max() <= 0.01
    else:
        steps = np.abs(ours - fq) / out["scale"]
        print(f"\n{case.name}: output steps vs fake-quant: max {steps.max():.2f}, p99 {np.percentile(steps, 99):.2f}")
        assert np.percentile(steps, 99) <= 1.0


@pytest.mark.needs("arm-gcc", "newlib", "qemu")
def test_qemu_int8_bit_exact_float_regions_match_torch(case: Case, tmp_path_factory) -> None:
    from torchmcu import device

    # One build directory for both cases (this worker's): the second is a relink.
    build = Path(tmp_path_factory.getbasetemp()) / "mixed-an547"
    outs, _ = device.run_samples(case.probe, "qemu-an547", case.samples, build, timeout=120)
    for s, got in zip(case.samples, outs):
        _check_outputs(case, got, run_program(case.probe_program, s), "qemu")
        host = native.run_program(case.probe, s)
        for g, h in zip(got, host):  # newlib vs glibc math: float within RTOL
            np.testing.assert_allclose(g, h, rtol=RTOL, atol=RTOL * float(np.abs(h).max()))


# -- the annotation record ------------------------------------------------------------------


def _records(gm: torch.fx.GraphModule) -> dict[str, tuple[bool, str]]:
    out = {}
    for n in gm.graph.nodes:
        rec = read_annotation(n)
        assert rec is not None, f"node {n.name} ({n.op} {n.target}) has no record"
        out[n.name] = (rec.quantized, rec.role)
    return out


def test_record_on_every_node_after_export_deepcopy_and_reexport() -> None:
    c = _CACHE.get("float_middle") or _build("float_middle")
    _CACHE["float_middle"] = c
    recs = _records(c.gm)
    assert recs["layer_norm"] == (False, "float") and recs["gelu"] == (False, "float")
    assert recs["conv2d"][0] and recs["conv2d_1"][0] and recs["linear"][0]
    assert _records(copy.deepcopy(c.gm)) == recs
    again = torch.export.export(c.gm, (torch.from_numpy(c.samples[0][0]),)).module()
    by_target = {}
    for n in again.graph.nodes:
        if n.op == "call_function" and "aten" in str(n.target):
            rec = read_annotation(n)
            assert rec is not None, f"re-exported node {n.name} lost its record"
            by_target[str(n.target)] = rec.quantized
    assert by_target["aten.layer_norm.default"] is False and by_target["aten.gelu.default"] is False
    assert by_target["aten.conv2d.default"] is True


def test_float_config_rejects_a_config_object() -> None:
    with pytest.raises(ValueError, match="only None"):
        TorchmcuQuantizer().set_module_name("head", object())


# -- the Ethos-U partitioner on a mixed graph -------------------------------------------------


def test_npu_partition_leaves_float_region_on_cpu() -> None:
    pytest.importorskip("ethosu.vela")
    c = _CACHE.get("float_middle") or _build("float_middle")
    _CACHE["float_middle"] = c
    from torchmcu.api import export_quantized
    from torchmcu.npu.config import resolve_target

    e = export_quantized(c.gm, board="corstone-300",
                         npu_target=resolve_target("corstone-300", "ethos-u55-128"))
    where = {p.node: p.where for p in e.npu.placements}
    assert where["layer_norm"] == "float" and where["gelu"] == "float"
    assert where["conv2d"] == "npu"
    assert "float" in str(e.report["npu"])
    # the partitioned program computes what the CPU-only program computes
    s = c.samples[0]
    got = run_program(e.program, s, delegate_fn=e.reference_delegate_fn())
    want = run_program(c.exported.program, s)
    np.testing.assert_array_equal(got[0], want[0])


def test_graph_without_records_is_refused() -> None:
    from torchmcu.lower.errors import LoweringError
    from torchmcu.npu.partition import PartitionError, decide

    c = _CACHE.get("float_middle") or _build("float_middle")
    _CACHE["float_middle"] = c
    gm = copy.deepcopy(c.gm)
    ctx = lower_graph(gm)
    for n in gm.graph.nodes:  # a pass dropped the records after lowering (meta["custom"] is
        # shared with c.gm's nodes by deepcopy: replace it, do not mutate it)
        n.meta["custom"] = {k: v for k, v in n.meta.get("custom", {}).items() if k != META_KEY}
    program, _ = finish_lowering(lower_graph(c.gm))
    with pytest.raises(PartitionError, match="no torchmcu annotation record"):
        decide(ctx, program, "u55", lambda plan, i, family: None)
    # an old graph (no records at all) cannot even be lowered: the float ops are not int8 ops
    with pytest.raises(LoweringError, match="layer_norm.*no torchmcu annotation record"):
        lower_graph(gm)


def test_cli_float_options_build_the_quantizer() -> None:
    from torchmcu.cli import build_parser
    from torchmcu.cli_args import float_quantizer

    args = build_parser().parse_args(
        ["export", "m.py:f", "--float-module", "head", "--float-op", "gelu",
         "--float-op", "layer_norm.default"])
    cfg = float_quantizer(args).float_config
    assert cfg.module_names == ["head"]
    assert cfg.operators == [torch.ops.aten.gelu, torch.ops.aten.layer_norm.default]
    assert float_quantizer(build_parser().parse_args(["export", "m.py:f"])) is None


class FloatFirst(nn.Module):
    """LayerNorm (float) reading the program input, then int8 conv -> relu -> pool -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm([2, 5, 5])
        self.conv = nn.Conv2d(2, 4, 3)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(self.norm(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def test_float_op_reading_the_program_input() -> None:
    torch.manual_seed(1)
    model = FloatFirst().eval()
    xs = [(torch.randn(1, 2, 5, 5),) for _ in range(6)]
    e = torchmcu.export(model, xs[0], calibration=xs,
                        quantizer=TorchmcuQuantizer().set_module_type(nn.LayerNorm, None))
    plan = e.program.execution_plan[0]
    ops = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert ops[:2] == ["aten::native_layer_norm", "cortex_m::quantize_per_tensor"]
    assert e.report["inputs"][0]["dtype"] == "float32"
    program, marks = _probe(e.quantized_model)
    x = xs[1][0].numpy()
    outs = native.run_program(serialize(program), [x])
    ref = run_program(program, [x])
    np.testing.assert_array_equal(outs[0], ref[0])  # int8 tail, dequantized: bit-exact
    (o,) = marks["float_out"]
    with torch.no_grad():
        _close(outs[o], model.norm(torch.from_numpy(x)).numpy(), "layer norm of the input")
