"""Build the runner firmware for a board: drives the board's CMake preset.

One build directory per board can be reused for many programs: reconfiguring with another
.pte regenerates only the embedded-blob source and the linker script, so the runtime and
kernel libraries are compiled once and each further program costs a relink.

One image can also hold several programs (a list of .pte files, typically with the merged
selected_operators.yaml of their models): the runner loads and runs each in turn with the one
kernel registry, in buffers sized for the largest.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchmcu import doctor, progress
from torchmcu.boards import get_board


class FirmwareBuildError(RuntimeError):
    """CMake configuration or the cross build failed; the message carries the tool's output."""


PathLike = str | os.PathLike[str]
Inputs = PathLike | bytes | None

_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")  # what the runner prints in its TM_PROGRAM lines


@dataclass(frozen=True)
class FirmwareImage:
    elf: Path
    bin: Path
    program_bin: Path
    hex: Path
    board: str
    build_dir: Path
    programs: tuple[str, ...] = ()  # names of the embedded programs in run order (several only)


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


_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\] ")  # "[12/80] Building C object ..."


def _run(cmd: Sequence[str], cwd: Path, what: str, shown: progress.Task | None = None) -> str:
    """Run a CMake step; its output is read line by line so `shown` can count the build
    steps ninja reports. FirmwareBuildError with the output's tail when it fails."""
    try:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    except FileNotFoundError as e:
        raise FirmwareBuildError(
            f"{what}: {e.filename} not found (install cmake and ninja)"
        ) from None
    lines = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            m = _NINJA_STEP.match(line)
            if m and shown is not None:
                shown.update(int(m.group(1)), total=int(m.group(2)))
        proc.wait()
    except BaseException:  # Ctrl-C included: never leave the build running behind us
        proc.kill()
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    output = "".join(lines)
    if proc.returncode != 0:
        raise FirmwareBuildError(f"{what} failed:\n{_tail(output)}")
    return output


