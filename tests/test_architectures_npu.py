"""Example architectures on the Ethos-U NPUs (issue 17): each exports as ONE EthosUBackend
delegate holding all of its MACs, and run_on_host of that program (the delegate's TOSA graph
on the TOSA reference model, an independent implementation of the TOSA operators) equals the
reference interpreter on the CPU-only program of the same quantized model, exactly.

A subset chosen for distinct operators, on two calibration samples (the comparison does not
depend on how the ranges were found; fewer samples keep the suite fast): ShuffleNetV2 (chunk,
channel shuffle: 5-D reshape + transpose), the GRU keyword spotter (the unrolled gates, a
constant zero initial state read as an activation) and the tiny U-Net (max pool, nearest
upsample, skip cat, transposed conv). Hardswish and squeeze-excite on the NPU are in
test_models_activations.py; bench/architectures_npu.py checks all twelve on both NPUs.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torchmcu
from torchmcu.api import export_quantized
from torchmcu.examples import models
from torchmcu.npu.config import resolve_target
from torchmcu.pte.reader import parse
from torchmcu.quantize import quantize
from torchmcu.reference.interpreter import run_program

pytest.importorskip("tosa_reference_model")
pytest.importorskip("ethosu.vela")

BOARD = {"ethos-u55-128": "corstone-300", "ethos-u85-256": "corstone-320"}
CASES = [
    ("shufflenet_v2_x0_5", "ethos-u55-128"),
    ("gru_kws", "ethos-u55-128"),
    ("tiny_unet", "ethos-u55-128"),
    ("shufflenet_v2_x0_5", "ethos-u85-256"),
    ("tiny_unet", "ethos-u85-256"),
]


@functools.cache
def _quantized(name: str):
    model, example = models.build(name)
    return quantize(model, example, models.calibration(name, 2))


@pytest.fixture(scope="module")
def inputs() -> dict[str, list[list[np.ndarray]]]:
    """Two inputs per model, not among its calibration samples."""
    return {
        name: [[t.numpy() for t in s] for s in models.calibration(name, 2, seed=7)]
        for name, _ in CASES
    }


@pytest.mark.parametrize(("name", "npu"), CASES, ids=[f"{m}-{n}" for m, n in CASES])
def test_one_delegate_bit_exact_with_the_cpu_program(name, npu, inputs, tmp_path):
    board = BOARD[npu]
    quantized = _quantized(name)
    exported = export_quantized(quantized, board=board, npu_target=resolve_target(board, npu))
    plan = parse(exported.pte_bytes).execution_plan[0]
    assert [d.id for d in plan.delegates] == ["EthosUBackend"]
    assert exported.report["npu"]["macs"]["fraction"] == 1.0
    cpu = export_quantized(quantized, board=board)
    assert not parse(cpu.pte_bytes).execution_plan[0].delegates
    path = exported.save(tmp_path / "npu")
    for x in inputs[name]:
        got = torchmcu.run_on_host(path, x)
        want = run_program(cpu.program, x)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
