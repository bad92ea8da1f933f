"""Compile a TOSA subgraph for an Ethos-U with Vela, in-process, into an EthosUBackend blob.

Vela is run through its command-line entry point (`ethosu.vela.vela.main`) in a temporary
directory with raw output: the .npz it writes holds the command stream, the encoded weights and
where the inputs/outputs live in the scratch area; the summary CSV holds its performance estimate.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from torchmcu.npu.blob import (
    REGION_FAST_SCRATCH,
    REGION_SCRATCH,
    REGION_WEIGHTS,
    SHAPE_DIMS,
    BlobError,
    VelaTensor,
    pack_blob,
    parse_blob,
)
from torchmcu.npu.config import NpuTarget

__all__ = ["VelaCompileError", "VelaResult", "VelaTensor", "combine_estimates", "compile_tosa"]

_NAME_RE = re.compile(r"^[A-Za-z0-9_]{1,64}$")
# Summary CSV columns Vela writes in KiB; the estimate also carries them in bytes.
_KIB_COLUMNS = {
    "sram_memory_used": "sram_bytes",
    "dram_memory_used": "dram_bytes",
    "on_chip_flash_memory_used": "on_chip_flash_bytes",
    "off_chip_flash_memory_used": "off_chip_flash_bytes",
}


class VelaCompileError(RuntimeError):
    """Vela rejected a subgraph, or wrote something we cannot use."""


@dataclass
class VelaResult:
    blob: bytes  # EthosUBackend delegate blob (torchmcu.npu.blob layout)
    command_stream: bytes
    weights: bytes
    scratch_size: int
    inputs: list[VelaTensor]
    outputs: list[VelaTensor]
    # Vela's summary CSV: every numeric column as written (memory columns in KiB), plus
    # sram_bytes/dram_bytes/on_chip_flash_bytes/off_chip_flash_bytes in bytes.
    estimate: dict[str, float | int]
    # Size of the fast-scratch region (2) the firmware must provide; non-zero only in
    # Dedicated_Sram memory modes. The blob does not carry it (ExecuTorch's layout has no block).
    fast_scratch_size: int = 0
    # compile_tosa(per_layer=True): Vela's per-layer table (operator, target, "Op Cycles",
    # "MAC Count", ... as its per-layer CSV names them; numbers parsed).
    per_layer: list[dict[str, str | float | int]] = field(default_factory=list)
    log: str = field(default="", repr=False)  # Vela's console output


def _vela_main():
    """Vela's entry point, imported on first use (the import costs about 0.25 s)."""
    from ethosu.vela import vela

    return vela.main


def _number(text: str) -> float | int | None:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None


def read_summary(path: Path) -> dict[str, float | int]:
    """Numeric columns of Vela's summary CSV (one row per network)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 1:
        raise VelaCompileError(f"{path.name}: expected one summary row, found {len(rows)}")
    estimate: dict[str, float | int] = {}
    for key, text in rows[0].items():
        value = _number(text)
        if value is None:
            continue
        if key.startswith("cycles") or key == "nn_macs":
            value = round(value)
        estimate[key] = value
    for kib, nbytes in _KIB_COLUMNS.items():
        if kib in estimate:
            estimate[nbytes] = round(float(estimate[kib]) * 1024)
    return estimate


def read_per_layer(path: Path) -> list[dict[str, str | float | int]]:
    """Rows of Vela's per-layer CSV, numeric cells as numbers."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out: list[dict[str, str | float | int]] = []
    for row in rows:
        parsed: dict[str, str | float | int] = {}
        for key, text in row.items():
            value = _number(text)
            parsed[key] = text if value is None else value
        out.append(parsed)
    return out


def _int_array(npz: np.lib.npyio.NpzFile, key: str, subgraph: str) -> np.ndarray:
    if key not in npz.files:
        raise VelaCompileError(f"subgraph {subgraph!r}: Vela's output has no {key!r}")
    return np.asarray(npz[key]).astype(np.int64)


def _tensors(npz: np.lib.npyio.NpzFile, prefix: str, subgraph: str) -> list[VelaTensor]:
    shapes = _int_array(npz, f"{prefix}_shape", subgraph).reshape(-1, SHAPE_DIMS)
    elem = _int_array(npz, f"{prefix}_elem_size", subgraph).reshape(-1)
    offset = _int_array(npz, f"{prefix}_offset", subgraph).reshape(-1)
    region = _int_array(npz, f"{prefix}_region", subgraph).reshape(-1)
    if not len(shapes) == len(elem) == len(offset) == len(region):
        raise VelaCompileError(
            f"subgraph {subgraph!r}: inconsistent {prefix} arrays in Vela's output"
        )
    return [
        VelaTensor([int(d) for d in shapes[i]], int(elem[i]), int(offset[i]), int(region[i]))
        for i in range(len(shapes))
    ]


@dataclass
class _RawOutput:
    cmd: bytes
    weights: bytes
    scratch: int
    fast: int
    inputs: list[VelaTensor]
    outputs: list[VelaTensor]


