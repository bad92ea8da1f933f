"""The transformer residual stream the quantizer makes int16 (quantize/quantizer.py:
residual_stream): which adds it takes (read only by layer norms and such adds), how they are
quantized (symmetric int16, read as they are), per-channel linear weights beside them, and
that graphs without one (a CNN's residual add, an add something else also reads) stay int8."""

from __future__ import annotations

import numpy as np
import torch
import torchmcu
from torch import nn
from torchmcu import native
from torchmcu.pte.reader import parse
from torchmcu.quantize import quantize, read_annotation
from torchmcu.reference.interpreter import run_program

_qd = torch.ops.quantized_decomposed
_aten = torch.ops.aten


class PreNorm(nn.Module):
    """Two pre-norm residual blocks and a final norm: x + f(ln(x)), twice."""

    def __init__(self, extra_reader: bool = False) -> None:
        super().__init__()
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(16), nn.LayerNorm(16), nn.LayerNorm(16)
        self.f1, self.f2, self.head = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 4)
        self.extra_reader = extra_reader

    def forward(self, x):
        r = x + self.f1(self.ln1(x))
        r2 = r + self.f2(self.ln2(r))
        y = self.head(self.ln3(r2))
        if self.extra_reader:  # a linear reads r2 too: it cannot stay int16
            y = y + self.head(r2)
        return y


class PostNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.f, self.ln = nn.Linear(16, 16), nn.LayerNorm(16)

    def forward(self, x):
        return self.ln(x + self.f(x))


class ResidualCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = torch.relu(x + self.conv(x))
        return self.fc(y.mean((2, 3)))


def _samples(shape, n=8):
    torch.manual_seed(0)
    return [(torch.randn(*shape),) for _ in range(n)]


def _quantized(model, shape):
    cal = _samples(shape)
    return quantize(model.eval(), cal[0], cal)


def _calls(gm, target):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == target]


def _out_dtype(node):
    (q,) = [u for u in node.users if u.target == _qd.quantize_per_tensor.default]
    return q.args[5], q.args[3:5]


def _linear_weights(gm):
    return {n.args[1].target for n in _calls(gm, _aten.linear.default)}


def test_pre_norm_adds_are_int16_read_as_they_are_with_per_channel_linears():
    torch.manual_seed(0)
    gm = _quantized(PreNorm(), (1, 5, 16))
    adds = _calls(gm, _aten.add.Tensor)
    assert len(adds) == 2
    for add in adds:
        assert _out_dtype(add) == (torch.int16, (-32767, 32767))
        assert read_annotation(add).output_dtype == "int16"
        q = next(u for u in add.users if u.target == _qd.quantize_per_tensor.default)
        assert q.args[2] == 0  # symmetric
        for dq in q.users:  # every reader takes the int16 tensor itself (no int8 copy)
            assert dq.args[5] == torch.int16
    for ln in _calls(gm, _aten.layer_norm.default):  # the norms' outputs stay int8
        assert _out_dtype(ln)[0] == torch.int8
    assert _linear_weights(gm) == {_qd.dequantize_per_channel.default}


def test_post_norm_add_is_int16():
    torch.manual_seed(0)
    gm = _quantized(PostNorm(), (1, 5, 16))
    (add,) = _calls(gm, _aten.add.Tensor)
    assert _out_dtype(add)[0] == torch.int16


def test_an_add_another_op_reads_stays_int8_and_so_does_its_stream_before_it():
    torch.manual_seed(0)
    gm = _quantized(PreNorm(extra_reader=True), (1, 5, 16))
    first, second = _calls(gm, _aten.add.Tensor)[:2]
    assert _out_dtype(second)[0] == torch.int8  # r2: a linear reads it
    assert _out_dtype(first)[0] == torch.int8  # r: ln2 and r2's add, now an int8 one, read it
    assert _linear_weights(gm) == {_qd.dequantize_per_tensor.default}  # no stream: per tensor


def test_a_cnn_residual_add_stays_int8_with_per_tensor_linear():
    torch.manual_seed(0)
    gm = _quantized(ResidualCnn(), (1, 4, 6, 6))
    (add,) = _calls(gm, _aten.add.Tensor)  # its output is the fused ReLU's
    assert read_annotation(add).output_dtype == "int8"
    assert {q.args[5] for q in _calls(gm, _qd.quantize_per_tensor.default)} == {torch.int8}
    assert _linear_weights(gm) == {_qd.dequantize_per_tensor.default}


def test_pre_norm_program_host_is_the_reference_and_near_float():
    torch.manual_seed(0)
    model = PreNorm().eval()
    cal = _samples((1, 5, 16), 16)
    exp = torchmcu.export(model, cal[0], calibration=cal, strict=True)
    pte = bytes(exp.pte_bytes)
    plan = parse(pte).execution_plan[0]
    ops = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert ops.count("torchmcu::quantized_add16") == 2 and "cortex_m::quantized_add" not in ops
    signal = noise = 0.0
    for (x,) in _samples((1, 5, 16), 4):
        (ours,) = native.run_program(pte, [x.numpy()])
        np.testing.assert_array_equal(ours, run_program(parse(pte), [x.numpy()])[0])
        f = model(x).detach().numpy().astype(np.float64)
        signal, noise = signal + (f**2).sum(), noise + ((f - ours) ** 2).sum()
    assert 10 * np.log10(signal / noise) > 25.0
