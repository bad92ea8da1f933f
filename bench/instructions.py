"""Executed instructions per inference of the MLPerf Tiny models on QEMU (Cortex-M55).

    python bench/instructions.py [--models ds_cnn resnet8 ...] [--board corstone-300]
                                 [--build-dir build/bench-instructions] [--json out.json]

For each model: export for the board (CPU path), build the runner, run it once on QEMU
mps3-an547 with the counting plugin (tools/qemu_icount) and print the instructions
between the runner's markers around tm_method_execute (one inference on the runner's
default input, including quantize/dequantize of float inputs and outputs), the MACs of
the model's convolutions and linear layers, and instructions per MAC.

MACs come from the float PyTorch model (forward hooks on Conv2d/Linear: output elements
x input channels per group x kernel area, or x in_features), so they are independent of
the program and the kernels. QEMU has no timing model: instructions, not cycles.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))  # works without an installed torchmcu too


@dataclass
class Row:
    model: str
    instructions: int  # one inference, between the markers
    total: int  # the whole run: reset, load, verify, init, inference, output printing
    macs: int

    @property
    def per_mac(self) -> float:
        return self.instructions / self.macs if self.macs else float("nan")


def count_macs(model: Any, example: tuple[Any, ...]) -> int:
    """Multiply-accumulates of every convolution, Linear and GRU/LSTM in one forward pass of
    the float model."""
    import math

    import torch
    from torch import nn

    total = 0

    def hook(module: nn.Module, inputs: Any, output: Any) -> None:
        nonlocal total
        if isinstance(module, nn.ConvTranspose2d):  # every input tap scatters a kernel
            area = math.prod(module.kernel_size)
            total += inputs[0].numel() * (module.out_channels // module.groups) * area
        elif isinstance(module, (nn.Conv1d, nn.Conv2d)):
            area = math.prod(module.kernel_size)
            total += output.numel() * (module.in_channels // module.groups) * area
        elif isinstance(module, (nn.GRU, nn.LSTM)):  # gates x (input + hidden) per step
            gates = 3 if isinstance(module, nn.GRU) else 4
            steps = inputs[0].shape[1 if module.batch_first else 0]
            size, hidden = module.input_size, module.hidden_size
            directions = 2 if module.bidirectional else 1
            for _ in range(module.num_layers):
                total += steps * gates * hidden * (size + hidden) * directions
                size = hidden * directions
        else:
            total += output.numel() * module.in_features

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d, nn.Linear, nn.GRU, nn.LSTM))
    ]
    try:
        with torch.no_grad():
            model(*example)
    finally:
        for h in handles:
            h.remove()
    return total


def measure(name: str, board: str, build_dir: Path, calibration: int) -> Row:
    import torchmcu
    from torchmcu import device
    from torchmcu.device.icount import count_instructions
    from torchmcu.examples import models

    model, example = models.build(name)
    macs = count_macs(model, example)
    exported = torchmcu.export(
        model, example, calibration=models.calibration(name, calibration), board=board
    )
    with tempfile.TemporaryDirectory() as tmp:
        pte = exported.save(tmp, name)
        image = device.build(pte, board, build_dir / board)
        counts = count_instructions(image.elf, board, timeout=600)
    (inference,) = counts["regions"]["inference"]
    return Row(model=name, instructions=inference, total=counts["total"], macs=macs)


def main(argv: list[str] | None = None) -> int:
    from torchmcu.examples import models

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(models.MLPERF_TINY))
    parser.add_argument("--board", default="corstone-300", choices=("corstone-300", "qemu-an547"))
    parser.add_argument("--build-dir", default=str(ROOT / "build" / "bench-instructions"))
    parser.add_argument("--calibration", type=int, default=8)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)

    print(f"{args.board} runner on QEMU mps3-an547, one inference (default input)")
    print(f"{'model':<20} {'instructions':>13} {'MACs':>12} {'instr/MAC':>10} {'whole run':>13}")
    rows = []
    for name in args.models:
        started = time.perf_counter()
        row = measure(name, args.board, Path(args.build_dir), args.calibration)
        rows.append(row)
        print(
            f"{row.model:<20} {row.instructions:>13,} {row.macs:>12,} {row.per_mac:>10.2f} "
            f"{row.total:>13,}   ({time.perf_counter() - started:.1f} s)",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps([asdict(r) | {"per_mac": r.per_mac} for r in rows], indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
