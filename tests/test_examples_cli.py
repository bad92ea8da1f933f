"""`torchmcu export torchmcu.examples.models:NAME` needs no --calibration: the examples module
has a calibration_samples(name), and the CLI passes it the factory's name (issue 15, 2.10)."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchmcu.cli import main
from torchmcu.cli_model import calibration_samples, load_model
from torchmcu.examples import models


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_every_example_has_calibration_samples(name: str) -> None:
    loaded = load_model(f"torchmcu.examples.models:{name}")
    samples = calibration_samples(loaded)
    assert samples is not None and len(samples) == 16
    assert tuple(samples[0][0].shape) == models.input_shape(name)
    for sample in samples:
        assert [tuple(x.shape) for x in sample] == [tuple(x.shape) for x in loaded.example_inputs]
    assert not samples[0][0].equal(samples[1][0])  # 16 different inputs, not one repeated


def test_export_an_example_without_calibration(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["export", "torchmcu.examples.models:ds_cnn", "-o", str(out)]) == 0
    assert "(16 calibration samples)" in capsys.readouterr().out
    assert (out / "model.pte").is_file() and (out / "model.report.json").is_file()
    assert main(["run", str(out / "model.pte"), "--host"]) == 0
    assert capsys.readouterr().out.startswith("output 0: shape [1, 12] float32 [")


def test_calibration_samples_without_a_name_still_work(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n\ndef build():\n"
        "    return nn.Linear(4, 2).eval(), (torch.randn(1, 4),)\n\n\n"
        "def calibration_samples():\n    return [torch.randn(1, 4) for _ in range(3)]\n"
    )
    samples = calibration_samples(load_model(f"{path}:build"))
    assert samples is not None and [len(s) for s in samples] == [1, 1, 1]  # bare tensors: 1-tuples
