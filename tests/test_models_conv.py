"""Small models of the convolution forms of issue 17, exported for corstone-300 as users write
them: a Conv1d keyword-spotter block (Conv1d, BatchNorm1d, inplace ReLU, dilated depthwise
Conv1d, grouped 1x1 Conv1d, mean(-1), Linear) on [1, 40, 49], a conv1d feeding a flatten, and a
tiny decoder with ConvTranspose2d (stride 2, output_padding) and a BatchNorm2d folded into it.
Each exports with every compute op an int8 cortex_m:: call, the host runtime is bit-exact with the reference interpreter, and both
are within one output step of torchao's fake-quantized model (the independent reference). On
ethos-u55-128 each is one delegate with all its MACs (Vela accepts the dilated, grouped and
transposed forms), bit-exact on the host (TOSA reference model) with the CPU program."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from torch import nn
from torchmcu.api import run_on_host
from torchmcu.reference.interpreter import run_program as reference_run

# every op of the programs: the int8 computes, their I/O (de)quantize, and layout transposes
INT8_OPS = {
    "cortex_m::quantized_conv2d", "cortex_m::quantized_depthwise_conv2d",
    "cortex_m::quantized_transpose_conv2d", "cortex_m::quantized_avg_pool2d",
    "cortex_m::quantized_linear", "cortex_m::quantize_per_tensor",
    "cortex_m::dequantize_per_tensor", "cortex_m::transpose",
}  # fmt: skip


class KeywordSpotter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(40, 32, 5, stride=2, padding=2)
        self.bn = nn.BatchNorm1d(32)
        self.dw = nn.Conv1d(32, 32, 3, padding=2, dilation=2, groups=32)
        self.bn2 = nn.BatchNorm1d(32)
        self.pw = nn.Conv1d(32, 32, 1, groups=4)
        self.fc = nn.Linear(32, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv(x)), inplace=True)
        x = F.relu(self.bn2(self.dw(x)))
        x = self.pw(x)
        return self.fc(x.mean(-1))


class Conv1dFlatten(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, stride=2)
        self.fc = nn.Linear(6 * 7, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.up2 = nn.ConvTranspose2d(6, 4, 2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv(x))
        return self.up2(F.relu(self.bn(self.up(x)), inplace=True))


MODELS = {
    "kws_conv1d": (KeywordSpotter, (1, 40, 49)),
    "conv1d_flatten": (Conv1dFlatten, (2, 4, 15)),
    "decoder_tconv": (Decoder, (1, 3, 6, 6)),
}


def _export(name: str, **kw):
    cls, shape = MODELS[name]
    torch.manual_seed(0)
    model = cls().eval()
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    calibration = [(torch.randn(*shape),) for _ in range(8)]
    prog = torchmcu.export(
        model, (torch.randn(*shape),), calibration=calibration, board="corstone-300", **kw
    )
    return prog, shape


@pytest.fixture(scope="module", params=list(MODELS))
def exported(request):
    return request.param, *_export(request.param)


def _ops(prog) -> Counter:
    plan = prog.program.execution_plan[0]
    return Counter(plan.operators[i.op_index].name for c in plan.chains for i in c.instructions)


def test_exports_as_int8_calls_bit_exact_on_the_host(exported):
    name, prog, shape = exported
    ops = _ops(prog)
    assert set(ops) <= INT8_OPS, ops
    want = {"kws_conv1d": {"cortex_m::quantized_conv2d": 2, "cortex_m::quantized_depthwise_conv2d": 1},
            "conv1d_flatten": {"cortex_m::quantized_conv2d": 1},
            "decoder_tconv": {"cortex_m::quantized_transpose_conv2d": 2}}[name]  # fmt: skip
    assert {k: ops[k] for k in want} == want
    # a conv1d's [N, L, C] output feeds the next conv1d and the mean as it is: the one
    # transpose is the input's (and, for the flatten, the conv's output's)
    assert (
        ops["cortex_m::transpose"]
        == {"kws_conv1d": 1, "conv1d_flatten": 2, "decoder_tconv": 2}[name]
    )
    rng = np.random.default_rng(5)
    scale = prog.report["outputs"][0]["scale"]
    for _ in range(3):
        x = rng.standard_normal(shape).astype(np.float32)
        host = run_on_host(prog.pte_bytes, [x])[0]
        assert host.tobytes() == reference_run(prog.program, [x])[0].tobytes()
        fake_quant = prog.quantized_model(torch.from_numpy(x)).detach().numpy()
        assert np.abs(host - fake_quant).max() <= 1.01 * scale
        assert np.abs(fake_quant).max() > 10 * scale  # not a constant output


def test_one_npu_delegate_bit_exact_with_the_cpu_program(exported, tmp_path):
    name, cpu, shape = exported
    npu, _ = _export(name, npu="ethos-u55-128")
    assert npu.report["npu"]["macs"]["fraction"] == 1.0
    assert len(npu.program.execution_plan[0].delegates) == 1
    path = npu.save(tmp_path, name)
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    assert run_on_host(path, [x])[0].tobytes() == reference_run(cpu.program, [x])[0].tobytes()
