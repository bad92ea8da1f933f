"""Progress of long steps (torchmcu.progress): one updating line on a terminal, plain lines
elsewhere, nothing with --quiet or when the library is used on its own (issue 15, item 3)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from torchmcu import progress
from torchmcu.cli import main

SECONDS = r"\d+\.\d s"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _off_afterwards():
    yield
    progress.configure(enabled=False)


def _count_task(stream: io.StringIO, total: int) -> None:
    progress.configure(enabled=True, stream=stream)
    with progress.task("calibrating", total=total, unit="samples") as t:
        for _ in range(total):
            t.advance()


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    _count_task(out, 20)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    counts = [re.fullmatch(rf"calibrating: (\d+)/20 samples, {SECONDS}", ln) for ln in lines[:-1]]
    assert all(counts), lines
    assert [int(m.group(1)) for m in counts] == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]  # each tenth
    assert re.fullmatch(rf"calibrating: 20/20 samples, done in {SECONDS}", lines[-1])


def test_one_updating_line_on_a_terminal() -> None:
    out = _Terminal()
    _count_task(out, 5)
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")  # one line, rewritten in place
    assert text.startswith("\r\x1b[K")
    last = text.rsplit("\r\x1b[K", 1)[1]
    assert re.fullmatch(rf"calibrating: 5/5 samples, done in {SECONDS}\n", last)


def test_stages_and_failure() -> None:
    out = io.StringIO()
    progress.configure(enabled=True, stream=out)
    with pytest.raises(RuntimeError), progress.task("export"):
        progress.stage("quantize")
        progress.stage("lower")
        raise RuntimeError("stop")
    progress.stage("after")  # no task runs: nothing
    lines = out.getvalue().splitlines()
    assert [re.sub(SECONDS, "T", ln) for ln in lines] == [
        "export: quantize, T",
        "export: lower, T",
        "export: failed after T",
    ]


def test_silent_unless_switched_on() -> None:
    out = io.StringIO()
    progress.configure(enabled=False, stream=out)
    with progress.task("calibrating", total=3) as t:
        t.advance(3)
        progress.stage("x")
    assert out.getvalue() == ""


MODEL = """
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 4)).eval(), (torch.randn(1, 8),)


def calibration_samples():
    return [(torch.randn(1, 8),) for _ in range(30)]
"""


def test_cli_export_reports_each_stage(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.py"
    path.write_text(MODEL)
    assert main(["export", f"{path}:build", "-o", str(tmp_path / "out")]) == 0
    err = [re.sub(SECONDS, "T", ln) for ln in capsys.readouterr().err.splitlines()]
    shown = [ln for ln in err if ln.startswith(("export:", "calibrating:"))]
    assert shown == [
        "export: quantize, T",
        *[f"calibrating: {n}/30 samples, T" for n in range(0, 30, 3)],
        "calibrating: 30/30 samples, done in T",
        "export: lower, T",
        "export: plan, T",
        "export: serialize, T",
        "export: save, T",
        "export: done in T",
    ]
    assert main(["export", f"{path}:build", "-o", str(tmp_path / "q"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "export:" not in err and "calibrating:" not in err
    assert (tmp_path / "q" / "model.pte").is_file()


def test_cli_build_and_qemu_run_report_progress(tmp_path: Path, capsys) -> None:
    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        pytest.fail("qemu-system-arm and arm-none-eabi-gcc are needed (scripts/setup.sh)")
    path = tmp_path / "m.py"
    path.write_text(MODEL)
    assert main(["export", f"{path}:build", "-o", str(tmp_path / "out"), "-q"]) == 0
    x = np.random.default_rng(0).standard_normal((3, 1, 8)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    pte, build = str(tmp_path / "out" / "model.pte"), str(tmp_path / "build")
    capsys.readouterr()
    assert main(["run", pte, "--inputs", str(tmp_path / "x.npz"), "--build-dir", build]) == 0
    out, err = capsys.readouterr()
    assert "sample 2 output 0: shape [1, 4] float32" in out
    lines = err.splitlines()
    assert "building the qemu-an547 firmware: configure, " in err
    built = rf"^building the qemu-an547 firmware: (\d+)/\1 steps, done in {SECONDS}$"
    assert re.search(built, err, re.MULTILINE)
    assert re.fullmatch(rf"running on QEMU: 3/3 samples, done in {SECONDS}", lines[-1])
    assert main(["run", pte, "--inputs", str(tmp_path / "x.npz"), "--build-dir", build, "-q"]) == 0
    assert capsys.readouterr().err == ""
