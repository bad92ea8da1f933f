"""A program whose arena does not fit the board is refused at firmware build time with one
error naming both sizes: by torchmcu.device.build before CMake runs, and by the CMake
configure step itself (cmake --preset BOARD -DTORCHMCU_PTE=...), without the wrong hint
"is torchmcu installed for this Python?" (issue 15, item 2.5)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_runtime_programs import add_program
from torchmcu import device
from torchmcu.boards import get_board
from torchmcu.pte import writer

ROOT = Path(__file__).resolve().parents[1]
ARENA = 5 * 1024 * 1024  # the program's planned arena: more than any board has


@pytest.fixture
def big_pte(tmp_path: Path) -> Path:
    path = tmp_path / "big.pte"
    path.write_bytes(writer.serialize(add_program(arena=ARENA)))
    return path


def _expected(board: str) -> str:
    limit = int(get_board(board).config["memory"]["arena_bytes_max"])
    assert limit == 4 * 1024 * 1024 < ARENA
    return (
        f"the activation arena needs {ARENA:,} bytes but {board} has {limit:,} bytes of sram2 "
        f"for it ({ARENA - limit:,} bytes over)"
    )


def test_build_refuses_before_cmake(big_pte: Path, tmp_path: Path, monkeypatch) -> None:
    def no_cmake(*args: object) -> str:
        raise AssertionError(f"CMake was run: {args}")

    monkeypatch.setattr(sys.modules["torchmcu.device.build"], "_run", no_cmake)
    with pytest.raises(device.FirmwareBuildError) as err:
        device.build(big_pte, "qemu-an547", tmp_path / "build")
    assert str(err.value) == (
        f"cannot build the qemu-an547 firmware: {big_pte}: {_expected('qemu-an547')}"
    )


def test_cmake_configure_names_the_sizes(big_pte: Path, tmp_path: Path) -> None:
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("cmake") is None:
        pytest.fail("arm-none-eabi-gcc and cmake are needed (scripts/setup.sh installs them)")
    r = subprocess.run(
        ["cmake", "--preset", "corstone-300", "-B", str(tmp_path / "build"),
         f"-DTORCHMCU_PTE={big_pte}", f"-DPython3_EXECUTABLE={sys.executable}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode != 0
    log = " ".join((r.stdout + r.stderr).split())  # CMake wraps its messages
    assert _expected("corstone-300") in log
    assert "is torchmcu installed" not in log
