"""The float fallback (issue 17, item 2): an operator without an int8 Cortex-M kernel runs its
portable fp32 kernel between a dequantize and a quantize, and export warns once per operator,
naming its source lines; strict=True refuses it instead, naming the operator and the line.

The model is a small CNN with two such operators in the middle: torch.flip (no int8 pattern at
all; its portable kernel is aten::flip) and a softmax over the channels (the int8 softmax takes
the last dim only, so its int8 rule refuses it and the node is lowered again in float32).
Checked here: the warnings and the report's float_ops; the program's calls; the host runtime
against the reference interpreter and against torchao's fake-quantized model
(prog.quantized_model, the independent reference: >= 30 dB SQNR); strict refusing, and the same
operators kept in float32 on request passing strict without a warning; an operator with neither
kernel (torch.sort) named in a clear error. The program also runs on QEMU in the multi-program
image of tests/test_multi_program_firmware.py, bit-exact with the host runtime.
"""

from __future__ import annotations

import io
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from torch import nn
from torchmcu import native, progress
from torchmcu.api import export_quantized
from torchmcu.lower import FloatFallbackWarning, UnsupportedOpError
from torchmcu.lower.float_nodes import IN_FLOAT_REGION, NO_INT8_KERNEL, REQUESTED
from torchmcu.pte import program as pm
from torchmcu.quantize import TorchmcuQuantizer
from torchmcu.reference.interpreter import run_program

SHAPE = (1, 3, 8, 8)


def _line(marker: str) -> int:
    """The line number of this file holding `marker` (the model's source lines)."""
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if marker in text and "_line(" not in text)


class FlipCnn(nn.Module):
    """conv-relu, flip (float), conv-relu, x * softmax over channels (float), pool, linear."""

    def __init__(self, sort: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 4)
        self.sort = sort

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        if self.sort:
            x = torch.sort(x, dim=3).values  # the sort line
        else:
            x = torch.flip(x, (3,))  # the flip line
        x = F.relu(self.conv2(x))
        x = x * torch.softmax(x, dim=1)  # the softmax line
        x = F.max_pool2d(x, 2)
        return self.fc(torch.flatten(x, 1))


def fallback_cnn() -> tuple[nn.Module, list[tuple[torch.Tensor]], list[list[np.ndarray]]]:
    """(model, calibration, test samples) of the flip CNN (also run by the multi-program image)."""
    torch.manual_seed(0)
    model = FlipCnn().eval()
    gen = torch.Generator().manual_seed(5)
    calibration = [(torch.randn(SHAPE, generator=gen),) for _ in range(16)]
    samples = [[torch.randn(SHAPE, generator=gen).numpy()] for _ in range(8)]
    return model, calibration, samples


@pytest.fixture(scope="module")
def fallback():
    model, calibration, samples = fallback_cnn()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exported = torchmcu.export(model, calibration[0], calibration=calibration)
    fallbacks = [w for w in caught if issubclass(w.category, FloatFallbackWarning)]
    return model, exported, samples, fallbacks


def _where(marker: str) -> str:
    return f"{__file__}:{_line(marker)} (forward): "


def test_warns_once_per_operator_naming_its_line(fallback) -> None:
    _, exported, _, caught = fallback
    texts = [str(w.message) for w in caught]
    assert len(texts) == 2, texts
    flip, softmax = texts
    assert flip.startswith(
        "aten.flip has no int8 Cortex-M kernel: 1 call placed in float32 (dequantize, its "
        f"portable fp32 kernel, quantize) at {_where('# the flip line')}x = torch.flip(x, (3,))"
    )
    assert softmax.startswith(
        "aten.softmax.int has no int8 Cortex-M kernel (softmax over dim 1 (only the last "
        "dimension)): 1 call placed in float32"
    )
    assert f"at {_where('# the softmax line')}x = x * torch.softmax(x, dim=1)" in softmax
    assert all(t.endswith("Export with strict=True (--strict) to refuse it instead") for t in texts)
    assert all(w.filename == __file__ for w in caught)  # pointed at the export call
    float_ops = exported.report["float_ops"]
    assert [(f["node"], f["target"]) for f in float_ops] == [
        ("flip", "aten.flip"),
        ("softmax", "aten.softmax.int"),
    ]
    assert float_ops[0]["reason"] == NO_INT8_KERNEL
    assert (
        float_ops[1]["reason"] == f"{NO_INT8_KERNEL}: softmax over dim 1 (only the last dimension)"
    )
    assert float_ops[0]["source"].endswith("x = torch.flip(x, (3,))  # the flip line")


