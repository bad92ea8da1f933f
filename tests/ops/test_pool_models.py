"""Pooling and reductions as models write them, exported for corstone-300: MaxPool2d(3, 2,
ceil_mode=True), a dilated max pool, AdaptiveAvgPool2d to a size that does not divide the input,
x.mean((2, 3)), a channel mean with keepdim, amax over one dim, and the 1-D pools
(max_pool1d with ceil_mode, avg_pool1d with count_include_pad=False, adaptive_avg_pool1d)
on the result, adaptive max pools 2-D and 1-D. The model is one export (module fixture): every compute op is an int8 call, the
host runtime is bit-exact with the reference interpreter, and the output follows torchao's
fake-quantized model of the same export within a step or two (the pools' half-away rounding of
ties against the float mean, nothing more)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from torch import nn
from torchmcu.reference.interpreter import run_program


class PoolNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)  # 12x12 -> 6x6, the last window partial
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.adapt = nn.AdaptiveAvgPool2d((4, 4))  # 6x6 -> 4x4: unequal windows
        self.conv1d = nn.Conv1d(5, 8, 3, padding=1)  # its output is channels-last [N, L, C]
        self.heads = nn.ModuleList(nn.Linear(n, 10) for n in (16 * 4 * 4, 16, 36, 16, 16 * 2 * 2))
        self.seq_head = nn.Linear(8 * 4, 10)

    def forward(self, image: torch.Tensor, seq: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = self.pool(F.relu(self.conv1(image), inplace=True))
        x = F.relu(self.conv2(x))
        a = torch.flatten(self.adapt(x), 1)
        g = x.mean((2, 3))
        c = torch.flatten(x.mean(1, keepdim=True), 1)  # over channels
        t = x.amax(2)  # [N, 16, 6]
        t = F.max_pool1d(t, 3, 2, ceil_mode=True)  # [N, 16, 3]
        t = F.avg_pool1d(t, 2, 1, padding=1, count_include_pad=False)  # [N, 16, 4]
        t = F.adaptive_avg_pool1d(t, 3)  # unequal windows: [N, 16, 3]
        t = torch.flatten(F.max_pool1d(t, 2, 1, dilation=2), 1)  # [N, 16]
        m = torch.flatten(F.max_pool2d(x, 3, 3, dilation=2, ceil_mode=True), 1)  # [N, 16 * 2 * 2]
        out = self.heads[0](a)
        for head, v in zip(self.heads[1:], (g, c, t, m)):
            out = out + head(v)
        u = F.max_pool1d(F.relu(self.conv1d(seq)), 3, 2, ceil_mode=True)  # [2, 8, 5]
        u = torch.flatten(F.adaptive_avg_pool1d(u, 4), 1)  # unequal windows, channels-last
        return (out, self.seq_head(u), *(probe(image, seq) for probe in PROBES.values()))


def _half_away(v: torch.Tensor) -> torch.Tensor:
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


# Each probe pools a program input directly, and its int8 values follow from the input's by
# the integer rule, computed here in float64 torch on the raw int8 values q (zero point zp).
# Pools keep the input's qparams: the half-away mean of the in-bounds taps (count_include_pad
# pads with zp, so that mean is torch's of q - zp, plus zp), the max of the taps. So does a
# mean over an odd number of values; over an even number it has its own output qparams
# (scale so, zero point zo): round(mean(q - zp) * s / so) + zo.
PROBES = {
    "mean(-1)": lambda x, s: x.mean(-1),
    "mean(1, keepdim)": lambda x, s: x.mean(1, keepdim=True),
    "mean((1, 3))": lambda x, s: x.mean((1, 3)),
    "amax((2, 3), keepdim)": lambda x, s: x.amax((2, 3), keepdim=True),
    "amax(1)": lambda x, s: x.amax(1),
    "seq.mean(1)": lambda x, s: s.mean(1),
    "avg_pool2d ceil count_include_pad": lambda x, s: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
    "adaptive_avg_pool2d (5, 7)": lambda x, s: F.adaptive_avg_pool2d(x, (5, 7)),
    "adaptive_avg_pool2d (3, 1)": lambda x, s: F.adaptive_avg_pool2d(x, (3, 1)),
    "max_pool2d dilation ceil": lambda x, s: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True),
    "max_pool1d ceil dilation": lambda x, s: F.max_pool1d(s, 3, 2, 1, dilation=2, ceil_mode=True),
    "avg_pool1d": lambda x, s: F.avg_pool1d(s, 4, 3, 2, ceil_mode=True, count_include_pad=False),
    "avg_pool1d count_include_pad": lambda x, s: F.avg_pool1d(s, 3, 2, 1),
    "adaptive_avg_pool1d": lambda x, s: F.adaptive_avg_pool1d(s, 4),
    "adaptive_max_pool2d (4, 5)": lambda x, s: F.adaptive_max_pool2d(x, (4, 5)),
    "adaptive_max_pool2d (3, 4)": lambda x, s: F.adaptive_max_pool2d(x, (3, 4)),
    "adaptive_max_pool1d": lambda x, s: F.adaptive_max_pool1d(s, 3),
}


# The probes that average an even number of values (x is [1, 3, 12, 12]): 12 and 3 * 12;
# mean(1) averages 3 channels and seq.mean(1) 5, odd counts.
OWN_QPARAMS_MEANS = ("mean(-1)", "mean((1, 3))")


def _is_mean(name: str) -> bool:
    return name in OWN_QPARAMS_MEANS


def _expected(name: str, q: torch.Tensor, qs: torch.Tensor, zp: int, zs: int,
              requant: tuple[float, int]) -> torch.Tensor:
    """The probe's int8 output from the raw int8 inputs (float64, exact for these sums);
    requant: a mean's (input scale / output scale, output zero point)."""
    if _is_mean(name):
        ratio, zo = requant
        return torch.clamp(torch.round(PROBES[name](q - zp, qs - zs) * ratio) + zo, -128, 127)
    if name == "avg_pool2d ceil count_include_pad":
        return _half_away(F.avg_pool2d(q - zp, 3, 2, 1, ceil_mode=True) + zp)
    if name == "avg_pool1d count_include_pad":
        return _half_away(F.avg_pool1d(qs - zs, 3, 2, 1) + zs)
    out = PROBES[name](q, qs)
    return out if "max" in name else _half_away(out)