def _read_npz(path: Path, subgraph: str) -> _RawOutput:
    # allow_pickle=False: the *_quantization entries are pickled objects and are never read.
    with np.load(path, allow_pickle=False) as npz:
        variables = (
            _int_array(npz, "variable_shape", subgraph) if "variable_shape" in npz.files else None
        )
        if variables is not None and variables.size:
            raise VelaCompileError(
                f"subgraph {subgraph!r}: Vela placed stateful variables, which the "
                "EthosUBackend blob cannot describe"
            )
        scratch_shape = _int_array(npz, "scratch_shape", subgraph).reshape(-1)
        regions = {
            "weight_region": REGION_WEIGHTS,
            "scratch_region": REGION_SCRATCH,
        }
        for key, expected in regions.items():
            if key in npz.files and int(npz[key]) != expected:
                raise VelaCompileError(
                    f"subgraph {subgraph!r}: Vela put {key.split('_')[0]} in region "
                    f"{int(npz[key])}, the EthosUBackend convention is {expected}"
                )
        fast = int(npz["scratch_fast_size"]) if "scratch_fast_size" in npz.files else 0
        if fast and int(npz["scratch_fast_region"]) != REGION_FAST_SCRATCH:
            raise VelaCompileError(
                f"subgraph {subgraph!r}: fast scratch in region {int(npz['scratch_fast_region'])}, "
                f"expected {REGION_FAST_SCRATCH}"
            )
        return _RawOutput(
            cmd=npz["cmd_data"].tobytes(),
            weights=npz["weight_data"].tobytes(),
            scratch=int(scratch_shape[0]),
            fast=fast,
            inputs=_tensors(npz, "input", subgraph),
            outputs=_tensors(npz, "output", subgraph),
        )


def compile_tosa(
    tosa: bytes,
    target: NpuTarget,
    name: str = "subgraph0",
    *,
    verbose: bool = False,
    per_layer: bool = False,
    extra_args: Iterable[str] = (),
) -> VelaResult:
    """Compile one TOSA 1.0 flatbuffer for `target`; VelaCompileError names the subgraph.

    verbose: let Vela print its summary (it is captured in VelaResult.log otherwise).
    per_layer: also return Vela's per-layer performance table (where the cycles go).
    """
    if not _NAME_RE.match(name):
        raise ValueError(f"subgraph name {name!r}: use 1-64 letters, digits or underscores")
    with tempfile.TemporaryDirectory(prefix="torchmcu-vela-") as tmp:
        tmpdir = Path(tmp)
        tosa_path = tmpdir / f"{name}.tosa"
        tosa_path.write_bytes(tosa)
        out_dir = tmpdir / "out"
        argv = [
            *target.vela_args(),
            "--output-format",
            "raw",
            "--output-dir",
            str(out_dir),
            *(["--verbose-performance"] if per_layer else []),
            *extra_args,
            str(tosa_path),
        ]
        console = io.StringIO()
        main = _vela_main()
        try:
            if verbose:
                status = main(argv)
            else:
                with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
                    status = main(argv)
        except SystemExit as e:  # argparse rejected an option
            raise VelaCompileError(
                f"subgraph {name!r}: Vela rejected its arguments (exit {e.code}): "
                f"{console.getvalue().strip()[-2000:]}"
            ) from None
        except Exception as e:
            raise VelaCompileError(
                f"subgraph {name!r} for {target.accelerator} ({target.system_config}, "
                f"{target.memory_mode}): Vela failed: {' '.join(str(e).split())}"
            ) from e
        if status not in (0, None):
            raise VelaCompileError(
                f"subgraph {name!r}: Vela returned {status}: {console.getvalue()[-2000:]}"
            )
        npz_path = out_dir / f"{name}_vela.npz"
        csv_path = out_dir / f"{name}_summary_{target.system_config}.csv"
        if not npz_path.is_file():
            raise VelaCompileError(f"subgraph {name!r}: Vela wrote no {npz_path.name}")
        raw = _read_npz(npz_path, name)
        estimate = read_summary(csv_path) if csv_path.is_file() else {}
        layers_path = out_dir / f"{name}_per-layer.csv"
        layers = read_per_layer(layers_path) if per_layer and layers_path.is_file() else []
    try:
        blob = pack_blob(raw.cmd, raw.weights, raw.scratch, raw.inputs, raw.outputs)
        parse_blob(blob)  # what the firmware will check: I/O inside the scratch area, ...
    except BlobError as e:
        raise VelaCompileError(f"subgraph {name!r}: {e}") from e
    return VelaResult(
        blob=blob,
        command_stream=raw.cmd,
        weights=raw.weights,
        scratch_size=raw.scratch,
        inputs=raw.inputs,
        outputs=raw.outputs,
        estimate=estimate,
        fast_scratch_size=raw.fast,
        per_layer=layers,
        log=console.getvalue(),
    )


def combine_estimates(estimates: Iterable[dict[str, float | int]]) -> dict[str, float | int]:
    """One figure for a program with several delegates, run one after the other: cycles, MACs,
    time, traffic and flash use add up; SRAM/DRAM use is the largest single need (the scratch
    area is reused between delegates)."""
    reused = {"sram_memory_used", "sram_bytes", "dram_memory_used", "dram_bytes"}
    total: dict[str, float | int] = {}
    count = 0
    for est in estimates:
        count += 1
        for key, value in est.items():
            if key in reused:
                total[key] = max(total.get(key, 0), value)
            elif (
                key.startswith("cycles")
                or key == "nn_macs"
                or key == "inference_time"
                or key.endswith(("_bytes", "_memory_used"))
            ):
                total[key] = total.get(key, 0) + value
    if total.get("inference_time"):
        total["inferences_per_second"] = 1.0 / float(total["inference_time"])
    total["delegates"] = count
    return total
