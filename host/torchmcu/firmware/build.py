"""Build the runner firmware for a board: drives the board's CMake preset.

One build directory per board can be reused for many programs: reconfiguring with another
.pte regenerates only the embedded-blob source and the linker script, so the runtime and
kernel libraries are compiled once and each further program costs a relink.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchmcu.boards import get_board


class FirmwareBuildError(RuntimeError):
    """CMake configuration or the cross build failed; the message carries the tool's output."""


@dataclass(frozen=True)
class FirmwareImage:
    elf: Path
    bin: Path
    program_bin: Path
    hex: Path
    board: str
    build_dir: Path


def source_dir() -> Path:
    """The repository root (CMakeLists.txt, CMakePresets.json, boards/, firmware/)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "CMakePresets.json").is_file():
        raise FirmwareBuildError(
            f"firmware sources not found at {root} (a source checkout is needed)"
        )
    return root


def _write_if_changed(path: Path, data: bytes) -> None:
    """Unchanged bytes keep their timestamp, so CMake does not rebuild for nothing."""
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)


def _unpack_bundle(
    bundle: str | os.PathLike[str] | bytes, out: Path, pte: str | os.PathLike[str] | None
) -> tuple[str, Path]:
    """(absolute .bpte path, its program written beside it for the memory plan)."""
    from torchmcu.pte.bundled import parse_bundled
    from torchmcu.pte.validate import ProgramError

    if isinstance(bundle, bytes):
        data, bpte = bundle, out / "program.bpte"
        _write_if_changed(bpte, data)
    else:
        bpte = Path(bundle).resolve()
        if not bpte.is_file():
            raise FirmwareBuildError(f"{bpte} does not exist")
        data = bpte.read_bytes()
    try:
        program = parse_bundled(data).program
    except ProgramError as e:
        raise FirmwareBuildError(f"bundled program {bpte}: {e}") from None
    if pte is not None and Path(pte).read_bytes() != program:
        raise FirmwareBuildError(f"{pte} is not the program inside {bpte}")
    program_path = out / "bundle-program.pte"
    _write_if_changed(program_path, program)
    return str(bpte), program_path


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _run(cmd: Sequence[str], cwd: Path, what: str) -> str:
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError as e:
        raise FirmwareBuildError(
            f"{what}: {e.filename} not found (install cmake and ninja)"
        ) from None
    if proc.returncode != 0:
        raise FirmwareBuildError(f"{what} failed:\n{_tail(proc.stdout + proc.stderr)}")
    return proc.stdout


def build(
    pte: str | os.PathLike[str] | None,
    board: str,
    build_dir: str | os.PathLike[str],
    inputs: str | os.PathLike[str] | bytes | None = None,
    *,
    defines: dict[str, Any] | None = None,
    profile: bool = False,
    bundle: str | os.PathLike[str] | bytes | None = None,
    bundle_rtol: float | None = None,
    bundle_atol: float | None = None,
    bundle_atol_int: float | None = None,
    ops_yaml: str | os.PathLike[str] | None = None,
) -> FirmwareImage:
    """Configure (preset `board`) and build the runner with `pte` embedded.

    inputs: an inputs blob (torchmcu.firmware.io_blob.write_io_blob bytes, or a path to one);
    None runs the runner's deterministic default input. defines: extra CMake cache entries
    (e.g. {"TORCHMCU_RUNNER_FAULT_TEST": "ON"}). profile: compile the executor's per-kernel
    hook in (TORCHMCU_PROFILE; counted by torchmcu.firmware.icount.profile_instructions).
    Always set explicitly, so a reused build directory never keeps a previous choice.
    bundle: a .bpte (bytes or path) embedded instead of the .pte and inputs; the runner runs
    every test case and compares on the device (firmware/runner/bundled_runner.c), with the
    float tolerances bundle_rtol (default 1e-5) / bundle_atol (1e-8) and bundle_atol_int (0,
    bit-exact) for integer outputs. `pte` may then be None (the program comes from the bundle).
    ops_yaml: a selected_operators.yaml; the image then compiles and registers only its kernels,
    and a .pte needing an operator outside it is refused here, before anything is compiled.
    """
    get_board(board)  # a clear error for an unknown board before CMake runs
    if shutil.which("arm-none-eabi-gcc") is None:
        raise FirmwareBuildError("arm-none-eabi-gcc is not on PATH (scripts/setup.sh installs it)")
    root = source_dir()
    out = Path(build_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    bundle_path = ""
    if bundle is not None:
        if inputs is not None:
            raise FirmwareBuildError("a bundled program carries its own inputs: pass inputs=None")
        bundle_path, pte = _unpack_bundle(bundle, out, pte)
    if pte is None:
        raise FirmwareBuildError("no program: pass a .pte (or bundle=)")
    pte_path = Path(pte).resolve()
    if not pte_path.is_file():
        raise FirmwareBuildError(f"{pte_path} does not exist")
    yaml_path = _check_ops_yaml(pte_path, ops_yaml) if ops_yaml is not None else ""
    inputs_path = ""
    if isinstance(inputs, bytes):
        blob = out / "inputs.tmio"
        if not blob.is_file() or blob.read_bytes() != inputs:  # unchanged bytes: no rebuild
            blob.write_bytes(inputs)
        inputs_path = str(blob)
    elif inputs is not None:
        inputs_path = str(Path(inputs).resolve())
    cache = {
        "TORCHMCU_PTE": str(pte_path),
        "TORCHMCU_INPUTS": inputs_path,
        "Python3_EXECUTABLE": sys.executable,
        "TORCHMCU_RUNNER_FAULT_TEST": "OFF",
        "TORCHMCU_PROFILE": "ON" if profile else "OFF",
        "TORCHMCU_BUNDLE": bundle_path,
        "TORCHMCU_BUNDLE_RTOL": "" if bundle_rtol is None else repr(float(bundle_rtol)),
        "TORCHMCU_BUNDLE_ATOL": "" if bundle_atol is None else repr(float(bundle_atol)),
        "TORCHMCU_BUNDLE_ATOL_INT": "" if bundle_atol_int is None else repr(float(bundle_atol_int)),
        "TORCHMCU_OPS_YAML": yaml_path,
    }
    cache.update({k: str(v) for k, v in (defines or {}).items()})
    _run(
        ["cmake", "--preset", board, "-B", str(out), *(f"-D{k}={v}" for k, v in cache.items())],
        root,
        f"configuring the {board} firmware",
    )
    _run(["cmake", "--build", str(out)], root, f"building the {board} firmware")
    return FirmwareImage(
        elf=out / "firmware.elf",
        bin=out / "firmware.bin",
        program_bin=out / "firmware-program.bin",
        hex=out / "firmware.hex",
        board=board,
        build_dir=out,
    )


def _check_ops_yaml(pte: Path, ops_yaml: str | os.PathLike[str]) -> str:
    """The yaml's absolute path, once every operator of `pte` is known to be selected by it."""
    from torchmcu.pte.reader import parse
    from torchmcu.selective import OpListError, missing_operators, program_operators, read_yaml

    path = Path(ops_yaml).resolve()
    try:
        doc = read_yaml(path)
    except (OpListError, OSError) as e:
        raise FirmwareBuildError(f"operator list {path}: {e}") from None
    missing = missing_operators(program_operators(parse(pte.read_bytes())), doc)
    if missing:
        raise FirmwareBuildError(
            f"{pte} needs operators that {path} does not select: {', '.join(missing)} "
            "(merge the program's selected_operators.yaml into it: torchmcu ops merge)"
        )
    return str(path)
