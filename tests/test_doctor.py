"""torchmcu doctor and the tests' `needs` marker, on machines reduced to what a new one lacks.

A new machine of this kind has none of the Debian packages scripts/setup.sh installs and no
venv. These tests build such a machine's view with a PATH that holds only the tools named
and a Python started without site-packages (-S), then check that every missing part is
named with the package that provides it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchmcu import doctor

ROOT = Path(__file__).resolve().parents[1]


def _bin_dir(tmp_path: Path, *tools: str) -> Path:
    """A directory of links to just these tools (plus bash), to use as the whole PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", *tools):
        found = shutil.which(tool)
        assert found, f"{tool} should be on this machine (scripts/setup.sh installs it)"
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def _doctor(path: Path, *python_flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": str(path), "PYTHONPATH": str(ROOT / "host")}
    return subprocess.run(
        [sys.executable, *python_flags, "-m", "torchmcu.doctor"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def _line(out: str, name: str) -> str:
    (line,) = [ln for ln in out.splitlines() if ln[15:41].strip() == name]  # Finding.line()
    return line


def test_new_machine_every_missing_part_named_with_its_package(tmp_path: Path) -> None:
    """No tools, no packages: exit 1 and one 'missing' line per component with its fix."""
    r = _doctor(_bin_dir(tmp_path), "-S")
    assert r.returncode == 1, r.stdout + r.stderr
    fixes = {
        "arm-none-eabi-gcc": "gcc-arm-none-eabi",
        "newlib (arm-none-eabi)": "libnewlib-arm-none-eabi",
        "qemu-system-arm": "qemu-system-arm",
        "clang": "clang",
        "clang sanitizer runtimes": "libclang-rt-14-dev",
        "libFuzzer": "libclang-rt-14-dev",
        "cmake": "cmake",
        "ninja": "ninja-build",
        "chromium": "chromium",
        "torch (Python)": "scripts/setup.sh",
        "torchao (Python)": "scripts/setup.sh",
        "ethos-u-vela (Python)": "scripts/setup.sh",
        "TOSA reference model": "tosa-tools",
    }
    for name, package in fixes.items():
        line = _line(r.stdout, name)
        assert line.startswith("missing"), line
        assert package in line.split("->", 1)[1], line
    assert "required component(s) missing or wrong" in r.stdout.splitlines()[-1]


def test_sanitizer_runtimes_missing_beside_a_working_clang(tmp_path: Path) -> None:
    """clang without libclang-rt-14-dev (the set-up gap that once hid behind a green CI): a
    clang that looks for its runtimes in an empty resource dir links plain C but not ASan."""
    bin_dir = _bin_dir(tmp_path)
    real = shutil.which("clang")
    assert real
    (tmp_path / "empty-resource-dir").mkdir()
    wrapper = bin_dir / "clang"
    wrapper.write_text(f'#!/bin/sh\nexec {real} -resource-dir {tmp_path}/empty-resource-dir "$@"\n')
    wrapper.chmod(0o755)
    for tool in ("ld", "ld.bfd", "cc", "gcc"):  # clang drives the system linker
        if (found := shutil.which(tool)) and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    r = _doctor(bin_dir)
    assert r.returncode == 1
    assert _line(r.stdout, "clang").startswith("ok")
    for name in ("clang sanitizer runtimes", "libFuzzer"):
        line = _line(r.stdout, name)
        assert line.startswith("missing") and "libclang-rt-14-dev" in line, line


def test_this_machine_after_setup_is_ready() -> None:
    """scripts/setup.sh ran (the suite starts with it): every required component is found."""
    lines: list[str] = []
    assert doctor.run(lines.append) == 0, "\n".join(lines)
    assert lines[-1].startswith("ready")


def test_pins_match_the_versions_the_project_measured() -> None:
    """requirements.txt (what setup.sh installs) keeps FACTS.md's pins."""
    pins = dict(doctor.requirements())
    assert pins["torch"] == "2.13.0" and pins["torchao"] == "0.18.0"
    assert pins["ethos-u-vela"] == "5.2.0" and pins["tosa-tools"] == "2026.8.0"


def test_needs_marker_fails_in_one_line_never_skips(tmp_path: Path) -> None:
    """A test marked needs(...) on a machine without the tool fails with doctor's line."""
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.needs('qemu', 'arm-gcc')\n"
        "def test_uses_qemu():\n    assert False, 'must not run'\n\n"
        "def test_builds_firmware(tmp_path):\n"
        "    from torchmcu.device.build import build\n"
        "    build(None, 'qemu-an547', tmp_path)\n"
    )
    env = {**os.environ, "PATH": str(_bin_dir(tmp_path, "python3"))}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    out = r.stdout
    assert r.returncode == 1, out
    # the marker fails at set-up (an error), the build step's check in the call (a failure)
    assert "1 failed, 1 error" in out and "skipped" not in out, out
    assert "must not run" not in out and "another exception" not in out, out
    assert "needs qemu-system-arm: missing" in out and "apt-get install qemu-system-arm" in out
    assert "needs arm-none-eabi-gcc: missing" in out and "gcc-arm-none-eabi" in out


@pytest.mark.parametrize("name", [c.name for c in doctor.COMPONENTS])
def test_every_component_has_a_fix_when_missing(name: str) -> None:
    """The finding of each component is either usable or says how to fix it."""
    f = doctor.check(name)
    assert f.problem is None or f.fix, f.line()
