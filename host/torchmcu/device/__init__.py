"""Firmware for boards: build the runner with a program embedded, run it on an emulator.

    image = device.build("out/model.pte", "qemu-an547", "build/fw-qemu")
    result = device.run(image.elf, "qemu-an547", timeout=60).check()
    outputs = result.outputs(native.program_info(pte_bytes))

`run_samples` does both for a list of input samples and returns the outputs per sample.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from torchmcu.device.build import FirmwareBuildError, FirmwareImage, build
from torchmcu.device.io_blob import default_inputs, write_io_blob
from torchmcu.device.run import FirmwareRunError, RunResult, run

__all__ = [
    "FirmwareBuildError",
    "FirmwareImage",
    "FirmwareRunError",
    "RunResult",
    "build",
    "default_inputs",
    "run",
    "run_samples",
    "write_io_blob",
]


def run_samples(
    pte: str | os.PathLike[str] | bytes,
    board: str,
    samples: Sequence[Sequence[Any]],
    build_dir: str | os.PathLike[str],
    *,
    timeout: float = 120.0,
    expected: Sequence[Sequence[Any]] | None = None,
) -> tuple[list[list[np.ndarray]], RunResult]:
    """Build the runner with `samples` embedded, run it once, return outputs per sample.

    Raises FirmwareRunError (with the firmware's error lines) unless the run succeeded.
    """
    from torchmcu import native

    out = Path(build_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(pte, bytes):
        pte_path = out / "program.pte"
        if not pte_path.is_file() or pte_path.read_bytes() != pte:
            pte_path.write_bytes(pte)
        data = pte
    else:
        pte_path = Path(pte)
        data = pte_path.read_bytes()
    info = native.program_info(data)
    arrays = [
        [np.asarray(x.detach().numpy() if hasattr(x, "detach") else x) for x in s] for s in samples
    ]
    blob = write_io_blob(info, arrays, expected)
    image = build(pte_path, board, out, inputs=blob)
    result = run(image.elf, board, timeout).check()
    return [result.outputs(info, s) for s in range(len(samples))], result
