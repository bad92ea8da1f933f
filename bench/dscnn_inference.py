"""Whole DS-CNN inference on QEMU vs the sum of CMSIS-NN's figures for its layers (issue 4).

    python bench/dscnn_inference.py [--board corstone-300] [--build-dir build/bench-dscnn]
                                    [--json out.json]

Exports the DS-CNN example (torchmcu.examples.models.ds_cnn) followed by a softmax, as the
MVE issue's DS-CNN ends with one, builds the runner twice for the board - a normal image
and one with the executor's per-kernel profiling hook (TORCHMCU_PROFILE) - and runs both on
QEMU mps3-an547 with the instruction-counting plugin (tools/qemu_icount):

- the whole-inference figure comes from the normal image (runner markers around
  tm_method_execute, default input, float in/out: quantize and dequantize included);
- the per-operator split comes from the profiled image (one count per kernel call, from its
  mark to the next; the executor's entry/exit and the bench markers are the "executor" row);
- the marker overhead is the profiled inference minus the normal one.

The reference is the sum of issue 4's CMSIS-NN figures for DS-CNN's layers; the target is
at most 1.05x that sum. Layers of our program without a CMSIS-NN row (quantize, pad,
dequantize) are listed; their instructions count against us.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))  # works without an installed torchmcu too

# Issue 4's reference figures (CMSIS-NN 99f736a6, -Ofast, GCC 12.2, Cortex-M55, QEMU 7.2).
CMSIS_NN = {
    "conv_first_dscnn": 289_049,
    "dwconv3x3_dscnn": 166_882,
    "conv1x1_dscnn": 202_883,
    "avgpool": 9_359,
    "fc_small": 676,
    "softmax 1x10": 5_779,
}
# DS-CNN's layers: first conv, four depthwise + pointwise blocks, pool, linear, softmax.
DSCNN_LAYERS = {
    "conv_first_dscnn": 1,
    "dwconv3x3_dscnn": 4,
    "conv1x1_dscnn": 4,
    "avgpool": 1,
    "fc_small": 1,
    "softmax 1x10": 1,
}
TARGET_RATIO = 1.05


def cmsis_sum() -> int:
    return sum(CMSIS_NN[row] * n for row, n in DSCNN_LAYERS.items())


def cmsis_row(op: str, seen: dict[str, int]) -> str | None:
    """The issue-4 row of a kernel call of our DS-CNN program (None: no CMSIS-NN row)."""
    name = op.split("::")[-1].split(".")[0]
    seen[name] = seen.get(name, 0) + 1
    if name == "quantized_conv2d":
        return "conv_first_dscnn" if seen[name] == 1 else "conv1x1_dscnn"
    return {
        "quantized_depthwise_conv2d": "dwconv3x3_dscnn",
        "quantized_avg_pool2d": "avgpool",
        "quantized_linear": "fc_small",
        "softmax": "softmax 1x10",
        "quantized_softmax": "softmax 1x10",
    }.get(name)


def dscnn_with_softmax() -> tuple[Any, tuple[Any, ...], list[tuple[Any, ...]]]:
    import torch
    from torch import nn
    from torchmcu.examples import models

    model, example = models.build("ds_cnn")
    wrapped = nn.Sequential(model, nn.Softmax(dim=-1)).eval()
    with torch.no_grad():
        wrapped(*example)
    return wrapped, example, models.calibration("ds_cnn", 8)


def measure(board: str, build_dir: Path) -> dict[str, Any]:
    import torchmcu
    from torchmcu import device
    from torchmcu.device.icount import count_instructions, profile_instructions

    model, example, calibration = dscnn_with_softmax()
    exported = torchmcu.export(model, example, calibration=calibration, board=board)
    with tempfile.TemporaryDirectory() as tmp:
        pte = exported.save(tmp, "ds_cnn_softmax")
        plain = device.build(pte, board, build_dir / f"{board}-plain")
        (inference,) = count_instructions(plain.elf, board, timeout=600)["regions"]["inference"]
        profiled = device.build(pte, board, build_dir / f"{board}-profile", profile=True)
        prof = profile_instructions(profiled.elf, board, pte, timeout=600)
    (kernels,) = prof["kernels"]
    (profiled_inference,) = prof["inference"]
    (executor,) = prof["executor"]
    seen: dict[str, int] = {}
    rows = [dict(k, cmsis_row=cmsis_row(k["op"], seen)) for k in kernels]
    return {
        "board": board,
        "inference": inference,
        "profiled_inference": profiled_inference,
        "marker_overhead": profiled_inference - inference,
        "marks": len(kernels) + 1,
        "executor": executor,
        "kernels": rows,
        "cmsis_nn_sum": cmsis_sum(),
    }


def report(r: dict[str, Any]) -> None:
    total, ref = r["inference"], r["cmsis_nn_sum"]
    print(
        f"DS-CNN + softmax, {r['board']} runner on QEMU mps3-an547, one inference (default input)"
    )
    print(f"whole inference (normal image):      {total:>11,} instructions")
    print(
        f"whole inference (profiled image):    {r['profiled_inference']:>11,} "
        f"(marker overhead {r['marker_overhead']:,} = {r['marks']} marks, "
        f"{r['marker_overhead'] / r['marks']:.1f} each)"
    )
    print(
        f"sum of CMSIS-NN figures of its layers: {ref:>9,}  ("
        + " + ".join(
            f"{n} x {row} {CMSIS_NN[row]:,}" if n > 1 else f"{row} {CMSIS_NN[row]:,}"
            for row, n in DSCNN_LAYERS.items()
        )
        + ")"
    )
    verdict = "meets" if total <= TARGET_RATIO * ref else "misses"
    print(
        f"ratio: {total / ref:.3f}x  ({verdict} the {TARGET_RATIO:.2f}x target, "
        f"{TARGET_RATIO * ref:,.0f} instructions)\n"
    )

    prof_total = r["profiled_inference"]
    print("per kernel call (profiled image; a call runs from its mark to the next: argument")
    print("checks, the kernel, the executor loop; shares of the profiled inference)")
    print(
        f"{'#':>3} {'operator':<42} {'instructions':>12} {'share':>7} {'CMSIS-NN row':<17} "
        f"{'CMSIS-NN':>9} {'ratio':>6}"
    )
    for k in r["kernels"]:
        row = k["cmsis_row"]
        ref_n = CMSIS_NN[row] if row else None
        print(
            f"{k['instruction']:>3} {k['op']:<42} {k['instructions']:>12,} "
            f"{k['instructions'] / prof_total:>6.1%} {row or '(none)':<17} "
            + (f"{ref_n:>9,} {k['instructions'] / ref_n:>6.2f}" if ref_n else f"{'-':>9} {'-':>6}")
        )
    print(
        f"{'':>3} {'executor entry/exit + bench markers':<42} {r['executor']:>12,} "
        f"{r['executor'] / prof_total:>6.1%}"
    )

    by_op: dict[str, list[int]] = {}
    for k in r["kernels"]:
        by_op.setdefault(k["op"], []).append(k["instructions"])
    print(f"\nper operator{'':<31} {'calls':>5} {'instructions':>12} {'share':>7}")
    for op, ns in sorted(by_op.items(), key=lambda kv: -sum(kv[1])):
        print(f"    {op:<42} {len(ns):>5} {sum(ns):>12,} {sum(ns) / prof_total:>6.1%}")
    unmatched = sorted({k["op"] for k in r["kernels"] if k["cmsis_row"] is None})
    extra = sum(k["instructions"] for k in r["kernels"] if k["cmsis_row"] is None)
    print(
        f"\nno CMSIS-NN row: {', '.join(unmatched) or '(none)'} - {extra:,} instructions "
        f"({extra / prof_total:.1%}) counted against us"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="corstone-300", choices=("corstone-300", "qemu-an547"))
    parser.add_argument("--build-dir", default=str(ROOT / "build" / "bench-dscnn"))
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = measure(args.board, Path(args.build_dir))
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
