"""torchmcu::resize2d, defined once in torchmcu/ops/defs/resize.py: nearest against torch's
float64 F.interpolate, bilinear against an exact rational formula written here (and within
half a step of torch's float64 bilinear), the C kernel and the TOSA lowering (TOSA reference
model) bit-exact with the reference, the argument check naming what the C kernel names, and
a tiny U-Net exported for corstone-300 as int8 calls only, the host runtime bit-exact with
the reference interpreter."""

from __future__ import annotations

from fractions import Fraction
from math import floor

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from _arg_checks import assert_every_stage_names
from _pte_programs import Planned, call_program
from torch import nn
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support, run_tosa_reference
from torchmcu.ops.defs.portable_resize import MODES, aten_scale, upsample2d
from torchmcu.ops.defs.resize import axis_params, resize2d
from torchmcu.ops.intmath import single_rounding_multiplier
from torchmcu.pte import program as pm
from torchmcu.quantize import TorchmcuQuantizer
from torchmcu.reference.interpreter import run_program

RESIZE = ops.get("torchmcu::resize2d.out")
A = RESIZE.schema.A
NHWC = [0, 2, 3, 1]


def _program(shape, out_hw, scale, offset, bilinear, multiplier=0, shift=0):
    n, h, w, c = shape
    program = call_program(
        RESIZE.key,
        {
            "input": Planned([n, c, h, w], NHWC),
            "scale": list(scale),
            "offset": list(offset),
            "bilinear": 0,
            "multiplier": multiplier,
            "shift": shift,
            "out": Planned([n, c, *out_hw], NHWC),
        },
    )
    plan = program.execution_plan[0]
    plan.values[plan.chains[0].instructions[0].args[A.bilinear]] = pm.Bool(bool(bilinear))
    return program


def _params(h, w, oh, ow, mode, factor=None):
    (yn, yd, oy), (xn, xd, ox) = (
        axis_params(s, o, Fraction(factor) if factor else Fraction(o, s), mode)
        for s, o in ((h, oh), (w, ow))
    )
    m, s = single_rounding_multiplier(1 / (yn * xn)) if mode.startswith("bilinear") else (0, 0)
    return [yn, yd, xn, xd], [oy, ox], m, s


def _all_stages(x_nhwc, out_hw, scale, offset, bilinear, m, s):
    """The reference, the interpreter, the C kernel and the TOSA reference model on one case:
    all equal; returns the NHWC result."""
    n, h, w, c = x_nhwc.shape
    want = resize2d(x_nhwc, out_hw, scale, offset, bilinear, m, s)
    program = _program(x_nhwc.shape, out_hw, scale, offset, bilinear, m, s)
    logical = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))
    (interpreted,) = run_program(program, [logical])
    np.testing.assert_array_equal(interpreted.transpose(0, 2, 3, 1), want)
    out = np.zeros((n, *out_hw, c), np.int8)
    native.call_kernel(
        "torchmcu::resize2d",
        [
            native.TensorArg(np.ascontiguousarray(x_nhwc), [n, c, h, w], NHWC),
            list(scale),
            list(offset),
            bool(bilinear),
            m,
            s,
            native.TensorArg(out, [n, c, *out_hw], NHWC),
        ],
    )
    np.testing.assert_array_equal(out, want)
    plan = program.execution_plan[0]
    if npu_support(plan, 0, "u85") is None:
        (got,) = run_tosa_reference(lower_to_tosa(program), [x_nhwc])
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    return want


NEAREST = [  # (N, H, W, C), (OH, OW), mode, scale factor or None
    ((1, 4, 6, 5), (8, 12), "nearest", 2.0),
    ((2, 3, 5, 17), (9, 15), "nearest", 3.0),
    ((1, 6, 4, 3), (10, 7), "nearest", None),
    ((1, 8, 6, 16), (4, 3), "nearest", None),
    ((1, 3, 5, 4), (5, 8), "nearest-exact", None),
    ((1, 4, 4, 33), (8, 8), "nearest-exact", 2.0),
]


@pytest.mark.parametrize(("shape", "out_hw", "mode", "factor"), NEAREST)
def test_nearest_is_torch_interpolate(shape, out_hw, mode, factor):
    x = np.random.default_rng(sum(shape)).integers(-128, 128, shape, dtype=np.int8)
    scale, offset, m, s = _params(shape[1], shape[2], *out_hw, mode, factor)
    got = _all_stages(x, out_hw, scale, offset, False, m, s)
    t = torch.from_numpy(x.transpose(0, 3, 1, 2).astype(np.float64))
    kw = {"scale_factor": factor} if factor else {"size": out_hw}
    want = F.interpolate(t, mode=mode, **kw).numpy().transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(got, want.astype(np.int8))