def test_the_float_ops_sit_between_dequantize_and_quantize(fallback) -> None:
    _, exported, _, _ = fallback
    plan = exported.program.execution_plan[0]
    calls = plan.chains[0].instructions
    ops = [plan.operators[i.op_index].name for i in calls]
    assert Counter(o for o in ops if not o.startswith("cortex_m::")) == {
        "aten::flip": 1,
        "aten::_softmax": 1,
    }
    for name in ("aten::flip", "aten::_softmax"):
        k = ops.index(name)
        assert ops[k - 1] == "cortex_m::dequantize_per_tensor"
        assert ops[k + 1] == "cortex_m::quantize_per_tensor"
        x, out = (plan.values[a] for a in (calls[k].args[0], calls[k].args[-1]))
        assert x.scalar_type == out.scalar_type == pm.ScalarType.FLOAT
    # the program's own input quantize and output dequantize, plus one pair per float op
    assert (
        ops.count("cortex_m::quantize_per_tensor")
        == ops.count("cortex_m::dequantize_per_tensor")
        == 3
    )


def _sqnr_db(signal: np.ndarray, noisy: np.ndarray) -> float:
    noise = float(np.sum((signal.astype(np.float64) - noisy) ** 2))
    return 10 * np.log10(float(np.sum(signal.astype(np.float64) ** 2)) / max(noise, 1e-30))


def test_host_runtime_matches_reference_and_fake_quant(fallback) -> None:
    _, exported, samples, _ = fallback
    (out_q,) = exported.report["outputs"]
    ours, fake = [], []
    for s in samples:
        (host,) = torchmcu.run_on_host(exported.pte_bytes, s)
        (ref,) = run_program(exported.program, s)
        # the int8 parts are the reference's integers; the fp32 softmax's expf may round a
        # probability to the neighbouring int8 step (C libm against numpy's float64 exp)
        assert np.max(np.abs(host - ref)) <= 2 * out_q["scale"] + 1e-6
        with torch.no_grad():
            fake.append(exported.quantized_model(torch.from_numpy(s[0])).numpy())
        ours.append(host)
    ours_all, fake_all = np.concatenate(ours), np.concatenate(fake)
    db = _sqnr_db(fake_all, ours_all)
    print(f"\nflip CNN, int8 program vs fake-quantized model: SQNR {db:.1f} dB")
    assert db >= 30.0


def test_progress_output_shows_the_warning(fallback) -> None:
    _, exported, _, _ = fallback
    stream = io.StringIO()
    progress.configure(enabled=True, stream=stream)
    try:
        with progress.task("export"), warnings.catch_warnings():
            warnings.simplefilter("ignore", FloatFallbackWarning)
            export_quantized(exported.quantized_model)
    finally:
        progress.configure(enabled=False)
    lines = [ln for ln in stream.getvalue().splitlines() if ln.startswith("warning: ")]
    assert [ln.split(" has ")[0] for ln in lines] == [
        "warning: aten.flip",
        "warning: aten.softmax.int",
    ]


def test_strict_refuses_naming_the_operator_and_line(fallback) -> None:
    _, exported, _, _ = fallback
    with pytest.raises(UnsupportedOpError) as err:
        export_quantized(exported.quantized_model, strict=True)
    assert str(err.value).startswith(
        "unsupported op aten.flip for the int8 Cortex-M kernels; node 'flip' (aten.flip) at "
        f"{_where('# the flip line')}x = torch.flip(x, (3,))  # the flip line. It has a portable "
        "fp32 kernel: keep it in float32 with --float-op flip (torchmcu export)"
    )


def test_kept_in_float_on_request_passes_strict_without_a_warning(fallback) -> None:
    model, _, samples, _ = fallback
    _, calibration, _ = fallback_cnn()
    quantizer = TorchmcuQuantizer().set_operator(torch.ops.aten.flip.default, None)
    quantizer.set_operator(torch.ops.aten.softmax.int, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FloatFallbackWarning)
        exported = torchmcu.export(
            model, calibration[0], calibration=calibration, quantizer=quantizer, strict=True
        )
    assert [(f["node"], f["reason"]) for f in exported.report["float_ops"]] == [
        ("flip", REQUESTED),
        ("softmax", REQUESTED),
    ]
    (host,) = native.run_program(exported.pte_bytes, samples[0])
    with torch.no_grad():
        want = model(torch.from_numpy(samples[0][0])).numpy()
    assert _sqnr_db(want, host) >= 20.0  # against the float model


