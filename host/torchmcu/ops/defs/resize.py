"""torchmcu::resize2d: nearest and bilinear 2-D resizing of an int8 NHWC activation.

Defined here once: the argument check (the rules firmware/kernels/cortex_m/resize2d.c
enforces, naming the same argument), the reference, the TOSA lowering and its NPU support
rule, the contract, and the aten rules that emit it (aten::upsample_nearest2d.vec,
_upsample_nearest_exact2d.vec, upsample_bilinear2d.vec), which get the lowering Kit
(torchmcu/lower/kit.py) as `k`.

The arithmetic is TOSA 1.0 RESIZE's integer form, so the Cortex-M kernel and the NPU agree
bit for bit: per axis a rational step scale_n / scale_d and an offset (the source coordinate
of output pixel o is (o * scale_d + offset) / scale_n), with integer bilinear weights in units
of scale_n. NEAREST output is a copy of an input pixel (the qparams pass through); BILINEAR
accumulates in int32 with weights summing to S = scale_y_n * scale_x_n and divides by S with
one requantization (multiplier, shift: single_rounding_multiplier(1 / S)), keeping the input's
qparams.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Npu, op, pattern
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    requantize,
    single_rounding_multiplier,
)
from torchmcu.ops.layout import activation_dims, disjoint
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

SIZE_LIMIT = 16384  # TOSA: every H and W below it (int32 coordinates never overflow)
SCALE_N_MAX = 2048  # TOSA: scale_n <= 2^11
SHIFT_MIN, SHIFT_MAX = -31, 31
RATIO_MAX = 1024  # the aten rules: numerator and denominator of a scale factor

CONTRACT = """\
- `input`, `out`: int8 4-D activations, legacy `[N, C, H, W]` sizes with NHWC bytes, the same
  N and C, every H and W in [1, 16383]; `out` shares no byte with `input`.
