"""The fp32 rules (a Pattern's lower_float, beside the portable definitions in
torchmcu/ops/defs/portable_*.py) end to end: a small model kept wholly in float32 exports to a
program of portable calls that the host runtime (the C kernels) and the reference interpreter
(the definitions) run within float32 rounding of torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from torch import nn
from torchmcu import native, ops
from torchmcu.lower.errors import has_float_rule
from torchmcu.lower.lowering import FLOAT_EMITTERS
from torchmcu.pte.writer import serialize
from torchmcu.quantize import TorchmcuQuantizer
from torchmcu.reference.interpreter import run_program


class Body(nn.Module):
    """Every fp32 rule: conv2d, relu, sigmoid, tanh, mul, add, hardsigmoid_, silu, hardswish,
    leaky_relu_, hardtanh, relu6,
    layer_norm, gelu, permute, cat, adaptive_avg_pool2d, flatten (a view), linear with and
    without bias, softmax, mean.dim."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm = nn.LayerNorm(6)
        self.fc = nn.Linear(8, 5)
        self.fc2 = nn.Linear(5, 3, bias=False)
        self.fc3 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = torch.sigmoid(y) * torch.tanh(y) + y
        y = F.hardswish(F.silu(F.hardsigmoid(y, inplace=True)))
        y = F.relu6(F.hardtanh(F.leaky_relu(y, 0.2, inplace=True), -0.1, 0.9))
        y = F.gelu(self.norm(y), approximate="tanh")
        y = torch.cat([y, y.permute(0, 1, 3, 2)], 1)
        z = F.adaptive_avg_pool2d(y, 1).flatten(1)
        z = torch.softmax(self.fc(z), -1)
        return self.fc2(z) + self.fc3(y.mean(dim=(2, 3)))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = Body()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


@pytest.fixture(scope="module")
def exported():
    torch.manual_seed(0)
    model = Model().eval()
    xs = [(torch.randn(1, 3, 6, 6),) for _ in range(4)]
    quantizer = TorchmcuQuantizer().set_module_name("body", None)
    return model, xs, torchmcu.export(model, xs[0], calibration=xs, quantizer=quantizer)


def test_float_model_lowers_to_portable_calls(exported) -> None:
    _, _, e = exported
    plan = e.program.execution_plan[0]
    names = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert names == [
        "aten::convolution", "aten::relu", "aten::sigmoid", "aten::tanh", "aten::mul", "aten::add",
        "aten::hardsigmoid", "aten::silu", "aten::hardswish", "aten::leaky_relu", "aten::hardtanh",
        "aten::hardtanh", "aten::native_layer_norm", "aten::gelu", "aten::permute_copy", "aten::cat", "aten::mean",
        "aten::addmm", "aten::_softmax", "aten::mm", "aten::mean", "aten::addmm", "aten::add",
    ]  # fmt: skip
    portable = {o.qualified for o in ops.ops("portable")}
    assert set(names) <= portable


def test_float_model_runs_like_torch(exported) -> None:
    model, xs, e = exported
    pte = serialize(e.program)
    for (x,) in xs[1:]:
        with torch.no_grad():
            want = model(x).numpy()
        (got,) = native.run_program(pte, [x.numpy()])
        (ref,) = run_program(e.program, [x.numpy()])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ref, got, rtol=1e-5, atol=1e-6)


def test_float_emitters_are_the_patterns_fp32_rules() -> None:
    fp32 = [p for p in ops.patterns() if p.lower_float is not None]
    assert len(FLOAT_EMITTERS) == sum(len(p.aten) for p in fp32)
    any_dtype = {"torchmcu::slice_copy.out"}  # int8-family kernels that copy any element type
    for p in fp32:
        assert all(o.family == "portable" or o.key in any_dtype for o in p.emits), p.aten
    assert has_float_rule(torch.ops.aten.layer_norm.default)
    assert not has_float_rule(torch.ops.aten.cumsum.default)
