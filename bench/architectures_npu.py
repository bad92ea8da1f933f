"""The 12 example architectures on the Ethos-U NPUs: one delegate, all MACs, bit-exact.

For each (architecture, NPU) it quantizes the model once (calibration(name, 8)), exports it
CPU-only and with npu=..., and prints the number of EthosUBackend delegates, the fraction of the
MACs on the NPU, and whether run_on_host of the saved NPU program (the delegates' TOSA graphs
on the TOSA reference model) equals the reference interpreter on the CPU program, on a few
inputs. Exit status 1 if any model is not one delegate with 100 % of the MACs, or not
bit-exact; issue 17's acceptance point "each model on ethos-u55-128 and ethos-u85-256".

Usage:  python bench/architectures_npu.py [--models NAME ...] [--npus ethos-u55-128 ...]
        [--inputs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))  # works without an installed torchmcu too

import numpy as np
import torchmcu
from torchmcu.api import export_quantized
from torchmcu.examples import models
from torchmcu.examples.architectures import ARCHITECTURES
from torchmcu.npu.config import resolve_target
from torchmcu.pte.reader import parse
from torchmcu.quantize import quantize
from torchmcu.reference.interpreter import run_program

NPUS = ("ethos-u55-128", "ethos-u85-256")
BOARD = {"u55": "corstone-300", "u65": "corstone-300", "u85": "corstone-320"}


def check(name: str, npus: Sequence[str], n_inputs: int, work: Path) -> list[tuple[str, ...]]:
    """One row per NPU: (model, npu, delegates, MAC %, bit-exact, seconds, note)."""
    model, example = models.build(name)
    quantized = quantize(model, example, models.calibration(name, 8))
    inputs = [[t.numpy() for t in s] for s in models.calibration(name, n_inputs, seed=7)]
    rows = []
    for npu in npus:
        board = BOARD[npu.split("-")[1]]
        started = time.perf_counter()
        try:
            cpu = export_quantized(quantized, board=board)
            exported = export_quantized(
                quantized, board=board, npu_target=resolve_target(board, npu)
            )
            plan = parse(exported.pte_bytes).execution_plan[0]
            delegates = [d.id for d in plan.delegates]
            fraction = exported.report["npu"]["macs"]["fraction"]
            path = exported.save(work / f"{name}_{npu}")
            exact = all(
                all(
                    np.array_equal(got, want)
                    for got, want in zip(
                        torchmcu.run_on_host(path, x), run_program(cpu.program, x), strict=True
                    )
                )
                for x in inputs
            )
            note = "" if delegates == ["EthosUBackend"] else f"delegates: {delegates}"
            rows.append(
                (name, npu, str(len(delegates)), f"{100 * fraction:.1f}", "yes" if exact else "NO",
                 f"{time.perf_counter() - started:.1f}", note)
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001  (report it, go on with the others)
            rows.append(
                (name, npu, "-", "-", "-", f"{time.perf_counter() - started:.1f}",
                 f"{type(exc).__name__}: {exc}"[:160])
            )  # fmt: skip
    return rows


def passed(row: tuple[str, ...]) -> bool:
    return row[2] == "1" and row[3] == "100.0" and row[4] == "yes" and not row[6]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(ARCHITECTURES))
    ap.add_argument("--npus", nargs="+", default=list(NPUS))
    ap.add_argument("--inputs", type=int, default=3, help="inputs compared per model")
    args = ap.parse_args(argv)
    print(f"{'model':<20} {'npu':<14} {'deleg':>5} {'MACs%':>6} {'exact':>5} {'s':>6}  notes")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="arch-npu-") as tmp:
        for name in args.models:
            for row in check(name, args.npus, args.inputs, Path(tmp)):
                print(f"{row[0]:<20} {row[1]:<14} {row[2]:>5} {row[3]:>6} {row[4]:>5} "
                      f"{row[5]:>6}  {row[6]}", flush=True)  # fmt: skip
                failed += not passed(row)
    print(f"{failed} of {len(args.models) * len(args.npus)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
