"""Running a script in the ExecuTorch venv, shared by the benchmarks that compare with it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ET_PYTHON = Path(os.environ.get("TORCHMCU_ET_VENV", ROOT / ".venv-executorch")) / "bin" / "python"


def save_samples(path: Path, samples: Sequence[tuple[Any, ...]]) -> None:
    """Input samples as the ExecuTorch scripts read them: `argI` arrays with a leading sample
    axis (one per model input)."""
    import numpy as np

    arrays = {f"arg{i}": np.stack([s[i].numpy() for s in samples]) for i in range(len(samples[0]))}
    np.savez(path, **arrays)


def et_env() -> dict[str, str]:
    """The ExecuTorch venv's environment: torchmcu's sources first on PYTHONPATH, then the
    caller's (Vela from beside a venv shared read-only, say)."""
    extra = os.environ.get("PYTHONPATH")
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "host"), *filter(None, [extra])])
    )


def run_script(
    args: Sequence[str], *, timeout: float, threads: int | None = None
) -> subprocess.CompletedProcess[str] | None:
    """`ET_PYTHON args...` from the repository root with torchmcu's sources on its path (the
    example models), output captured; threads sets its OMP_NUM_THREADS. None on a timeout."""
    env = et_env()
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    try:
        return subprocess.run(
            [str(ET_PYTHON), *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
