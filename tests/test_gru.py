"""Recurrent layers beyond the one-layer LSTM (issue 17, "Recurrent"): nn.GRU is unrolled the
way nn.LSTM is (quantize/recurrent.py: torch's own decomposition, its tuple ops rewritten, the
zero initial state folded to an int8 constant), multi-layer and bidirectional GRU/LSTM export,
and the whole output sequence can be the output.

- A GRU keyword spotter (GRU 16 -> 32 over 8 steps, linear head, no h0: the zero state) exports
  for corstone-300 with strict=True as int8 calls only (no float op), the C host runtime is
  bit-exact with the reference interpreter, and the program is >= 30 dB SQNR against torchao's
  fake-quantized model (the independent reference).
- A 2-layer bidirectional GRU returning its whole sequence (4 steps) and the same LSTM export by default
  (their direction flips and the sequence cats run in float32 through the fallback until those
  have int8 kernels), bit-exact with the reference interpreter and >= 30 dB against fake-quant.

The GRU's h' = (h - n) * z + n needs the int8 sub of the elementwise family.

The layers are unrolled by our own pass (quantize/recurrent.py unroll_recurrent), not by
run_decompositions (a re-trace of the whole program that cost a GRU model ~1 s of export): its
graph computes what torch's nn.GRU / nn.LSTM kernels do (every output, several layers and
directions, with and without biases and initial states), and op for op the graph torch's own
decomposition gives (so the same program).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torchmcu
from torch import nn
from torchmcu import native
from torchmcu.lower import FloatFallbackWarning
from torchmcu.quantize import TorchmcuQuantizer, recurrent
from torchmcu.quantize.api import export_model
from torchmcu.reference.interpreter import run_program

STEPS, FEATURES, HIDDEN = 8, 16, 32


class GruKws(nn.Module):
    """GRU 16 -> 32 over 8 steps (batch first, zero initial state), 12 logits from the last."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(FEATURES, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.gru(x)
        return self.head(y[:, -1])


