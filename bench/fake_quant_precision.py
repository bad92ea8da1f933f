"""How far torchao's fake-quantized model is from itself: its float32 run against the same
graph evaluated in float64, beside our int8 program against both (issue 17's "at least 30 dB
against prog.quantized_model").

The fake-quantized model (`ExportedModel.quantized_model`, torchao's convert_pt2e output)
computes each op in float32 between quantize/dequantize pairs. Where an exact result lies
within float32 noise of a rounding boundary, that run and exact arithmetic round to
neighbouring steps, and a deep network with random weights carries the one-step difference to
its output. This script evaluates the same graph with every quantize/dequantize replaced by its
formula in float64 (round half to even of x / scale, plus the zero point, clamped; (q - zp) *
scale), parameters cast to float64, everything else unchanged, and prints per model and input
the SQNR (dB) of:
  ours-fq32   our int8 program (host runtime) against the float32 fake-quant model,
  ours-fq64   our int8 program against the float64 evaluation,
  fq32-fq64   torchao's float32 run against the float64 evaluation (the reference's own noise).
"exact" is 250 dB and above (bit-exact outputs; 150 dB is float64 noise on equal steps).

Usage:  python bench/fake_quant_precision.py [--models NAME ...] [--inputs 6]
        (default: the 12 example architectures of torchmcu.examples.architectures)
"""

from __future__ import annotations

import argparse
import copy
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))  # works without an installed torchmcu too

import torchmcu
from torchmcu.examples import models


def _quantize(x, scale, zero_point, qmin, qmax, dtype):  # type: ignore[no-untyped-def]
    return torch.clamp(torch.round(x / scale) + zero_point, qmin, qmax).to(dtype)


def _dequantize(x, scale, zero_point, qmin, qmax, dtype, **_):  # type: ignore[no-untyped-def]
    return (x.to(torch.float64) - zero_point) * scale


def _dequantize_per_channel(x, scales, zero_points, axis, qmin, qmax, dtype, **_):  # type: ignore[no-untyped-def]
    shape = [1] * x.dim()
    shape[axis] = -1
    zp = zero_points.to(torch.float64).reshape(shape)
    return (x.to(torch.float64) - zp) * scales.to(torch.float64).reshape(shape)


def float64_graph(fake_quant: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The fake-quantized graph with its quantize/dequantize ops evaluated in float64."""
    qd = torch.ops.quantized_decomposed
    formulas = {
        qd.quantize_per_tensor.default: _quantize,
        qd.dequantize_per_tensor.default: _dequantize,
        qd.dequantize_per_channel.default: _dequantize_per_channel,
    }
    gm = copy.deepcopy(fake_quant)
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in formulas:
            node.target = formulas[node.target]
        elif node.op == "call_function" and "quantized_decomposed" in str(node.target):
            raise SystemExit(f"no float64 formula for {node.target}")
    gm = gm.to(torch.float64)  # float parameters and buffers; int8 weights keep their dtype
    gm.recompile()
    return gm


def sqnr_db(reference: np.ndarray, test: np.ndarray) -> float:
    ref = np.asarray(reference, np.float64)
    err = ((ref - np.asarray(test, np.float64)) ** 2).sum()
    return float(10 * np.log10((ref**2).sum() / max(err, 1e-30)))


def _single(out: object) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out  # type: ignore[return-value,index]


def _db(v: float) -> str:
    return "exact" if v >= 250 else f"{v:.1f}"


def bench(name: str, n_inputs: int) -> tuple[int, int, int]:
    """Print one line per input; return how many inputs were (ours == fq32, ours == fq64,
    fq32 == fq64) to the output step."""
    model, example = models.build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = torchmcu.export(model, example, calibration=models.calibration(name, 16), strict=True)
    fq32, fq64 = exp.quantized_model, float64_graph(exp.quantized_model)
    scale = exp.report["outputs"][0]["scale"]
    counts = [0, 0, 0]
    with torch.no_grad():
        for i, sample in enumerate(models.calibration(name, n_inputs, seed=9)):
            a = _single(fq32(*sample)).numpy()
            b = _single(fq64(*(x.double() for x in sample))).numpy()
            (ours,) = torchmcu.run_on_host(exp.pte_bytes, [x.numpy() for x in sample])
            pairs = ((a, ours), (b, ours), (b, a))
            for j, (ref, got) in enumerate(pairs):
                counts[j] += int(not np.any(np.round((ref - got) / scale)))
            figures = "  ".join(f"{_db(sqnr_db(r, g)):>6}" for r, g in pairs)
            print(f"{name:20s} {i:5d}  {figures}", flush=True)
    return counts[0], counts[1], counts[2]


def main(argv: Sequence[str] | None = None) -> int:
    from torchmcu.examples.architectures import ARCHITECTURES

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(ARCHITECTURES))
    ap.add_argument("--inputs", type=int, default=6, help="test inputs per model (seed 9)")
    args = ap.parse_args(argv)
    print(f"{'model':20s} input  ours-fq32 ours-fq64 fq32-fq64 (SQNR dB)")
    totals = {name: bench(name, args.inputs) for name in args.models}
    print(f"\ninputs bit-exact at the output step, of {args.inputs} each:")
    print(f"{'model':20s} ours=fq32 ours=fq64 fq32=fq64")
    for name, (x, y, z) in totals.items():
        print(f"{name:20s} {x:9d} {y:9d} {z:9d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
