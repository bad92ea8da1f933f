"""A MobileNetV3-style block written as model code writes it (issue 17): conv-BN-hardswish with
the activations in place, a depthwise conv, squeeze-excite (`x.mean((2, 3), keepdim=True)`,
1x1 convs, relu_, hardsigmoid_, a channel-broadcast mul), a SiLU, leaky_relu, dropout in the
head (nn.Dropout(inplace=True) and F.dropout), torch.flatten and a linear.

On corstone-300 it exports entirely as int8 cortex_m calls; the host C runtime is bit-exact
with the reference interpreter; it agrees with torchao's fake-quantized model of the same
export; and on ethos-u55-128 it is one delegate, bit-exact on the host (TOSA reference model)
with the CPU program."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from torch import nn
from torchmcu.api import export_quantized
from torchmcu.npu.config import resolve_target
from torchmcu.pte.reader import parse
from torchmcu.quantize import quantize
from torchmcu.reference.interpreter import run_program


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        w = x.mean((2, 3), keepdim=True)
        w = F.relu(self.fc1(w), inplace=True)
        return x * F.hardsigmoid(self.fc2(w), inplace=True)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish(inplace=True)
        )
        self.dw = nn.Sequential(
            nn.Conv2d(8, 8, 3, 1, 1, groups=8, bias=False),
            nn.BatchNorm2d(8),
            nn.Hardswish(inplace=True),
        )
        self.se = SqueezeExcite(8, 4)
        self.pw = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU(True))
        self.head = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(16, 10))

    def forward(self, x):
        x = F.leaky_relu(self.pw(self.se(self.dw(self.stem(x)))), 0.1)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.head(F.dropout(x, 0.1, training=self.training))


class _Export:
    def __init__(self) -> None:
        torch.manual_seed(0)
        model = Block()
        for m in model.modules():  # random statistics so the signal survives the BatchNorms
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        model.eval()
        cal = [(torch.randn(1, 3, 16, 16),) for _ in range(8)]
        self.graph = quantize(model, cal[0], cal)
        self.cpu = export_quantized(self.graph, board="corstone-300")
        self.inputs = [cal[0][0].numpy(), torch.randn(1, 3, 16, 16).numpy()]


@pytest.fixture(scope="module")
def block() -> _Export:
    return _Export()


def test_exports_as_int8_calls_only(block):
    plan = block.cpu.program.execution_plan[0]
    names = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert all(n.startswith("cortex_m::") for n in names), names
    # hardswish x2, relu_ (SE squeeze: it follows a conv, so fused), hardsigmoid_, silu, leaky
    assert names.count("cortex_m::quantized_activation") == 5
    assert names.count("cortex_m::quantized_mul") == 1  # the excitation, [N,C,1,1] x [N,C,H,W]
    assert "dropout" not in str(block.graph.graph)


def test_host_bit_exact_with_the_reference_and_close_to_fake_quant(block):
    scale = block.cpu.report["outputs"][0]["scale"]
    for x in block.inputs:
        (ours,) = torchmcu.run_on_host(block.cpu.pte_bytes, [x])
        (reference,) = run_program(block.cpu.program, [x])
        np.testing.assert_array_equal(ours, reference)
        want = block.graph(torch.from_numpy(x)).detach().numpy()
        assert np.abs(ours - want).max() <= 2 * scale + 1e-6  # avg pool and mul round


def test_one_npu_delegate_bit_exact_with_the_cpu_program(block, tmp_path):
    pytest.importorskip("tosa_reference_model")
    pytest.importorskip("ethosu.vela")
    exported = export_quantized(
        block.graph,
        board="corstone-300",
        npu_target=resolve_target("corstone-300", "ethos-u55-128"),
    )
    plan = parse(exported.pte_bytes).execution_plan[0]
    assert [d.id for d in plan.delegates] == ["EthosUBackend"]
    assert exported.report["npu"]["macs"]["fraction"] == 1.0
    path = exported.save(tmp_path / "npu")
    for x in block.inputs:
        (got,) = torchmcu.run_on_host(path, [x])
        (want,) = run_program(block.cpu.program, [x])
        np.testing.assert_array_equal(got, want)
