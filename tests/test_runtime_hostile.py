"""Hostile input: the runtime built with ASan+UBSan (clang) must reject damaged .pte files cleanly.

tools/host/pte_check is built once into build/hostile-asan (cached, serialised
with a lock). For each program it tries every truncation (all must be rejected)
and corrupts every u32 and byte of the flatbuffer part (each must be rejected or
load, init and run cleanly with probe kernels reading every tensor byte); any
sanitizer report aborts the process and fails the test.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _cmake import locked_build
from test_runtime_programs import add_program, describe_program, fail_program
from torchmcu.pte import writer

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "hostile-asan"

pytestmark = pytest.mark.needs("clang", "cmake", "clang-sanitizers")


@pytest.fixture(scope="module")
def pte_check() -> Path:
    locked_build(
        ROOT,
        BUILD,
        ["-DCMAKE_BUILD_TYPE=Debug", "-DTORCHMCU_SANITIZE=ON", "-DTORCHMCU_HOST_TOOLS=ON"],
        "pte_check",
    )
    return BUILD / "tools" / "host" / "pte_check"


def _programs(tmp_path: Path) -> list[Path]:
    progs = {"add": add_program(), "describe": describe_program(), "fail": fail_program(4, 1)}
    try:  # the .pte tests' cortex_m::quantized_linear program, when present
        from _pte_programs import linear_program

        progs["linear"] = linear_program()
    except ImportError:
        pass
    paths = []
    for name, prog in progs.items():
        path = tmp_path / f"{name}.pte"
        path.write_bytes(writer.serialize(prog))
        paths.append(path)
    return paths


def _run(exe: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600)


def _assert_clean(r: subprocess.CompletedProcess) -> None:
    assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-4000:]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_valid_programs_pass_under_sanitizers(pte_check: Path, tmp_path: Path) -> None:
    r = _run(pte_check, "--any-op", *map(str, _programs(tmp_path)))
    _assert_clean(r)
    assert r.stdout.count(": OK (") == len(r.stdout.splitlines())


def test_every_truncation_rejected(pte_check: Path, tmp_path: Path) -> None:
    paths = _programs(tmp_path)
    r = _run(pte_check, "--any-op", "--truncations", *map(str, paths))
    _assert_clean(r)
    for p in paths:
        size = p.stat().st_size
        assert f"{p}: {size} truncations, 0 accepted" in r.stdout


def test_corruptions_never_crash(pte_check: Path, tmp_path: Path) -> None:
    paths = _programs(tmp_path)
    r = _run(pte_check, "--any-op", "--flips", *map(str, paths))
    _assert_clean(r)
    lines = [ln for ln in r.stdout.splitlines() if "corruptions" in ln]
    assert len(lines) == len(paths)
    for ln in lines:
        rejected = int(ln.split(" corruptions, ")[1].split(" rejected")[0])
        assert rejected > 0  # the verifier did reject most damage, not just survive it


def test_buffers_too_small(pte_check: Path, tmp_path: Path) -> None:
    add = str(_programs(tmp_path)[0])
    r = _run(pte_check, "--any-op", "--arena-bytes", "16", add)
    assert r.returncode == 1 and "OUT_OF_MEMORY: arena too small" in r.stdout
    r = _run(pte_check, "--any-op", "--meta-bytes", "64", add)
    assert r.returncode == 1 and "OUT_OF_MEMORY: metadata buffer too small" in r.stdout
    r = _run(pte_check, add)  # the real registry has no torchmcu_test kernels
    assert r.returncode == 1 and "MISSING_OPERATOR" in r.stdout and "torchmcu_test::add.out" in r.stdout


def test_strings_not_utf8_rejected_cleanly(pte_check: Path, tmp_path: Path) -> None:
    """The loader's UTF-8 check of operator names, under ASan: every malformed sequence of
    tests/test_runtime.py (one stops mid-sequence at the string's end) is refused cleanly,
    naming the field."""
    from test_runtime import NOT_UTF8, _operator_name_with

    paths = []
    for name, (old, new) in NOT_UTF8.items():
        path = tmp_path / f"{name}.pte"
        path.write_bytes(_operator_name_with(old, new))
        paths.append(path)
    r = _run(pte_check, "--any-op", *map(str, paths))
    assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-4000:]
    lines = r.stdout.splitlines()
    assert len(lines) == len(paths), r.stdout
    assert all("Operator.name is not UTF-8" in ln for ln in lines), r.stdout
