"""The twelve example architectures (torchmcu.examples.architectures), exported once per test
run for the files that check them (test_architectures.py on the host, test_architectures_qemu.py
on QEMU): strict CPU-only int8 export for corstone-300, saved with two test inputs (not the
calibration ones) and what torchao's fake-quantized model of the same export and the float
model give on them. Saved under build/, made by the first xdist worker that asks."""

from __future__ import annotations

import json
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torchmcu
from conftest import ROOT, once_per_run
from torchmcu.examples import models
from torchmcu.examples.architectures import ARCHITECTURES
from torchmcu.lower import FloatFallbackWarning

CACHE = ROOT / "build" / "test-architectures"
NAMES = tuple(ARCHITECTURES)
CALIBRATION = 16
TEST_INPUTS = 2


@dataclass(frozen=True)
class Exported:
    name: str
    pte: Path
    inputs: list[list[np.ndarray]]  # per sample, per program input
    fake_quant: list[np.ndarray]  # per sample, the (single) output
    float32: list[np.ndarray]
    output_scale: float
    seconds: float

    @property
    def pte_bytes(self) -> bytes:
        return self.pte.read_bytes()


def _as_tuple(out: object) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)  # type: ignore[return-value]


def _export(name: str, out: Path) -> None:

    model, example = models.build(name)
    calibration = models.calibration(name, CALIBRATION)
    tests = models.calibration(name, TEST_INPUTS, seed=9)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FloatFallbackWarning)
        exp = torchmcu.export(model, example, calibration=calibration, strict=True)
    seconds = time.perf_counter() - start
    exp.save(out, name=name)
    arrays: dict[str, np.ndarray] = {}
    with torch.no_grad():
        for s, sample in enumerate(tests):
            for i, x in enumerate(sample):
                arrays[f"input{s}_{i}"] = x.numpy()
            (arrays[f"fake_quant{s}"],) = (
                t.numpy() for t in _as_tuple(exp.quantized_model(*sample))
            )
            (arrays[f"float{s}"],) = (t.numpy() for t in _as_tuple(model(*sample)))
    np.savez(out / "samples.npz", **arrays)
    meta = {"output_scale": exp.report["outputs"][0]["scale"], "seconds": seconds}
    (out / "meta.json").write_text(json.dumps(meta))


def _load(name: str, out: Path) -> Exported:
    meta = json.loads((out / "meta.json").read_text())
    with np.load(out / "samples.npz") as z:
        inputs = [
            [z[f"input{s}_{i}"] for i in range(sum(k.startswith(f"input{s}_") for k in z.files))]
            for s in range(TEST_INPUTS)
        ]
        fake_quant = [z[f"fake_quant{s}"] for s in range(TEST_INPUTS)]
        float32 = [z[f"float{s}"] for s in range(TEST_INPUTS)]
    return Exported(name, out / f"{name}.pte", inputs, fake_quant, float32,
                    meta["output_scale"], meta["seconds"])  # fmt: skip


def exported_architectures() -> dict[str, Exported]:
    """name -> its export, made once per run (about a minute for all twelve)."""
    with once_per_run(CACHE) as make:
        if make:
            shutil.rmtree(CACHE, ignore_errors=True)
            for name in NAMES:
                _export(name, CACHE / name)
    return {name: _load(name, CACHE / name) for name in NAMES}
