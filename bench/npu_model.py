"""Ethos-U functional model benchmark (U55, U65, U85): how long the model takes per model, against the TOSA
reference model on the same delegate calls, and whether they agree bit for bit.

For each model it prints the export time, the seconds the functional model spent executing
Vela's command streams (all delegate calls of all samples), the seconds the TOSA reference
model spent on the same calls, the NPU operations executed, the model's MAC count and Vela's
nn_macs, and "bit-exact" or the mismatches.

Usage:  python bench/npu_model.py [--models ds_cnn resnet8 ...] [--npu ethos-u55-128]
        [--samples 3] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from torchmcu.api import export_quantized
from torchmcu.examples import models
from torchmcu.npu.config import resolve_target
from torchmcu.npu.model_check import compare
from torchmcu.quantize import quantize

DEFAULT_MODELS = ("ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder", "mobilenet_v2_like")
# also: "lstm" (examples.models), which the U85 runs whole


def run(name: str, npu: str, samples: int, memory_mode: str | None = None) -> dict[str, object]:
    model, example = models.build(name)
    graph = quantize(model, example, models.calibration(name, 2))
    start = time.perf_counter()
    # corstone-300 offers U55-128/-256, corstone-320 the U85-256; other sizes get Vela's
    # defaults without a board
    u85 = npu == "ethos-u85-256"
    board = "corstone-300" if npu in ("ethos-u55-128", "ethos-u55-256") else None
    target = resolve_target("corstone-320" if u85 else board, npu, memory_mode=memory_mode)
    on_board = {"board": "corstone-320"} if u85 else {}
    exported = export_quantized(graph, npu_target=target, **on_board)
    export_s = time.perf_counter() - start
    xs = [
        [np.ascontiguousarray(t.numpy()) for t in s]
        for s in models.calibration(name, samples, seed=7)
    ]
    c = compare(exported, xs, macs_per_cc=int(npu.rsplit("-", 1)[1]))
    return {
        "model": name,
        "npu": npu,
        "export_s": round(export_s, 2),
        "calls": c.calls,
        "model_s": round(c.model_seconds, 3),
        "tosa_s": round(c.tosa_seconds, 3),
        "ops": c.ops,
        "macs": c.macs,
        "vela_nn_macs": c.vela_macs,
        "result": "bit-exact" if not c.mismatches else "; ".join(c.mismatches),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--npu", default="ethos-u55-128")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument(
        "--memory-mode", help="Vela memory mode (default: the board's or the family's)"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [run(m, args.npu, args.samples, args.memory_mode) for m in args.models]
    header = f"{'model':<20}{'export s':>9}{'calls':>6}{'model s':>9}{'TOSA s':>8}{'ops':>6}"
    print(header + f"{'MACs':>11}{'nn_macs':>11}  result")
    for r in rows:
        print(
            f"{r['model']:<20}{r['export_s']:>9}{r['calls']:>6}{r['model_s']:>9}{r['tosa_s']:>8}"
            f"{r['ops']:>6}{r['macs']:>11}{r['vela_nn_macs']:>11}  {r['result']}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
