"""The user-facing API: export a model to a .pte, save it, run it on the host."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from torchmcu.boards import Board, get_board
from torchmcu.pte.program import Program


@dataclass
class ExportedModel:
    """A lowered, memory-planned program and what export measured about it."""

    program: Program
    pte_bytes: bytes
    board: Board
    report: dict[str, Any] = field(default_factory=dict)
    # The converted PT2E graph (float ops between quantize/dequantize nodes): torchao's
    # fake-quantized model, the float reference the integer program is measured against.
    quantized_model: Any = None

    def save(
        self,
        out_dir: str | os.PathLike[str],
        name: str = "model",
        *,
        bundle_samples: Sequence[Sequence[Any]] | None = None,
    ) -> Path:
        """Write `<name>.pte`, `<name>.report.json` and `selected_operators.yaml` (the program's
        operators for a selective firmware build) into out_dir; returns the .pte path.
        bundle_samples: also write `<name>.bpte`, the program with these inputs as test cases.

        Each file is written to a temporary name and renamed, so an interrupted
        save never leaves a truncated program that looks valid.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        pte_path = out / f"{name}.pte"
        _write_atomically(pte_path, self.pte_bytes)
        if bundle_samples is not None:
            from torchmcu.pte.bundled import serialize_bundled

            _write_atomically(out / f"{name}.bpte", serialize_bundled(self.bundle(bundle_samples)))
        _write_atomically(
            out / f"{name}.report.json", json.dumps(self.report, indent=2).encode() + b"\n"
        )
        from torchmcu.selective.oplist import dumps, from_program

        oplist = dumps(from_program(self.program, name)).encode()
        _write_atomically(out / "selected_operators.yaml", oplist)
        return pte_path

    def bundle(self, samples: Sequence[Sequence[Any]]) -> Any:
        """A BundledProgram (torchmcu.pte.bundled): one test case per sample, expected outputs
        from the host runtime (the program's own integer semantics)."""
        from torchmcu.pte.bundled import bundle

        return bundle(self.pte_bytes, samples, io_quant=self.report.get("inputs"))


def export(
    model: Any,
    example_inputs: tuple[Any, ...],
    *,
    calibration: Iterable[tuple[Any, ...]] | Sequence[tuple[Any, ...]],
    board: str = "corstone-300",
    per_channel: bool = True,
    int8_io: bool = False,
    observer: str = "minmax",
) -> ExportedModel:
    """Quantize `model` to int8 with PT2E, lower it to Cortex-M kernels and plan its memory.

    calibration: samples shaped like example_inputs (a list of tuples or any iterable of tuples);
    an empty calibration set is an error. int8_io: program inputs and outputs stay int8 instead of
    being quantized/dequantized inside the program. observer: how activation ranges are
    calibrated, "minmax" (default) or "histogram" (what ExecuTorch's Cortex-M quantizer uses).
    """
    from torchmcu.lower import lower_to_program
    from torchmcu.pte.writer import serialize
    from torchmcu.quantize import quantize

    target = get_board(board)
    started = time.perf_counter()
    quantized = quantize(
        model, example_inputs, calibration, per_channel=per_channel, observer=observer
    )
    calibrated = time.perf_counter()
    program, lowering_report = lower_to_program(quantized, example_inputs, int8_io=int8_io)
    pte = serialize(program)
    finished = time.perf_counter()

    report: dict[str, Any] = dict(lowering_report.to_dict())
    report.update(
        board=target.name,
        pte_bytes=len(pte),
        seconds_quantize_and_calibrate=round(calibrated - started, 3),
        seconds_lower_and_serialize=round(finished - calibrated, 3),
    )
    target.check_fits(arena_bytes=report["arena_bytes"], program_bytes=len(pte))
    return ExportedModel(
        program=program, pte_bytes=pte, board=target, report=report, quantized_model=quantized
    )


def run_on_host(pte: str | os.PathLike[str] | bytes, inputs: Sequence[Any]) -> list[np.ndarray]:
    """Run a .pte with the C runtime built into torchmcu._native (the firmware's own sources)."""
    from torchmcu import native

    data = pte if isinstance(pte, bytes) else Path(pte).read_bytes()
    arrays = [np.ascontiguousarray(_to_numpy(x)) for x in inputs]
    return native.run_program(data, arrays)


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # a torch.Tensor, without importing torch here
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.partial")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
