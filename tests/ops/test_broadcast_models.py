"""The general broadcast of add/sub/mul and the int8 sum reached from model code, exported
for corstone-300 with strict=True: a conv net adding, multiplying and subtracting its own
reductions (`y + y.mean(1, keepdim=True)` [N,1,H,W], `y * y.mean(3, keepdim=True)`
[N,C,H,1], `y - y.amax((1, 2), keepdim=True)` [N,1,1,W], `[N,C,1,W] + [N,1,H,1]`), a conv
net of sums over any dims with and without keepdim (`y.sum(1, keepdim=True)`,
`y.sum((2, 3))`, ...) and a sequence net (`[B,T,C] + [1,1,C]`, `[B,T,C] * [B,T,1]`, a sum
over T). Each exports as int8 cortex_m calls only; the host runtime is bit-exact with the
reference interpreter; the output agrees with torchao's fake-quantized model (the
independent reference) within two quantization steps at the 99th percentile (three at most:
the first net chains five requantizing ops); on Ethos-U55 each conv net is one delegate whose
TOSA graph, run on the TOSA reference model, is bit-exact with the CPU program. The same ops
in a float region run the portable kernels like torch (a sum as mean.out times the count)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchmcu
from _model_checks import fake_quant_steps, float_region
from torch import nn
from torchmcu.reference.interpreter import run_program as reference_run


class ConvBroadcast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.proj = nn.Conv2d(8, 8, 1)
        for m in (self.conv, self.proj):
            nn.init.kaiming_normal_(m.weight, generator=g)
            nn.init.uniform_(m.bias, -0.2, 0.2, generator=g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = y + y.mean(1, keepdim=True)  # [N,1,H,W]
        y = y * y.mean(3, keepdim=True)  # [N,C,H,1]
        y = y - y.amax((1, 2), keepdim=True)  # [N,1,1,W]
        y = self.proj(y)
        return y.mean(2, keepdim=True) + y.mean((1, 3), keepdim=True)  # [N,C,1,W] + [N,1,H,1]


class ConvSums(nn.Module):
    """int8 sums over any dims, keepdim or not, added back by the broadcast."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        nn.init.kaiming_normal_(self.conv.weight, generator=g)
        nn.init.uniform_(self.conv.bias, -0.2, 0.2, generator=g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        a = y.sum(1, keepdim=True) + y.sum((2, 3))[:, :, None, None]  # [N,1,H,W] + [N,C,1,1]
        return a + y.sum(3, keepdim=True) + y.sum((1, 2), keepdim=True)  # + [N,C,H,1] + [N,1,1,W]


class SeqBroadcast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.fc = nn.Linear(6, 12)
        self.gate = nn.Linear(6, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        y = y + y.mean((0, 1), keepdim=True)  # [B,T,C] + [1,1,C]
        y = y * torch.sigmoid(self.gate(x))  # [B,T,C] * [B,T,1]
        return y + y.sum(1, keepdim=True)  # a sum over T: [B,1,C]


MODELS = {
    "conv": (ConvBroadcast, (1, 3, 8, 8)),
    "sum": (ConvSums, (1, 3, 8, 8)),
    "seq": (SeqBroadcast, (2, 5, 6)),
}


def _export(name: str, **kw):
    cls, shape = MODELS[name]
    torch.manual_seed(0)
    model = cls().eval()
    calibration = [(torch.randn(shape),) for _ in range(8)]
    prog = torchmcu.export(
        model, calibration[0], calibration=calibration, int8_io=True, strict=True, **kw
    )
    return model, prog, calibration


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request):
    return request.param, *_export(request.param, board="corstone-300")


def test_exports_as_int8_calls_only(exported) -> None:
    name, _, prog, _ = exported
    counts = prog.report["op_counts"]
    assert all(op.startswith("cortex_m::") for op in counts), counts
    want = {
        "conv": {"cortex_m::quantized_add": 3, "cortex_m::quantized_mul": 1},
        "sum": {"cortex_m::quantized_add": 3, "cortex_m::quantized_depthwise_conv2d": 4},
        "seq": {
            "cortex_m::quantized_add": 2,
            "cortex_m::quantized_mul": 1,
            "cortex_m::quantized_depthwise_conv2d": 2,  # the mean: a requantized sum
        },
    }[name]
    for op, n in want.items():
        assert counts.get(op) == n, (op, counts)


def test_host_bit_exact_with_reference_and_near_fake_quant(exported) -> None:
    name, _, prog, _ = exported
    d = fake_quant_steps(prog, MODELS[name][1], 6)
    # five chained requantizing ops (means, adds, a mul) in the conv net: each may round once
    assert np.percentile(d, 99) <= 2.0 and d.max() <= 3 and d.mean() <= 0.3, (
        d.max(),
        np.percentile(d, 99),
    )


def test_ethos_u55_one_delegate_bit_exact_with_cpu(exported) -> None:
    name, _, cpu, _ = exported
    if name == "seq":
        pytest.skip("the conv nets are enough")
    _, npu, _ = _export(name, board="corstone-300", npu="ethos-u55-128")
    assert npu.report["op_counts"] == {"delegate:EthosUBackend": 1}, npu.report["op_counts"]
    qx = np.random.default_rng(5).integers(-128, 128, MODELS[name][1], dtype=np.int8)
    (got,) = reference_run(npu.program, [qx], delegate_fn=npu.tosa_delegate_fn())
    (want,) = reference_run(cpu.program, [qx])
    np.testing.assert_array_equal(got, want)


class FloatBody(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + x.mean(1, keepdim=True)
        y = y * y.mean(3, keepdim=True)
        y = y - y.amax((1, 2), keepdim=True)
        return y + y.sum((1, 3), keepdim=True) + y.sum(2)[:, :, None]


def test_float_region_runs_the_portable_forms_like_torch() -> None:
    names, want, got, ref = float_region(FloatBody(), (1, 4, 3, 5))
    assert {"aten::add", "aten::mul", "aten::mean"} <= names, names
    assert not any(n.startswith("cortex_m::") for n in names), names
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the reference's mean sums in float64, the kernel in float32: float32 rounding apart
    np.testing.assert_allclose(ref, got, rtol=1e-5, atol=1e-5)
