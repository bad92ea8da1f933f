"""A CMake build that several pytest processes (xdist workers, parallel runs) may ask for at once:
configured once, built under an exclusive file lock beside the build directory."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path


def locked_build(
    source: Path, build: Path, configure: list[str], target: str | None = None
) -> None:
    """Configure `source` into `build` with clang and the `configure` flags (only when no
    CMakeCache.txt is there yet), then build `target` (all without); a failure names the
    command's output."""
    build.parent.mkdir(parents=True, exist_ok=True)
    with open(build.parent / f".{build.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (build / "CMakeCache.txt").exists():
            gen = ["-G", "Ninja"] if shutil.which("ninja") else []
            cmd = ["cmake", "-S", str(source), "-B", str(build), *gen, "-DCMAKE_C_COMPILER=clang"]
            r = subprocess.run([*cmd, *configure], capture_output=True, check=False, text=True)
            assert r.returncode == 0, r.stdout + r.stderr
        cmd = ["cmake", "--build", str(build), *(["--target", target] if target else [])]
        r = subprocess.run(cmd, capture_output=True, check=False, text=True)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