@pytest.fixture(scope="module")
def exported():
    torch.manual_seed(0)
    model = PoolNet().eval()
    xs = [(torch.randn(1, 3, 12, 12), torch.randn(2, 5, 11)) for _ in range(6)]
    return (
        model,
        xs,
        torchmcu.export(model, xs[0], calibration=xs[:4], board="corstone-300", int8_io=True),
    )


def _names(program) -> list[str]:
    plan = program.execution_plan[0]
    return [plan.operators[i.op_index].name for i in plan.chains[0].instructions]


def test_every_op_is_an_int8_call(exported) -> None:
    _, _, e = exported
    names = _names(e.program)
    assert all(n.startswith(("cortex_m::", "torchmcu::")) for n in names), names
    for op in (
        "cortex_m::quantized_max_pool2d",
        "cortex_m::quantized_avg_pool2d",
        "torchmcu::quantized_adaptive_avg_pool2d",
    ):
        assert op in names, op


def test_host_is_bit_exact_with_the_reference_and_follows_fake_quant(exported) -> None:
    _, xs, e = exported
    for inputs in xs[4:]:
        q = _quantized(inputs, e.report["inputs"])
        ours = torchmcu.run_on_host(e.pte_bytes, q)
        ref = run_program(e.program, q)
        for a, b in zip(ours, ref, strict=True):
            np.testing.assert_array_equal(a, b)
        with torch.no_grad():
            fq = e.quantized_model(*inputs)[:2]  # the two heads
        for got, want, out_q in zip(ours[:2], fq, e.report["outputs"], strict=False):
            grid = np.round(want.numpy() / out_q["scale"]) + out_q["zero_point"]
            steps = np.abs(got.astype(np.int64) - grid.astype(np.int64))
            assert steps.max() <= 3, steps.max()


def _quantized(inputs, qparams) -> list[np.ndarray]:
    return [
        np.clip(np.round(x.numpy() / q["scale"]) + q["zero_point"], -128, 127).astype(np.int8)
        for x, q in zip(inputs, qparams, strict=True)
    ]


def test_each_probe_is_the_integer_rule_on_its_input(exported) -> None:
    _, xs, e = exported
    (iq, sq), outs_q = e.report["inputs"], e.report["outputs"][2:]
    q = _quantized(xs[5], e.report["inputs"])
    ours = torchmcu.run_on_host(e.pte_bytes, q)[2:]
    bad = []
    for name, got, oq in zip(PROBES, ours, outs_q, strict=True):
        src = sq if ("seq" in name or "1d" in name) else iq
        if _is_mean(name):  # its own qparams: a finer step than its input's
            assert oq["scale"] < src["scale"], name
        else:
            assert (oq["scale"], oq["zero_point"]) == (src["scale"], src["zero_point"]), name
        want = _expected(
            name,
            torch.from_numpy(q[0]).double(),
            torch.from_numpy(q[1]).double(),
            iq["zero_point"],
            sq["zero_point"],
            (src["scale"] / oq["scale"], oq["zero_point"]),
        )
        if got.shape != tuple(want.shape) or not np.array_equal(got, want.numpy()):
            bad.append(name)
    assert not bad, bad
