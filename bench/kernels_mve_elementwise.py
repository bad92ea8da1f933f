"""Executed instructions of quantize/dequantize, add/mul (also broadcast), maximum, max/avg
pooling, softmax, resize and cat on QEMU
(Cortex-M55), scalar vs Helium (MVE), against the CMSIS-NN figures of issue 4.

    python bench/kernels_mve_elementwise.py [--shapes add maxpool ...]
                                            [--build-dir build/bench-kernels-mve-elementwise]

Each shape is a one-operator Program (random data) embedded in the runner and run once on QEMU
mps3-an547 with the counting plugin (tools/qemu_icount), in an image with the Helium paths and
in one built with -DTM_KERNELS_SCALAR_ONLY. The count runs from the kernel's entry to the
runner's end-of-inference marker (the kernel, its argument checks and a few instructions of
return path). Every output is compared bit for bit with the reference interpreter first.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "tests"))  # the one-op Program builder of the MVE tests

BOARD = "qemu-an547"
LEGACY = [0, 2, 3, 1]


@dataclass
class Shape:
    op: str  # cortex_m operator
    elements: int
    cmsis_nn: int | None  # issue 4's reference figure
    build: Callable  # (CaseProgram, rng) -> None, adds exactly one call
    prefix: str = "tm_cortex_m_"  # of the kernel's entry point


def _quantize(p, rng) -> None:
    from torchmcu.pte import program as pm

    x = (rng.standard_normal(16384) * 30).astype(np.float32)
    out = p.output(pm.ScalarType.CHAR, [1, 16384])
    args = [p.input(x.reshape(1, -1), pm.ScalarType.FLOAT), p.d(0.25), p.i(3), p.i(-128), p.i(127), p.i(1), out]
    p.call("cortex_m::quantize_per_tensor", args, "16384")


def _dequantize(p, rng) -> None:
    from torchmcu.pte import program as pm

    q = rng.integers(-128, 128, (1, 16384), dtype=np.int8)
    out = p.output(pm.ScalarType.FLOAT, [1, 16384])
    args = [p.input(q, pm.ScalarType.CHAR), p.d(0.25), p.i(3), p.i(-128), p.i(127), p.i(1), out]
    p.call("cortex_m::dequantize_per_tensor", args, "16384")


def _nhwc(p, rng, h, w, c) -> int:
    from torchmcu.pte import program as pm

    sizes = [1, c, h, w]
    return p.input(rng.integers(-128, 128, sizes, dtype=np.int8), pm.ScalarType.CHAR, sizes, LEGACY)


def _add(p, rng) -> None:
    from torchmcu import reference as ref
    from torchmcu.pte import program as pm

    s1, s2, so = 0.05, 0.08, 0.1
    twice = 2 * max(s1, s2)
    m1, sh1 = ref.quantize_multiplier(s1 / twice)
    m2, sh2 = ref.quantize_multiplier(s2 / twice)
    mo, sho = ref.quantize_multiplier(twice / (so * (1 << 20)))
    a, b = _nhwc(p, rng, 32, 32, 16), _nhwc(p, rng, 32, 32, 16)
    out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
    args = [a, p.i(-3), p.i(m1), p.i(sh1), b, p.i(5), p.i(m2), p.i(sh2), p.i(-1), p.i(mo), p.i(sho),
            p.i(-128), p.i(127), out]  # fmt: skip
    p.call("cortex_m::quantized_add", args, "32x32x16")


def _mul(p, rng) -> None:
    from torchmcu import reference as ref
    from torchmcu.pte import program as pm

    mo, sho = ref.quantize_multiplier(0.05 * 0.08 / 0.1)
    a, b = _nhwc(p, rng, 32, 32, 16), _nhwc(p, rng, 32, 32, 16)
    out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
    p.call("cortex_m::quantized_mul", [a, p.i(-3), b, p.i(5), p.i(-1), p.i(mo), p.i(sho), out], "32x32x16")


_OTHER_SIZES = {"channel": [1, 16, 1, 1], "scalar": [1], "spatial": [1, 1, 32, 32], "row": [1, 16, 32, 1]}


def _mul_broadcast(other: str) -> Callable:
    """mul of a 32x32x16 map by a [1,16,1,1] channel vector (squeeze-excite), one number, or
    (the general broadcast) a [1,1,32,32] map (x * x.mean(1, keepdim=True): rows of one value
    along C) or a [1,16,32,1] one (x * x.mean(3, keepdim=True): rows of C along W)."""

    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        mo, sho = ref.quantize_multiplier(0.05 * 0.08 / 0.1)
        a = _nhwc(p, rng, 32, 32, 16)
        sizes = _OTHER_SIZES[other]
        order = LEGACY if len(sizes) == 4 else None
        b = p.input(rng.integers(-128, 128, sizes, dtype=np.int8), pm.ScalarType.CHAR, sizes, order)
        out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
        p.call("cortex_m::quantized_mul", [a, p.i(-3), b, p.i(5), p.i(-1), p.i(mo), p.i(sho), out],
               f"32x32x16 * {other}")  # fmt: skip

    return build


def _maximum(p, rng) -> None:
    from torchmcu.pte import program as pm

    a, b = _nhwc(p, rng, 32, 32, 16), _nhwc(p, rng, 32, 32, 16)
    out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
    p.call("cortex_m::maximum", [a, b, out], "32x32x16")


def _maxpool(p, rng) -> None:
    from torchmcu.pte import program as pm

    x = _nhwc(p, rng, 32, 32, 16)
    out = p.output(pm.ScalarType.CHAR, [1, 16, 16, 16], LEGACY)
    args = [x, p.ints([2, 2]), p.ints([2, 2]), p.ints([0, 0]), p.ints([1, 1]), p.b(False), p.i(0), p.i(0),
            p.i(-128), p.i(127), out]  # fmt: skip
    p.call("cortex_m::quantized_max_pool2d", args, "32x32x16 2x2 s2")


def _avgpool(p, rng) -> None:
    from torchmcu import reference as ref
    from torchmcu.pte import program as pm

    x = _nhwc(p, rng, 25, 5, 64)
    out = p.output(pm.ScalarType.CHAR, [1, 64, 1, 1], LEGACY)
    m, s = ref.quantize_multiplier(0.05)
    args = [x, p.ints([25, 5]), p.ints([1, 1]), p.ints([0, 0]), p.b(False), p.i(0), p.i(m), p.i(s),
            p.scratch(), out]  # fmt: skip
    p.call("cortex_m::quantized_avg_pool2d", args, "25x5x64 global")


def _softmax(n: int) -> Callable:
    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        m, s = ref.quantize_multiplier(min(0.0625 * (1 << 26), 2**31 - 1))
        diff_min = -int(np.floor(31 * (1 << 26) / (1 << s)))
        x = p.input(rng.integers(-128, 128, (1, n), dtype=np.int8), pm.ScalarType.CHAR)
        out = p.output(pm.ScalarType.CHAR, [1, n])
        p.call("cortex_m::softmax", [x, p.i(-1), p.i(0), p.i(-128), p.i(m), p.i(s), p.i(diff_min), out], f"1x{n}")

    return build


def _resize(bilinear: bool) -> Callable:
    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        m, s = ref.single_rounding_multiplier(1 / 16) if bilinear else (0, 0)
        x = _nhwc(p, rng, 16, 16, 16)
        out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
        args = [x, p.ints([4, 2, 4, 2]), p.ints([-1, -1]), p.b(bilinear), p.i(m), p.i(s), out]
        p.call("torchmcu::resize2d", args, f"16x16x16 2x bilinear={bilinear}")

    return build


def _cat(requantized: bool, h: int, w: int) -> Callable:
    """Two NHWC halves of 32 channels joined along C, each requantized or both copied."""

    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        halves = [_nhwc(p, rng, h, w, 32) for _ in range(2)]
        out = p.output(pm.ScalarType.CHAR, [1, 64, h, w], LEGACY)
        params = [ref.single_rounding_multiplier(r) for r in (0.7, 1.6)] if requantized else [(1 << 30, 1)] * 2
        zps = [5, -9] if requantized else [0, 0]
        args = [p._add(pm.TensorList(halves)), p.i(1), p.ints(zps), p.ints([m for m, _ in params]),
                p.ints([s for _, s in params]), p.i(0), out]  # fmt: skip
        p.call("torchmcu::quantized_cat", args, f"2x{h}x{w}x32 requantized={requantized}")

    return build


def _shuffle(p, rng) -> None:
    """The channel shuffle of a 16x16x32 NHWC activation in 2 groups: [256, 2, 16] -> [256, 16, 2]."""
    from torchmcu.pte import program as pm

    x = p.input(rng.integers(-128, 128, (256, 2, 16), dtype=np.int8), pm.ScalarType.CHAR)
    out = p.output(pm.ScalarType.CHAR, [256, 16, 2])
    p.call("cortex_m::transpose", [x, p.ints([0, 2, 1]), out], "256x2x16 -> 256x16x2")


SHAPES: dict[str, Shape] = {
    "quantize": Shape("quantize_per_tensor", 16384, None, _quantize),
    "dequantize": Shape("dequantize_per_tensor", 16384, None, _dequantize),
    "add": Shape("quantized_add", 16384, 225_378, _add),
    "mul": Shape("quantized_mul", 16384, None, _mul),
    "mul_channel": Shape("quantized_mul", 16384, None, _mul_broadcast("channel")),
    "mul_scalar": Shape("quantized_mul", 16384, None, _mul_broadcast("scalar")),
    "mul_spatial": Shape("quantized_mul", 16384, None, _mul_broadcast("spatial")),
    "mul_row": Shape("quantized_mul", 16384, None, _mul_broadcast("row")),
    "maximum": Shape("maximum", 16384, None, _maximum),
    "maxpool": Shape("quantized_max_pool2d", 16384, 44_780, _maxpool),
    "avgpool": Shape("quantized_avg_pool2d", 8000, 9_359, _avgpool),
    "softmax_1x10": Shape("softmax", 10, 5_779, _softmax(10)),
    "softmax_1x1000": Shape("softmax", 1000, 537_951, _softmax(1000)),
    "resize_nearest_2x": Shape("resize2d", 16384, None, _resize(False), "tm_torchmcu_"),
    "resize_bilinear_2x": Shape("resize2d", 16384, None, _resize(True), "tm_torchmcu_"),
    "cat_16x16": Shape("quantized_cat", 16384, None, _cat(True, 16, 16), "tm_torchmcu_"),
    "cat_2x2": Shape("quantized_cat", 256, None, _cat(True, 2, 2), "tm_torchmcu_"),
    "cat_copy_16x16": Shape("quantized_cat", 16384, None, _cat(False, 16, 16), "tm_torchmcu_"),
    "shuffle_16x16x32": Shape("transpose", 8192, None, _shuffle),
}


def measure(name: str, shape: Shape, build_dir: Path, scalar_only: bool) -> int:
    """Instructions from the kernel's entry to the end-of-inference marker, output checked."""
    from test_kernels_mve_elementwise import CaseProgram
    from torchmcu import device, native
    from torchmcu.device.icount import count_instructions
    from torchmcu.pte import writer
    from torchmcu.reference.interpreter import run_program

    p = CaseProgram()
    shape.build(p, np.random.default_rng(7))
    program = p.program()
    pte = writer.serialize(program)
    out = build_dir / name / ("scalar" if scalar_only else "mve")
    out.mkdir(parents=True, exist_ok=True)
    (out / "program.pte").write_bytes(pte)
    info = native.program_info(pte)
    defines = {"CMAKE_C_FLAGS": "-DTM_KERNELS_SCALAR_ONLY" if scalar_only else ""}
    image = device.build(out / "program.pte", BOARD, out, device.write_io_blob(info, [p.input_arrays]),
                           defines=defines)  # fmt: skip
    got = device.run(image.elf, BOARD, 120).check().outputs(info)
    expected = run_program(program, p.input_arrays)
    if any(g.tobytes() != e.tobytes() for g, e in zip(got, expected)):
        raise SystemExit(f"{name}: output differs from the reference (scalar_only={scalar_only})")
    entry = f"{shape.prefix}{shape.op}_out"
    counts = count_instructions(image.elf, BOARD, {"kernel": (entry, "tm_bench_end")}, timeout=300)
    return counts["regions"]["kernel"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "bench-kernels-mve-elementwise")
    args = parser.parse_args()
    print(f"{'shape':16} {'elements':>9} {'scalar':>10} {'MVE':>10} {'MVE/elem':>9} {'CMSIS-NN':>10} {'ratio':>6}")
    for name in args.shapes:
        shape = SHAPES[name]
        scalar = measure(name, shape, args.build_dir, True)
        mve = measure(name, shape, args.build_dir, False)
        ref = f"{shape.cmsis_nn:>10,}" if shape.cmsis_nn else f"{'-':>10}"
        ratio = f"{mve / shape.cmsis_nn:>6.2f}" if shape.cmsis_nn else f"{'-':>6}"
        print(f"{name:16} {shape.elements:>9,} {scalar:>10,} {mve:>10,} {mve / shape.elements:>9.2f} {ref} {ratio}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
