"""ExecuTorch 1.5.1's own Cortex-M programs on our runtime, on the host and under QEMU.

Six example models go through ExecuTorch's Cortex-M flow (CortexMQuantizer,
CortexMPassManager; tests/executorch/export_cortex_m.py in the ExecuTorch venv),
which also runs each .pte's graph with ExecuTorch's Python implementations of its
cortex_m operators (`cortex_m0`). On the same inputs we check, bit for bit:

1. our C runtime (host) == our reference interpreter run on ExecuTorch's program;
2. the reference interpreter with ExecuTorch Python's avg-pool formula swapped in
   == ExecuTorch's Python outputs. ExecuTorch's C++ avg pool calls CMSIS-NN's
   arm_avgpool_s8, which rounds an exact .5 mean half away from zero (as we do);
   its Python reference averages in float32 and rounds with torch.round (half to
   even, float noise permitting). With that one operator swapped everything
   matches, so the avg pool's tie rounding is the only difference;
3. our runtime == ExecuTorch's Python outputs exactly, except for a sample whose
   avg pools hit at least one exact tie (counted, and the count must be > 0);
4. the same .pte under QEMU (Cortex-M55, MVE kernels) == our host runtime.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import executorch_export
from torchmcu import device, native
from torchmcu.examples import models
from torchmcu.pte import reader
from torchmcu.reference import interpreter, ops_pool

pytestmark = [pytest.mark.executorch, pytest.mark.slow]

MODELS = ["mlp", "small_cnn", "ds_cnn", "resnet8", "mobilenet_v1_025", "mobilenet_v2_like"]
N_INPUTS = 3


def inputs(name: str) -> np.ndarray:
    return np.stack([s[0].numpy().astype(np.float32) for s in models.calibration(name, N_INPUTS, seed=77)])


def executorch_program(et_python: Path, name: str, tmp_root: Path):
    calibration = np.stack([s[0].numpy() for s in models.calibration(name, 16, seed=1)])
    return executorch_export(et_python, name, tmp_root / "et" / name, inputs(name), calibration)


def _avg_pool_like_executorch_python(ties: list[int]):
    """ExecuTorch Python's avg pool, written from its formula: dequantize with the scale its
    multiplier/shift stand for, float32 avg_pool2d (padding not counted), torch.round(y / scale)
    + zp, clamp. Float noise decides exact .5 means there (mostly half to even).

    Appends the number of exact .5 means (integers; where the rules may differ) to `ties`.
    """

    def pool(x, kernel_size, stride, padding, ceil_mode, zero_point, multiplier, shift, scratch=None):
        k, s, p = (ops_pool.pair(v, n) for v, n in ((kernel_size, "kernel"), (stride, "stride"),
                                                      (padding, "padding")))
        win, valid = ops_pool.windows(np.asarray(x, dtype=np.int64), k, s, p, bool(ceil_mode))
        total = np.where(valid[None, :, :, :, :, None], win, 0).sum(axis=(3, 4))
        count = np.broadcast_to(valid.sum(axis=(2, 3))[None, :, :, None], total.shape)
        ties.append(int(np.sum(2 * np.mod(total, count) == count)))

        scale = multiplier * (2**shift) / (1 << 31)
        nchw = torch.from_numpy(np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2))))
        y = F.avg_pool2d((nchw.float() - zero_point) * scale, k, stride=s, padding=p, ceil_mode=bool(ceil_mode),
                         count_include_pad=False)
        q = (torch.round(y / scale) + zero_point).clamp(-128, 127).to(torch.int8)
        return np.ascontiguousarray(q.numpy().transpose(0, 2, 3, 1))

    return pool


def _run_reference(program, x: np.ndarray, monkeypatch: pytest.MonkeyPatch, ties: list[int] | None):
    """The reference interpreter on `program`; with `ties`, ExecuTorch Python's avg-pool rule."""
    with monkeypatch.context() as m:
        # ExecuTorch inserts dim_order_ops::_clone_dim_order (e.g. before a flatten): the
        # interpreter runs it as a portable op (torchmcu/ops/defs/portable_copy.py)
        handlers = dict(interpreter._HANDLERS)
        if ties is not None:
            pool = _avg_pool_like_executorch_python(ties)
            handlers["cortex_m::quantized_avg_pool2d"] = lambda c: pool(
                c.nhwc(0, False), *(c.scalar(i) for i in range(1, 8)))
            handlers["cortex_m::quantized_avg_pool2d_nhwc"] = lambda c: pool(
                c.nhwc(0, True), *(c.scalar(i) for i in range(1, 8)))
        m.setattr(interpreter, "_HANDLERS", handlers)
        return interpreter.run_program(program, [x])[0]


@pytest.mark.parametrize("name", MODELS)
def test_executorch_program_on_host(name: str, et_python_cortex_m: Path, tmp_path_factory, monkeypatch) -> None:
    et = executorch_program(et_python_cortex_m, name, tmp_path_factory.getbasetemp())
    info = native.program_info(et.pte)
    assert info["missing_operators"] == []
    program = reader.parse(et.pte)
    has_avg_pool = any("avg_pool" in op.name for op in program.execution_plan[0].operators)
    expected = et.outputs["cortex_m0"]
    assert expected.shape[0] == N_INPUTS
    for i, x in enumerate(inputs(name)):
        (ours,) = native.run_program(et.pte, [x])
        et_py = expected[i].reshape(ours.shape)
        np.testing.assert_array_equal(ours, _run_reference(program, x, monkeypatch, None), err_msg=f"{name} input {i}: "
                                      "runtime vs reference interpreter")
        ties: list[int] = []
        swapped = _run_reference(program, x, monkeypatch, ties)
        np.testing.assert_array_equal(swapped, et_py, err_msg=f"{name} input {i}: reference with ExecuTorch "
                                      "Python's avg pool vs ExecuTorch Python")
        if not np.array_equal(ours, et_py):
            assert has_avg_pool and sum(ties) > 0, f"{name} input {i}: differs from ExecuTorch without a tie"
            print(f"\n{name} input {i}: {int(np.sum(ours != et_py))} outputs differ from ExecuTorch's Python "
                  f"after {sum(ties)} avg-pool ties (half away from zero, as CMSIS-NN)")


@pytest.mark.parametrize("name", MODELS)
def test_executorch_program_under_qemu(name: str, et_python_cortex_m: Path, tmp_path_factory) -> None:
    root = tmp_path_factory.getbasetemp()
    et = executorch_program(et_python_cortex_m, name, root)
    samples = [[x] for x in inputs(name)[:2]]
    outs, result = device.run_samples(et.pte, "qemu-an547", samples, root / "fw-qemu-an547", timeout=300)
    assert "TM_END status=OK samples=2" in result.console
    for k, (sample, on_device) in enumerate(zip(samples, outs)):
        host = native.run_program(et.pte, sample)
        assert len(on_device) == len(host) == 1
        assert on_device[0].dtype == host[0].dtype and on_device[0].shape == host[0].shape
        assert on_device[0].tobytes() == host[0].tobytes(), f"{name} sample {k}: QEMU differs from the host runtime"
