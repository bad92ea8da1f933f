"""Program-level properties of the lowering: boundaries, aliases, memory plan, report, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from torchmcu.lower import UnsupportedOpError, lower_to_program
from torchmcu.pte.program import KernelCall, ScalarType, Tensor
from torchmcu.pte.validate import validate
from torchmcu.quantize import quantize


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        y = self.pool(F.relu(self.conv(x)))
        return self.fc(y.flatten(1))


def _lower(model, shape, **kw):
    torch.manual_seed(0)
    cal = [(torch.randn(*shape),) for _ in range(4)]
    gm = quantize(model.eval(), cal[0], cal)
    program, report = lower_to_program(gm, cal[0], **kw)
    validate(program)
    return gm, program, report, cal


def _plan(program):
    return program.execution_plan[0]


def test_boundaries_float_io_and_layouts():
    _, program, report, _ = _lower(Small(), (1, 2, 6, 6))
    ep = _plan(program)
    (inp,) = [ep.values[i] for i in ep.inputs]
    (out,) = [ep.values[i] for i in ep.outputs]
    assert inp.scalar_type == ScalarType.FLOAT and inp.sizes == [1, 2, 6, 6]
    assert inp.dim_order == [0, 1, 2, 3]
    assert out.scalar_type == ScalarType.FLOAT and out.sizes == [1, 5]
    # the conv's activations are NHWC: legacy sizes with dim_order [0, 2, 3, 1]
    conv = next(i for i in ep.chains[0].instructions
                if ep.operators[i.op_index].name == "cortex_m::quantized_conv2d")
    x, w = ep.values[conv.args[0]], ep.values[conv.args[1]]
    assert x.sizes == [1, 2, 6, 6] and x.dim_order == [0, 2, 3, 1]
    assert w.sizes == [4, 3, 3, 2] and w.data_buffer_idx > 0  # OHWI constant
    # out tensor passed twice
    for ins in ep.chains[0].instructions:
        assert ins.args[-1] == ins.args[-2]
    assert report.arena_bytes == ep.non_const_buffer_sizes[1] >= report.arena_lower_bound > 0


def test_int8_io():
    gm, program, report, cal = _lower(Small(), (1, 2, 6, 6), int8_io=True)
    ep = _plan(program)
    names = [ep.operators[i.op_index].name for i in ep.chains[0].instructions]
    assert "cortex_m::quantize_per_tensor" not in names
    assert "cortex_m::dequantize_per_tensor" not in names
    (inp,) = [ep.values[i] for i in ep.inputs]
    (out,) = [ep.values[i] for i in ep.outputs]
    assert inp.scalar_type == ScalarType.CHAR and out.scalar_type == ScalarType.CHAR
    assert report.inputs[0]["dtype"] == "int8" and "scale" in report.inputs[0]


def test_flatten_is_an_alias():
    _, program, _, _ = _lower(Small(), (1, 2, 6, 6))
    ep = _plan(program)
    ins = ep.chains[0].instructions
    names = [ep.operators[i.op_index].name for i in ins]
    pool = ins[names.index("cortex_m::quantized_max_pool2d")]
    fc = ins[names.index("cortex_m::quantized_linear")]
    pool_out, fc_in = ep.values[pool.args[-1]], ep.values[fc.args[0]]
    assert fc_in.sizes == [1, 36] and pool_out.sizes == [1, 4, 3, 3]
    assert fc_in.allocation.offset == pool_out.allocation.offset  # same arena bytes
    assert names.index("cortex_m::quantized_linear") == names.index(
        "cortex_m::quantized_max_pool2d") + 1


def test_only_used_constants_written_and_planned_buffers_disjoint():
    _, program, _, _ = _lower(Small(), (1, 2, 6, 6))
    ep = _plan(program)
    used = {ep.values[a].data_buffer_idx for i in ep.chains[0].instructions for a in i.args
            if isinstance(ep.values[a], Tensor)}
    assert set(range(1, len(program.constants))) <= used
    # two planned tensors of different buffers that overlap in bytes must not be live together
    live: dict[int, tuple[int, int]] = {}
    for idx, ins in enumerate(ep.chains[0].instructions):
        for a in ins.args:
            t = ep.values[a]
            if isinstance(t, Tensor) and t.allocation is not None:
                lo, hi = live.get(a, (idx, idx))
                live[a] = (min(lo, idx), max(hi, idx))
    items = list(live.items())
    for i, (va, (fa, la)) in enumerate(items):
        ta = ep.values[va]
        for vb, (fb, lb) in items[i + 1:]:
            tb = ep.values[vb]
            overlap_bytes = (ta.allocation.offset < tb.allocation.offset + tb.nbytes
                             and tb.allocation.offset < ta.allocation.offset + ta.nbytes)
            overlap_time = fa <= lb and fb <= la
            same_bytes = ta.allocation.offset == tb.allocation.offset
            if overlap_bytes and overlap_time and not same_bytes:
                pytest.fail(f"values {va} and {vb} share arena bytes while both live")
    assert all(o % 16 == 0 for o in (ep.values[v].allocation.offset for v in live))


def test_report_names_modules_and_ops():
    _, _, report, _ = _lower(Small(), (1, 2, 6, 6))
    d = report.to_dict()
    assert d["op_counts"]["cortex_m::quantized_conv2d"] == 1
    conv = next(n for n in report.nodes if n.op == "cortex_m::quantized_conv2d")
    assert conv.module == "conv (Conv2d)"
    assert d["constant_bytes"] > 4 * 3 * 3 * 2


class WithCumsum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cumsum(self.fc(x), dim=1)  # CUMSUM-LINE


def test_unsupported_op_names_op_and_source_line():
    lineno = next(i for i, line in enumerate(open(__file__), 1) if "# CUMSUM-LINE" in line
                  and "next(" not in line)
    with pytest.raises(UnsupportedOpError) as err:
        _lower(WithCumsum(), (2, 4))
    msg = str(err.value)
    assert "aten.cumsum" in msg
    assert f"test_lower_program.py:{lineno}" in msg
    assert "float" in msg  # suggests keeping it in float / replacing it


def test_standalone_relu_is_int8():  # a standalone clamp kernel, no float fallback
    _, _, report, _ = _lower(nn.Sequential(nn.ReLU()), (1, 4), strict=True)
    assert report.float_ops == []


def test_quantize_multiplier_encoding():
    from torchmcu.lower import quantize_multiplier

    for real in [1e-6, 0.0003, 0.25, 0.5, 0.999999, 1.0, 3.7]:
        m, s = quantize_multiplier(real)
        assert 2**30 <= m < 2**31
        assert abs(m * 2.0 ** (s - 31) - real) <= real * 2**-30
    assert quantize_multiplier(0.0) == (0, 0)
    assert np.isclose(quantize_multiplier(0.5)[0], 2**30) and quantize_multiplier(0.5)[1] == 0