- `scale` = `[scale_y_n, scale_y_d, scale_x_n, scale_x_d]`, `offset` = `[offset_y, offset_x]`
  (TOSA 1.0 RESIZE's parameters): per axis `1 <= n <= 2048`, `1 <= d < 16 n`,
  `-n <= offset < 16 n`.
- Per axis and output index o: `v = o * d + offset`, `i = floor(v / n)`, `r = v - i * n`
  (`0 <= r < n`), `i0 = clamp(i, 0, size - 1)`, `i1 = clamp(i + 1, 0, size - 1)`.
- `bilinear` false (NEAREST): `out[o_y, o_x] = input[2 r_y >= n_y ? i1_y : i0_y, ...x]`, all
  channels; `multiplier` and `shift` are range-checked only. The output keeps the input's
  qparams.
- `bilinear` true: `acc = v00 (n_y - r_y)(n_x - r_x) + v01 (n_y - r_y) r_x + v10 r_y (n_x - r_x)
  + v11 r_y r_x` on the raw int8 values (rows i0/i1, columns i0/i1), then
  `out = clamp(requantize(acc, multiplier, shift), -128, 127)`; the exporter passes
  `single_rounding_multiplier(1 / (n_y n_x))` (exactly `floor(acc / S + 1/2)` when S is a
  power of two, e.g. 16 for a 2x upsample). The weights sum to S, so the zero point passes
  through and the output keeps the input's qparams.
- TOSA RESIZE computes the same (its border is `(OH - 1) d - (H - 1) n + offset`); the
  exporter's parameters, for a ratio `out/in = a/b` (the scale factor, else the sizes):
  nearest `n = 2a, d = 2b, offset = -a` (`floor(o b / a)`, PyTorch's `nearest`), or
  `offset = b - a` for `nearest-exact` and for integer upscales (where both agree);
  bilinear, align_corners false: `n = 2a, d = 2b, offset = b - a`; true:
  `a/b = (OH - 1)/(H - 1)`, offset 0.
- **Differs from float PyTorch**: PyTorch computes the source coordinate and the bilinear
  weights in float (`1/scale` or `in/out`), then the quantized model rounds the float result
  with its own observer's qparams. Here coordinates and weights are exact rationals and the
  result is rounded once, half up, on the input's grid: bilinear outputs differ by at most one
  step, nearest indices agree except where PyTorch's float product falls below an exact
  integer (non-integer ratios only)."""


def axis_sources(size: int, out_size: int, n: int, d: int, offset: int) -> tuple[np.ndarray, ...]:
    """(i0, i1, r) of every output index along one axis."""
    v = np.arange(out_size, dtype=np.int64) * d + offset
    i = np.floor_divide(v, n)
    r = v - i * n
    return np.clip(i, 0, size - 1), np.clip(i + 1, 0, size - 1), r


def resize2d(
    x: np.ndarray,
    out_hw: Sequence[int],
    scale: Sequence[int],
    offset: Sequence[int],
    bilinear: bool,
    multiplier: int,
    shift: int,
) -> np.ndarray:
    """The reference on an NHWC int8 array."""
    x = np.asarray(x)
    _, h, w, _ = x.shape
    yn, yd, xn, xd = (int(s) for s in scale)
    y0, y1, ry = axis_sources(h, int(out_hw[0]), yn, yd, int(offset[0]))
    x0, x1, rx = axis_sources(w, int(out_hw[1]), xn, xd, int(offset[1]))
    if not bilinear:
        ys = np.where(2 * ry >= yn, y1, y0)
        xs = np.where(2 * rx >= xn, x1, x0)
        return np.ascontiguousarray(x[:, ys][:, :, xs])
    v = x.astype(np.int64)
    wy1, wx1 = ry[None, :, None, None], rx[None, None, :, None]
    wy0, wx0 = yn - wy1, xn - wx1
    acc = (
        v[:, y0][:, :, x0] * wy0 * wx0
        + v[:, y0][:, :, x1] * wy0 * wx1
        + v[:, y1][:, :, x0] * wy1 * wx0
        + v[:, y1][:, :, x1] * wy1 * wx1
    )
    return np.clip(requantize(acc, multiplier, shift), INT8_MIN, INT8_MAX).astype(np.int8)


def _ints(b: Bound, name: str, count: int) -> list[int]:
    if not isinstance(b.value(name), pm.IntList) or len(b.scalar(name)) != count:
        raise b.reject(name, f"expected {count} ints")
    return [int(v) for v in b.scalar(name)]


def _dims(b: Bound, name: str) -> tuple[int, int, int, int]:
    dims = activation_dims(b.value(name), False)
    if dims is None or not all(1 <= s < SIZE_LIMIT for s in dims[1:3]):
        raise b.reject(
            name,
            f"expected a 4-D int8 activation ([N, C, H, W] sizes, NHWC memory,"
            f" H and W in [1, {SIZE_LIMIT - 1}])",
        )
    return dims


def check(b: Bound) -> None:
    """resize2d.c's TM_ARG_CHECKs, in its order, on a bound call."""
    n, _, _, c = _dims(b, "input")
    scale = _ints(b, "scale", 4)
    for k in range(0, 4, 2):
        if not (1 <= scale[k] <= SCALE_N_MAX and 1 <= scale[k + 1] < 16 * scale[k]):
            raise b.reject(
                "scale",
                f"item {k} must be in [1, {SCALE_N_MAX}] and item {k + 1} in [1, 16 * item {k})",
            )
    offset = _ints(b, "offset", 2)
    for k in range(2):
        if not -scale[2 * k] <= offset[k] < 16 * scale[2 * k]:
            raise b.reject("offset", f"item {k} must be in [-scale_n, 16 * scale_n)")
    if not isinstance(b.value("bilinear"), pm.Bool):
        raise b.reject("bilinear", "expected a bool")
    b.int_in("multiplier", 0, INT32_MAX)
    b.int_in("shift", SHIFT_MIN, SHIFT_MAX)
    out = _dims(b, "out")
    if out[0] != n or out[3] != c or not disjoint(b.tensor("input"), b.tensor("out")):
        raise b.reject(
            "out",
            f"expected an activation of the input's N ({n}) and C ({c}), apart from the input",
        )


def _out_hw(b: Any) -> tuple[int, int]:
    _, oh, ow, _ = activation_dims(b.value("out"), False)  # type: ignore[misc]
    return oh, ow


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the out's NHWC memory."""
    return resize2d(
        b.nhwc("input", False), _out_hw(b), b.scale, b.offset, b.bilinear, b.multiplier, b.shift
    )


def tosa_border(size: int, out_size: int, n: int, d: int, offset: int) -> int:
    return (out_size - 1) * d - (size - 1) * n + offset


# Vela 5.2 (measured on TOSA graphs): Ethos-U85 runs every RESIZE form the check allows;
# Ethos-U55 and U65 run only a 2x NEAREST upscale in the half-pixel form, scale 4/2, offset -1
# (border 1), on both axes. BILINEAR, other factors and the (2/1, offset -1) form of the same
# 2x NEAREST stay on the CPU there.
NPU_2X_NEAREST = (4, 2, -1)


def npu_support(b: Bound, family: str) -> str | None:
    _, h, w, _ = activation_dims(b.value("input"), False)  # type: ignore[misc]
    oh, ow = _out_hw(b)
    yn, yd, xn, xd = b.scale
    oy, ox = b.offset
    for size, out_size, n, d, off in ((h, oh, yn, yd, oy), (w, ow, xn, xd, ox)):
        if not -16 * n <= tosa_border(size, out_size, n, d, off) < n:
            return "resize whose output size needs a TOSA border outside [-16 n, n)"
    if family == "u85":
        return None
    if b.bilinear:
        return f"bilinear resize (Vela 5.2 runs RESIZE BILINEAR on Ethos-U85 only, not {family})"
    if (yn, yd, oy) != NPU_2X_NEAREST or (xn, xd, ox) != NPU_2X_NEAREST:
        return f"nearest resize other than 2x (Vela 5.2 runs only 2x on {family})"
    return None


def lower_tosa(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """TOSA RESIZE (g: tosa Graph, a: its Bound); BILINEAR's int32 result through one RESCALE."""
    a.checked()
    n, h, w, c = activation_dims(a.value("input"), False)
    oh, ow = _out_hw(a)
    yn, yd, xn, xd = a.scale
    oy, ox = a.offset
    border = [tosa_border(h, oh, yn, yd, oy), tosa_border(w, ow, xn, xd, ox)]
    x = g.reshape(read(a.index("input")), (n, h, w, c))
    out = g.resize(x, a.bilinear, (a.scale, a.offset, border), (n, oh, ow, c))
    if a.bilinear:
        out = g.requantize(out, [a.multiplier], [a.shift], 0)
    return out


_NPU = Npu(
    lower_tosa, npu_support, doc="TOSA RESIZE (BILINEAR + RESCALE); Ethos-U55/U65: 2x nearest"
)
_SCHEMA = (
    "torchmcu::resize2d.out(Tensor input, int[] scale, int[] offset, bool bilinear,"
    " int multiplier, int shift, *, Tensor(a!) out) -> Tensor(a!)"
)
RESIZE2D = op(_SCHEMA, family="int8",
              reference=reference, check=check, npu=_NPU, contract=CONTRACT)  # fmt: skip


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _ratio(k: Any, node: Any, size: int, out_size: int, factor: Any) -> Fraction:
    """out/in of one axis: PyTorch steps by 1/scale_factor when one is given, else by the sizes."""
    r = Fraction(float(factor)) if factor is not None else Fraction(out_size, size)
    if r <= 0 or r.numerator > RATIO_MAX or r.denominator > RATIO_MAX:
        raise k.unsupported(
            node, f"resize ratio {float(r)} (needs a fraction a/b with a, b <= {RATIO_MAX})"
        )
    return r


def axis_params(size: int, out_size: int, r: Fraction, mode: str) -> tuple[int, int, int]:
    """(scale_n, scale_d, offset) of one axis for mode "nearest", "nearest-exact", "bilinear"
    or "bilinear-align" (the contract's table)."""
    a, b = r.numerator, r.denominator
    if mode == "bilinear-align":
        if out_size == 1 or size == 1:
            return (1, 1, 0) if out_size == 1 else (2 * out_size, 2, 1 - out_size)
        f = Fraction(out_size - 1, size - 1)
        return f.numerator, f.denominator, 0
    if mode == "nearest" and a % b:
        return 2 * a, 2 * b, -a
    return 2 * a, 2 * b, b - a  # half-pixel centres


def _emit(k: Any, node: Any, mode: str, factors: Any) -> None:
    x = k.input_value(node.args[0])
    if x.rank != 4:
        raise k.unsupported(node, "resize of a tensor that is not 4-D")
    x = k.as_nhwc(x)
    _, _, h, w = x.sizes
    out_shape = k.shape_of(node)
    oh, ow = out_shape[2], out_shape[3]
    fy, fx = (None, None) if factors is None else (factors[0], factors[-1])
    if mode == "bilinear-align":  # PyTorch steps by (in - 1) / (out - 1) whatever was given
        fy = fx = None
    params = [
        axis_params(s, o, _ratio(k, node, s, o, f), mode) for s, o, f in ((h, oh, fy), (w, ow, fx))
    ]
    (yn, yd, oy), (xn, xd, ox) = params
    if max(yn, xn) > SCALE_N_MAX:
        raise k.unsupported(
            node, f"resize {h}x{w} -> {oh}x{ow} (scale numerator above {SCALE_N_MAX})"
        )
    qs, act, qp = k.output_quant(node, allow_activation=False)
    if not k.same_qparams(x.scale, x.zero_point, qp):
        raise k.unsupported(
            node,
            "resize needs equal input and output qparams (annotate it with torchmcu's quantizer)",
        )
    bilinear = mode.startswith("bilinear")
    m, s = single_rounding_multiplier(1.0 / (yn * xn)) if bilinear else (0, 0)
    out = k.new_int8(node.name, out_shape, qp, nhwc=True)
    scale, offset = k.int_list([yn, yd, xn, xd]), k.int_list([oy, ox])
    k.call(RESIZE2D, node, input=x.vi, scale=scale, offset=offset, bilinear=k.bool_(bilinear),
           multiplier=k.int_(m), shift=k.int_(s), out=out.vi)  # fmt: skip
    k.bind_output(qs, act, out)


def lower_nearest(k: Any, node: Any) -> None:
    """aten::upsample_nearest2d.vec: PyTorch's legacy nearest, floor(o * in / out)."""
    _emit(k, node, "nearest", k.aten_arg(node, "scale_factors", None))


def lower_nearest_exact(k: Any, node: Any) -> None:
    """aten::_upsample_nearest_exact2d.vec: floor((o + 1/2) * in / out)."""
    _emit(k, node, "nearest-exact", k.aten_arg(node, "scale_factors", None))


def lower_bilinear(k: Any, node: Any) -> None:
    """aten::upsample_bilinear2d.vec, align_corners false or true."""
    align = bool(k.aten_arg(node, "align_corners", False))
    _emit(
        k, node, "bilinear-align" if align else "bilinear", k.aten_arg(node, "scale_factors", None)
    )


_ANCHOR = Annotate("anchor")  # the input's qparams, shared by the output
pattern("aten::upsample_nearest2d.vec", annotate=_ANCHOR, lower=lower_nearest, emits=(RESIZE2D,))
pattern(
    "aten::_upsample_nearest_exact2d.vec",
    annotate=_ANCHOR,
    lower=lower_nearest_exact,
    emits=(RESIZE2D,),
)
pattern("aten::upsample_bilinear2d.vec", annotate=_ANCHOR, lower=lower_bilinear, emits=(RESIZE2D,))
