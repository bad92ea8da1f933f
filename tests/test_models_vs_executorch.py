"""Deep nets side by side with ExecuTorch 1.5.1's Cortex-M flow (same model, calibration, inputs).

Two questions, kept apart because they have different answers:

1. Is our integer engine as exact as ExecuTorch's? ExecuTorch's own .pte of each model runs
   on our C runtime and must equal ExecuTorch's Python reference of its cortex_m operators,
   bit for bit. No noise, no margin. (Known divergence, documented in docs/operators.md: at an
   exact .5 average, ExecuTorch's Python avg pool rounds half to even in float, while CMSIS-NN's
   arm_avgpool_s8, which its C++ kernel calls and we follow, rounds half away from zero. Only
   even window sizes have such ties: ResNet8's 8x8 pool.)

2. Do our programs drift from their fake-quantized model no more than ExecuTorch's do?
   Integer requantization differs from torchao's float32 fake-quant model wherever float32
   noise puts a value on the other side of a rounding boundary, and such one-step flips
   multiply through depth (measured on DS-CNN, both flows alike: 0.2% of values after the
   first conv, 36% after the last). The count of output steps this yields depends on the
   scales the observers chose: a finer scale turns the same disturbance into more steps
   (DS-CNN: our min/max observer gives the last linear layer an input scale 1.165x of
   ExecuTorch's histogram one, and 1.22x its mean drift; with the histogram observer the
   layer scales match ExecuTorch's and so does the drift, within noise). The mean over all
   outputs must be within 25% of ExecuTorch's; the 99th percentile and maximum are printed,
   not asserted: with 2-class MobileNetV1 the 99th percentile is the third largest of 256
   values (bootstrap 95% interval of the ratio between two equally exact runs: 0.95-1.57).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import executorch_export
from test_models_e2e import DEEP, N_TEST_INPUTS, exported, output_steps, quantize_input

import torchmcu
from torchmcu import native
from torchmcu.examples import models

pytestmark = [pytest.mark.executorch, pytest.mark.slow]

def _executorch(name: str, et_python: Path, tmp_path: Path):
    calibration = np.stack([s[0].numpy() for s in models.calibration(name, 16, seed=1)])
    inputs = np.stack([x.numpy() for x in exported(name).inputs])
    return executorch_export(et_python, name, tmp_path / "et", inputs, calibration)


def _steps(int8_model: torchmcu.ExportedModel, inputs: list[torch.Tensor]) -> np.ndarray:
    (in_q,), (out_q,) = int8_model.report["inputs"], int8_model.report["outputs"]
    steps = []
    for x in inputs:
        qx = quantize_input(x, in_q["scale"], in_q["zero_point"])
        (q_out,) = native.run_program(int8_model.pte_bytes, [qx])
        with torch.no_grad():
            fq = int8_model.quantized_model(x)
        steps.append(output_steps(q_out, fq, out_q["scale"], out_q["zero_point"]))
    return np.concatenate(steps)


def _figures(d: np.ndarray) -> str:
    return f"max {d.max():.0f} p99 {np.percentile(d, 99):.2f} mean {d.mean():.3f}"


AVG_POOL_TIES = pytest.mark.xfail(
    strict=True,
    reason="ExecuTorch's Python avg pool rounds .5 averages half to even; CMSIS-NN (and we, and "
    "ExecuTorch's C++ kernel) half away from zero (docs/operators.md; tests/test_interop_executorch.py "
    "proves ties are the only difference)",
)
KNOWN = {"resnet8": AVG_POOL_TIES}


@pytest.mark.parametrize("name", [pytest.param(n, marks=KNOWN[n]) if n in KNOWN else n for n in DEEP])
def test_executorch_program_bit_exact_on_our_runtime(
    name: str, et_python_cortex_m: Path, tmp_path: Path
) -> None:
    et = _executorch(name, et_python_cortex_m, tmp_path)
    expected = et.outputs["cortex_m0"]
    for i, x in enumerate(exported(name).inputs[:8]):
        (ours,) = native.run_program(et.pte, [x.numpy().astype(np.float32)])
        np.testing.assert_array_equal(ours, expected[i].reshape(ours.shape), err_msg=f"input {i}")


@pytest.mark.parametrize("name", DEEP)
def test_drift_no_worse_than_executorch(name: str, et_python_cortex_m: Path, tmp_path: Path) -> None:
    e = exported(name)
    model, example = models.build(name)
    matched = torchmcu.export(
        model, example, calibration=models.calibration(name, 16, seed=1), int8_io=True,
        observer="histogram",
    )
    d_matched = _steps(matched, e.inputs)
    d_default = _steps(e.int8, e.inputs)

    et = _executorch(name, et_python_cortex_m, tmp_path)
    (scale, zero_point) = et.report["output_qparams"][0]
    q_fq = np.round(et.outputs["fake_quant0"].astype(np.float64) / scale)
    q_cm = np.round(et.outputs["cortex_m0"].astype(np.float64) / scale)
    d_et = np.abs(q_cm - q_fq).ravel()
    assert d_et.size == d_matched.size == N_TEST_INPUTS * d_matched.size // len(e.inputs)

    print(
        f"\n{name}: output steps vs own fake-quant over {d_et.size} outputs | "
        f"ExecuTorch {_figures(d_et)} | torchmcu (histogram, as ExecuTorch) {_figures(d_matched)} | "
        f"torchmcu default (minmax) {_figures(d_default)}"
    )
    assert d_default.mean() <= 1.25 * d_et.mean() + 1e-9, (
        f"{name}: mean drift {d_default.mean():.3f} steps, ExecuTorch {d_et.mean():.3f}"
    )
