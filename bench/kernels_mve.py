"""Executed instructions of the conv / depthwise / linear kernels on QEMU (Cortex-M55), scalar
vs Helium (MVE), against the CMSIS-NN figures of issue 4.

    python bench/kernels_mve.py [--shapes conv1x1_dscnn fc_ae ...] [--build-dir build/bench-kernels-mve]
                                [--json out.json]

Each shape is a one-operator Program (random int8 data, per-channel requantization) embedded in
the runner and executed twice (two samples, one method instance) on QEMU mps3-an547 with the
counting plugin (tools/qemu_icount), in an image built with the Helium paths and in one built
with -DTM_KERNELS_SCALAR_ONLY. The count runs from the kernel's entry to the runner's
end-of-inference marker (the kernel plus the runtime's return path, a few instructions).

The figures are the steady state: the SECOND call, which is what an inference loop runs. From
then on the executor tells the kernel its (static) arguments were already verified
(tm_kernel_context.arguments_verified), so it skips its argument checks. The first call, with the
full checks, is printed beside it ("MVE 1st"). Every run's output is checked bit for bit against
the reference interpreter before its figure is printed. MACs are computed from the shapes.

conv_first_dscnn: the issue's TF-SAME padding is top 4 / bottom 5; our conv takes symmetric
padding, so the row uses 5 / 5 (same output 25x5, same MACs; one more padded row is read).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "tests"))  # the one-op Program builder of the MVE kernel tests

BOARD = "qemu-an547"
ENTRY = {
    "cortex_m::quantized_conv2d": "tm_cortex_m_quantized_conv2d_out",
    "cortex_m::quantized_depthwise_conv2d": "tm_cortex_m_quantized_depthwise_conv2d_out",
    "cortex_m::quantized_linear": "tm_cortex_m_quantized_linear_out",
    "cortex_m::quantized_transpose_conv2d": "tm_cortex_m_quantized_transpose_conv2d_out",
}

# name -> (builder args, CMSIS-NN instructions from issue 4)
SHAPES: dict[str, tuple[tuple, int]] = {
    "conv3x3_rn8": (("conv", 1, 32, 32, 16, 16, 3, 3, (1, 1), (1, 1)), 914_862),
    "conv3x3_s2": (("conv", 1, 32, 32, 16, 32, 3, 3, (2, 2), (1, 1)), 387_867),
    "conv1x1_dscnn": (("conv", 1, 25, 5, 64, 64, 1, 1, (1, 1), (0, 0)), 202_883),
    "conv1x1_mbv1": (("conv", 1, 12, 12, 64, 128, 1, 1, (1, 1), (0, 0)), 462_483),
    "conv_first_dscnn": (("conv", 1, 49, 10, 1, 64, 10, 4, (2, 2), (5, 1)), 289_049),
    "dwconv3x3_dscnn": (("dw", 1, 25, 5, 64, 3, 3, (1, 1), (1, 1)), 166_882),
    "dwconv3x3_mbv1": (("dw", 1, 48, 48, 16, 3, 3, (1, 1), (1, 1)), 1_150_669),
    "dwconv3x3_s2": (("dw", 1, 48, 48, 32, 3, 3, (2, 2), (1, 1)), 447_037),
    "fc_ae": (("fc", 1, 640, 128), 40_166),
    "fc_small": (("fc", 1, 64, 12), 676),
    # issue 18: the bias form (what torchmcu's lowering passes; the kernel_sum form above is
    # ExecuTorch's) at vit_tiny's shapes (17 tokens)
    "fc_ae_bias": (("fc", 1, 640, 128, "bias"), 0),
    "fc_vit_qkv_bias": (("fc", 17, 64, 192, "bias"), 0),
    "fc_vit_mlp_bias": (("fc", 17, 128, 64, "bias"), 0),
    # issue 17 (0: no CMSIS-NN figure): conv1d as H = 1, grouped, dilated, transposed
    "conv1d_kws_k5_s2": (("conv", 1, 1, 49, 40, 32, 1, 5, (1, 2), (0, 2)), 0),
    "dwconv1d_k3_d2": (("dw", 1, 1, 25, 32, 1, 3, (1, 1), (0, 2), (1, 2)), 0),
    "conv1x1_g4_shufflenet": (("conv", 1, 16, 16, 64, 64, 1, 1, (1, 1), (0, 0), (1, 1), 4), 0),
    "conv1x1_g1_16ch_x4": (("conv", 1, 16, 16, 16, 16, 1, 1, (1, 1), (0, 0)), 0),
    "conv3x3_g2_resnext": (("conv", 1, 8, 8, 32, 32, 3, 3, (1, 1), (1, 1), (1, 1), 2), 0),
    "conv3x3_g1_16ch_x2": (("conv", 1, 8, 8, 16, 16, 3, 3, (1, 1), (1, 1)), 0),
    "conv3x3_d2": (("conv", 1, 16, 16, 16, 16, 3, 3, (1, 1), (2, 2), (2, 2)), 0),
    "dwconv3x3_d2": (("dw", 1, 24, 24, 32, 3, 3, (1, 1), (2, 2), (2, 2)), 0),
    # issue 19: the front layers of ResNet8 and MobileNetV1 (few channels: per-pixel overhead)
    "conv_first_rn8": (("conv", 1, 32, 32, 3, 16, 3, 3, (1, 1), (1, 1)), 0),
    "conv_first_mbv1": (("conv", 1, 96, 96, 3, 8, 3, 3, (2, 2), (1, 1)), 0),
    "conv1x1_k8_mbv1": (("conv", 1, 48, 48, 8, 16, 1, 1, (1, 1), (0, 0)), 0),
    "dwconv3x3_c8_mbv1": (("dw", 1, 48, 48, 8, 3, 3, (1, 1), (1, 1)), 0),
    "dwconv3x3_6x6x128_mbv1": (("dw", 1, 6, 6, 128, 3, 3, (1, 1), (1, 1)), 0),
    "dwconv3x3_3x3x256_mbv1": (("dw", 1, 3, 3, 256, 3, 3, (1, 1), (1, 1)), 0),
    "tconv3x3_s2_unet": (("tconv", 1, 8, 8, 16, 8, 3, 3, (2, 2), (1, 1), (1, 1)), 0),
    # CMSIS-NN arm_transpose_conv_s8, measured as issue 4's figures (bench/README.md)
    "tconv2x2_s2": (("tconv", 1, 8, 8, 32, 16, 2, 2, (2, 2), (0, 0), (0, 0)), 182_313),
    "tconv2x2_s2_unet": (("tconv", 1, 16, 16, 32, 16, 2, 2, (2, 2), (0, 0), (0, 0)), 723_833),
}


@dataclass
class Row:
    shape: str
    macs: int
    scalar: int  # steady state (second call)
    mve: int  # steady state (second call)
    mve_first: int  # first call of the method instance (full argument checks)
    cmsis_nn: int

    @property
    def ratio(self) -> float:
        return self.mve / self.cmsis_nn if self.cmsis_nn else float("nan")


def make_case(name: str, spec: tuple):
    import test_kernels_mve_conv as t

    rng = np.random.default_rng(1234)
    kind, *a = spec
    if kind == "conv":
        n, h, w, cin, cout, kh, kw, stride, pad, *rest = a
        dil = rest[0] if rest else (1, 1)
        groups = rest[1] if len(rest) > 1 else 1
        case = t.conv_case(rng, name, n, h, w, cin, cout, kh, kw, stride, pad, dil, groups)
        oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
        ow = (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
        macs = n * oh * ow * cout * kh * kw * cin // groups
    elif kind == "dw":
        n, h, w, c, kh, kw, stride, pad, *rest = a
        dil = rest[0] if rest else (1, 1)
        case = t.dw_case(rng, name, n, h, w, c, kh, kw, stride, pad, dil)
        oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
        ow = (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
        macs = n * oh * ow * c * kh * kw
    elif kind == "tconv":
        n, h, w, cin, cout, kh, kw, stride, pad, out_pad = a
        case = t.tconv_case(rng, name, n, h, w, cin, cout, kh, kw, stride, pad, out_pad)
        macs = n * h * w * cin * cout * kh * kw
    else:
        rows, k, nout, *form = a
        form = form[0] if form else "kernel_sum"
        case = t.linear_case(rng, name, rows, k, nout, form, per_channel=True)
        macs = rows * k * nout
    case.args["act_min"], case.args["act_max"] = -128, 127
    return case, macs


def measure(case, build_dir: Path, scalar_only: bool) -> tuple[int, int]:
    """(first call, second call) instructions of the kernel, outputs checked."""
    import test_kernels_mve_conv as t
    from torchmcu import device, native
    from torchmcu.device.icount import count_instructions
    from torchmcu.device.io_blob import from_tensor_bytes
    from torchmcu.device.run import parse_output
    from torchmcu.pte.writer import serialize
    from torchmcu.reference import interpreter

    program, inputs = t._build_program([case])
    pte = serialize(program)
    info = native.program_info(pte)
    expected = interpreter.run_program(program, inputs)
    out = build_dir / ("scalar" if scalar_only else "mve")
    out.mkdir(parents=True, exist_ok=True)
    (out / "program.pte").write_bytes(pte)
    defines = {"CMAKE_C_FLAGS": "-DTM_KERNELS_SCALAR_ONLY" if scalar_only else ""}
    image = device.build(out / "program.pte", BOARD, out, device.write_io_blob(info, [inputs, inputs]),
                           defines=defines)  # fmt: skip
    counts = count_instructions(image.elf, BOARD, {"kernel": (ENTRY[case.op], "tm_bench_end")}, timeout=300)
    raw, _ = parse_output(counts["console"])
    for sample in range(2):
        got = from_tensor_bytes(raw[sample][0][1], info["outputs"][0])
        if got.tobytes() != expected[0].tobytes():
            raise SystemExit(f"{case.name} ({'scalar' if scalar_only else 'mve'}, call {sample + 1}): "
                             "output differs from the reference")  # fmt: skip
    first, second = counts["regions"]["kernel"]
    return first, second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES))
    parser.add_argument("--build-dir", default=str(ROOT / "build" / "bench-kernels-mve"))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    header = (f"{'shape':22} {'MACs':>10} {'scalar':>11} {'/MAC':>6} {'MVE':>10} {'/MAC':>6} {'CMSIS-NN':>10} "
              f"{'ratio':>6} {'MVE 1st':>10} {'ratio':>6}")  # fmt: skip
    print("executed instructions of the steady-state (second) call, as in an inference loop; "
          "'MVE 1st': the first call (full argument checks)")  # fmt: skip
    print(header)
    for name in args.shapes:
        spec, cmsis = SHAPES[name]
        case, macs = make_case(name, spec)
        _, scalar = measure(case, Path(args.build_dir), True)
        mve_first, mve = measure(case, Path(args.build_dir), False)
        row = Row(name, macs, scalar, mve, mve_first, cmsis)
        rows.append(row)
        print(f"{name:22} {macs:>10,} {scalar:>11,} {scalar / macs:>6.2f} {mve:>10,} {mve / macs:>6.2f} "
              f"{cmsis:>10,} {row.ratio:>5.2f}x {mve_first:>10,} {mve_first / cmsis if cmsis else float('nan'):>5.2f}x", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) | {"ratio": r.ratio} for r in rows], indent=2))


if __name__ == "__main__":
    main()
