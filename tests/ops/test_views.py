"""The view and activation patterns (torchmcu/ops/defs/views.py, activations.py): the
quantizer's SHARED_TARGETS and ACTIVATION_TARGETS and the lowering's ACTIVATIONS are views of
them; a view lowers to an alias of the input's bytes (a transpose first when NHWC bytes must
become contiguous), an activation to its producer's activation_min/max. The numbers are
checked against the converted fake-quant GraphModule (torch's float ops between quantize and
dequantize) and against bounds quantized by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torchmcu.lower import lower_to_program, requant
from torchmcu.lower.errors import UnsupportedOpError
from torchmcu.lower.graph import QParams
from torchmcu.lower.lowering import EMITTERS
from torchmcu.quantize import noops, quantize
from torchmcu.quantize.quantizer import ACTIVATION_TARGETS, SHARED_TARGETS
from torchmcu.reference.interpreter import run_program

_aten = torch.ops.aten

VIEWS = {
    _aten.flatten.using_ints,
    _aten.view.default,
    _aten.reshape.default,
    _aten._unsafe_view.default,
    _aten.squeeze.dim,
    _aten.squeeze.dims,
    _aten.unsqueeze.default,
    _aten.unflatten.int,
}
# the eval graph's no-ops: removed before quantization (quantize/noops.py), a view if they stay
NOOPS = {
    _aten.alias.default,
    _aten.clone.default,
    _aten.contiguous.default,
    _aten.detach.default,
    _aten.detach_.default,
    _aten.lift_fresh_copy.default,
    *(
        getattr(_aten, name + inplace).default
        for name in ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
        for inplace in ("", "_")
    ),
}
ACTIVATIONS = {
    _aten.relu.default,
    _aten.relu_.default,
    _aten.relu6.default,
    _aten.relu6_.default,
    _aten.hardtanh.default,
    _aten.hardtanh_.default,
    _aten.clamp.default,
    _aten.clamp_.default,
    _aten.clamp_min.default,
    _aten.clamp_min_.default,
    _aten.clamp_max.default,
    _aten.clamp_max_.default,
}


def test_the_shared_targets_are_the_views_and_the_data_movement_ops():
    moves = {
        _aten.pad.default,
        _aten.constant_pad_nd.default,
        _aten.select.int,
        _aten.slice.Tensor,
        _aten.transpose.int,
        _aten.permute.default,
        _aten.channel_shuffle.default,
        _aten.repeat.default,
        _aten.expand.default,
        _aten.pixel_shuffle.default,
        _aten.pixel_unshuffle.default,
    }
    assert set(SHARED_TARGETS) == VIEWS | NOOPS | moves
    assert set(noops.NOOPS) == NOOPS
    assert set(SHARED_TARGETS) <= set(EMITTERS)  # each has its int8 rule


def test_the_activations_fuse_and_have_a_rule_for_where_they_do_not():
    assert set(ACTIVATION_TARGETS) == set(requant.ACTIVATIONS) == ACTIVATIONS
    assert ACTIVATIONS <= set(EMITTERS)  # standalone: a clamp table
    assert not ACTIVATIONS & set(SHARED_TARGETS)


QP = QParams(scale=0.1, zero_point=-20, quant_min=-128, quant_max=127)


def _act(target, *args, **kwargs) -> torch.fx.Node:
    g = torch.fx.Graph()
    x = g.placeholder("x")
    return g.call_function(target, (x, *args), kwargs)


# (node, (activation_min, activation_max)): bound / 0.1 - 20, clipped to -128..127
RANGES = [
    (_act(_aten.relu.default), (-20, 127)),
    (_act(_aten.relu_.default), (-20, 127)),
    (_act(_aten.relu6.default), (-20, 40)),
    (_act(_aten.hardtanh.default), (-30, -10)),  # defaults -1, 1
    (_act(_aten.hardtanh_.default, -0.5, 0.8), (-25, -12)),
    (_act(_aten.hardtanh.default, max_val=0.3), (-30, -17)),
    (_act(_aten.clamp.default, -0.3), (-23, 127)),
    (_act(_aten.clamp_.default, None, 0.2), (-128, -18)),
    (_act(_aten.clamp.default, min=-20.0, max=20.0), (-128, 127)),
    (_act(_aten.clamp_min.default, 0.35), (-16, 127)),  # 3.5 - 20, ties to even
    (_act(_aten.clamp_max_.default, -0.25), (-128, -22)),  # -2.5 - 20
]


@pytest.mark.parametrize(("node", "expected"), RANGES, ids=lambda v: str(v))
def test_activation_range_quantizes_the_bounds(node, expected):
    assert requant.activation_range(node, QP) == expected


def test_clamp_bounds_must_be_numbers():
    g = torch.fx.Graph()
    x, lo = g.placeholder("x"), g.placeholder("lo")
    node = g.call_function(_aten.clamp.default, (x, lo))
    with pytest.raises(UnsupportedOpError, match="clamp bounds must be numbers"):
        requant.activation_range(node, QP)


def _lower_and_compare(model: nn.Module, shape: tuple[int, ...]) -> list[str]:
    """Quantize, lower and run `model` on the interpreter: within one output step of the
    converted GraphModule; returns the program's operator names."""
    torch.manual_seed(0)
    model = model.eval()
    cal = [(torch.randn(*shape),) for _ in range(8)]
    gm = quantize(model, cal[0], cal)
    program, report = lower_to_program(gm)
    for (x,) in [*cal[:2], (torch.randn(*shape),)]:
        (got,) = run_program(program, [x.numpy()])
        want = gm(x).detach().numpy()
        assert got.shape == want.shape
        assert float(np.max(np.abs(got - want))) <= report.outputs[0]["scale"] + 1e-6
    plan = program.execution_plan[0]
    return [plan.operators[i.op_index].name for i in plan.chains[0].instructions]


