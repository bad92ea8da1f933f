"""torchmcu::upsample2d.out: float32 nearest / nearest-exact / bilinear resizing for float regions,
and the fp32 rules of aten::upsample_nearest2d.vec, _upsample_nearest_exact2d.vec and
upsample_bilinear2d.vec that emit it. Conventions: defs/portable.py.

ExecuTorch's portable upsample kernels take the scale factors as a float list, which this
runtime does not pass to kernels; this operator takes the float scales ATen's CPU kernels
compute instead (`1 / scale_factor`, `in / out`, or `(in - 1) / (out - 1)` with
align_corners) and follows their float32 coordinate arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from torchmcu.ops.core import Bound, Kernel, op, pattern
from torchmcu.ops.defs.portable import F32, FLOAT_MAX, f32_tensor
from torchmcu.ops.layout import disjoint, laid_out_as
from torchmcu.pte import program as pm

MODES = ("nearest", "nearest-exact", "bilinear", "bilinear-align")

CONTRACT = """\
- `input`, `out`: float32, contiguous `[N, C, H, W]` (H, W >= 1), the same N and C, apart.
- `mode`: 0 nearest, 1 nearest-exact, 2 bilinear, 3 bilinear with align_corners.
  `scale_h`, `scale_w`: Doubles in [0, FLT_MAX], used as float32: the source step per output
  index (ATen's `compute_scales_value` / `area_pixel_compute_scale`).
- Per axis (size I, output size O, float32 arithmetic):
  - nearest: `i = o` if `O == I`, `o >> 1` if `O == 2 I`, else `floorf(o * scale)`;
    nearest-exact: `floorf((o + 0.5) * scale)` (the product in double); both `min(i, I - 1)`.
  - bilinear: `real = scale * o` (align_corners) or `max(scale * (o + 0.5) - 0.5, 0)`;
    `i0 = min(floor(real), I - 1)`, `i1 = i0 + (i0 < I - 1)`, `l1 = clamp(real - i0, 0, 1)`,
    `l0 = 1 - l1`; `out = l0_y (l0_x v00 + l1_x v01) + l1_y (l0_x v10 + l1_x v11)`, each product
    and sum rounded to float32 (no fused multiply-add).
- PyTorch's CPU kernel computes the same coordinates; its bilinear sums may associate
  differently (last-bit differences)."""


def _axis_nearest(size: int, out: int, scale: float, exact: bool) -> np.ndarray:
    o = np.arange(out)
    s = F32(scale)
    if exact:
        i = np.floor(((o + 0.5) * np.float64(s)).astype(F32))
    elif out == size:
        i = o
    elif out == 2 * size:
        i = o >> 1
    else:
        i = np.floor(o.astype(F32) * s)
    return np.minimum(i.astype(np.int64), size - 1)


def _axis_linear(size: int, out: int, scale: float, align: bool) -> tuple[np.ndarray, ...]:
    o = np.arange(out).astype(F32)
    s = F32(scale)
    real = s * o if align else np.maximum(s * (o + F32(0.5)) - F32(0.5), F32(0))
    i0 = np.minimum(np.floor(real).astype(np.int64), size - 1)
    i1 = i0 + (i0 < size - 1)
    l1 = np.clip(real - i0.astype(F32), F32(0), F32(1)).astype(F32)
    return i0, i1, (F32(1) - l1).astype(F32), l1


def upsample2d(
    x: np.ndarray, out_hw: tuple[int, int], mode: int, sh: float, sw: float
) -> np.ndarray:
    """The reference on a float32 [N, C, H, W] array."""
    _, _, h, w = x.shape
    oh, ow = out_hw
    if mode < 2:
        ys, xs = _axis_nearest(h, oh, sh, mode == 1), _axis_nearest(w, ow, sw, mode == 1)
        return np.ascontiguousarray(x[:, :, ys][:, :, :, xs])
    y0, y1, ly0, ly1 = _axis_linear(h, oh, sh, mode == 3)
    x0, x1, lx0, lx1 = _axis_linear(w, ow, sw, mode == 3)
    r0, r1 = x[:, :, y0], x[:, :, y1]
    top = (lx0 * r0[..., x0]).astype(F32) + (lx1 * r0[..., x1]).astype(F32)
    bottom = (lx0 * r1[..., x0]).astype(F32) + (lx1 * r1[..., x1]).astype(F32)
    ly0, ly1 = ly0[:, None], ly1[:, None]
    return ((ly0 * top).astype(F32) + (ly1 * bottom).astype(F32)).astype(F32)


def _scale(b: Bound, name: str) -> float:
    v = b.value(name)
    if not (isinstance(v, pm.Double) and 0.0 <= v.value <= FLOAT_MAX):
        raise b.reject(name, "expected a Double in [0, FLT_MAX]")
    return v.value


def check(b: Bound) -> None:
    """upsample2d.c's TM_ARG_CHECKs, in its order."""
    x = f32_tensor(b, "input", 4, 4)
    if not (laid_out_as(x.sizes, x.dim_order, range(4)) and x.sizes[2] > 0 and x.sizes[3] > 0):
        raise b.reject("input", "expected a contiguous [N, C, H, W] float32 tensor, H, W >= 1")
    b.int_in("mode", 0, len(MODES) - 1)
    _scale(b, "scale_h")
    _scale(b, "scale_w")
    out = b.value("out")
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == pm.ScalarType.FLOAT
        and len(out.sizes) == 4
        and laid_out_as(out.sizes, out.dim_order, range(4))
        and list(out.sizes[:2]) == list(x.sizes[:2])
        and min(out.sizes[2:]) > 0
        and disjoint(x, out)
    ):
        raise b.reject("out", "expected a contiguous float32 [N, C, OH, OW] of the input's N, C")


