"""Shared fixtures: the separate ExecuTorch 1.5.1 venv and exports through its Cortex-M flow,
and the `needs` marker.

`@pytest.mark.needs("arm-gcc", "qemu")` names the machine components (torchmcu.doctor's
names) a test needs. A missing one fails the test with doctor's one line (what is missing,
which package, which set-up step): scripts/setup.sh installs all of them, so a missing tool
is a broken set-up, never a reason to skip.

ExecuTorch is never a dependency of torchmcu: it lives in .venv-executorch, built by
scripts/executorch_venv.sh. If the venv cannot be built the tests that need it fail
(it is the interop contract); TORCHMCU_ALLOW_NO_EXECUTORCH=1 turns that into a skip.

The suite runs in parallel (scripts/test.sh: pytest-xdist, --dist loadfile): each worker is a
process with its own tmp_path_factory directory and its own session fixtures. Anything written
outside tmp_path (build/ in the checkout) is shared by the workers and must be made under a
lock: `once_per_run` below.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from torchmcu import doctor

ROOT = Path(__file__).resolve().parents[1]
EXPORT_CORTEX_M = ROOT / "tests" / "executorch" / "export_cortex_m.py"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*components): machine components (torchmcu doctor)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    try:
        doctor.require(*(name for mark in item.iter_markers("needs") for name in mark.args))
        return (yield)  # fixtures: a build step's doctor.require fails the same way
    except doctor.MissingComponent as e:
        missing = str(e)
    pytest.fail(f"needs {missing}", pytrace=False)  # outside the except: no chained traceback


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        return (yield)
    except doctor.MissingComponent as e:  # torchmcu.device's build/run check their tools
        missing = str(e)
    pytest.fail(f"needs {missing}", pytrace=False)


# One id per test run: the same in every xdist worker of a run, new for each serial run.
_RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex


@contextlib.contextmanager
def once_per_run(path: Path) -> Iterator[bool]:
    """Make `path` (a file or directory outside tmp_path, e.g. under build/) once per test run.

    Holds an exclusive lock (.NAME.lock beside it) for the whole block, so two xdist workers
    never write it at once nor read it half-written; yields True when this run has not made it
    yet (the caller then makes it from scratch), False when a worker of this run already did.
    The run's stamp (.NAME.testrun) is written only when the block ends without an exception.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = path.parent / f".{path.name}.testrun"
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = stamp.is_file() and stamp.read_text() == _RUN_ID
        if not made:
            stamp.unlink(missing_ok=True)
        yield not made
        stamp.write_text(_RUN_ID)


def _venv_python(*flags: str) -> Path:
    try:
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / "executorch_venv.sh"), *flags],
            check=False,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    except subprocess.TimeoutExpired:
        proc = None
    if proc is None or proc.returncode != 0:
        detail = "timed out" if proc is None else proc.stderr[-3000:]
        msg = f"could not build the ExecuTorch venv (scripts/executorch_venv.sh {' '.join(flags)}): {detail}"
        if os.environ.get("TORCHMCU_ALLOW_NO_EXECUTORCH") == "1":
            pytest.skip(msg)
        pytest.fail(msg + "\n(set TORCHMCU_ALLOW_NO_EXECUTORCH=1 to skip explicitly)")
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def et_python() -> Path:
    """Python of the ExecuTorch venv (deserializer only)."""
    return _venv_python()


@pytest.fixture(scope="session")
def et_python_cortex_m(et_python: Path) -> Path:
    """Python of the ExecuTorch venv with its Cortex-M quantizer and passes importable."""
    return _venv_python("--cortex-m")


@dataclass
class ExecuTorchExport:
    """What ExecuTorch 1.5.1's Cortex-M flow made of one example model."""

    pte: bytes
    outputs: dict[str, np.ndarray]  # float{j}, fake_quant{j}, cortex_m{j}; sample axis first
    report: dict[str, Any]


_ET_EXPORTS: dict[tuple[Any, ...], ExecuTorchExport] = {}


def executorch_export(
    et_python: Path,
    name: str,
    out_dir: Path,
    inputs: np.ndarray | None = None,
    calibration: np.ndarray | None = None,
) -> ExecuTorchExport:
    """Export example model `name` (seed 0) with ExecuTorch's Cortex-M flow, once per session.

    inputs/calibration: arrays with a leading sample axis for the model's single input.
    """
    key = (
        name,
        None if inputs is None else inputs.tobytes(),
        None if calibration is None else calibration.tobytes(),
    )
    if key in _ET_EXPORTS:
        return _ET_EXPORTS[key]
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(et_python),
        str(EXPORT_CORTEX_M),
        "--model",
        f"{ROOT}/host/torchmcu/examples/models.py:{name}",
        "--seed",
        "0",
        "--out-dir",
        str(out_dir),
    ]
    if inputs is not None:
        np.savez(out_dir / "inputs.npz", arg0=inputs)
        cmd += ["--inputs", str(out_dir / "inputs.npz")]
    if calibration is not None:
        np.savez(out_dir / "calibration.npz", arg0=calibration)
        cmd += ["--calibration", str(out_dir / "calibration.npz")]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (
        f"ExecuTorch Cortex-M export of {name} failed:\n{proc.stderr[-3000:]}"
    )
    with np.load(out_dir / "outputs.npz") as z:
        outputs = {k: z[k] for k in z.files}
    result = ExecuTorchExport(
        pte=(out_dir / "model.pte").read_bytes(),
        outputs=outputs,
        report=json.loads((out_dir / "report.json").read_text()),
    )
    _ET_EXPORTS[key] = result
    return result


@pytest.fixture(scope="session")
def op_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the C tables generated from the operator registry (op_args.h,
    kernel_entries.h, control_ops.inc...): what cmake/ops.cmake writes into a build's
    generated/, for the tests that compile firmware sources with clang by hand."""
    from torchmcu.ops import generate

    out = tmp_path_factory.mktemp("generated")
    assert generate.main(["--out", str(out)]) == 0
    return out
