"""Programs written by ExecuTorch 1.5.1's own Cortex-M flow load and run on our runtime.

tests/executorch/export_cortex_m.py runs in the ExecuTorch venv and saves the
.pte plus the outputs of ExecuTorch's Python reference of its cortex_m ops on
the model's example input; our C runtime + kernels must reproduce them exactly.
Its file also goes through the sanitizer-built pte_check (truncations, corruptions).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from test_runtime_hostile import _assert_clean, _run, pte_check  # noqa: F401  (fixture)

from conftest import executorch_export
from torchmcu import native
from torchmcu.examples import models

pytestmark = [pytest.mark.executorch, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def _export(et_python_cortex_m: Path, name: str, out: Path) -> tuple[bytes, np.ndarray]:
    """ExecuTorch's .pte and its reference output on the model's example input."""
    et = executorch_export(et_python_cortex_m, name, out)
    (out / "model.pte").write_bytes(et.pte)
    return et.pte, et.outputs["cortex_m0"][0]


@pytest.mark.parametrize(
    "name",
    ["mlp", "ds_cnn"],  # ds_cnn: a C == 1 pad with dim order [0,2,1,3] and N,H,W,C pads
)
def test_executorch_program_runs_bit_exact(et_python_cortex_m: Path, tmp_path: Path, name: str) -> None:
    pte, expected = _export(et_python_cortex_m, name, tmp_path)
    info = native.program_info(pte)
    assert info["missing_operators"] == []
    _, example = getattr(models, name)(seed=0)
    x = example[0].numpy().astype(np.float32)
    (y,) = native.run_program(pte, [x])
    np.testing.assert_array_equal(y, expected.reshape(y.shape))


def test_executorch_program_survives_damage(et_python_cortex_m: Path, pte_check: Path, tmp_path: Path) -> None:
    pte, _ = _export(et_python_cortex_m, "mlp", tmp_path)
    path = tmp_path / "model.pte"
    r = _run(pte_check, "--any-op", "--truncations", "--flips", str(path))
    _assert_clean(r)
    assert f"{path}: {len(pte)} truncations, 0 accepted" in r.stdout