def _exact_bilinear(x: np.ndarray, out_hw, align: bool) -> np.ndarray:
    """PyTorch's bilinear coordinates in exact rationals, rounded once half up."""

    def taps(size, out):
        rows = []
        for o in range(out):
            if align:
                src = Fraction(o * (size - 1), out - 1) if out > 1 else Fraction(0)
            else:
                src = max(
                    Fraction(2 * o + 1, 2) * Fraction(size, out) - Fraction(1, 2), Fraction(0)
                )
            i0 = floor(src)
            rows.append((i0, min(i0 + 1, size - 1), src - i0))
        return rows

    n, h, w, c = x.shape
    out = np.zeros((n, *out_hw, c), np.int64)
    for oy, (y0, y1, ly) in enumerate(taps(h, out_hw[0])):
        for ox, (x0, x1, lx) in enumerate(taps(w, out_hw[1])):
            for b in range(n):
                for ch in range(c):
                    v = (1 - ly) * (
                        (1 - lx) * int(x[b, y0, x0, ch]) + lx * int(x[b, y0, x1, ch])
                    ) + ly * ((1 - lx) * int(x[b, y1, x0, ch]) + lx * int(x[b, y1, x1, ch]))
                    out[b, oy, ox, ch] = floor(v + Fraction(1, 2))
    return out


BILINEAR = [  # (N, H, W, C), (OH, OW), align_corners: weight sums S = 16 and 4 (exact division)
    ((1, 4, 6, 5), (8, 12), False),
    ((1, 3, 3, 19), (6, 6), False),
    ((1, 5, 3, 6), (9, 5), True),
]


@pytest.mark.parametrize(("shape", "out_hw", "align"), BILINEAR)
def test_bilinear_is_the_exact_formula_and_half_a_step_from_torch(shape, out_hw, align):
    x = np.random.default_rng(sum(shape)).integers(-128, 128, shape, dtype=np.int8)
    scale, offset, m, s = _params(
        shape[1], shape[2], *out_hw, "bilinear-align" if align else "bilinear"
    )
    got = _all_stages(x, out_hw, scale, offset, True, m, s)
    np.testing.assert_array_equal(got, _exact_bilinear(x, out_hw, align))
    t = torch.from_numpy(x.transpose(0, 3, 1, 2).astype(np.float64))
    torch_out = F.interpolate(t, size=out_hw, mode="bilinear", align_corners=align).numpy()
    assert np.abs(got - torch_out.transpose(0, 2, 3, 1)).max() <= 0.5 + 1e-9


def test_c_kernel_and_tosa_are_bit_exact_with_the_reference_on_generated_geometries():
    """Ratios whose weight sums are not powers of two (multiplier not exact), offsets at the
    rule's ends, channel tails."""
    rng = np.random.default_rng(17)
    for _ in range(24):
        h, w, c = (*(int(v) for v in rng.integers(1, 7, 2)), int(rng.integers(1, 21)))
        oh, ow = (int(v) for v in rng.integers(1, 13, 2))
        bilinear = bool(rng.integers(2))
        scale, offset = [], []
        for size, out in ((h, oh), (w, ow)):
            n = int(rng.integers(1, 12))
            scale += [n, int(rng.integers(1, 16 * n))]
            offset.append(int(rng.integers(-n, 16 * n)))
        m, s = single_rounding_multiplier(1 / (scale[0] * scale[2])) if bilinear else (0, 0)
        x = rng.integers(-128, 128, (1, h, w, c), dtype=np.int8)
        _all_stages(x, (oh, ow), scale, offset, bilinear, m, s)


def test_npu_support_is_what_vela_5_2_accepts():
    two_x = _program((1, 4, 4, 8), (8, 8), [4, 2, 4, 2], [-1, -1], False)
    four_x = _program((1, 4, 4, 8), (16, 16), [8, 2, 8, 2], [-3, -3], False)
    bilinear = _program((1, 4, 4, 8), (8, 8), [4, 2, 4, 2], [-1, -1], True, 1 << 27, 0)
    for family in ("u55", "u65", "u85"):
        assert npu_support(two_x.execution_plan[0], 0, family) is None
    for family in ("u55", "u65"):
        assert "2x" in npu_support(four_x.execution_plan[0], 0, family)
        assert "bilinear" in npu_support(bilinear.execution_plan[0], 0, family)
    assert npu_support(four_x.execution_plan[0], 0, "u85") is None
    assert npu_support(bilinear.execution_plan[0], 0, "u85") is None


# (scale, offset, multiplier, shift, out H, W, C, the argument named)
BAD = [
    ([0, 1, 2, 1], [0, 0], 0, 0, (8, 8, 4), A.scale),  # scale_n 0
    ([2, 32, 2, 1], [0, 0], 0, 0, (8, 8, 4), A.scale),  # d >= 16 n
    ([2, 1, 2, 1, 1], [0, 0], 0, 0, (8, 8, 4), A.scale),  # 5 items
    ([2, 1, 2, 1], [-3, 0], 0, 0, (8, 8, 4), A.offset),  # offset < -n
    ([2, 1, 2, 1], [0, 32], 0, 0, (8, 8, 4), A.offset),  # offset >= 16 n
    ([2, 1, 2, 1], [0, 0], -1, 0, (8, 8, 4), A.multiplier),
    ([2, 1, 2, 1], [0, 0], 0, 32, (8, 8, 4), A.shift),
    ([2, 1, 2, 1], [0, 0], 0, 0, (8, 8, 5), A.out),  # other C
]


