"""Seed corpora for the fuzz targets, generated from real exported programs.

Writes into OUT:
  pte/       a .pte of every MLPerf Tiny example model (seeds of fuzz_pte_load, fuzz_method_init)
  programs/  small real programs that fuzz_run loads and runs with the real kernels
  run/       fuzz_run seeds: one per program, its index then calibration-like input bytes
  plan/      fuzz_plan seeds: one per program, its index, no tensor moves, then input bytes
  bpte/      bundled programs (.bpte) of the small programs, two test cases each (fuzz_bundled)
  blob/      EthosUBackend delegate blobs: hand-packed ones and the Vela blobs of small CNNs
             exported for ethos-u55-128 and ethos-u85-256 (fuzz_ethos_u_blob); those programs
             also join pte/

Usage: python tools/fuzz/make_corpus.py OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torchmcu.api import export
from torchmcu.examples import models


class _MixedOps(nn.Module):
    """Tiny net covering the kernels the MLPerf models do not all reach (pool, add, mul, softmax)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(2)
        self.fc = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = y + self.dw(y)
        y = self.avg(self.pool(y * y))
        return torch.softmax(self.fc(torch.flatten(y, 1)), dim=1)


class _TinyLSTM(nn.Module):
    """nn.LSTM(4, 4) over 3 steps returning the whole sequence: slice_copy of the steps and
    gates, int8 tables, mul/add, and the aten::cat of the output sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 4, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]


def _small_programs() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...], list]]:
    gen = torch.Generator().manual_seed(7)
    progs = {}
    for name in ("mlp", "small_cnn"):
        model, example = models.build(name)
        progs[name] = (model, example, models.calibration(name, 4))
    torch.manual_seed(3)
    mixed = _MixedOps().eval()
    example = (torch.rand(1, 3, 8, 8, generator=gen) * 2 - 1,)
    progs["mixed_ops"] = (
        mixed,
        example,
        [(torch.rand(1, 3, 8, 8, generator=gen) * 2 - 1,) for _ in range(4)],
    )
    lstm = _TinyLSTM().eval()
    progs["tiny_lstm"] = (
        lstm,
        (torch.randn(1, 3, 4, generator=gen),),
        [(torch.randn(1, 3, 4, generator=gen),) for _ in range(4)],
    )
    return progs


def _synthetic_blobs() -> dict[str, bytes]:
    """EthosUBackend blobs of hand-chosen shapes (one input, two inputs, no weights)."""
    from torchmcu.npu.blob import VelaTensor, pack_blob

    cmd = b"COP1" + bytes(28)
    one = [VelaTensor([1, 1, 4, 4, 4, 8], 1, 0, 1)]
    two = [VelaTensor([1, 1, 1, 2, 2, 3], 1, 0, 1), VelaTensor([1, 1, 1, 1, 1, 4], 1, 16, 1)]
    return {
        "one_io": pack_blob(
            cmd, bytes(range(48)), 1024, one, [VelaTensor([1, 1, 1, 1, 1, 10], 1, 512, 1)]
        ),
        "two_in": pack_blob(cmd, b"", 48, two, [VelaTensor([1, 1, 1, 1, 1, 4], 1, 32, 1)]),
        "int32_out": pack_blob(
            cmd, bytes(16), 64, one[:0], [VelaTensor([1, 1, 1, 1, 2, 2], 4, 0, 1)]
        ),
    }


def _npu_programs(out: Path) -> None:
    """Real EthosUBackend programs (Vela blobs) of the small CNNs: their .pte as loader seeds,
    their blobs as fuzz_ethos_u_blob seeds."""
    from torchmcu.pte.reader import parse

    small = _small_programs()
    for board, npu in (("corstone-300", "ethos-u55-128"), ("corstone-320", "ethos-u85-256")):
        for name in ("small_cnn", "mixed_ops"):
            model, example, calib = small[name]
            exported = export(model, example, calibration=calib, board=board, npu=npu)
            tag = f"{name}_{npu.replace('-', '_')}"
            (out / "pte" / f"npu_{tag}.pte").write_bytes(exported.pte_bytes)
            for k, blob in enumerate(parse(exported.pte_bytes).segments_data):
                (out / "blob" / f"{tag}_{k}").write_bytes(blob)


def main(out: Path) -> None:
    for sub in ("pte", "programs", "run", "plan", "bpte", "blob"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for name, blob in _synthetic_blobs().items():
        (out / "blob" / f"synthetic_{name}").write_bytes(blob)
    _npu_programs(out)
    for name in models.MLPERF_TINY:
        model, example = models.build(name)
        exported = export(model, example, calibration=models.calibration(name, 2))
        (out / "pte" / f"{name}.pte").write_bytes(exported.pte_bytes)
    small = _small_programs()
    for index, name in enumerate(sorted(small)):  # fuzz_run/fuzz_plan number programs by file name
        model, example, calib = small[name]
        exported = export(model, example, calibration=calib)
        (out / "programs" / f"{name}.pte").write_bytes(exported.pte_bytes)
        (out / "pte" / f"small_{name}.pte").write_bytes(exported.pte_bytes)
        for k, sample in enumerate(calib[:2]):
            raw = b"".join(
                np.ascontiguousarray(t.numpy(), dtype=np.float32).tobytes() for t in sample
            )
            (out / "run" / f"{name}_{k}").write_bytes(bytes([index]) + raw)
            (out / "plan" / f"{name}_{k}").write_bytes(bytes([index, 0]) + raw)
        (out / "run" / f"{name}_zeros").write_bytes(bytes([index]))
        if hasattr(exported, "bundle"):  # the .bpte writer (torchmcu.pte.bundled)
            from torchmcu.pte.bundled import serialize_bundled

            bundled = serialize_bundled(exported.bundle([list(s) for s in calib[:2]]))
            (out / "bpte" / f"{name}.bpte").write_bytes(bundled)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
