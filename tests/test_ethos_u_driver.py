"""Our Ethos-U driver against the register model (tests/c): built with gcc and clang
(-std=c11 -Wall -Wextra -Werror), once more under ASan+UBSan, and cross-compiled with the
firmware's compiler and CPU flags, because the same file runs on the host and the board.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "firmware" / "drivers" / "ethos_u"
SOURCES = [
    ROOT / "tests" / "c" / "test_ethos_u_driver.c",
    ROOT / "tests" / "c" / "ethos_u_model.c",
    DRIVER / "ethos_u_driver.c",
]
INCLUDES = [f"-I{DRIVER / 'include'}", f"-I{ROOT / 'firmware' / 'runtime' / 'include'}"]
WARNINGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
SANITIZE = [
    "-g",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
]


def _build_and_run(compiler: str, flags: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which(compiler) is None:
        pytest.fail(f"{compiler} is not installed (the driver must build with it)")
    build = subprocess.run(
        [compiler, *WARNINGS, *flags, *INCLUDES, *map(str, SOURCES), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    return subprocess.run([str(out)], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    ("compiler", "flags"),
    [("gcc", ["-O2"]), ("clang", ["-O2"]), ("clang", ["-O1", *SANITIZE])],
    ids=["gcc", "clang", "clang-asan-ubsan"],
)
def test_driver_against_register_model(compiler: str, flags: list[str], tmp_path: Path) -> None:
    run = _build_and_run(compiler, flags, tmp_path / "test_ethos_u_driver")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout
    assert run.stdout.rstrip().splitlines()[-1].startswith("ALL PASS")
    assert run.stderr == ""  # no sanitizer report


@pytest.mark.parametrize("board", ["corstone-300", "corstone-320"])
def test_driver_cross_compiles_for_the_board(board: str, tmp_path: Path) -> None:
    """With the board's CPU flags (boards/<board>/board.json), as the firmware build uses them."""
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.fail("arm-none-eabi-gcc is not installed")
    cpu_flags = json.loads((ROOT / "boards" / board / "board.json").read_text())["cpu_flags"]
    build = subprocess.run(
        [
            "arm-none-eabi-gcc",
            *WARNINGS,
            *cpu_flags,
            "-Os",
            *INCLUDES,
            "-c",
            str(DRIVER / "ethos_u_driver.c"),
            "-o",
            str(tmp_path / "driver.o"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