@pytest.mark.parametrize(("scale", "offset", "m", "s", "out", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(scale, offset, m, s, out, bad):
    x = np.zeros((1, 4, 4, 4), np.int8)
    res = np.zeros((1, out[0], out[1], out[2]), np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(
            "torchmcu::resize2d",
            [
                native.TensorArg(x, [1, 4, 4, 4], NHWC),
                scale,
                offset,
                False,
                m,
                s,
                native.TensorArg(res, [1, out[2], out[0], out[1]], NHWC),
            ],
        )
    program = _program((1, 4, 4, 4), out[:2], scale, offset, False, m, s)
    if out[2] != 4:
        plan = program.execution_plan[0]
        plan.values[plan.chains[0].instructions[0].args[A.out]].sizes[1] = out[2]
    assert_every_stage_names(RESIZE, program, bad, [np.zeros((1, 4, 4, 4), np.int8)])


class TinyUNet(nn.Module):
    """conv, maxpool, conv, nearest upsample x2, the skip joined by add, conv; and a bilinear
    branch (both align_corners forms) and a size= nearest on the side."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        skip = F.relu(self.enc(x), inplace=True)
        y = F.relu(self.mid(F.max_pool2d(skip, 2)))
        y = self.dec(self.up(y) + skip)
        side = F.interpolate(F.max_pool2d(skip, 2), scale_factor=2, mode="bilinear")
        side = F.interpolate(side, size=(12, 12), mode="bilinear", align_corners=True)
        return y, F.interpolate(side, size=(6, 6))


@pytest.fixture(scope="module")
def unet():
    torch.manual_seed(0)
    model = TinyUNet().eval()
    calibration = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    return torchmcu.export(
        model, calibration[0], calibration=calibration, board="corstone-300", int8_io=True
    )


def test_tiny_unet_exports_int8_and_runs_bit_exact_on_the_host(unet):
    counts = unet.report["op_counts"]
    assert counts.get("torchmcu::resize2d") == 4
    assert all(ops.get(f"{k}.out").family == "int8" for k in counts), counts  # no float op
    x = np.random.default_rng(3).integers(-128, 128, (1, 3, 8, 8), dtype=np.int8)
    ours = native.run_program(unet.pte_bytes, [x])
    want = run_program(unet.program, [x])
    for o, r in zip(ours, want):
        np.testing.assert_array_equal(o, r)


FP32 = [  # (H, W), (OH, OW), mode, scale factor or None
    ((4, 6), (8, 12), "nearest", 2.0),
    ((3, 5), (7, 11), "nearest", None),
    ((5, 3), (8, 4), "nearest-exact", None),
    ((4, 6), (8, 12), "bilinear", 2.0),
    ((4, 4), (6, 6), "bilinear", 1.5),
    ((3, 5), (7, 11), "bilinear", None),
    ((5, 3), (9, 5), "bilinear-align", None),
]


@pytest.mark.parametrize(("hw", "out_hw", "mode", "factor"), FP32)
def test_fp32_kernel_is_the_reference_and_torch(hw, out_hw, mode, factor):
    """torchmcu::upsample2d (float regions): the C kernel bit-exact with the numpy reference;
    nearest equal to torch's float32 F.interpolate, bilinear within float32 rounding of it."""
    x = np.random.default_rng(sum(hw)).standard_normal((2, 3, *hw)).astype(np.float32)
    sh, sw = (aten_scale(s, o, factor, mode) for s, o in zip(hw, out_hw))
    want = upsample2d(x, out_hw, MODES.index(mode), sh, sw)
    out = np.zeros((2, 3, *out_hw), np.float32)
    native.call_kernel("torchmcu::upsample2d", [x, MODES.index(mode), sh, sw, out])
    assert out.tobytes() == want.tobytes()
    kw = {"scale_factor": factor} if factor else {"size": out_hw}
    if mode.startswith("bilinear"):
        kw["align_corners"] = mode == "bilinear-align"
    torch_out = F.interpolate(torch.from_numpy(x), mode=mode.replace("-align", ""), **kw).numpy()
    tolerance = 0 if mode.startswith("nearest") else 1e-6
    np.testing.assert_allclose(out, torch_out, rtol=0, atol=tolerance)


def test_tiny_unet_with_float_resizes_runs_bit_exact_on_the_host():
    torch.manual_seed(0)
    quantizer = TorchmcuQuantizer().set_operator(torch.ops.aten.upsample_nearest2d.vec, None)
    quantizer.set_operator(torch.ops.aten.upsample_bilinear2d.vec, None)
    calibration = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    exported = torchmcu.export(TinyUNet().eval(), calibration[0], calibration=calibration,
                               quantizer=quantizer)  # fmt: skip
    assert exported.report["op_counts"].get("torchmcu::upsample2d") == 4
    x = torch.randn(1, 3, 8, 8).numpy()
    for o, r in zip(
        native.run_program(exported.pte_bytes, [x]), run_program(exported.program, [x])
    ):
        assert o.tobytes() == r.tobytes()