def test_an_operator_without_any_kernel_is_named() -> None:
    torch.manual_seed(0)
    model = FlipCnn(sort=True).eval()
    x = torch.randn(SHAPE)
    with pytest.raises(UnsupportedOpError) as err:
        torchmcu.export(model, (x,), calibration=[(x,)])
    text = str(err.value)
    assert text.startswith("unsupported op aten.sort for the int8 Cortex-M kernels; node 'sort'")
    assert f"at {_where('# the sort line')}x = torch.sort(x, dim=3).values" in text
    assert (
        "There is neither an int8 Cortex-M kernel nor a portable fp32 kernel for aten.sort" in text
    )


class _OffsetNet(nn.Module):
    """relu(conv(x) + alpha * a float Parameter): the Parameter is quantized like a weight."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.offset = nn.Parameter(torch.randn(1, 4, 4, 5))
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(torch.add(self.conv(x), self.offset, alpha=self.alpha))


def _export_offset_net(alpha: float = 1.0):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    x = torch.randn(1, 3, 4, 5)
    cal = [(torch.randn(1, 3, 4, 5),) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FloatFallbackWarning)
        exported = torchmcu.export(_OffsetNet(alpha).eval(), (x,), calibration=cal)
    (host,) = native.run_program(exported.pte_bytes, [x.numpy()])
    with torch.no_grad():
        fq = exported.quantized_model(x).numpy()
    return exported, host, fq


def test_a_parameter_operand_is_an_int8_constant() -> None:
    """The int8 add takes a quantized Parameter as an int8 constant operand: no float op, and
    the program equals the fake-quantized model."""
    exported, host, fq = _export_offset_net()
    assert exported.report["float_ops"] == []
    np.testing.assert_array_equal(host, fq)


def test_a_fused_relu_after_a_fallback_op_stays_in_its_float_region() -> None:
    """add + relu where the int8 add refuses its operands (alpha=2, which it has no form for):
    the add runs in float32, and the ReLU fused into its output range reads its float value."""
    exported, host, fq = _export_offset_net(alpha=2.0)
    reasons = {f["node"]: f["reason"] for f in exported.report["float_ops"]}
    assert reasons["add"].startswith(NO_INT8_KERNEL) and reasons["relu"] == IN_FLOAT_REGION
    assert _sqnr_db(fq, host) >= 30.0


def test_constant_fills_fold_to_int8_constants() -> None:
    """torch.zeros_like / torch.ones (a recurrent layer's initial state, a bias of ones): no
    kernel and no float op; their quantized values are int8 constants in the program."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            return (y + torch.zeros_like(y)) * torch.full((1, 4, 1, 1), 0.5)

    torch.manual_seed(0)
    x = torch.randn(1, 3, 4, 5)
    cal = [(torch.randn(1, 3, 4, 5),) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FloatFallbackWarning)
        exported = torchmcu.export(Net().eval(), (x,), calibration=cal, strict=True)
    assert exported.report["float_ops"] == []
    plan = exported.program.execution_plan[0]
    ops = Counter(plan.operators[i.op_index].name for i in plan.chains[0].instructions)
    assert ops["cortex_m::quantized_add"] == ops["cortex_m::quantized_mul"] == 1
    add = next(
        i
        for i in plan.chains[0].instructions
        if plan.operators[i.op_index].name == "cortex_m::quantized_add"
    )
    zeros = plan.values[add.args[4]]  # other: the int8 constant of zeros_like, its zero point
    assert zeros.data_buffer_idx > 0 and zeros.sizes == [1, 4, 4, 5]
    zero_point = plan.values[add.args[5]].value
    data = np.frombuffer(exported.program.constants[zeros.data_buffer_idx], np.int8)
    assert data.size == 80 and (data == zero_point).all()
    (host,) = native.run_program(exported.pte_bytes, [x.numpy()])
    assert np.array_equal(host, run_program(exported.program, [x.numpy()])[0])
    with torch.no_grad():
        fq = exported.quantized_model(x).numpy()
    assert _sqnr_db(fq, host) >= 30.0