def reference(b: Any) -> np.ndarray:
    out = b.tensor("out")
    result = upsample2d(b.logical("input"), tuple(out.sizes[2:]), b.mode, b.scale_h, b.scale_w)
    return b.to_out(result)


UPSAMPLE2D = op(
    "torchmcu::upsample2d.out(Tensor input, int mode, float scale_h, float scale_w, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="portable",
    kernel=Kernel("tm_torchmcu_upsample2d_out", "portable/upsample2d.c"),
    reference=reference,
    check=check,
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def aten_scale(size: int, out: int, factor: float | None, mode: str) -> float:
    """The float32 step ATen's CPU kernels use along one axis."""
    if mode == "bilinear-align":
        return float(F32(size - 1) / F32(out - 1)) if out > 1 else 0.0
    if factor is not None and factor > 0:
        return float(F32(1.0 / factor))
    return float(F32(size) / F32(out))


def _emit(k: Any, node: Any, mode: str) -> None:
    x = k.float_input(node.args[0])
    if x.rank != 4:
        raise k.unsupported(node, "resize of a tensor that is not 4-D")
    _, _, h, w = x.sizes
    out = k.float_out(node)
    oh, ow = out.sizes[2], out.sizes[3]
    factors = k.aten_arg(node, "scale_factors", None)
    fy, fx = (None, None) if factors is None else (float(factors[0]), float(factors[-1]))
    sh, sw = aten_scale(h, oh, fy, mode), aten_scale(w, ow, fx, mode)
    k.call(UPSAMPLE2D, node, input=x.vi, mode=k.int_(MODES.index(mode)), scale_h=k.double(sh),
           scale_w=k.double(sw), out=out.vi)  # fmt: skip


def lower_nearest(k: Any, node: Any) -> None:
    _emit(k, node, "nearest")


def lower_nearest_exact(k: Any, node: Any) -> None:
    _emit(k, node, "nearest-exact")


def lower_bilinear(k: Any, node: Any) -> None:
    align = bool(k.aten_arg(node, "align_corners", False))
    _emit(k, node, "bilinear-align" if align else "bilinear")


pattern("aten::upsample_nearest2d.vec", lower_float=lower_nearest, emits=(UPSAMPLE2D,))
pattern("aten::_upsample_nearest_exact2d.vec", lower_float=lower_nearest_exact,
        emits=(UPSAMPLE2D,))  # fmt: skip
pattern("aten::upsample_bilinear2d.vec", lower_float=lower_bilinear, emits=(UPSAMPLE2D,))
