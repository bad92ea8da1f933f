"""sha256 of the .pte torchmcu.export writes for the benchmark models, CPU-only and for the NPU.

    python bench/pte_hashes.py                        # ten lines: <sha256>  <model> <flow>
    python bench/pte_hashes.py --write bench/pte_hashes.txt
    python bench/pte_hashes.py --check bench/pte_hashes.txt  # exit 1 naming those that differ
    python bench/pte_hashes.py --models ds_cnn --flows cpu   # a subset (--check compares it only)
    python bench/pte_hashes.py --models lstm small_cnn mlp   # the other examples (not in the list)

The behaviour baseline for refactors that must not change the output (issue 16): the four MLPerf
Tiny models (ds_cnn, resnet8, mobilenet_v1_025, deep_autoencoder) and the MobileNetV2-like net
from torchmcu.examples, each exported for corstone-300 twice: CPU-only ("cpu") and with
npu="ethos-u55-128" ("u55-128", Vela-compiled EthosUBackend delegates). The .pte bytes are
hashed in memory (ExportedModel.pte_bytes); nothing is written but the hash list.

Deterministic by construction: the models come from torchmcu.examples.build(name) (seeded
weights, seed 0) and are calibrated with calibration(name, 16, seed=1), the samples
bench/export_bench.py and tests/test_models_e2e.py use; torch's global RNG is reseeded before
each export and torch runs on one thread, so the calibration ranges do not depend on the
machine's core count. Running it twice prints the same lines. The bytes do depend on the CPU:
torch's float kernels differ by instruction set, and the calibration ranges with them, so compare
lists made on one kind of machine (pte_hashes.txt; pte_hashes.amd-epyc.txt for an AMD EPYC) or
record a baseline on yours before a change.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))  # works without an installed torchmcu too

MODELS = ("ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder", "mobilenet_v2_like")
OTHER_MODELS = ("lstm", "small_cnn", "mlp")  # the other examples: slice_copy, table activations...
FLOWS = {"cpu": None, "u55-128": "ethos-u55-128"}  # flow name -> torchmcu.export(npu=...)
BOARD = "corstone-300"
CALIBRATION_SAMPLES = 16
CALIBRATION_SEED = 1


def pte_sha256(model_name: str, npu: str | None) -> str:
    """sha256 (hex) of the .pte bytes torchmcu.export produces for one example model."""
    import torch

    import torchmcu
    from torchmcu.examples import build, calibration

    torch.manual_seed(0)
    model, inputs = build(model_name)
    samples = calibration(model_name, CALIBRATION_SAMPLES, seed=CALIBRATION_SEED)
    exported = torchmcu.export(model, inputs, calibration=samples, board=BOARD, npu=npu)
    return hashlib.sha256(bytes(exported.pte_bytes)).hexdigest()


def line(digest: str, model_name: str, flow: str) -> str:
    return f"{digest}  {model_name} {flow}"


def read_list(path: Path) -> dict[tuple[str, str], str]:
    """(model, flow) -> sha256 from `<sha256>  <model> <flow>` lines (# starts a comment)."""
    saved: dict[tuple[str, str], str] = {}
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        text = text.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        if len(parts) != 3 or len(parts[0]) != 64:
            raise SystemExit(f"{path}:{number}: expected '<sha256>  <model> <flow>', got {text!r}")
        saved[(parts[1], parts[2])] = parts[0]
    return saved


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS + OTHER_MODELS,
                    metavar="MODEL")
    ap.add_argument("--flows", nargs="+", default=list(FLOWS), choices=list(FLOWS), metavar="FLOW")
    ap.add_argument("--check", type=Path, metavar="FILE",
                    help="compare with a saved list; exit 1 naming the exports that differ")
    ap.add_argument("--write", type=Path, metavar="FILE", help="save the list to FILE")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")

    import torch

    torch.set_num_threads(1)
    saved = read_list(args.check) if args.check else None
    lines: list[str] = []
    differ: list[str] = []
    for model_name in args.models:
        for flow in args.flows:
            digest = pte_sha256(model_name, FLOWS[flow])
            lines.append(line(digest, model_name, flow))
            print(lines[-1], flush=True)
            if saved is not None:
                want = saved.get((model_name, flow))
                if want != digest:
                    differ.append(f"{model_name} {flow}: "
                                  + ("not in the list" if want is None else f"{want} -> {digest}"))
    if args.write:
        args.write.write_text("\n".join(lines) + "\n")
    if saved is not None:
        if differ:
            print(f"\n{len(differ)} of {len(lines)} .pte files differ from {args.check}:",
                  file=sys.stderr)
            for text in differ:
                print(f"  {text}", file=sys.stderr)
            return 1
        print(f"\nall {len(lines)} match {args.check}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
