"""Single-op models: quantize, lower, run the Program with the reference interpreter and
compare with the converted fake-quant GraphModule (the independent oracle: torch's float
ops between quantize/dequantize). Single-op models agree within one output step."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from torchmcu.lower import lower_to_program
from torchmcu.pte.validate import validate
from torchmcu.quantize import quantize

interpreter = pytest.importorskip("torchmcu.reference.interpreter")


def _ops(program) -> list[str]:
    ep = program.execution_plan[0]
    return [ep.operators[i.op_index].name for i in ep.chains[0].instructions]


def lower_and_compare(model: nn.Module, shapes, *, per_channel=True, max_steps=1.0, n_cal=8,
                      seed=0, scale_inputs=1.0):
    torch.manual_seed(seed)
    model = model.eval()
    cal = [tuple(torch.randn(*s) * scale_inputs for s in shapes) for _ in range(n_cal)]
    gm = quantize(model, cal[0], cal, per_channel=per_channel)
    program, report = lower_to_program(gm)
    validate(program)
    tests = cal[:2] + [tuple(torch.randn(*s) * scale_inputs for s in shapes) for _ in range(2)]
    worst = 0.0
    for sample in tests:
        expected = gm(*sample)
        expected = expected if isinstance(expected, (tuple, list)) else (expected,)
        got = interpreter.run_program(program, [t.numpy() for t in sample])
        assert len(got) == len(expected)
        for g, e, info in zip(got, expected, report.outputs):
            e = e.detach().numpy()
            assert g.shape == e.shape and g.dtype == np.float32
            steps = float(np.max(np.abs(g - e))) / info["scale"]
            worst = max(worst, steps)
    assert worst <= max_steps + 1e-3, f"max difference {worst} output steps"
    return program, report


class Seq(nn.Module):
    def __init__(self, *layers: nn.Module) -> None:
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def test_linear_per_tensor():
    program, _ = lower_and_compare(Seq(nn.Linear(16, 8)), [(2, 16)])
    assert _ops(program) == ["cortex_m::quantize_per_tensor", "cortex_m::quantized_linear",
                             "cortex_m::dequantize_per_tensor"]


def test_linear_relu_fused():
    program, _ = lower_and_compare(Seq(nn.Linear(16, 8), nn.ReLU()), [(1, 16)])
    assert "cortex_m::quantized_linear" in _ops(program)
    assert len(_ops(program)) == 3  # the ReLU is the kernel's activation range


@pytest.mark.parametrize(
    "conv",
    [
        nn.Conv2d(3, 8, 3),
        nn.Conv2d(3, 8, 3, padding=1),
        nn.Conv2d(4, 6, 3, stride=2, padding=1),
        nn.Conv2d(4, 6, (3, 1), stride=(1, 2), padding=(1, 0)),
        nn.Conv2d(8, 4, 1, bias=False),
    ],
    ids=["3x3", "3x3pad", "3x3s2", "3x1s12", "1x1nobias"],
)
def test_conv2d(conv):
    program, _ = lower_and_compare(Seq(conv), [(1, conv.in_channels, 9, 10)])
    ops = _ops(program)
    assert ops.count("cortex_m::quantized_conv2d") == 1
    assert ops.count("cortex_m::transpose") == 2  # one at each boundary


def test_conv2d_per_tensor_weights():
    lower_and_compare(Seq(nn.Conv2d(3, 8, 3, padding=1)), [(1, 3, 8, 8)], per_channel=False)


def test_grouped_conv():
    lower_and_compare(Seq(nn.Conv2d(4, 8, 3, groups=2)), [(1, 4, 7, 7)])


def test_conv_relu6_fused():
    program, _ = lower_and_compare(Seq(nn.Conv2d(3, 8, 3), nn.ReLU6()), [(1, 3, 8, 8)],
                                   scale_inputs=3.0)
    assert "cortex_m::quantized_conv2d" in _ops(program)


def test_depthwise_relu6():
    program, _ = lower_and_compare(
        Seq(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU6()), [(1, 8, 6, 6)]
    )
    assert "cortex_m::quantized_depthwise_conv2d" in _ops(program)


def test_depthwise_multiplier_strided():
    program, _ = lower_and_compare(
        Seq(nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4)), [(1, 4, 9, 9)]
    )
    assert "cortex_m::quantized_depthwise_conv2d" in _ops(program)


class Add(nn.Module):
    def __init__(self, relu: bool) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1)
        self.b = nn.Conv2d(3, 4, 3, padding=1)
        self.relu = relu

    def forward(self, x):
        y = self.a(x) + self.b(x)
        return F.relu(y) if self.relu else y


@pytest.mark.parametrize("relu", [False, True])
def test_residual_add(relu):
    program, _ = lower_and_compare(Add(relu), [(1, 3, 6, 6)])
    assert _ops(program).count("cortex_m::quantized_add") == 1


class TwoInputs(nn.Module):
    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op

    def forward(self, x, y):
        return x * y if self.op == "mul" else x + y


@pytest.mark.parametrize("op", ["mul", "add"])
def test_elementwise_two_inputs(op):
    program, _ = lower_and_compare(TwoInputs(op), [(2, 5, 3), (2, 5, 3)])
    assert f"cortex_m::quantized_{op}" in _ops(program)


@pytest.mark.parametrize(
    "pool",
    [nn.MaxPool2d(2), nn.MaxPool2d(3, stride=2, padding=1), nn.AvgPool2d(2),
     nn.AvgPool2d(3, stride=2, padding=1), nn.AvgPool2d(3, stride=2, padding=1,
                                                        count_include_pad=False),
     nn.AdaptiveAvgPool2d(1)],
    ids=["max2", "max3s2p1", "avg2", "avg3s2p1", "avg3s2p1_nopad", "global"],
)
def test_pools(pool):
    program, _ = lower_and_compare(Seq(nn.Conv2d(3, 4, 1), pool), [(1, 3, 8, 8)])
    ops = _ops(program)
    # a global average of 8x8 (an even count) has its own output qparams: the all-ones
    # depthwise sum, requantized
    want = "depthwise_conv2d" if isinstance(pool, nn.AdaptiveAvgPool2d) else "pool2d"
    assert any(want in o for o in ops), ops


class MeanHW(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x).mean(dim=(2, 3))


def test_mean_over_hw_is_global_avg_pool():
    # 5x5 = 25 values, an odd count: the input's qparams, so the average pool
    program, _ = lower_and_compare(MeanHW(), [(1, 3, 7, 7)])
    ops = _ops(program)
    assert "cortex_m::quantized_avg_pool2d" in ops
    assert ops.count("cortex_m::transpose") == 1  # [N,C] output needs no layout change


def test_softmax():
    program, report = lower_and_compare(Seq(nn.Linear(10, 6), nn.Softmax(dim=-1)), [(3, 10)],
                                        scale_inputs=2.0)
    assert "cortex_m::softmax" in _ops(program)
    assert report.outputs[0]["scale"] == 1.0 / 256 and report.outputs[0]["zero_point"] == -128


class ConvFlattenLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, stride=2)
        self.fc = nn.Linear(5 * 3 * 4, 7)

    def forward(self, x):
        return self.fc(torch.flatten(F.relu(self.conv(x)), 1))


def test_flatten_of_nhwc_folds_into_linear_weights():
    # H*W = 12 > 1: a wrong column order would mix channels and fail the comparison.
    program, _ = lower_and_compare(ConvFlattenLinear(), [(1, 3, 7, 9)])
    assert _ops(program) == [
        "cortex_m::quantize_per_tensor", "cortex_m::transpose", "cortex_m::quantized_conv2d",
        "cortex_m::quantized_linear", "cortex_m::dequantize_per_tensor",
    ]


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(6)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.3, 0.3)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def test_conv_batchnorm_folded():
    program, _ = lower_and_compare(ConvBN(), [(1, 3, 6, 6)])
    assert _ops(program).count("cortex_m::quantized_conv2d") == 1


class LinearBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 8)
        self.bn = nn.BatchNorm1d(8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return F.relu(self.bn(self.fc(x)))


def test_linear_batchnorm1d_folded():
    program, _ = lower_and_compare(LinearBN(), [(4, 12)])
    assert _ops(program).count("cortex_m::quantized_linear") == 1


def test_zero_pad_asymmetric_then_conv():
    program, _ = lower_and_compare(Seq(nn.ZeroPad2d((1, 2, 3, 0)), nn.Conv2d(2, 4, 3)),
                                   [(1, 2, 6, 5)])
    assert "cortex_m::pad" in _ops(program)


class ConvClamp(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.kind = kind

    def forward(self, x):
        y = self.conv(x)
        if self.kind == "hardtanh":
            return F.hardtanh(y, -0.5, 0.75)
        return torch.clamp(y, min=-0.25, max=1.5)


@pytest.mark.parametrize("kind", ["hardtanh", "clamp"])
def test_conv_clamp_fused(kind):
    program, _ = lower_and_compare(ConvClamp(kind), [(1, 3, 6, 6)], scale_inputs=2.0)
    assert len(_ops(program)) == 5  # quantize, transpose, conv, transpose, dequantize
