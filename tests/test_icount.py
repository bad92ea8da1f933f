"""The QEMU instruction-counting plugin (tools/qemu_icount) and torchmcu.device.icount.

Exactness is checked on a test-only image (tools/qemu_icount/selftest/loop.S) whose marked
regions run an assembly loop of N iterations x K instructions: the expected counts follow
from the loop parameters and the listing, not from the plugin. The runner's inference
markers are checked on real firmware: deterministic, one count per sample, below the
total, and growing with the model's MACs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from torch import nn
from torchmcu import device, native
from torchmcu.device.icount import (
    IcountError,
    count_instructions,
    plugin_path,
    plugin_source_dir,
)

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu", "host-gcc")

BOARD = "qemu-an547"


def _loop_image(out: Path, body: int, a: int, b: int) -> Path:
    """Assemble the self-test image with K=body instructions per iteration, A and B iterations."""
    elf = out / f"loop-{body}-{a}-{b}.elf"
    subprocess.run(
        [
            "arm-none-eabi-gcc", "-mcpu=cortex-m55", "-mthumb", "-nostdlib", "-Wl,-Ttext=0",
            "-Wl,-e,reset", f"-DLOOP_BODY={body}", f"-DLOOP_ITERATIONS_A={a}",
            f"-DLOOP_ITERATIONS_B={b}", "-o", str(elf),
            str(plugin_source_dir() / "selftest" / "loop.S"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return elf


@pytest.mark.parametrize(("body", "a", "b"), [(5, 1000, 7), (2, 1, 40000), (17, 123, 0x10000)])
def test_loop_regions_are_exact(tmp_path: Path, body: int, a: int, b: int) -> None:
    counts = count_instructions(_loop_image(tmp_path, body, a, b), BOARD)
    # Per occurrence: the loop, plus begin's `bx lr`, the count load and the `bl` to the end.
    expected = [a * body + 3, b * body + 3]
    assert counts["regions"]["inference"] == expected
    # Reset to exit: `movs` and two `bl` to begin before the regions, end's `bx lr` after
    # each, then `movs`, `ldr`, `bkpt` of the semihosting exit.
    assert counts["total"] == sum(expected) + 1 + 2 + 2 + 3
    assert counts["exit_code"] == 0


def test_tick_region_and_explicit_addresses(tmp_path: Path) -> None:
    elf = _loop_image(tmp_path, 4, 50, 3)
    counts = count_instructions(
        elf,
        BOARD,
        {
            # begin == end: each hit closes the previous occurrence. Between the two calls
            # of tm_bench_begin: loop A, `bx lr` x2, the `ldr`, `bl` end, `bl` begin.
            "tick": ("tm_bench_begin", "tm_bench_begin"),
            "by_address": (0x40, 0x42),  # the markers' addresses in the listing
        },
    )
    assert counts["regions"]["tick"] == [50 * 4 + 5]
    assert counts["regions"]["by_address"] == [50 * 4 + 3, 3 * 4 + 3]


def test_unbalanced_markers_and_missing_symbols_raise(tmp_path: Path) -> None:
    elf = _loop_image(tmp_path, 3, 10, 10)
    with pytest.raises(IcountError, match="end-without-begin"):
        count_instructions(elf, BOARD, {"reversed": ("tm_bench_end", "tm_bench_begin")})
    with pytest.raises(IcountError, match="'no_such_marker' is not a symbol"):
        count_instructions(elf, BOARD, {"r": ("no_such_marker", "tm_bench_end")})
    with pytest.raises(IcountError, match="region name"):
        count_instructions(elf, BOARD, {"bad name": ("tm_bench_begin", "tm_bench_end")})


def test_plugin_is_cached_by_source_hash() -> None:
    first = plugin_path()
    assert first.is_file() and plugin_path() == first
    assert first.name.startswith("libicount-")


@pytest.fixture(scope="module")
def linear_images(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Runner images of one Linear(64 -> n) layer for two widths, three samples embedded."""
    root = tmp_path_factory.mktemp("icount-fw")
    images = {}
    for width in (16, 64):
        torch.manual_seed(width)
        model = nn.Sequential(nn.Linear(64, width)).eval()
        calibration = [(torch.randn(1, 64),) for _ in range(4)]
        exported = torchmcu.export(model, calibration[0], calibration=calibration, board=BOARD)
        pte = Path(exported.save(root / f"linear{width}"))
        samples = [[np.asarray(x[0].numpy())] for x in calibration[:3]]
        blob = device.write_io_blob(native.program_info(exported.pte_bytes), samples)
        # One build directory: the libraries compile once, the second model is a relink.
        image = device.build(pte, BOARD, root / "build", inputs=blob)
        elf = root / f"linear{width}.elf"
        shutil.copy(image.elf, elf)
        images[width] = elf
    return images


def test_runner_inference_counts(linear_images: dict[int, Path]) -> None:
    small = count_instructions(linear_images[16], BOARD)
    again = count_instructions(linear_images[16], BOARD)
    assert (small["total"], small["regions"]) == (again["total"], again["regions"])
    runs = small["regions"]["inference"]
    assert len(runs) == 3  # one region per embedded sample
    assert all(0 < r < small["total"] for r in runs)
    assert sum(runs) < small["total"]
    assert "TM_END status=OK samples=3" in small["console"]

    large = count_instructions(linear_images[64], BOARD)
    macs_small, macs_large = 64 * 16, 64 * 64
    # No Cortex-M55 instruction does more than 16 int8 MACs (one MVE VMLADAV of 16 lanes).
    assert min(runs) >= macs_small / 16
    assert min(large["regions"]["inference"]) >= macs_large / 16
    # Four times the MACs, same everything else: at least the extra MACs / 16 more.
    assert min(large["regions"]["inference"]) - max(runs) >= (macs_large - macs_small) / 16
