"""Export errors name the problem and where it is, and a failed export leaves no file.

Through the public API (torchmcu.export / ExportedModel.save) and the CLI: an unsupported op
names the op, the user's file and line and suggests a fix; a too-large arena gives the sizes;
a calibration sample of the wrong shape names the sample, the input and both shapes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torchmcu
from torch import nn
from torchmcu.boards import BoardError, get_board
from torchmcu.lower.errors import UnsupportedOpError


class _WithCumsum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(self.fc(x), dim=1)  # UNSUPPORTED-OP-LINE


class _BigActivation(nn.Module):
    """A conv whose int8 output alone (32 x 384 x 384 bytes) exceeds a 4 MiB arena."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def _line_of(marker: str) -> int:
    return next(
        i
        for i, ln in enumerate(Path(__file__).read_text().splitlines(), 1)
        if f"# {marker}" in ln and "_line_of" not in ln
    )


def test_unsupported_op_names_op_file_and_line() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    with pytest.raises(UnsupportedOpError) as err:
        torchmcu.export(_WithCumsum().eval(), (x,), calibration=[(x,)])
    msg = str(err.value)
    assert "aten.cumsum" in msg
    assert f"{Path(__file__).name}:{_line_of('UNSUPPORTED-OP-LINE')}" in msg
    assert "float" in msg and "replace" in msg  # the suggested fixes


def test_too_large_arena_gives_the_sizes() -> None:
    board = get_board("corstone-300")
    x = torch.rand(1, 3, 384, 384)
    out_bytes = 32 * 384 * 384  # the int8 conv output must be in the arena: a lower bound
    assert out_bytes > board.arena_bytes_max
    with pytest.raises(BoardError) as err:
        torchmcu.export(_BigActivation().eval(), (x,), calibration=[(x,)], board="corstone-300")
    msg = str(err.value)
    assert f"{board.arena_bytes_max:,} bytes" in msg and "corstone-300" in msg
    needed = int(msg.split("arena needs ")[1].split(" bytes")[0].replace(",", ""))
    assert needed >= out_bytes
    assert f"({needed - board.arena_bytes_max:,} bytes over)" in msg


def test_calibration_shape_mismatch_names_sample_and_input() -> None:
    model = nn.Sequential(nn.Linear(16, 4)).eval()
    good = (torch.randn(1, 16),)
    with pytest.raises(ValueError) as err:
        torchmcu.export(model, good, calibration=[good, good, (torch.randn(1, 15),)])
    msg = str(err.value)
    assert "calibration sample 2" in msg and "input 0" in msg
    assert "[1, 16]" in msg and "[1, 15]" in msg


def test_calibration_input_count_mismatch() -> None:
    model = nn.Sequential(nn.Linear(16, 4)).eval()
    good = (torch.randn(1, 16),)
    with pytest.raises(
        ValueError, match=r"calibration sample 0 has 2 input\(s\) but example_inputs has 1"
    ):
        torchmcu.export(model, good, calibration=[(torch.randn(1, 16), torch.randn(1, 16))])


def test_calibration_generator_checked_per_sample() -> None:
    model = nn.Sequential(nn.Linear(4, 2)).eval()
    good = (torch.randn(1, 4),)
    samples = (good if i < 3 else torch.randn(2, 4) for i in range(5))  # a bare tensor: a 1-tuple
    with pytest.raises(ValueError, match=r"calibration sample 3, input 0: expected shape \[1, 4\]"):
        torchmcu.export(model, good, calibration=samples)


def test_failed_save_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = nn.Sequential(nn.Linear(4, 2)).eval()
    x = (torch.randn(1, 4),)
    exported = torchmcu.export(model, x, calibration=[x])

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt  # as if the process was stopped between write and rename

    monkeypatch.setattr("torchmcu.api.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        exported.save(tmp_path, name="model")
    assert not (tmp_path / "model.pte").exists()
    monkeypatch.undo()
    path = exported.save(tmp_path, name="model")
    assert path.read_bytes() == exported.pte_bytes


def test_failing_cli_export_leaves_no_pte(tmp_path: Path) -> None:
    src = tmp_path / "big_model.py"
    src.write_text(
        textwrap.dedent("""
        import torch
        from torch import nn

        def make():
            return nn.Sequential(nn.Conv2d(3, 32, 1), nn.ReLU()).eval(), (torch.rand(1, 3, 384, 384),)

        def calibration_samples():
            return [(torch.rand(1, 3, 384, 384),)]
    """)
    )
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "torchmcu", "export", f"{src}:make", "-o", str(out)],
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0
    assert "arena needs" in r.stdout + r.stderr
    assert not list(out.glob("*.pte")) if out.exists() else True
    assert not list(tmp_path.rglob("*.pte"))


class _TrainingDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(self.fc(x), 0.5, training=True)  # DROPOUT-LINE


def test_dropout_in_training_mode_is_refused_before_calibration() -> None:
    """F.dropout(training=True) is random even in an eval graph: refused, naming the line,
    before any calibration sample runs (the generator below would fail if one were drawn)."""

    def calibration():
        raise AssertionError("calibration started")
        yield

    where = rf"test_export_errors.py:{_line_of('DROPOUT-LINE')} .*dropout with train=True"
    with pytest.raises(ValueError, match=where):
        torchmcu.export(_TrainingDropout(), (torch.randn(1, 8),), calibration=calibration())
