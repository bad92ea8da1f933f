"""The elementwise operators reached from model code, exported for corstone-300: a
squeeze-excite block (x.mean((2, 3), keepdim=True), 1x1 convs, relu6(x + 3) / 6, x * s with
s [1, C, 1, 1]), torch.maximum / minimum, abs, neg, a subtraction, 1 - x, x * 0.5 and
BatchNorm2d at the input and after an add. It exports as int8 cortex_m calls only; the host
runtime is bit-exact with the reference interpreter; the output agrees with torchao's
fake-quantized model (the independent reference) within one quantization step at the 99th
percentile; on Ethos-U85 the whole model is one delegate whose TOSA graph, run on the TOSA
reference model, is bit-exact with the CPU program."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from _model_checks import fake_quant_steps, float_region
from torch import nn
from torchmcu.reference.interpreter import run_program as reference_run

SHAPE = (1, 3, 10, 10)


def _random_bn(bn: nn.BatchNorm2d, g: torch.Generator) -> nn.BatchNorm2d:
    c = bn.num_features
    bn.running_mean.copy_(torch.rand(c, generator=g) * 2 - 1)
    bn.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.5)
    bn.weight.data.copy_(torch.rand(c, generator=g) * 3 - 1.5)
    bn.bias.data.copy_(torch.rand(c, generator=g) - 0.5)
    return bn


class SENet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(17)
        self.bn_in = _random_bn(nn.BatchNorm2d(3), g)
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.fc1 = nn.Conv2d(16, 4, 1)
        self.fc2 = nn.Conv2d(4, 16, 1)
        self.proj = nn.Conv2d(16, 16, 1)
        self.bn_add = _random_bn(nn.BatchNorm2d(16), g)
        for m in (self.conv, self.fc1, self.fc2, self.proj):
            nn.init.kaiming_normal_(m.weight, generator=g)
            nn.init.uniform_(m.bias, -0.2, 0.2, generator=g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn_in(x)
        y = F.relu(self.conv(x), inplace=True)
        s = y.mean((2, 3), keepdim=True)
        s = F.relu(self.fc1(s))
        s = F.relu6(self.fc2(s) + 3.0) / 6.0
        y = y * s
        z = torch.maximum(self.proj(y), y - 0.25)
        z = self.bn_add(z + y)
        z = torch.minimum(z.abs(), 1 - z)
        return -z * 0.5


@pytest.fixture(scope="module")
def exported():
    torch.manual_seed(0)
    model = SENet().eval()
    calibration = [(torch.randn(SHAPE),) for _ in range(8)]
    prog = torchmcu.export(
        model, calibration[0], calibration=calibration, board="corstone-300", int8_io=True
    )
    return model, prog, calibration


def test_exports_as_int8_calls_only(exported) -> None:
    _, prog, _ = exported
    counts = prog.report["op_counts"]
    assert all(op.startswith("cortex_m::") for op in counts), counts
    for op, n in {
        "cortex_m::quantized_mul": 4,
        "cortex_m::maximum": 1,
        "cortex_m::minimum": 1,
        "cortex_m::quantized_activation": 1,
        "cortex_m::quantized_depthwise_conv2d": 3,  # one is the global mean (own qparams)
        "cortex_m::quantized_add": 4,
    }.items():
        assert counts.get(op) == n, (op, counts)


def test_host_bit_exact_with_reference_and_near_fake_quant(exported) -> None:
    _, prog, _ = exported
    d = fake_quant_steps(prog, SHAPE, 8)
    assert np.percentile(d, 99) <= 1.0, (d.max(), np.percentile(d, 99))


def test_ethos_u85_one_delegate_bit_exact_with_cpu(exported) -> None:
    model, cpu, calibration = exported
    npu = torchmcu.export(
        model,
        calibration[0],
        calibration=calibration,
        board="corstone-320",
        npu="ethos-u85-256",
        int8_io=True,
    )
    assert npu.report["op_counts"] == {"delegate:EthosUBackend": 1}, npu.report["op_counts"]
    qx = np.random.default_rng(5).integers(-128, 128, SHAPE, dtype=np.int8)
    (got,) = reference_run(npu.program, [qx], delegate_fn=npu.tosa_delegate_fn())
    (want,) = reference_run(cpu.program, [qx])
    np.testing.assert_array_equal(got, want)


class FloatBody(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = 2 - (x * 0.5 + 1)
        y = -((y - x) / 4)
        y = torch.maximum(y.abs(), x)
        return torch.minimum(y, x * 3)


def test_float_region_runs_the_portable_forms_like_torch() -> None:
    """The same operators kept in float32 (set_module_name(..., None)): portable calls only,
    the host runtime and the reference within float32 rounding of torch."""
    names, want, got, ref = float_region(FloatBody(), (1, 4, 3, 3))
    assert names == {"aten::add", "aten::mul", "aten::abs", "aten::maximum", "aten::minimum"}
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ref, got)
