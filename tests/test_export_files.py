"""ExportedModel.save writes all of its files or none (torchmcu.filesets.write_all).

A bundle whose samples do not fit the program, a full disk while writing, and an interruption
while renaming each leave the output directory as it was: no new file, no `.partial` file.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from torch import nn
from torchmcu.pte.validate import ProgramError

FILES = ["model.bpte", "model.pte", "model.report.json", "selected_operators.yaml"]


@pytest.fixture(scope="module")
def exported() -> torchmcu.api.ExportedModel:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 2)).eval()
    x = (torch.randn(1, 4),)
    return torchmcu.export(model, x, calibration=[x])


def _listing(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())} if out.exists() else {}


def test_bad_bundle_shape_writes_nothing(exported, tmp_path: Path) -> None:
    good = [[np.zeros((1, 4), np.float32)]]
    exported.save(tmp_path, bundle_samples=good)
    before = _listing(tmp_path)
    assert sorted(before) == FILES
    with pytest.raises(ProgramError, match=r"sample 0 input 0: expected float32\[1, 4\], got "):
        exported.save(tmp_path, name="other", bundle_samples=[[np.zeros((1, 5), np.float32)]])
    assert _listing(tmp_path) == before  # no other.pte, the earlier files untouched


def test_full_disk_writes_nothing(exported, tmp_path: Path, monkeypatch) -> None:
    calls = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 3:  # the third file: the report
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr("torchmcu.filesets.os.fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        exported.save(tmp_path / "out", bundle_samples=[[np.zeros((1, 4), np.float32)]])
    assert len(calls) == 3
    assert _listing(tmp_path / "out") == {}


def test_interrupted_rename_removes_every_file(exported, tmp_path: Path, monkeypatch) -> None:
    renamed = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        if len(renamed) == 2:
            raise KeyboardInterrupt  # Ctrl-C after two of the four files were renamed
        real_replace(src, dst)
        renamed.append(Path(dst).name)

    monkeypatch.setattr("torchmcu.filesets.os.replace", replace)
    with pytest.raises(KeyboardInterrupt):
        exported.save(tmp_path, bundle_samples=[[np.zeros((1, 4), np.float32)]])
    assert len(renamed) == 2
    assert _listing(tmp_path) == {}


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "", "a\\b"])
def test_name_with_a_path_is_refused(exported, tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match=r"without path separators or '\.\.'"):
        exported.save(tmp_path / "out", name=name)
    assert not (tmp_path / "out").exists() and not list(tmp_path.rglob("*.pte"))