class ConvThen(nn.Module):
    def __init__(self, view) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.view = view
        self.fc = nn.Linear(4 * 3 * 2, 5)

    def forward(self, x):
        return self.fc(self.view(F.relu(self.conv(x))).reshape(x.shape[0], -1))


VIEW_MODELS = {
    "flatten": lambda y: torch.flatten(y, 1),
    "view": lambda y: y.view(y.shape[0], 4, 6),
    "unsqueeze_squeeze": lambda y: torch.squeeze(torch.unsqueeze(y, 1), 1),
    "squeeze_dims": lambda y: torch.squeeze(y.unsqueeze(0), (0,)),
    "dropout": lambda y: F.dropout(y, 0.5, training=False),
    "clone": lambda y: y.clone(),
    "contiguous": lambda y: y.contiguous(),
}


@pytest.mark.parametrize("name", list(VIEW_MODELS))
def test_a_view_aliases_the_bytes(name):
    names = _lower_and_compare(ConvThen(VIEW_MODELS[name]), (1, 3, 5, 4))
    # no kernel of the view's own: the input transpose, conv, at most one transpose to make
    # NHWC bytes contiguous, linear, dequantize
    assert names[:3] == [
        "cortex_m::quantize_per_tensor",
        "cortex_m::transpose",
        "cortex_m::quantized_conv2d",
    ]
    assert names[-2:] == ["cortex_m::quantized_linear", "cortex_m::dequantize_per_tensor"]
    assert len(names) <= 6


def test_flatten_of_nhwc_keeps_the_bytes():
    """flatten(1) of NHWC bytes emits nothing: the linear weights take the (h, w, c) order."""
    names = _lower_and_compare(ConvThen(lambda y: torch.flatten(y, 1)), (1, 3, 5, 4))
    assert names.count("cortex_m::transpose") == 1  # the input's only


def test_a_reshape_of_nhwc_bytes_makes_them_contiguous_first():
    names = _lower_and_compare(ConvThen(lambda y: y.reshape(1, 4, 6)), (1, 3, 5, 4))
    assert names.count("cortex_m::transpose") == 2


# a conv with its activation fused, between the program's layout conversions
CONV_ONLY = [
    "cortex_m::quantize_per_tensor",
    "cortex_m::transpose",
    "cortex_m::quantized_conv2d",
    "cortex_m::transpose",
    "cortex_m::dequantize_per_tensor",
]


class ConvClamp(nn.Module):
    def __init__(self, act) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.act = act

    def forward(self, x):
        return self.act(self.conv(x))


FUSED = {
    "relu": F.relu,
    "relu6": F.relu6,
    "hardtanh": lambda y: F.hardtanh(y, -0.5, 0.75),
    "clamp": lambda y: torch.clamp(y, min=-0.25, max=1.5),
    "clamp_min": lambda y: torch.clamp(y, min=0.1),
}


@pytest.mark.parametrize("name", list(FUSED))
def test_an_activation_fuses_into_its_producer(name):
    names = _lower_and_compare(ConvClamp(FUSED[name]), (1, 3, 6, 6))
    assert names == CONV_ONLY


class NoOps(nn.Module):
    """conv -> every no-op of an eval graph -> relu: the relu still fuses into the conv."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.drop = nn.Dropout(0.3, inplace=True)
        self.same = nn.Identity()

    def forward(self, x):
        y = self.drop(self.same(self.conv(x)))
        y = F.dropout2d(F.alpha_dropout(y, 0.1, training=False), 0.2, training=False)
        y = y[:, :4].detach().clone().contiguous(memory_format=torch.channels_last)
        return torch.relu_(F.dropout(y, 0.5, training=self.training))


def test_the_no_ops_are_removed_before_quantization():
    model = NoOps().eval()
    gm = torch.export.export(model, (torch.randn(1, 3, 6, 6),)).module()
    before = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert {_aten.dropout_.default, _aten.alias.default, _aten.detach.default} <= before
    after = {n.target for n in noops.remove_noops(gm).graph.nodes if n.op == "call_function"}
    assert after == {_aten.conv2d.default, _aten.relu_.default}
    names = _lower_and_compare(model, (1, 3, 6, 6))
    assert names == CONV_ONLY


def test_a_training_dropout_is_not_a_no_op():
    """An eval dropout goes; a training one (random at inference too) is refused, named."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(_aten.dropout.default, (x, 0.5, False)))
    gm = noops.remove_noops(torch.fx.GraphModule(torch.nn.Module(), g))
    assert [n for n in gm.graph.nodes if n.op == "call_function"] == []
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(_aten.dropout.default, (x, 0.5, True)))
    with pytest.raises(
        ValueError, match=r"node 'dropout_default' \(aten.dropout\): dropout with train=True"
    ):
        noops.remove_noops(torch.fx.GraphModule(torch.nn.Module(), g))
