"""Digits on a microcontroller: train a small CNN on scikit-learn's bundled 8x8 digits (no
download), quantize and export it for Corstone-300 (CPU path), build the firmware, run it on
QEMU over the test images, and print fp32, host-int8 and on-device accuracy.

    python examples/digits/demo.py [--images 300] [--epochs 30] [--out out/digits]

The host int8 runtime and the firmware run the same integer program, so their accuracies
must agree exactly; the script exits non-zero when they do not.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torchmcu
from torch import nn
from torchmcu import device

BOARD = "corstone-300"


def load_digits_split(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The 1,797 8x8 digits scaled to [-1, 1], shuffled with a fixed seed; 80 % train."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images.astype(np.float32) / 8.0 - 1.0)[:, None, :, :]  # pixel values 0..16
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(x))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        nn.AvgPool2d(4),
        nn.Flatten(),
        nn.Linear(32, 10),
    )  # fmt: skip


def train(x: np.ndarray, y: np.ndarray, epochs: int, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
    return model.eval()


def accuracy(logits: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == y))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300, help="test images run on the device")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--out", default="out/digits", help="where the .pte and the build go")
    parser.add_argument("--timeout", type=float, default=300.0, help="QEMU timeout, seconds")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    out = Path(args.out)

    t0 = time.perf_counter()
    x_train, y_train, x_test, y_test = load_digits_split()
    x_test, y_test = x_test[: args.images], y_test[: args.images]
    model = train(x_train, y_train, args.epochs)
    with torch.no_grad():
        fp32_logits = model(torch.from_numpy(x_test)).numpy()
    print(f"trained on {len(x_train)} images in {time.perf_counter() - t0:.1f} s")

    calibration = [(torch.from_numpy(x_train[i : i + 1]),) for i in range(256)]
    exported = torchmcu.export(
        model, (torch.from_numpy(x_test[:1]),), calibration=calibration, board=BOARD
    )
    pte_path = exported.save(out)
    print(
        f"exported {pte_path} ({len(exported.pte_bytes):,} bytes, arena {exported.report['arena_bytes']:,} bytes)"
    )

    host_logits = np.concatenate(
        [torchmcu.run_on_host(exported.pte_bytes, [x[None]])[0] for x in x_test]
    )

    t1 = time.perf_counter()
    samples = [[x[None]] for x in x_test]
    device_outputs, _result = device.run_samples(
        pte_path, BOARD, samples, out / f"build-{BOARD}", timeout=args.timeout
    )
    device_logits = np.concatenate([o[0] for o in device_outputs])
    print(
        f"built for {BOARD} and ran {len(samples)} images on QEMU (mps3-an547) in {time.perf_counter() - t1:.1f} s"
    )

    acc = {
        "fp32 (PyTorch)": accuracy(fp32_logits, y_test),
        "int8 (host runtime)": accuracy(host_logits, y_test),
        "int8 (device, QEMU)": accuracy(device_logits, y_test),
    }
    print(f"\naccuracy on {len(y_test)} test images:")
    for name, value in acc.items():
        print(f"  {name:<22} {100 * value:6.2f} %")
    same = int(np.sum(np.all(host_logits.view(np.uint32) == device_logits.view(np.uint32), axis=1)))
    print(f"device outputs bit-identical to the host runtime on {same}/{len(y_test)} images")
    if same != len(y_test):
        print("error: the device disagrees with the host runtime", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
