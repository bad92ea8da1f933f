"""The unsupported-operator error gives advice that works (issue 15, item 2.6).

An op with a portable fp32 kernel (softmax over dim 0: no int8 kernel for that dim) is refused
by --strict (without it the float fallback runs it in float32: tests/test_float_fallback.py)
and told to stay in float32 with --float-op / --float-module; following each suggestion, taken
from the message itself, exports a program whose softmax columns sum to 1 on the host runtime.
An op with neither kernel (a cumulative sum) is told so, and --float-op does not change that.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torchmcu
from torchmcu.cli import main

MODELS = """
import torch
from torch import nn


class Columns(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.Softmax(dim=0)

    def forward(self, x):
        return self.norm(self.fc(x))


class Cumsum(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 1)


class Swish(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = Cumsum()

    def forward(self, x):
        return self.act(self.fc(x))


def columns():
    torch.manual_seed(0)
    return Columns().eval(), (torch.randn(4, 8),)


def swish():
    torch.manual_seed(0)
    return Swish().eval(), (torch.randn(4, 8),)


def calibration_samples():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 8, generator=g),) for _ in range(8)]
"""


@pytest.fixture
def models(tmp_path: Path) -> Path:
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_advice_to_keep_softmax_in_float_works(models: Path, tmp_path: Path, capsys) -> None:
    err = _error(capsys, ["export", f"{models}:columns", "-o", str(tmp_path / "no"), "--strict"])
    assert (
        "unsupported op aten.softmax.int for the int8 Cortex-M kernels: softmax over dim 0" in err
    )
    assert (
        "It has a portable fp32 kernel: keep it in float32 with --float-op softmax or "
        "--float-module norm (torchmcu export)" in err
    )
    advice = re.findall(r"(--float-(?:op|module)) ([\w.]+)", err)
    assert advice == [("--float-op", "softmax"), ("--float-module", "norm")]
    x = np.random.default_rng(3).standard_normal((1, 4, 8)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    for flag, value in advice:
        out = tmp_path / value
        assert main(["export", f"{models}:columns", "-o", str(out), flag, value]) == 0
        (y,) = torchmcu.run_on_host(out / "model.pte", [x[0]])
        assert y.shape == (4, 8)
        np.testing.assert_allclose(y.sum(axis=0), np.ones(8), atol=1e-5)  # softmax over dim 0


def test_op_without_any_kernel_says_so(models: Path, tmp_path: Path, capsys) -> None:
    for extra in ([], ["--float-op", "cumsum"], ["--float-module", "act"]):
        err = _error(capsys, ["export", f"{models}:swish", "-o", str(tmp_path / "o"), *extra])
        assert "unsupported op aten.cumsum for the int8 Cortex-M kernels" in err
        assert (
            "There is neither an int8 Cortex-M kernel nor a portable fp32 kernel for "
            "aten.cumsum, so keeping it in float (--float-op/--float-module) cannot help: "
            "replace it with supported operators (" in err
        )
        assert "--float-op cumsum" not in err.split("cannot help")[0]
    assert not (tmp_path / "o").exists()
