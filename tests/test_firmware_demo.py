"""The digits demo of the README runs end to end (small image count): train, export for
corstone-300, build, run on QEMU; the device's predictions equal the host runtime's."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "examples" / "digits" / "demo.py"

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")


@pytest.mark.slow
def test_digits_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("digits_demo", DEMO)
    assert spec and spec.loader
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.main(["--images", "80", "--epochs", "12", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    acc = {
        k: float(v)
        for k, v in re.findall(
            r"^\s+(fp32|int8 \(host|int8 \(device).*?([\d.]+) %$", out, re.MULTILINE
        )
    }
    assert set(acc) == {"fp32", "int8 (host", "int8 (device"}, out
    assert acc["fp32"] > 85.0  # a trained model, not chance (10 %)
    assert acc["int8 (device"] == acc["int8 (host"]
    assert abs(acc["int8 (host"] - acc["fp32"]) <= 5.0
    assert "bit-identical to the host runtime on 80/80 images" in out