def build(
    pte: PathLike | Sequence[PathLike] | None,
    board: str,
    build_dir: PathLike,
    inputs: Inputs | Sequence[Inputs] = None,
    *,
    defines: dict[str, Any] | None = None,
    profile: bool = False,
    bundle: str | os.PathLike[str] | bytes | None = None,
    bundle_rtol: float | None = None,
    bundle_atol: float | None = None,
    bundle_atol_int: float | None = None,
    ops_yaml: str | os.PathLike[str] | None = None,
    names: Sequence[str] | None = None,
    generate: tuple[int, int, int] | None = None,
) -> FirmwareImage:
    """Configure (preset `board`) and build the runner with `pte` embedded.

    inputs: an inputs blob (torchmcu.device.io_blob.write_io_blob bytes, or a path to one);
    None runs the runner's deterministic default input. defines: extra CMake cache entries
    (e.g. {"TORCHMCU_RUNNER_FAULT_TEST": "ON"}). profile: compile the executor's per-kernel
    hook in (TORCHMCU_PROFILE; counted by torchmcu.device.icount.profile_instructions).
    Always set explicitly, so a reused build directory never keeps a previous choice.
    bundle: a .bpte (bytes or path) embedded instead of the .pte and inputs; the runner runs
    every test case and compares on the device (firmware/runner/bundled_runner.c), with the
    float tolerances bundle_rtol (default 1e-5) / bundle_atol (1e-8) and bundle_atol_int (0,
    bit-exact) for integer outputs. `pte` may then be None (the program comes from the bundle).
    ops_yaml: a selected_operators.yaml; the image then compiles and registers only its kernels,
    and a .pte needing an operator outside it is refused here, before anything is compiled.
    Several programs: `pte` a list of .pte paths and `inputs` None or a list with one entry
    (blob, path or None) per program; `names` (default: the file stems) tag each program's
    output lines (TM_PROGRAM, parsed into RunResult.programs). A one-element list builds the
    one-program image.
    generate: (pad, end, max_new) token ids: the runner decodes greedily from each sample's
    prompt (firmware/runner/generate.h; end -1 for none) and prints TM_TOKEN lines
    (RunResult.generated) instead of one inference per sample.
    """
    get_board(board)  # a clear error for an unknown board before CMake runs
    if generate is not None and (len(generate) != 3 or int(generate[2]) < 1):
        raise FirmwareBuildError(f"generate must be (pad, end, max_new >= 1), got {generate!r}")
    doctor.require("arm-gcc", "newlib", "cmake", "ninja")  # one line naming what is missing
    root = source_dir()
    out = Path(build_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    several = isinstance(pte, (list, tuple))
    ptes: list[PathLike | None] = list(pte) if several else [pte]  # type: ignore[arg-type]
    if several and not ptes:
        raise FirmwareBuildError("no program: the list of .pte files is empty")
    per_program: list[Inputs] = _inputs_per_program(inputs, len(ptes), several)
    bundle_path = ""
    if bundle is not None:
        if len(ptes) != 1:
            raise FirmwareBuildError("a bundled image holds one program: pass one .pte (or None)")
        if inputs is not None:
            raise FirmwareBuildError("a bundled program carries its own inputs: pass inputs=None")
        bundle_path, ptes[0] = _unpack_bundle(bundle, out, ptes[0])
    if any(p is None for p in ptes):
        raise FirmwareBuildError("no program: pass a .pte (or bundle=)")
    pte_paths = [Path(p).resolve() for p in ptes if p is not None]
    for path in pte_paths:
        if not path.is_file():
            raise FirmwareBuildError(f"{path} does not exist")
    _check_plan(pte_paths, board)
    program_names = _program_names(pte_paths, names)
    yaml_path = _check_ops_yaml(pte_paths, ops_yaml) if ops_yaml is not None else ""
    inputs_paths = [
        _inputs_path(x, out / ("inputs.tmio" if len(ptes) == 1 else f"inputs-{i}.tmio"), len(ptes))
        for i, x in enumerate(per_program)
    ]
    inputs_path = ";".join(inputs_paths) if any(inputs_paths) else ""
    cache = {
        "TORCHMCU_PTE": ";".join(str(p) for p in pte_paths),
        "TORCHMCU_INPUTS": inputs_path,
        "TORCHMCU_PROGRAM_NAMES": ";".join(program_names) if len(pte_paths) > 1 else "",
        "Python3_EXECUTABLE": sys.executable,
        "TORCHMCU_RUNNER_FAULT_TEST": "OFF",
        "TORCHMCU_PROFILE": "ON" if profile else "OFF",
        "TORCHMCU_BUNDLE": bundle_path,
        "TORCHMCU_BUNDLE_RTOL": "" if bundle_rtol is None else repr(float(bundle_rtol)),
        "TORCHMCU_BUNDLE_ATOL": "" if bundle_atol is None else repr(float(bundle_atol)),
        "TORCHMCU_BUNDLE_ATOL_INT": "" if bundle_atol_int is None else repr(float(bundle_atol_int)),
        "TORCHMCU_OPS_YAML": yaml_path,
        "TORCHMCU_GENERATE": "" if generate is None else ";".join(str(int(v)) for v in generate),
    }
    cache.update({k: str(v) for k, v in (defines or {}).items()})
    with progress.task(f"building the {board} firmware", unit="steps") as shown:
        shown.stage("configure")
        _run(
            ["cmake", "--preset", board, "-B", str(out), *(f"-D{k}={v}" for k, v in cache.items())],
            root,
            f"configuring the {board} firmware",
        )
        shown.stage("compile and link")
        _run(["cmake", "--build", str(out)], root, f"building the {board} firmware", shown)
    return FirmwareImage(
        elf=out / "firmware.elf",
        bin=out / "firmware.bin",
        program_bin=out / "firmware-program.bin",
        hex=out / "firmware.hex",
        board=board,
        build_dir=out,
        programs=tuple(program_names) if len(pte_paths) > 1 else (),
    )


def _check_plan(ptes: Sequence[Path], board: str) -> None:
    """Before CMake: every program verifies and the image's arena and programs fit the board
    (one clear error with the sizes instead of a configure log)."""
    from torchmcu.boards import BoardError
    from torchmcu.device.plan import PlanError, board_plan

    try:
        board_plan(list(ptes), board)
    except (BoardError, PlanError) as e:
        raise FirmwareBuildError(f"cannot build the {board} firmware: {e}") from None


def _inputs_per_program(
    inputs: Inputs | Sequence[Inputs], count: int, several: bool
) -> list[Inputs]:
    """One inputs entry per program: a list for a list of programs, else the one value."""
    if not several:
        if isinstance(inputs, (list, tuple)):
            raise FirmwareBuildError("a list of inputs needs a list of programs (pte=[...])")
        return [inputs]  # type: ignore[list-item]
    if inputs is None:
        return [None] * count
    if not isinstance(inputs, (list, tuple)) or len(inputs) != count:
        raise FirmwareBuildError(
            f"with {count} programs, inputs must be None or a list of {count} entries "
            "(an inputs blob, a path to one, or None per program)"
        )
    return list(inputs)


def _inputs_path(inputs: Inputs, blob: Path, programs: int) -> str:
    """The absolute path CMake embeds for one program's inputs ('' for none). With several
    programs every program gets a file (an empty one: the default input), since CMake drops
    empty entries of a path list."""
    if isinstance(inputs, bytes):
        _write_if_changed(blob, inputs)  # unchanged bytes: no rebuild
        return str(blob)
    if inputs is not None:
        path = Path(inputs).resolve()
        if not path.is_file():
            raise FirmwareBuildError(f"inputs blob {path} does not exist")
        return str(path)
    if programs > 1:
        _write_if_changed(blob, b"")
        return str(blob)
    return ""


def _program_names(ptes: Sequence[Path], names: Sequence[str] | None) -> list[str]:
    """Names of the programs for the runner's TM_PROGRAM lines: given, or the file stems."""
    if names is None:
        return [
            re.sub(r"[^A-Za-z0-9_.+-]", "_", p.stem) or f"program{i}" for i, p in enumerate(ptes)
        ]
    names = list(names)
    if len(names) != len(ptes):
        raise FirmwareBuildError(f"{len(names)} names for {len(ptes)} programs")
    bad = [n for n in names if not _NAME.match(n)]
    if bad:
        raise FirmwareBuildError(
            f"program names {bad}: use letters, digits and _ . + - only "
            "(the runner prints them in its TM_PROGRAM lines)"
        )
    return names


def _check_ops_yaml(ptes: Sequence[Path], ops_yaml: str | os.PathLike[str]) -> str:
    """The yaml's absolute path, once every operator, delegate, runtime feature and kernel
    variant of every program is known to be selected by it."""
    from torchmcu.pte.reader import parse
    from torchmcu.selective import (
        OpListError,
        missing_delegates,
        missing_operators,
        program_delegates,
        program_operators,
        program_runtime_features,
        read_yaml,
        runtime_features,
    )
    from torchmcu.selective.oplist import includes_all
    from torchmcu.selective.variants import missing_variants

    path = Path(ops_yaml).resolve()
    try:
        doc = read_yaml(path)
    except (OpListError, OSError) as e:
        raise FirmwareBuildError(f"operator list {path}: {e}") from None
    problems = []
    for pte in ptes:
        program = parse(pte.read_bytes())
        missing = missing_operators(program_operators(program), doc)
        if missing:
            problems.append(
                f"{pte} needs operators that {path} does not select: {', '.join(missing)}"
            )
        delegates = missing_delegates(program_delegates(program), doc)
        if delegates:
            problems.append(
                f"{pte} needs delegates that {path} does not select: {', '.join(delegates)} "
                "(build_features: delegate:<id>)"
            )
        features = [
            f
            for f in program_runtime_features(program)
            if f != "delegates" and f not in runtime_features(doc)
        ]
        if features:
            problems.append(
                f"{pte} needs runtime features that {path} does not select: "
                + ", ".join(features)
                + " (build_features: "
                + ", ".join(f"runtime:{f}" for f in features)
                + ")"
            )
        variants = missing_variants(program, doc["build_features"], includes_all(doc))
        if variants:
            problems.append(
                f"{pte} takes kernel paths that {path} leaves out: "
                + ", ".join(variants)
                + " (build_features entries)"
            )
    if problems:
        raise FirmwareBuildError(
            "; ".join(problems)
            + " (merge the programs' selected_operators.yaml into it: torchmcu ops merge)"
        )
    return str(path)
