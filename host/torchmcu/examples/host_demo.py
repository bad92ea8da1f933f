"""Export an example model to a .pte and run it on the host build of the C runtime.

    python -m torchmcu.examples.host_demo [--model ds_cnn] [--out out/]

Prints how the integer program agrees with torchao's fake-quantized model and
with the Python reference semantics, input by input.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import torchmcu
from torchmcu.examples import models
from torchmcu.reference.interpreter import run_program as reference_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ds_cnn", choices=sorted(models.MODELS))
    parser.add_argument("--out", default="out")
    parser.add_argument("--inputs", type=int, default=8, help="number of test inputs")
    args = parser.parse_args(argv)

    model, example = models.build(args.model)
    calibration = models.calibration(args.model, 32, seed=1)
    print(f"[1/3] quantizing and lowering {args.model} ({len(calibration)} calibration samples)")
    started = time.perf_counter()
    exported = torchmcu.export(model, example, calibration=calibration, board="corstone-300")
    path = exported.save(args.out)
    r = exported.report
    print(f"      {time.perf_counter() - started:.1f} s -> {path} ({len(exported.pte_bytes):,} bytes)")
    print(f"      {r['instructions']} kernel calls: " + ", ".join(f"{n}x {op}" for op, n in r["op_counts"].items()))
    print(f"      arena {r['arena_bytes']:,} bytes (lower bound {r['arena_lower_bound']:,})")

    print(f"[2/3] running {args.inputs} inputs on the C runtime (host build of the firmware sources)")
    pte = path.read_bytes()
    rows = []
    for i, (x,) in enumerate(models.calibration(args.model, args.inputs, seed=1000)):
        (ours,) = torchmcu.run_on_host(pte, [x])
        (ref,) = reference_run(exported.program, [x.numpy()])
        with torch.no_grad():
            fake_quant = exported.quantized_model(x).numpy()
        rows.append((i, int(ours.argmax()), int(fake_quant.argmax()), np.array_equal(ours, ref),
                     float(np.abs(ours - fake_quant).max())))

    print("[3/3] results")
    print("      input  class(C runtime)  class(fake-quant)  bit-exact vs reference  max |diff|")
    for i, ours_cls, fq_cls, exact, diff in rows:
        print(f"      {i:5d}  {ours_cls:16d}  {fq_cls:17d}  {str(exact):>22s}  {diff:10.5f}")
    ok = all(row[3] for row in rows)
    print("C runtime output is bit-exact with the reference semantics" if ok else "MISMATCH against the reference")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
