"""Our Ethos-U driver against the register model (tests/c): built with gcc and clang
(-std=c11 -Wall -Wextra -Werror), once more under ASan+UBSan, and cross-compiled with the
firmware's compiler and CPU flags, because the same file runs on the host and the board.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
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
    [
        pytest.param("gcc", ["-O2"], id="gcc", marks=pytest.mark.needs("host-gcc")),
        pytest.param("clang", ["-O2"], id="clang", marks=pytest.mark.needs("clang")),
        pytest.param("clang", ["-O1", *SANITIZE], id="clang-asan-ubsan",
                     marks=pytest.mark.needs("clang-sanitizers")),
    ],
)
def test_driver_against_register_model(compiler: str, flags: list[str], tmp_path: Path) -> None:
    run = _build_and_run(compiler, flags, tmp_path / "test_ethos_u_driver")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout
    assert run.stdout.rstrip().splitlines()[-1].startswith("ALL PASS")
    assert run.stderr == ""  # no sanitizer report


@pytest.mark.parametrize("board", ["corstone-300", "corstone-320"])
@pytest.mark.needs("arm-gcc")
def test_driver_cross_compiles_for_the_board(board: str, tmp_path: Path) -> None:
    """With the board's CPU flags (boards/<board>/board.json), as the firmware build uses them."""
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


# ------------------------------------------------------------- Vela's real command data
def _conv1x1_tosa() -> bytes:
    """A lone int8 1x1 CONV2D: the smallest graph Vela turns into a command stream."""
    ts = pytest.importorskip("tosa_serializer")
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    x = g.addPlaceholder([1, 4, 4, 8], ts.DType.INT8)
    out = g.addOutput([1, 4, 4, 16], ts.DType.INT32)
    rng = np.random.default_rng(0)
    w = g.addConst(
        [16, 1, 1, 8], ts.DType.INT8, rng.integers(-127, 128, [16, 1, 1, 8]).astype(np.int8)
    )
    b = g.addConst([16], ts.DType.INT32, np.zeros(16, np.int32))
    zi = g.addConst([1], ts.DType.INT8, np.zeros(1, np.int8))
    zw = g.addConst([1], ts.DType.INT8, np.zeros(1, np.int8))
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute(
        pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], local_bound=False, acc_type=ts.DType.INT32
    )
    g.addOperator(ts.Op.CONV2D, [x.name, w.name, b.name, zi.name, zw.name], [out.name], attr)
    return g.serialize()


VELA_TARGETS = {
    "u55": ("corstone-300", "ethos-u55-128"),
    "u65": ("corstone-300", "ethos-u65-256"),
    "u85": ("corstone-320", "ethos-u85-256"),
}


def test_parses_velas_command_data(tmp_path: Path) -> None:
    """Vela's COP1 payload for each product parses, and its optimizer config is accepted by
    the model of that product only (so the model's ID/CONFIG words are what Vela targets)."""
    pytest.importorskip("ethosu.vela")
    from torchmcu.npu.config import resolve_target
    from torchmcu.npu.vela import compile_tosa

    harness = tmp_path / "harness"
    build = _build_and_run("gcc", ["-O1"], harness)
    assert build.returncode == 0, build.stdout
    tosa = _conv1x1_tosa()
    for name, (board, npu) in VELA_TARGETS.items():
        cmd = compile_tosa(tosa, resolve_target(board, npu)).command_stream
        assert cmd[:4] == b"COP1"
        path = tmp_path / f"{name}.bin"
        path.write_bytes(cmd)
        for product in VELA_TARGETS:
            run = subprocess.run(
                [str(harness), "payload", str(path), product],
                capture_output=True,
                text=True,
                check=False,
            )
            assert run.returncode == 0, run.stdout + run.stderr
            fields = run.stdout.split()
            got = dict(zip(fields[::2], fields[1::2]))
            offset, size = int(got["stream_offset"]), int(got["stream_size"])
            assert size > 0 and size % 4 == 0 and offset + size <= len(cmd)
            # the action word before the stream holds its length in words (bits 31:16)
            assert int.from_bytes(cmd[offset - 2 : offset], "little") == size // 4
            assert got["has_config"] == "1"
            expected = "0" if product == name else "2"  # TM_OK / TM_ERR_UNSUPPORTED
            assert got["check"] == expected, (name, product, run.stdout)