class Sequence(nn.Module):
    """A 2-layer bidirectional recurrent layer whose whole output sequence is the output."""

    def __init__(self, cell: type[nn.Module]) -> None:
        super().__init__()
        self.rnn = cell(FEATURES, 8, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


def _data(
    seed: int, steps: int = STEPS
) -> tuple[list[tuple[torch.Tensor]], list[list[np.ndarray]]]:
    gen = torch.Generator().manual_seed(seed)
    calibration = [(torch.randn(1, steps, FEATURES, generator=gen),) for _ in range(16)]
    tests = [[torch.randn(1, steps, FEATURES, generator=gen).numpy()] for _ in range(4)]
    return calibration, tests


def _sqnr_db(signal: np.ndarray, noisy: np.ndarray) -> float:
    noise = float(np.sum((signal.astype(np.float64) - noisy) ** 2))
    return 10 * np.log10(float(np.sum(signal.astype(np.float64) ** 2)) / max(noise, 1e-30))


def _check_against_references(exported: torchmcu.ExportedModel, tests: list) -> float:
    """Host runtime bit-exact with the reference interpreter; SQNR against fake-quant."""
    ours, fake = [], []
    for s in tests:
        (host,) = native.run_program(exported.pte_bytes, s)
        (ref,) = run_program(exported.program, s)
        assert host.dtype == ref.dtype and host.tobytes() == ref.tobytes()
        with torch.no_grad():
            fake.append(exported.quantized_model(torch.from_numpy(s[0])).numpy())
        ours.append(host)
    return _sqnr_db(np.concatenate(fake), np.concatenate(ours))


def _no_run_decompositions(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("run_decompositions called: the recurrent layer was not unrolled")

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", refuse)


def test_gru_keyword_spotter_is_int8_only_and_bit_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = GruKws().eval()
    calibration, tests = _data(1)
    _no_run_decompositions(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FloatFallbackWarning)
        exported = torchmcu.export(
            model, calibration[0], calibration=calibration, board="corstone-300", strict=True
        )
    graph = exported.quantized_model.graph
    targets = [n.target for n in graph.nodes if n.op == "call_function"]
    aten = torch.ops.aten
    assert aten.gru.input not in targets  # unrolled; its zero state is an int8 constant
    # per step: 2 sigmoid (reset, update gates), 1 tanh (candidate); the input projection once
    assert targets.count(aten.sigmoid.default) == 2 * STEPS
    assert targets.count(aten.tanh.default) == STEPS
    assert exported.report["float_ops"] == []
    plan = exported.program.execution_plan[0]
    ops = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert all(o.startswith(("cortex_m::", "torchmcu::")) for o in ops), set(ops)
    # the program's own float input quantize and output dequantize only
    assert (
        ops.count("cortex_m::quantize_per_tensor")
        == ops.count("cortex_m::dequantize_per_tensor")
        == 1
    )
    db = _check_against_references(exported, tests)
    print(f"\nGRU KWS: int8 program vs fake-quantized model: SQNR {db:.1f} dB")
    assert db >= 30.0


@pytest.mark.parametrize("cell", [nn.GRU, nn.LSTM], ids=["gru", "lstm"])
def test_two_layer_bidirectional_sequence_output(cell: type[nn.Module]) -> None:
    torch.manual_seed(0)
    model = Sequence(cell).eval()
    calibration, tests = _data(2, steps=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FloatFallbackWarning)  # the direction flips, the cats
        exported = torchmcu.export(model, calibration[0], calibration=calibration)
    (out,) = exported.report["outputs"]
    assert out["sizes"] == [1, 4, 2 * 8]  # every step, both directions
    # what runs in float32 is data movement only (the flips and cats); the cells are int8
    assert {f["target"] for f in exported.report["float_ops"]} <= {"aten.flip", "aten.cat"}
    db = _check_against_references(exported, tests[:2])
    print(f"\n2-layer bidirectional {cell.__name__}: vs fake-quantized model: SQNR {db:.1f} dB")
    assert db >= 30.0


def test_gru_kept_in_float_runs_the_fp32_kernels() -> None:
    """The GRU kept in float32 (what ExecuTorch's Cortex-M flow does with it; bench/export_bench.py
    compares that like for like): its linears of rank-3 inputs ([T, B, F] projection, [1, B, H]
    state) run the portable mm/addmm on [rows, K] views; the head stays int8."""
    torch.manual_seed(0)
    model = GruKws().eval()
    calibration, tests = _data(1)
    quantizer = TorchmcuQuantizer().set_module_name("gru", None)
    exported = torchmcu.export(model, calibration[0], calibration=calibration, quantizer=quantizer)
    plan = exported.program.execution_plan[0]
    ops = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert ops.count("aten::addmm") == STEPS + 1  # the projection once, one per step
    assert ops.count("cortex_m::quantized_linear") == 1  # the head
    assert _check_against_references(exported, tests[:2]) >= 30.0


class _WithState(nn.Module):
    """A time-first 2-layer layer given its initial state, every output returned."""

    def __init__(self, cell: type[nn.Module], bias: bool) -> None:
        super().__init__()
        self.rnn = cell(FEATURES, 8, num_layers=2, bias=bias)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if isinstance(self.rnn, nn.LSTM):
            y, (hn, cn) = self.rnn(x, (h, 0.5 * h))
            return y, hn, cn
        y, hn = self.rnn(x, h)
        return y, hn


def _graph_shape(gm: torch.fx.GraphModule) -> list[tuple[object, ...]]:
    """The graph's ops in order, each with its arguments (nodes by position)."""
    index = {n: k for k, n in enumerate(gm.graph.nodes)}

    def arg(a: object) -> object:
        if isinstance(a, torch.fx.Node):
            return index[a]
        return [arg(x) for x in a] if isinstance(a, (list, tuple)) else a

    return [(n.op, str(n.target), arg(n.args)) for n in gm.graph.nodes]


def test_unrolled_layers_compute_what_torch_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The float graph export_model hands the quantizer against torch's own recurrent kernels
    (the independent reference), every output, without run_decompositions: a batch-first
    2-layer bidirectional GRU from a zero state, a time-first 2-layer LSTM without biases given
    its state. The GRU's graph is op for op the one torch's decomposition gives."""
    gen = torch.Generator().manual_seed(4)
    torch.manual_seed(1)
    gru = Sequence(nn.GRU).eval(), (torch.randn(1, 3, FEATURES, generator=gen),)
    lstm = (
        _WithState(nn.LSTM, bias=False).eval(),
        (
            torch.randn(3, 2, FEATURES, generator=gen),
            torch.randn(2, 2, 8, generator=gen),
        ),
    )
    with monkeypatch.context() as mp:
        mp.setattr(recurrent, "_unrollable", lambda node: False)
        by_torch = _graph_shape(export_model(*gru))
    _no_run_decompositions(monkeypatch)
    for k, (model, inputs) in enumerate((gru, lstm)):
        gm = export_model(model, inputs)
        if k == 0:
            assert _graph_shape(gm) == by_torch
        assert not {n.target for n in gm.graph.nodes} & set(recurrent.RECURRENT_OPS)
        with torch.no_grad():
            want, got = model(*inputs), gm(*inputs)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, (tuple, list)) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
