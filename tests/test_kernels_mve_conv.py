"""Helium (MVE) paths of quantized_linear, quantized_conv2d, quantized_depthwise_conv2d and
quantized_transpose_conv2d, bit-exact on QEMU (Cortex-M55 with MVE) against the numpy reference.

One Program holds every case as its own KernelCall (own input, constants, scratch and output),
so the session builds one firmware image and runs QEMU once. The expected outputs come from
the reference interpreter (torchmcu.reference) running the same Program; the host runtime's
scalar kernels are checked on the same Program too, so a disagreement names the side at fault.

Shapes cover: reduction lengths with every tail 0-15 (1x1 channel counts 1..33, linear K 1..40),
channel counts 1, 3, 7, 17, 24, 27, pixel counts with every remainder mod 4, padding, strides
1-3, dilation, groups, depth multipliers, batch 2, per-channel and per-tensor requantization,
kernel_sum / bias / no bias for linear, and operands at odd arena offsets.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from torchmcu import device, native
from torchmcu.pte import program as pm
from torchmcu.pte.writer import serialize
from torchmcu.reference import interpreter, quantize_multiplier
from torchmcu.reference.scratch import SCRATCH_BYTES

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

BOARD = "qemu-an547"
NHWC_LEGACY = [0, 2, 3, 1]


@dataclass
class Case:
    name: str
    op: str  # cortex_m::<op>, overload out
    x: np.ndarray  # NHWC for convs, [..., K] for linear
    args: dict  # everything else, by schema name


class ProgramBuilder:
    """One method, one KernelCall per case; every tensor gets its own arena span."""

    def __init__(self) -> None:
        self.values: list = []
        self.constants: list[bytes] = [b""]
        self.instructions: list[pm.KernelCall] = []
        self.operators: list[pm.Operator] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.arena = 0

    def _add(self, v) -> int:
        self.values.append(v)
        return len(self.values) - 1

    def planned(self, st: pm.ScalarType, sizes, dim_order, nbytes: int, misalign: int = 0) -> int:
        offset = -(-self.arena // 16) * 16 + misalign
        self.arena = offset + nbytes
        return self._add(pm.Tensor(st, list(sizes), list(dim_order), allocation=pm.Allocation(1, offset)))

    def const(self, arr: np.ndarray, st: pm.ScalarType) -> int:
        self.constants.append(np.ascontiguousarray(arr).tobytes())
        dims = list(range(arr.ndim))
        return self._add(pm.Tensor(st, list(arr.shape), dims, data_buffer_idx=len(self.constants) - 1))

    def int(self, v: int) -> int:
        return self._add(pm.Int(int(v)))

    def int_list(self, items) -> int:
        return self._add(pm.IntList([self.int(v) for v in items]))

    def none(self) -> int:
        return self._add(pm.Null())

    def call(self, op: str, args: list[int]) -> None:
        names = [o.name for o in self.operators]
        if op not in names:
            self.operators.append(pm.Operator(op, "out"))
            names.append(op)
        self.instructions.append(pm.KernelCall(names.index(op), args))

    def program(self) -> pm.Program:
        plan = pm.ExecutionPlan(
            name="forward",
            values=self.values,
            inputs=self.inputs,
            outputs=self.outputs,
            chains=[pm.Chain(inputs=self.inputs, outputs=self.outputs, instructions=self.instructions)],
            operators=self.operators,
            non_const_buffer_sizes=[0, -(-self.arena // 16) * 16],
        )
        return pm.Program(execution_plan=[plan], constants=self.constants)


def _i8(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def _requant(rng: np.random.Generator, channels: int, k: int, per_channel: bool):
    """Multipliers/shifts that map a typical accumulator (~ sqrt(k) * 128 * 74) onto int8,
    spread by up to 4x per channel; now and then an extreme shift."""
    base = 40.0 / (np.sqrt(max(k, 1)) * 128 * 74)
    scales = base * np.exp2(rng.uniform(-1, 1, size=channels)) if per_channel else np.full(channels, base)
    pairs = [quantize_multiplier(float(s)) for s in scales]
    if per_channel and channels > 2:
        pairs[1] = (rng.integers(1 << 30, 1 << 31), int(rng.integers(1, 8)))  # left shift, saturating
        pairs[2] = (rng.integers(1 << 30, 1 << 31), -31)
    m = np.array([p[0] for p in pairs], dtype=np.int32)
    s = np.array([p[1] for p in pairs], dtype=np.int32)
    return m, s


def _act(rng: np.random.Generator) -> tuple[int, int]:
    if rng.random() < 0.6:
        return -128, 127
    lo = int(rng.integers(-128, 0))
    return lo, int(rng.integers(lo, 128))


def conv_case(rng, name, n, h, w, cin, cout, kh, kw, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1,
              per_channel=True, bias=True, nhwc=False) -> Case:
    x = _i8(rng, (n, h, w, cin))
    wt = _i8(rng, (cout, kh, kw, cin // groups))
    m, s = _requant(rng, cout, kh * kw * cin // groups, per_channel)
    lo, hi = _act(rng)
    args = {
        "weight": wt, "bias": rng.integers(-5000, 5000, size=cout, dtype=np.int32) if bias else None,
        "stride": list(stride), "padding": list(pad), "dilation": list(dil),
        "input_offset": int(rng.integers(-127, 129)), "output_offset": int(rng.integers(-128, 128)),
        "multipliers": m, "shifts": s, "act_min": lo, "act_max": hi, "nhwc": nhwc,
    }  # fmt: skip
    return Case(name, "cortex_m::quantized_conv2d" + ("_nhwc" if nhwc else ""), x, args)


def dw_case(rng, name, n, h, w, c, kh, kw, stride=(1, 1), pad=(0, 0), dil=(1, 1), dm=1, per_channel=True,
            bias=True, nhwc=False, input_offset: int | None = None) -> Case:
    h = max(h, dil[0] * (kh - 1) + 1 - 2 * pad[0])  # at least one output row and column
    w = max(w, dil[1] * (kw - 1) + 1 - 2 * pad[1])
    x = _i8(rng, (n, h, w, c))
    cout = c * dm
    wt = _i8(rng, (1, kh, kw, cout))
    m, s = _requant(rng, cout, kh * kw, per_channel)
    lo, hi = _act(rng)
    args = {
        "weight": wt, "bias": rng.integers(-5000, 5000, size=cout, dtype=np.int32) if bias else None,
        "stride": list(stride), "padding": list(pad), "dilation": list(dil), "depth_multiplier": dm,
        "input_offset": int(rng.integers(-127, 129)) if input_offset is None else input_offset,
        "output_offset": int(rng.integers(-128, 128)),
        "multipliers": m, "shifts": s, "act_min": lo, "act_max": hi, "nhwc": nhwc,
    }  # fmt: skip
    return Case(name, "cortex_m::quantized_depthwise_conv2d" + ("_nhwc" if nhwc else ""), x, args)


def tconv_case(rng, name, n, h, w, cin, cout, kh, kw, stride=(2, 2), pad=(0, 0), out_pad=(0, 0), dil=(1, 1),
               per_channel=True, bias=True, nhwc=False) -> Case:
    x = _i8(rng, (n, h, w, cin))
    wt = _i8(rng, (cout, kh, kw, cin))
    m, s = _requant(rng, cout, kh * kw * cin, per_channel)
    lo, hi = _act(rng)
    args = {
        "weight": wt, "bias": rng.integers(-5000, 5000, size=cout, dtype=np.int32) if bias else None,
        "stride": list(stride), "padding": list(pad), "output_padding": list(out_pad), "dilation": list(dil),
        "input_offset": int(rng.integers(-127, 129)), "output_offset": int(rng.integers(-128, 128)),
        "multipliers": m, "shifts": s, "act_min": lo, "act_max": hi, "nhwc": nhwc,
    }  # fmt: skip
    return Case(name, "cortex_m::quantized_transpose_conv2d" + ("_nhwc" if nhwc else ""), x, args)


def linear_case(rng, name, rows, k, n, form="bias", per_channel=False, filter_offset=0) -> Case:
    x = _i8(rng, (rows, k))
    wt = _i8(rng, (n, k))
    m, s = _requant(rng, n, k, per_channel)
    input_offset = int(rng.integers(-127, 129))
    bias = rng.integers(-5000, 5000, size=n, dtype=np.int32)
    kernel_sum = None
    if form == "kernel_sum":
        w64 = wt.astype(np.int64) + filter_offset
        kernel_sum = (input_offset * w64.sum(axis=1) + bias).astype(np.int32).reshape(1, n)
    lo, hi = _act(rng)
    args = {
        "weights": wt, "bias": bias if form == "bias" else None, "kernel_sum": kernel_sum,
        "input_offset": input_offset, "filter_offset": filter_offset, "output_offset": int(rng.integers(-128, 128)),
        "multipliers": m if per_channel else m[:1], "shifts": s if per_channel else s[:1], "act_max": hi, "act_min": lo,
    }  # fmt: skip
    return Case(name, "cortex_m::quantized_linear", x, args)


def ties_case() -> Case:
    """Multiplier 2^30 (0.5) and right shifts 1..16 over 256 consecutive accumulators per
    channel, positive and negative: every rounding tie of both rounding steps occurs."""
    x = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    n = 16
    shifts = -np.arange(1, n + 1, dtype=np.int32)
    bias = [(o % 4 - 2) * 37 << (o + 1) for o in range(n)]
    args = {
        "weights": np.ones((n, 1), np.int8), "bias": np.array(bias, np.int32), "kernel_sum": None,
        "input_offset": 3, "filter_offset": 0, "output_offset": 0,
        "multipliers": np.full(n, 1 << 30, np.int32), "shifts": shifts, "act_max": 127, "act_min": -128,
    }  # fmt: skip
    return Case("linear_requantize_ties", "cortex_m::quantized_linear", x, args)


def all_cases() -> list[Case]:
    rng = np.random.default_rng(20240611)
    cases: list[Case] = []
    # Linear: every K tail 0-15, output counts around the 4-channel blocks, rows 1 and 3.
    for k in range(1, 41):
        n = [1, 2, 3, 4, 5, 7, 12, 17][k % 8]
        form = ["bias", "kernel_sum", "none"][k % 3]
        cases.append(linear_case(rng, f"linear_k{k}_n{n}_{form}", 1 + 2 * (k % 2), k, n, form, per_channel=k % 4 < 2,
                                 filter_offset=0 if k % 5 else int(rng.integers(-127, 129))))  # fmt: skip
    cases.append(ties_case())
    cases.append(linear_case(rng, "linear_fc_small", 1, 64, 12, "kernel_sum"))
    cases.append(linear_case(rng, "linear_640x128", 1, 640, 128, "kernel_sum", per_channel=True))
    cases.append(linear_case(rng, "linear_rows_4d", 5, 33, 24, "bias", per_channel=True))
    # 1x1 (in-place columns): every Cin tail, pixel counts with every remainder mod 4, strides.
    for cin in range(1, 34):
        cout = [1, 3, 7, 17, 24, 27][cin % 6]
        h, w = [(1, 1), (2, 3), (3, 3), (5, 5), (2, 4), (3, 5), (1, 7)][cin % 7]
        stride = (1 + cin % 3, 1 + (cin // 3) % 3) if cin % 4 == 0 else (1, 1)
        cases.append(conv_case(rng, f"conv1x1_cin{cin}_cout{cout}_{h}x{w}_s{stride[0]}{stride[1]}", 1, h, w, cin, cout,
                               1, 1, stride=stride, per_channel=cin % 5 != 0, nhwc=cin % 6 == 0))  # fmt: skip
    cases.append(conv_case(rng, "conv1x1_dscnn_like", 1, 5, 5, 64, 64, 1, 1))
    cases.append(conv_case(rng, "conv1x1_pad1", 2, 3, 4, 7, 5, 1, 1, pad=(1, 1)))
    cases.append(conv_case(rng, "conv1x1_groups4", 1, 3, 5, 24, 8, 1, 1, groups=4))
    # General kxk (im2col): padding, strides 1-3, dilation, groups, batch 2, odd kernels.
    kxk = [
        (1, 8, 8, 16, 16, 3, 3, (1, 1), (1, 1), (1, 1), 1),
        (1, 9, 9, 16, 32, 3, 3, (2, 2), (1, 1), (1, 1), 1),
        (1, 10, 7, 3, 7, 3, 3, (3, 3), (1, 1), (1, 1), 1),
        (2, 6, 6, 7, 17, 3, 3, (1, 2), (1, 0), (1, 1), 1),
        (1, 9, 9, 5, 6, 3, 3, (1, 1), (2, 2), (2, 2), 1),
        (1, 7, 8, 17, 3, 2, 3, (1, 1), (0, 1), (1, 2), 1),
        (1, 6, 6, 24, 12, 3, 3, (1, 1), (1, 1), (1, 1), 3),
        (1, 5, 5, 27, 24, 5, 5, (2, 1), (2, 2), (1, 1), 1),
        (1, 4, 4, 1, 1, 3, 3, (1, 1), (1, 1), (1, 1), 1),
        (1, 6, 5, 4, 9, 4, 2, (1, 1), (0, 0), (1, 1), 1),
        (1, 3, 3, 8, 5, 3, 3, (1, 1), (2, 2), (1, 1), 1),  # windows hanging over both sides
    ]
    for i, (n, h, w, cin, cout, kh, kw, s, p, d, g) in enumerate(kxk):
        cases.append(conv_case(rng, f"conv{kh}x{kw}_{n}x{h}x{w}x{cin}_to{cout}_s{s[0]}{s[1]}_p{p[0]}{p[1]}"
                               f"_d{d[0]}{d[1]}_g{g}", n, h, w, cin, cout, kh, kw, s, p, d, g,
                               per_channel=i % 3 != 1, bias=i % 4 != 2, nhwc=i % 5 == 4))  # fmt: skip
    # Channel pairs of the MVE conv: every Cout 1..9 (odd last channel), odd channels per group.
    for cout in range(1, 10):
        cases.append(conv_case(rng, f"conv3x3_pairs_cout{cout}", 1, 3, 2 + cout % 4, 5 + cout, cout, 3, 3,
                               pad=(1, 1), per_channel=cout % 2 == 1))  # fmt: skip
    cases.append(conv_case(rng, "conv1x1_groups3_odd", 1, 3, 3, 6, 9, 1, 1, groups=3))
    cases.append(conv_case(rng, "conv3x3_groups2_odd", 1, 4, 5, 6, 10, 3, 3, pad=(1, 1), groups=2))
    # First layers: few input channels, tall kernels, stride 2.
    cases.append(conv_case(rng, "conv_first_cin1_10x4_s2", 1, 49, 10, 1, 64, 10, 4, (2, 2), (4, 1)))
    cases.append(conv_case(rng, "conv_first_cin3_3x3_s2", 1, 15, 15, 3, 8, 3, 3, (2, 2), (1, 1)))
    cases.append(conv_case(rng, "conv_first_cin3_5x5_s1", 2, 7, 6, 3, 5, 5, 5, (1, 1), (2, 2)))
    # Depthwise: every channel tail 1..33, kernels, strides 1-3, padding, dilation, depth multipliers.
    for c in range(1, 34):
        kh, kw = [(3, 3), (3, 3), (5, 5), (2, 3), (1, 1), (3, 1)][c % 6]
        h, w = [(5, 5), (4, 6), (7, 3), (3, 4), (6, 6)][c % 5]
        stride = (1 + c % 3, 1 + (c // 2) % 3)
        pad = (min(c % 3, kh // 2 + 1), min((c // 3) % 3, kw // 2 + 1))
        dil = (1 + (c % 7 == 3), 1 + (c % 5 == 2))
        cases.append(dw_case(rng, f"dw{kh}x{kw}_c{c}_{h}x{w}_s{stride[0]}{stride[1]}_p{pad[0]}{pad[1]}_d{dil[0]}{dil[1]}",
                             1 + (c % 8 == 0), h, w, c, kh, kw, stride, pad, dil, per_channel=c % 4 != 1,
                             bias=c % 6 != 5, nhwc=c % 5 == 0))  # fmt: skip
    cases.append(dw_case(rng, "dw3x3_dscnn_like", 1, 6, 5, 64, 3, 3, pad=(1, 1)))
    cases.append(dw_case(rng, "dw3x3_c24_s2", 1, 9, 9, 24, 3, 3, (2, 2), (1, 1)))
    cases.append(dw_case(rng, "dw3x3_dm2_c3", 1, 5, 5, 3, 3, 3, pad=(1, 1), dm=2))
    cases.append(dw_case(rng, "dw3x3_dm3_c7", 1, 4, 5, 7, 3, 3, (2, 1), (1, 1), dm=3))
    # Depthwise 3x3 Helium paths: output rows split into left border / interior / right border
    # runs, kernel rows outside the image (weight sets), full 16-channel blocks (assembly) and
    # tails, and the per-pixel path (borders two wide, images narrower than the kernel).
    for i, (h, w) in enumerate([(1, 1), (1, 6), (2, 3), (3, 2), (4, 5), (5, 4), (6, 6), (6, 1), (3, 3), (2, 2)]):
        c = [16, 32, 20, 48, 40, 16, 33, 17, 64, 16][i]
        cases.append(dw_case(rng, f"dw3x3_rows_c{c}_{h}x{w}_p11", 1 + (i == 6), h, w, c, 3, 3, pad=(1, 1),
                             bias=i % 4 != 3, per_channel=i % 5 != 2, nhwc=i % 3 == 2))  # fmt: skip
    for h, w, c in [(5, 7, 16), (7, 5, 32), (3, 3, 24), (9, 6, 16), (6, 9, 40)]:
        cases.append(dw_case(rng, f"dw3x3_s2_c{c}_{h}x{w}_p11", 1, h, w, c, 3, 3, (2, 2), (1, 1)))
    for stride, pad, dil, c in [((1, 2), (1, 1), (1, 1), 16), ((2, 1), (1, 1), (1, 1), 32), ((1, 1), (0, 0), (1, 1), 16),
                                ((1, 1), (2, 2), (1, 1), 16), ((1, 1), (1, 1), (2, 2), 32), ((1, 1), (2, 1), (2, 2), 16),
                                ((3, 3), (1, 1), (1, 1), 16), ((1, 1), (1, 0), (1, 1), 24), ((1, 1), (0, 1), (1, 1), 16)]:
        cases.append(dw_case(rng, f"dw3x3_c{c}_7x6_s{stride[0]}{stride[1]}_p{pad[0]}{pad[1]}_d{dil[0]}{dil[1]}", 1, 7, 6,
                             c, 3, 3, stride, pad, dil))  # fmt: skip
    for off in (-127, 128):  # zero points 127 and -128 fill the padding row
        cases.append(dw_case(rng, f"dw3x3_c32_5x5_p11_in_off{off}", 1, 5, 5, 32, 3, 3, pad=(1, 1), input_offset=off))
    extreme = dw_case(rng, "dw3x3_c16_4x4_p11_int8_extremes", 1, 4, 4, 16, 3, 3, pad=(1, 1), input_offset=128)
    extreme.x[...] = -128  # the input zero point: every (x + input_offset) * w is 0, only the bias is left
    extreme.args["weight"][...] = -128
    cases.append(extreme)
    extreme2 = dw_case(rng, "dw3x3_c16_4x4_p11_min_weights", 1, 4, 4, 16, 3, 3, pad=(1, 1), input_offset=-127)
    extreme2.x[...] = 127
    extreme2.args["weight"][...] = -128
    cases.append(extreme2)
    # conv1d as H = 1 (issue 17): im2col rows, strides, padding, dilation, groups; depthwise 1xK
    cases.append(conv_case(rng, "conv1d_k5_s2_p2_40to32", 1, 1, 49, 40, 32, 1, 5, (1, 2), (0, 2)))
    cases.append(conv_case(rng, "conv1d_k3_d2_p2_17to9", 2, 1, 13, 17, 9, 1, 3, (1, 1), (0, 2), (1, 2), nhwc=True))
    cases.append(conv_case(rng, "conv1d_k1_groups4", 1, 1, 25, 32, 32, 1, 1, groups=4))
    cases.append(conv_case(rng, "conv1d_k3_groups2_d3", 1, 1, 20, 12, 8, 1, 3, (1, 1), (0, 3), (1, 3), groups=2))
    # Interior pixels' whole-chunk taps (issue 19): 16 channels per group, dilated 16 channels.
    cases.append(conv_case(rng, "conv3x3_g2_cin32_p1", 1, 6, 7, 32, 8, 3, 3, pad=(1, 1), groups=2))
    cases.append(conv_case(rng, "conv3x3_d2_cin16_p2", 1, 8, 9, 16, 6, 3, 3, pad=(2, 2), dil=(2, 2)))
    cases.append(dw_case(rng, "dw1d_k3_d2_p2_c32", 1, 1, 25, 32, 1, 3, (1, 1), (0, 2), (1, 2)))
    cases.append(dw_case(rng, "dw1d_k9_s2_p4_c19", 1, 1, 30, 19, 1, 9, (1, 2), (0, 4), nhwc=True))
    cases.append(dw_case(rng, "dw3x3_d3_p3_c16", 1, 8, 8, 16, 3, 3, (1, 1), (3, 3), (3, 3)))
    # the int8 sum (pool.py's _sum_node): all-one weights, a window spanning the reduced run
    # (R x 1 over [outer, R, 1, inner] views, or H x W), no bias, one multiplier
    for name, (n, h, w, c, kh, kw) in {"sum_c_as_rows_r8_c1": (64, 8, 1, 1, 8, 1),
                                       "sum_t_r5_c12": (2, 5, 1, 12, 5, 1),
                                       "sum_hw_8x8_c8": (1, 8, 8, 8, 8, 8),
                                       "sum_w_1x8_c19": (1, 8, 8, 19, 1, 8)}.items():
        case = dw_case(rng, name, n, h, w, c, kh, kw, per_channel=False, bias=False)
        case.args["weight"][...] = 1
        cases.append(case)
    # transposed conv: strides, padding, output_padding, dilation, channel tails, batch 2
    for i, (n, h, w, cin, cout, kh, kw, s, p, op, d) in enumerate([
        (1, 4, 4, 8, 6, 3, 3, (2, 2), (1, 1), (1, 1), (1, 1)),
        (1, 3, 5, 16, 4, 2, 2, (2, 2), (0, 0), (0, 0), (1, 1)),
        (2, 3, 3, 5, 7, 4, 3, (2, 3), (1, 0), (0, 2), (1, 1)),
        (1, 5, 4, 33, 9, 3, 3, (1, 1), (1, 1), (0, 0), (2, 2)),
        (1, 2, 2, 3, 1, 5, 5, (3, 3), (2, 2), (2, 1), (1, 1)),
        (1, 1, 8, 17, 10, 1, 4, (1, 2), (0, 1), (0, 1), (1, 1)),
        # kernel == stride, no padding: the tiled path (pixel tails 1-3, Cin tails, odd Cout)
        (2, 3, 6, 17, 7, 2, 2, (2, 2), (0, 0), (0, 0), (1, 1)),
        (1, 2, 3, 40, 5, 3, 3, (3, 3), (0, 0), (0, 0), (1, 1)),
        (1, 1, 9, 8, 3, 1, 2, (1, 2), (0, 0), (0, 0), (1, 1)),
        (1, 4, 4, 32, 16, 2, 2, (2, 2), (0, 0), (0, 0), (1, 1)),
    ]):
        cases.append(tconv_case(rng, f"tconv{kh}x{kw}_{n}x{h}x{w}x{cin}_to{cout}_s{s[0]}{s[1]}_p{p[0]}{p[1]}"
                                f"_op{op[0]}{op[1]}_d{d[0]}{d[1]}", n, h, w, cin, cout, kh, kw, s, p, op, d,
                                per_channel=i % 3 != 1, bias=i % 4 != 2, nhwc=i % 3 == 2))  # fmt: skip
    # A foreign plan's 1-byte scratch (ExecuTorch plans CMSIS-NN's smaller buffers): the kernels
    # take their Helium scratch from the method's shared region (the arena's tail, sized by
    # torchmcu.device.plan from their prepare steps; test_shared_scratch.py).
    short = np.random.default_rng(19)
    for case in (conv_case(short, "conv3x3_short_scratch", 1, 6, 7, 8, 12, 3, 3, pad=(1, 1)),
                 conv_case(short, "conv1x1_short_scratch", 1, 5, 5, 20, 9, 1, 1, nhwc=True),
                 tconv_case(short, "tconv2x2_short_scratch", 1, 3, 4, 16, 5, 2, 2),
                 # one input channel, depth multiplier Cout: the convolution's Helium path
                 dw_case(short, "dw10x4_cin1_dm24_s2", 1, 13, 7, 1, 10, 4, (2, 2), (4, 1), dm=24),
                 dw_case(short, "dw3x3_cin1_dm5_nhwc", 2, 5, 6, 1, 3, 3, (1, 1), (1, 1), dm=5, nhwc=True)):
        case.args["scratch_bytes"] = 1
        cases.append(case)
    return cases


def _build_program(cases: list[Case]) -> tuple[pm.Program, list[np.ndarray]]:
    """The Program of all cases and its inputs (logical arrays, in method input order)."""
    b = ProgramBuilder()
    inputs = []
    for i, case in enumerate(cases):
        a = case.args
        misalign = i % 4  # int8 tensors at every offset mod 4: MVE byte loads need no alignment
        if case.op == "cortex_m::quantized_linear":
            rows, k = case.x.shape
            n = a["weights"].shape[0]
            xi = b.planned(pm.ScalarType.CHAR, [rows, k], [0, 1], rows * k, misalign)
            out = b.planned(pm.ScalarType.CHAR, [rows, n], [0, 1], rows * n, (i + 1) % 4)
            args = [
                xi, b.const(a["weights"], pm.ScalarType.CHAR),
                b.none() if a["bias"] is None else b.const(a["bias"], pm.ScalarType.INT),
                b.none() if a["kernel_sum"] is None else b.const(a["kernel_sum"], pm.ScalarType.INT),
                b.int(a["input_offset"]), b.int(a["filter_offset"]), b.int(a["output_offset"]),
                b.int_list(a["multipliers"]), b.int_list(a["shifts"]), b.int(a["act_max"]), b.int(a["act_min"]),
                out, out,
            ]  # fmt: skip
            inputs.append(case.x)
        else:
            n, h, w, c = case.x.shape
            wt = a["weight"]
            depthwise = "depthwise" in case.op
            transposed = "transpose" in case.op
            cout = wt.shape[3] if depthwise else wt.shape[0]
            kh, kw = wt.shape[1], wt.shape[2]
            if transposed:
                oh, ow = (
                    (size - 1) * a["stride"][i] - 2 * a["padding"][i] + a["dilation"][i] * (k - 1)
                    + a["output_padding"][i] + 1
                    for i, (size, k) in enumerate(((h, kh), (w, kw)))
                )  # fmt: skip
            else:
                oh = (h + 2 * a["padding"][0] - a["dilation"][0] * (kh - 1) - 1) // a["stride"][0] + 1
                ow = (w + 2 * a["padding"][1] - a["dilation"][1] * (kw - 1) - 1) // a["stride"][1] + 1
            nhwc = a["nhwc"]
            in_sizes, out_sizes = ([n, h, w, c], [n, oh, ow, cout]) if nhwc else ([n, c, h, w], [n, cout, oh, ow])
            order = [0, 1, 2, 3] if nhwc else NHWC_LEGACY
            xi = b.planned(pm.ScalarType.CHAR, in_sizes, order, n * h * w * c, misalign)
            out = b.planned(pm.ScalarType.CHAR, out_sizes, order, n * oh * ow * cout, (i + 2) % 4)
            op_key = case.op.removesuffix("_nhwc")
            nscratch = a.get("scratch_bytes") or SCRATCH_BYTES[op_key]((n, h, w, c), tuple(wt.shape))
            scratch = b.planned(pm.ScalarType.BYTE, [nscratch], [0], nscratch, (i + 3) % 4)
            args = [
                xi, b.const(wt, pm.ScalarType.CHAR),
                b.none() if a["bias"] is None else b.const(a["bias"], pm.ScalarType.INT),
                b.int_list(a["stride"]), b.int_list(a["padding"]),
            ]  # fmt: skip
            if transposed:
                args.append(b.int_list(a["output_padding"]))
            args.append(b.int_list(a["dilation"]))
            if depthwise:
                args.append(b.int(a["depth_multiplier"]))
            args += [
                b.int(a["input_offset"]), b.int(a["output_offset"]),
                b.const(a["multipliers"], pm.ScalarType.INT), b.const(a["shifts"], pm.ScalarType.INT),
                b.int(a["act_min"]), b.int(a["act_max"]), scratch, *([scratch] if transposed else []), out, out,
            ]  # fmt: skip
            inputs.append(case.x if nhwc else case.x.transpose(0, 3, 1, 2))
        b.inputs.append(xi)
        b.outputs.append(out)
        b.call(case.op, args)
    return b.program(), inputs


CASES = all_cases()


@pytest.fixture(scope="session")
def mve_run(tmp_path_factory: pytest.TempPathFactory):
    """Reference, host-runtime and QEMU outputs of every case (one image, one emulator run)."""
    program, inputs = _build_program(CASES)
    expected = interpreter.run_program(program, inputs)
    pte = serialize(program)
    host = native.run_program(pte, inputs)
    build_dir = tmp_path_factory.mktemp("fw-mve-conv")
    on_device, result = device.run_samples(pte, BOARD, [inputs], build_dir, timeout=120)
    return expected, host, on_device[0], result


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
def test_mve_bit_exact(mve_run, index: int) -> None:
    expected, host, on_device, _ = mve_run
    want = expected[index]
    assert host[index].tobytes() == want.tobytes(), "host (scalar) kernel differs from the reference"
    got = on_device[index]
    if got.tobytes() != want.tobytes():
        diff = np.argwhere(got != want)
        first = tuple(int(v) for v in diff[0])
        pytest.fail(f"{CASES[index].name}: {len(diff)} of {want.size} outputs differ on QEMU; first at "
                    f"{first}: got {got[first]}, want {want[first]}")


def test_cases_exercise_the_outputs(mve_run) -> None:
    """The requantization scales leave the outputs spread (not all clamped), so the
    comparisons above can fail."""
    expected = mve_run[0]
    spread = [len(np.unique(e)) for e in expected if e.size >= 64]
    assert spread and np.median(spread) > 20


def test_short_scratch_served_by_the_shared_region(mve_run) -> None:
    """The short-scratch cases ask for a shared scratch, and the image holds it: no TM_SCRATCH
    line (the runner's report of kernels left to their scalar path)."""
    program, _ = _build_program(CASES)
    assert native.program_info(serialize(program))["scratch_bytes"] > 16
    assert "TM_SCRATCH" not in mve_run[3].console


def test_image_is_an_mve_build(mve_run) -> None:
    """The image under test holds the Helium kernels (not a scalar-only build)."""
    result = mve_run[3]
    elf = Path(result.command[result.command.index("-kernel") + 1])
    objdump = shutil.which("arm-none-eabi-objdump")
    if objdump is None:
        pytest.skip("arm-none-eabi-objdump not found")
    import subprocess

    text = subprocess.run([objdump, "-d", "-m", "armv8.1-m.main", str(elf)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    assert "vmlava.s8" in text and "vqrdmulh.s32" in text


@pytest.mark.parametrize(
    ("channel", "field", "value"),
    [(5, "shifts", 32), (13, "shifts", -32), (9, "multipliers", 2**31), (12, "multipliers", -(2**31) - 1)],
)
def test_mve_linear_rejects_requant_out_of_range(tmp_path: Path, channel: int, field: str, value: int) -> None:
    """The Helium build's vectorised multiplier/shift check (four channels per step, tail
    lanes predicated: 14 channels) rejects one bad item anywhere and names the list."""
    from torchmcu.device.run import FirmwareRunError

    case = linear_case(np.random.default_rng(7), "bad_requant", 1, 64, 14, "kernel_sum", per_channel=True)
    items = [int(v) for v in case.args[field]]
    items[channel] = value
    case.args[field] = items
    program, inputs = _build_program([case])
    with pytest.raises(FirmwareRunError) as err:
        device.run_samples(serialize(program), BOARD, [inputs], tmp_path, timeout=60)
    index = 7 if field == "multipliers" else 8  # schema positions of multipliers / shifts
    assert "op=cortex_m::quantized_linear overload=out instruction=0 value=" in str(err.value)
    assert f" argument={index} " in str(err.value)
