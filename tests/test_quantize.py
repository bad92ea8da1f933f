"""Our PT2E quantizer: the scheme it annotates, BN folding, the annotation record, errors."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from torchmcu.quantize import TorchmcuAnnotation, quantize, read_annotation

_qd = torch.ops.quantized_decomposed
_aten = torch.ops.aten


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        y = F.relu6(self.bn(self.conv(x)))
        y = F.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.softmax(self.fc(y), dim=-1)


def _quantized(per_channel: bool = True):
    torch.manual_seed(0)
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    return quantize(Net().eval(), cal[0], cal, per_channel=per_channel)


def _call(gm, target):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == target]


def _attr(gm, node):
    return getattr(gm, node.target)


def test_scheme_weights_bias_activations():
    gm = _quantized()
    (conv,) = _call(gm, _aten.conv2d.default)
    x_dq, w_dq, b_dq = conv.args[:3]
    # activations: asymmetric int8 per tensor over -128..127
    assert x_dq.target == _qd.dequantize_per_tensor.default
    assert x_dq.args[3:6] == (-128, 127, torch.int8)
    # conv weights: symmetric per output channel over -127..127
    assert w_dq.target == _qd.dequantize_per_channel.default
    assert w_dq.args[3:7] == (0, -127, 127, torch.int8)
    assert torch.all(_attr(gm, w_dq.args[2]) == 0)
    w_scales = _attr(gm, w_dq.args[1]).double()
    # bias: int32, scale = input scale * weight scale, per channel
    assert b_dq.args[6] == torch.int32
    b_scales = _attr(gm, b_dq.args[1]).double()
    assert torch.allclose(b_scales, w_scales * x_dq.args[1], rtol=1e-6)
    # linear: per-tensor weights
    (fc,) = _call(gm, _aten.linear.default)
    assert fc.args[1].target == _qd.dequantize_per_tensor.default
    assert fc.args[1].args[3:6] == (-127, 127, torch.int8)


def test_per_tensor_conv_on_request():
    gm = _quantized(per_channel=False)
    (conv,) = _call(gm, _aten.conv2d.default)
    assert conv.args[1].target == _qd.dequantize_per_tensor.default
    assert read_annotation(conv).weight_qscheme == "per_tensor"


def test_batchnorm_folded_and_recorded():
    gm = _quantized()
    assert not _call(gm, _aten.batch_norm.default)
    (conv,) = _call(gm, _aten.conv2d.default)
    ann = read_annotation(conv)
    assert ann is not None and ann.folded == ["batch_norm"]
    assert ann.pattern == "conv2d+relu6" and ann.role == "anchor"


def test_fused_activation_shares_output_qparams():
    gm = _quantized()
    (conv,) = _call(gm, _aten.conv2d.default)
    (act,) = conv.users  # no quantize between conv and relu6: it is fused
    assert act.target == _aten.relu6.default
    assert read_annotation(act).role == "activation"
    (q,) = act.users
    assert q.target == _qd.quantize_per_tensor.default


def test_global_mean_has_own_qparams_and_softmax_fixed():
    gm = _quantized()
    (pool,) = _call(gm, _aten.adaptive_avg_pool2d.default)
    in_scale = pool.args[0].args[1]
    (q_out,) = pool.users
    # the average of 64 positions spans a narrower range than they do: a finer step
    assert q_out.args[1] < in_scale / 2
    (sm,) = _call(gm, _aten.softmax.int)
    (q_sm,) = sm.users
    assert q_sm.args[1:3] == (1.0 / 256.0, -128)
    assert read_annotation(sm).fixed_output_qparams == (1.0 / 256.0, -128)


def test_annotation_survives_deepcopy():
    gm = _quantized()
    before = {n.name: read_annotation(n) for n in gm.graph.nodes if read_annotation(n)}
    assert len(before) >= 5
    clone = copy.deepcopy(gm)
    after = {n.name: read_annotation(n) for n in clone.graph.nodes if read_annotation(n)}
    assert after == before
    raw = next(n for n in clone.graph.nodes if n.name == "conv2d").meta["custom"]["torchmcu"]
    assert isinstance(raw, dict)  # plain data, not our class
    assert TorchmcuAnnotation.from_dict(raw).to_dict() == raw


def test_quantized_model_tracks_float_model():
    torch.manual_seed(0)
    model = Net().eval()
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(16)]
    gm = quantize(model, cal[0], cal)
    x = cal[3][0]
    # softmax outputs: 1/256 steps; int8 error through 3 layers stays within a few steps
    assert torch.max(torch.abs(gm(x) - model(x))) < 4 / 256


@pytest.mark.parametrize("empty", [[], iter(())])
def test_empty_calibration_raises(empty):
    with pytest.raises(ValueError, match="calibration set is empty"):
        quantize(Net().eval(), (torch.randn(1, 3, 8, 8),), empty)


def test_calibration_accepts_generator_and_bare_tensors():
    gen = (torch.randn(1, 3, 8, 8) for _ in range(3))
    gm = quantize(Net().eval(), (torch.randn(1, 3, 8, 8),), gen)
    assert _call(gm, _qd.quantize_per_tensor.default)
