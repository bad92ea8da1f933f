"""cortex_m::quantized_avg_pool2d and quantized_max_pool2d, each with its _nhwc alias.

Defined here once: the argument checks (the rules firmware/kernels/cortex_m/
quantized_avg_pool2d.c and quantized_max_pool2d.c enforce, naming the same argument), the
references, the scratch size, the TOSA lowerings and their NPU support rules, the contracts,
and the aten rules that emit them (aten::max_pool2d, avg_pool2d, adaptive_avg_pool2d,
mean.dim, amax, and sum.dim_IntList: the mean's views with cortex_m::quantized_depthwise_conv2d
of all-one weights in place of the average), which get the lowering Kit
(torchmcu/lower/kit.py) as `k`. The fp32 rules of
adaptive_avg_pool2d and mean.dim are the portable family's.

On the NPU, average pool: CMSIS-NN divides the int32 window sum by the tap count rounding
half away from zero; TOSA's AVG_POOL2D rounds ties upwards. With an odd count there are no
ties, and AVG_POOL2D (zero points -128, so its accumulator is never negative) equals CMSIS-NN
for every possible window sum - checked exhaustively against TOSA's reciprocal_scale
arithmetic. With an even count the sum is taken by a DEPTHWISE_CONV2D with constant weights w
(acc = w * sum) and divided by one RESCALE (DOUBLE_ROUND) whose (multiplier, shift) equals the
half-away division for every sum, again checked exhaustively. Both need the same count for
every window (no padding, no partial ceil-mode window).

An even-count window covering the whole input (a global pool, 1x1 output) takes its sum in two
exact int32 steps that Vela runs far faster than a depthwise kernel spanning the whole input: a
DEPTHWISE_CONV2D summing each row and a REDUCE_SUM (U85: ADDs) of the rows (see
ops/global_sum.py; very long rows: TRANSPOSE of the positions into channels and a 1x1
CONV2D), then the same exact RESCALE.

An odd-count global pool of at least FOLD_CHANNELS_MIN channels that is its input's one reader
pools the input reshaped to
[N, H*W, 2, C/2] with an (H*W, 1) window (each position's channels split across the width):
the same sums, which Vela runs in about half the cycles (_channels_in_width).

A window covering the whole (possibly cropped) input is lowered with stride 1: the output is
1x1 either way, and Ethos-U55 accepts no pooling stride above 3.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import (
    Annotate,
    ArgError,
    Bound,
    Kernel,
    KernelVariants,
    Npu,
    nhwc_variant,
    op,
    pattern,
)
from torchmcu.ops.defs.conv import QUANTIZED_DEPTHWISE_CONV2D
from torchmcu.ops.defs.pad import PAD
from torchmcu.ops.defs.transpose import TRANSPOSE
from torchmcu.ops.global_sum import global_sum
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT32_MAX,
    INT32_MIN,
    check_activation,
    check_int,
    quantize_multiplier,
    round_half_away,
    tosa_double_round,
)
from torchmcu.ops.layout import activation_dims, fit_window, pair, pool_output_size
from torchmcu.ops.npu_limits import POOL_KERNEL_AREA_MAX, POOL_KERNEL_Y_MAX, stride_reason
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

SHIFT_MIN, SHIFT_MAX = -31, 31


# -- the numpy references (NHWC arrays)
_NO_PAD = (0, 0, 0, 0)  # a TOSA window's padding: top, bottom, left, right

def windows(x: np.ndarray, kernel_size: Sequence[int], stride: Sequence[int],
            padding: Sequence[int], ceil_mode: bool,
            dilation: Sequence[int] = (1, 1)) -> tuple[np.ndarray, np.ndarray]:
    """(N, OH, OW, KH, KW, C) windows of x and a matching (OH, OW, KH, KW) in-bounds mask;
    tap j of a window starting at y0 reads row y0 + j * dilation."""
    kh, kw = pair(kernel_size, "kernel_size")
    sh, sw = pair(stride, "stride")
    ph, pw = pair(padding, "padding")
    dh, dw = pair(dilation, "dilation")
    if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw) < 0 or ph > kh // 2 or pw > kw // 2:
        raise ValueError("pooling needs kernel, stride, dilation >= 1 and 0 <= padding <= kernel // 2")
    _, h, w, _ = x.shape
    oh = pool_output_size(h, dh * (kh - 1) + 1, sh, ph, ceil_mode)
    ow = pool_output_size(w, dw * (kw - 1) + 1, sw, pw, ceil_mode)
    if oh < 1 or ow < 1:
        raise ValueError("empty pooling output")
    rows = (np.arange(oh) * sh - ph)[:, None] + dh * np.arange(kh)[None, :]  # (OH, KH)
    cols = (np.arange(ow) * sw - pw)[:, None] + dw * np.arange(kw)[None, :]  # (OW, KW)
    rv = (rows >= 0) & (rows < h)
    cv = (cols >= 0) & (cols < w)
    win = x[:, np.clip(rows, 0, h - 1)[:, :, None, None], np.clip(cols, 0, w - 1)[None, None, :, :], :]
    win = win.transpose(0, 1, 3, 2, 4, 5)  # N, OH, OW, KH, KW, C
    valid = (rv[:, :, None, None] & cv[None, None, :, :]).transpose(0, 2, 1, 3)  # OH, OW, KH, KW
    return win, valid


def quantized_avg_pool2d(
    input: np.ndarray,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool,
    zero_point: int,
    multiplier: int,
    shift: int,
    scratch: np.ndarray | None = None,
) -> np.ndarray:
    """Mean of the in-bounds taps of the raw int8 values, rounded half away from zero (CMSIS-NN)."""
    del scratch
    check_int("zero_point", zero_point, INT8_MIN, INT8_MAX)
    check_int("multiplier", multiplier, INT32_MIN, INT32_MAX)
    check_int("shift", shift, SHIFT_MIN, SHIFT_MAX)
    win, valid = windows(np.asarray(input, dtype=np.int64), kernel_size, stride, padding, bool(ceil_mode))
    mask = valid[None, :, :, :, :, None]
    total = np.where(mask, win, 0).sum(axis=(3, 4))
    count = valid.sum(axis=(2, 3))[None, :, :, None]
    return np.clip(round_half_away(total, count), INT8_MIN, INT8_MAX).astype(np.int8)


def quantized_max_pool2d(
    input: np.ndarray,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
    input_zero_point: int,
    output_zero_point: int,
    activation_min: int,
    activation_max: int,
) -> np.ndarray:
    """Max of the in-bounds (dilated) taps, clamped to the activation range; a window with
    no in-bounds tap (possible with dilation) gives activation_min."""
    check_int("input_zero_point", input_zero_point, INT8_MIN, INT8_MAX)
    if output_zero_point != input_zero_point:
        raise ValueError("quantized_max_pool2d needs output_zero_point == input_zero_point")
    check_activation(activation_min, activation_max)
    win, valid = windows(np.asarray(input, dtype=np.int64), kernel_size, stride, padding,
                         bool(ceil_mode), dilation)
    mask = valid[None, :, :, :, :, None]
    best = np.where(mask, win, INT8_MIN - 1).max(axis=(3, 4))
    return np.clip(best, activation_min, activation_max).astype(np.int8)


def adaptive_bounds(o: int, out: int, size: int) -> tuple[int, int]:
    """torch's adaptive window of output o: [floor(o * size / out), ceil((o + 1) * size / out))."""
    return o * size // out, -(-(o + 1) * size // out)


def _adaptive(x: np.ndarray, out_hw: tuple[int, int], reduce: Callable[[np.ndarray], Any]) -> np.ndarray:
    """reduce((N, taps, C) window) -> (N, C) for every adaptive window of NHWC x."""
    n, h, w, c = x.shape
    oh, ow = out_hw
    out = np.zeros((n, oh, ow, c), dtype=np.int64)
    for i in range(oh):
        y0, y1 = adaptive_bounds(i, oh, h)
        for j in range(ow):
            x0, x1 = adaptive_bounds(j, ow, w)
            out[:, i, j, :] = reduce(x[:, y0:y1, x0:x1, :].reshape(n, -1, c))
    return out


def quantized_adaptive_avg_pool2d(input: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """Mean of each adaptive window's raw int8 values, rounded half away from zero."""
    x = np.asarray(input, dtype=np.int64)
    out = _adaptive(x, out_hw, lambda t: round_half_away(t.sum(axis=1), t.shape[1]))
    return np.clip(out, INT8_MIN, INT8_MAX).astype(np.int8)


def quantized_adaptive_max_pool2d(input: np.ndarray, out_hw: tuple[int, int], activation_min: int,
                                  activation_max: int) -> np.ndarray:
    """Max of each adaptive window, clamped to the activation range."""
    check_activation(activation_min, activation_max)
    out = _adaptive(np.asarray(input, dtype=np.int64), out_hw, lambda t: t.max(axis=1))
    return np.clip(out, activation_min, activation_max).astype(np.int8)


def quantized_avg_pool2d_scratch_bytes(input_nhwc: tuple[int, int, int, int]) -> int:
    """tm_quantized_avg_pool2d_scratch_bytes: none (the MVE path keeps its sums in registers)."""
    del input_nhwc
    return 0


# -- the checks: the C kernels' TM_ARG_CHECKs in their order
def _nhwc_sizes(b: Bound) -> bool:
    """The _nhwc aliases give input and out NHWC sizes; the others legacy NCHW sizes."""
    return b.op.variant_of is not None


def _activation(b: Bound, name: str) -> tuple[int, int, int, int]:
    dims = activation_dims(b.value(name), _nhwc_sizes(b))
    if dims is None:
        sizes = "[N, H, W, C]" if _nhwc_sizes(b) else "[N, C, H, W]"
        raise b.reject(name, f"expected a 4-D int8 activation, {sizes} sizes with NHWC memory")
    return dims


def _window(b: Bound) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """tm_pool_window_args: (kernel, stride, padding), padding at most half the kernel."""
    kernel = b.pair_in("kernel_size", 1, INT16_MAX, allow_single=True)
    stride = b.pair_in("stride", 1, INT16_MAX, allow_single=True)
    padding = b.pair_or_none("padding", 0, INT16_MAX, allow_single=True)
    if padding is None or padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise b.reject("padding", "expected 1 or 2 ints in [0, kernel // 2]")
    return kernel, stride, padding


def _out(b: Bound, dims: tuple[int, int, int, int], window: Any, ceil_mode: bool,
         dilation: tuple[int, int] = (1, 1)) -> None:
    """The out activation: the input's N and C, the pooled H and W (tm_window_out_dims)."""
    n, h, w, c = dims
    (kh, kw), (sh, sw), (ph, pw) = window
    oh = pool_output_size(h, dilation[0] * (kh - 1) + 1, sh, ph, ceil_mode)
    ow = pool_output_size(w, dilation[1] * (kw - 1) + 1, sw, pw, ceil_mode)
    got = activation_dims(b.value("out"), _nhwc_sizes(b))
    if not (oh > 0 and ow > 0 and got == (n, oh, ow, c)):
        raise b.reject("out", f"expected a 4-D int8 activation of NHWC dims {[n, oh, ow, c]}")


def _ceil_mode(b: Bound) -> bool:
    v = b.value("ceil_mode")
    if not isinstance(v, pm.Bool):
        raise b.reject("ceil_mode", "expected a bool")
    return v.value


def check_avg(b: Bound) -> None:
    """quantized_avg_pool2d.c's checks, in its order."""
    dims = _activation(b, "input")
    window = _window(b)
    ceil_mode = _ceil_mode(b)
    b.int_in("zero_point", INT8_MIN, INT8_MAX)
    b.int_in("multiplier", INT32_MIN, INT32_MAX)
    b.int_in("shift", SHIFT_MIN, SHIFT_MAX)
    s = b.value("scratch")
    needed = quantized_avg_pool2d_scratch_bytes(dims)
    if not (
        isinstance(s, pm.Tensor)
        and len(s.sizes) == 1
        and s.scalar_type in (pm.ScalarType.BYTE, pm.ScalarType.CHAR)
        and s.nbytes >= needed
    ):
        raise b.reject("scratch", f"expected a 1-D byte tensor of at least {needed} bytes")
    _out(b, dims, window, ceil_mode)


def check_max(b: Bound) -> None:
    """quantized_max_pool2d.c's checks, in its order."""
    dims = _activation(b, "input")
    window = _window(b)
    dilation = b.pair_in("dilation", 1, INT16_MAX, allow_single=True)
    ceil_mode = _ceil_mode(b)
    zp = b.int_in("input_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_zero_point", zp, zp)
    act_min = b.int_in("activation_min", INT8_MIN, INT8_MAX)
    b.int_in("activation_max", act_min, INT8_MAX)
    _out(b, dims, window, ceil_mode, dilation)


def reference_avg(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the out's NHWC memory."""
    return quantized_avg_pool2d(b.nhwc("input", _nhwc_sizes(b)), b.kernel_size, b.stride,
                                b.padding, b.ceil_mode, b.zero_point, b.multiplier, b.shift)


def reference_max(b: Any) -> np.ndarray:
    return quantized_max_pool2d(b.nhwc("input", _nhwc_sizes(b)), b.kernel_size, b.stride,
                                b.padding, b.dilation, b.ceil_mode, b.input_zero_point,
                                b.output_zero_point, b.activation_min, b.activation_max)


def _adaptive_out(b: Bound, dims: tuple[int, int, int, int]) -> None:
    """The out activation: the input's N and C, any H and W >= 1."""
    got = activation_dims(b.value("out"), False)
    if not (got is not None and got[0] == dims[0] and got[3] == dims[3] and min(got[1:3]) > 0):
        raise b.reject("out", f"expected a 4-D int8 activation of the input's N and C ({dims[0]},"
                       f" {dims[3]}), H and W >= 1, [N, C, H, W] sizes with NHWC memory")


def _adaptive_input(b: Bound) -> tuple[int, int, int, int]:
    dims = _activation(b, "input")
    if min(dims[1:3]) < 1:
        raise b.reject("input", "expected H and W >= 1")
    return dims


def check_adaptive_avg(b: Bound) -> None:
    """quantized_avg_pool2d.c's adaptive entry's checks (tm_adaptive_pool_args)."""
    _adaptive_out(b, _adaptive_input(b))


def check_adaptive_max(b: Bound) -> None:
    """quantized_max_pool2d.c's adaptive entry's checks, in its order."""
    check_adaptive_avg(b)
    act_min = b.int_in("activation_min", INT8_MIN, INT8_MAX)
    b.int_in("activation_max", act_min, INT8_MAX)


def reference_adaptive_avg(b: Any) -> np.ndarray:
    return quantized_adaptive_avg_pool2d(b.nhwc("input", False), _out_hw(b))


def reference_adaptive_max(b: Any) -> np.ndarray:
    return quantized_adaptive_max_pool2d(b.nhwc("input", False), _out_hw(b), b.activation_min,
                                         b.activation_max)


# -- NPU support (b: a checked Bound) and the TOSA lowerings (g: tosa Graph, a: its Bound)
def _kernel_reason(b: Bound, kind: str) -> str | None:
    kh, kw = pair(b.kernel_size)
    if kh > POOL_KERNEL_Y_MAX or kh * kw > POOL_KERNEL_AREA_MAX:
        return f"{kind} kernel {kh}x{kw} exceeds the NPU's limit (height <= 256, area <= 65536)"
    return None


def _out_hw(b: Bound) -> tuple[int, int]:
    _, oh, ow, _ = activation_dims(b.value("out"), _nhwc_sizes(b))  # type: ignore[misc]
    return oh, ow


# -- variants: quantized_avg_pool2d.c's Helium paths (TM_VARIANT_*), by the windows' tap counts
AVG_MVE_MAX_COUNT = 1 << 23  # its AVG_MVE_MAX_COUNT: larger windows take the scalar loop
AVG_SUM16_MAX = 256  # windows of at most this many taps sum in int16 lanes, larger in int32
AVG_VARIANTS = ("sum16", "sum32", "scalar")


def _avg_variants(kh: int, kw: int, rows: set[int], cols: set[int]) -> list[str]:
    """The paths of windows whose in-bounds extents are `rows` x `cols`, for a call whose
    (largest) window is kh x kw."""
    if kh * kw > AVG_MVE_MAX_COUNT:
        return ["scalar"]
    counts = {r * c for r in rows for c in cols}
    return (["sum16"] if min(counts) <= AVG_SUM16_MAX else []) + (
        ["sum32"] if max(counts) > AVG_SUM16_MAX else []
    )


def avg_variants(b: Bound) -> list[str]:
    """The paths of a quantized_avg_pool2d call (window_span: the in-bounds taps)."""
    dims = _activation(b, "input")
    (kh, kw), (sh, sw), (ph, pw) = _window(b)
    oh, ow = _out_hw(b)

    def extents(out: int, size: int, k: int, stride: int, pad: int) -> set[int]:
        return {min(size, o * stride - pad + k) - max(0, o * stride - pad) for o in range(out)}

    return _avg_variants(
        kh, kw, extents(oh, dims[1], kh, sh, ph), extents(ow, dims[2], kw, sw, pw)
    )


def adaptive_avg_variants(b: Bound) -> list[str]:
    """The paths of a quantized_adaptive_avg_pool2d call (torch's adaptive windows)."""
    _, h, w, _ = _adaptive_input(b)
    oh, ow = _out_hw(b)

    def extents(out: int, size: int) -> set[int]:
        return {hi - lo for lo, hi in (adaptive_bounds(o, out, size) for o in range(out))}

    # the kernel bounds a window by size // out + 2 positions per axis (its p.kh, p.kw)
    return _avg_variants(h // oh + 2, w // ow + 2, extents(oh, h), extents(ow, w))


def npu_support_avg(b: Bound, family: str) -> str | None:
    reason = _kernel_reason(b, "avg pool")
    if reason:
        return reason
    if any(pair(b.padding)):
        return "avg pool with padding divides border windows by fewer taps (not exact on the NPU)"
    _, h, w, _ = activation_dims(b.value("input"), _nhwc_sizes(b))  # type: ignore[misc]
    (kh, kw), (sh, sw), (oh, ow) = pair(b.kernel_size), pair(b.stride), _out_hw(b)
    if (oh - 1) * sh + kh > h or (ow - 1) * sw + kw > w:
        return "ceil-mode avg pool with a partial window (fewer taps) is not exact on the NPU"
    return stride_reason("avg pool", family, (sh, sw), (oh, ow))


def npu_support_max(b: Bound, family: str) -> str | None:
    if pair(b.dilation) != (1, 1):
        return "max pool with dilation (TOSA MAX_POOL2D has none)"
    return _kernel_reason(b, "max pool") or stride_reason("max pool", family, pair(b.stride), _out_hw(b))


@cache
def divisor(count: int) -> tuple[int, int, int]:
    """(weight, multiplier, tosa shift) with rescale(weight * s) == round_half_away(s / count)
    for every s in [-128 * count, 127 * count]."""
    sums = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    want = round_half_away(sums, count)
    for weight in (64, 127, 32, 16, 8, 4, 2, 1):
        for shift in range(62, 1, -1):
            multiplier = -(-(1 << shift) // (weight * count))  # ceil: never rounds the quotient down
            if multiplier >= 1 << 31:
                continue
            if np.array_equal(tosa_double_round(sums * weight, multiplier, shift), want):
                return weight, multiplier, shift
            break  # the largest usable shift failed; smaller ones are no more precise
    raise ValueError(f"no exact RESCALE divides by {count}")


def tosa_avg_pool_divide(total_minus_zp: np.ndarray, count: int) -> np.ndarray:
    """TOSA 1.0 AVG_POOL2D's integer division of an accumulator by the tap count."""
    k = (count - 1).bit_length()
    multiplier = (((1 << 30) + 1) << k) // count
    return (np.asarray(total_minus_zp, dtype=np.int64) * multiplier + (1 << (29 + k))) >> (30 + k)


@cache
def avg_pool_is_exact(count: int) -> bool:
    """AVG_POOL2D with zero points -128 equals the half-away mean for every int8 window sum."""
    if count % 2 == 0:
        return False
    sums = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    got = tosa_avg_pool_divide(sums + 128 * count, count) - 128
    return bool(np.array_equal(got, round_half_away(sums, count)))


def _checked(a: Any) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """The check's verdict as the lowering's error; (N, H, W, C) of input and out (both
    layouts: Args.nhwc_shape reads legacy sizes only)."""
    try:
        a.check()
    except ArgError as exc:
        raise a.error(str(exc)) from exc
    return _activation(a, "input"), _activation(a, "out")


# Fewest channels an odd-count global pool folds into width (_channels_in_width).
FOLD_CHANNELS_MIN = 64


def _channels_in_width(
    a: Any, read: Callable[[int], Any], hwc: tuple[int, int, int], out_hw: tuple[int, int],
    cropped: int,
) -> bool:
    """An exact (odd-count) global average pool is better pooled as [N, H*W, 2, C/2] by an
    (H*W, 1) window: each position's channels split in two halves across the width. Vela 5.2.0
    runs that AVG_POOL2D in about half the cycles (U55-128 / U85-256: 1x13x64 688 -> 412 /
    354 -> 222, 25x5x64 5,408 -> 2,652 / 2,656 -> 1,342, 7x7x96 3,628 -> 1,756 / 1,568 -> 886).
    Only where the pool is the input's one reader: the reshape of a tensor another op reads as
    it is costs a MemoryCopy (U55 1x13x64: 1,324). Its producer then writes a plain NHWC
    tensor, not Vela's faster brick layout (U85 1x13x64: 580 -> 658 cycles), which outweighs
    the gain below FOLD_CHANNELS_MIN channels (U85 3x3x10: +36 cycles in all, 3x3x32: +11)."""
    h, w, c = hwc
    if out_hw != (1, 1) or cropped or c % 2 or c < FOLD_CHANNELS_MIN:
        return False
    if not 1 < h * w <= POOL_KERNEL_Y_MAX:
        return False
    only_reader = getattr(read, "only_reader", None)
    return avg_pool_is_exact(h * w) and only_reader is not None and only_reader(a.index("input"))


def lower_tosa_avg(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    (n, h, w, c), (_, oh, ow, _) = _checked(a)
    (kh, kw), (sh, sw) = pair(a.kernel_size), pair(a.stride)
    if any(pair(a.padding)):
        raise a.error(
            "average pool with padding divides border windows by fewer taps; no exact NPU lowering"
        )
    # ceil_mode is fine as long as no window hangs over the edge
    if bool(a.ceil_mode) and ((oh - 1) * sh + kh > h or (ow - 1) * sw + kw > w):
        raise a.error("ceil-mode average pool has partial windows; no exact NPU lowering")
    if (pool_output_size(h, kh, sh, 0, False), pool_output_size(w, kw, sw, 0, False)) != (oh, ow):
        raise a.error(f"output {oh}x{ow} does not match the pooling geometry")
    if oh == 1:
        sh = 1
    if ow == 1:
        sw = 1
    pb, crop_h = fit_window(h, oh, kh, sh, 1, 0)
    pr, crop_w = fit_window(w, ow, kw, sw, 1, 0)
    if pb or pr:
        raise a.error("average pool window past the input edge")
    if _channels_in_width(a, read, (h, w, c), (oh, ow), crop_h or crop_w):
        folded = g.reshape(read(a.index("input")), (n, h * w, 2, c // 2))
        out = g.avg_pool2d(folded, [h * w, 1], [1, 1], (n, 1, 2, c // 2), -128)
        return g.reshape(out, (n, 1, 1, c))
    x = g.reshape(read(a.index("input")), (n, h, w, c))
    if crop_h or crop_w:
        x = g.slice(x, [0, 0, 0, 0], [n, h - crop_h, w - crop_w, c])
    if avg_pool_is_exact(kh * kw):
        return g.avg_pool2d(x, [kh, kw], [sh, sw], (n, oh, ow, c), -128)
    weight, multiplier, shift = divisor(kh * kw)
    if oh == 1 and ow == 1:
        return g.rescale(global_sum(g, x, weight, 0), "INT8", [multiplier], [shift])
    ones = np.full((kh, kw, c, 1), weight, dtype=np.int8)
    zeros = np.zeros(c, dtype=np.int32)
    acc = g.conv("DEPTHWISE_CONV2D", x, ones, zeros, 0, (n, oh, ow, c), _NO_PAD, [sh, sw], [1, 1])
    return g.rescale(acc, "INT8", [multiplier], [shift])


def lower_tosa_max(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    (n, h, w, c), (_, oh, ow, _) = _checked(a)
    (kh, kw), (sh, sw), (ph, pw) = pair(a.kernel_size), pair(a.stride), pair(a.padding)
    if pair(a.dilation) != (1, 1):
        raise a.error("max pool with dilation: TOSA MAX_POOL2D has no dilation")
    x = g.reshape(read(a.index("input")), (n, h, w, c))
    # ceil_mode: the partial last window is fit_window's padding after (fewer than kh rows,
    # as the last window starts inside the input), which MAX_POOL2D ignores like the rest
    if oh == 1 and ph == 0:
        sh = 1
    if ow == 1 and pw == 0:
        sw = 1
    pb, crop_h = fit_window(h, oh, kh, sh, 1, ph)
    pr, crop_w = fit_window(w, ow, kw, sw, 1, pw)
    if crop_h or crop_w:
        x = g.slice(x, [0, 0, 0, 0], [n, h - crop_h, w - crop_w, c])
    out = g.max_pool2d(x, [kh, kw], [sh, sw], [ph, pb, pw, pr], (n, oh, ow, c))
    return g.clamp(out, int(a.activation_min), int(a.activation_max))


# The bodies of their docs/operators.md sections (hand-kept until step 8 generates them)
AVG_CONTRACT = """\
- `input`/`out` int8 4-D activations (same layout kind), same N and C.
- `kernel_size`, `stride`, `padding`: lists of 1 (used for h and w) or 2 items `[h, w]`;
  kernel, stride >= 1; `0 <= pad <= kernel/2`.
- `OH = floor((H + 2p - k) / s) + 1`, or with `ceil_mode`: `ceil(...) + 1`, reduced by one if
  the last window would start at or beyond `H + p` (torch's rule). Same for W.
- `out = clamp(round_half_away_from_zero(S / count), -128, 127)` where S sums the raw int8
  values of the window's in-bounds taps and `count` is their number (padding excluded,
  i.e. `count_include_pad = False`; ExecuTorch materialises `count_include_pad=True` as an
  explicit `cortex_m::pad` with the zero point, then pools with padding 0). In integers:
  `(S + count//2) // count` for S > 0, `-((-S + count//2) // count)` otherwise.
- `zero_point`, `multiplier`, `shift` (= input zp and `quantize_multiplier(input_scale)`)
  are range-checked and otherwise unused: averaging commutes with the affine map, so the
  output keeps the input's qparams.
- **Differs from ExecuTorch's Python**: that dequantizes, averages in float32 and re-quantizes
  with `torch.round` (half to even, on `q - zp`, float noise permitting), so at exact .5
  averages it can differ by 1. ExecuTorch 1.5.1's C++ kernel (`op_quantized_avg_pool2d.cpp`)
  calls CMSIS-NN's `arm_avgpool_s8` and ignores zp/multiplier/shift; `arm_avgpool_s8` rounds the
  raw sum half away from zero (`(sum + count/2) / count` for sum > 0, `(sum - count/2) / count`
  otherwise). **Decision: we follow CMSIS-NN**, i.e. ExecuTorch's device kernel, so ExecuTorch
  programs give on our runtime what they give on ExecuTorch's own Cortex-M runtime; against its
  Python reference the outputs differ only downstream of such ties.
  `tests/test_interop_executorch.py` proves it per model and input: our runtime equals our
  reference interpreter on ExecuTorch's program, the interpreter with ExecuTorch Python's
  avg-pool formula swapped in equals ExecuTorch's Python outputs bit for bit, and every
  difference comes with at least one exact tie (ResNet8's 8x8 pool, the small CNN's 2x2 pool).
- `scratch`: 0 bytes needed."""
MAX_CONTRACT = """\
- Layout/list rules as avg_pool2d. `dilation`: 1 or 2 ints >= 1 (tap `j` of a window
  starting at `y0` reads row `y0 + j * dilation`); the output size is avg_pool2d's with the
  dilated kernel `dilation * (k - 1) + 1`, `ceil_mode` as there (torch's rule).
  `input_zero_point == output_zero_point` (ExecuTorch falls back to a portable op otherwise).
- `out = clamp(max over in-bounds taps, activation_min, activation_max)`; padding taps are
  ignored (not treated as any value); a window with no in-bounds tap (only possible with
  dilation) gives `activation_min`."""

_AVG_SCRATCH = "tm_quantized_avg_pool2d_scratch_bytes"

QUANTIZED_AVG_POOL2D = op(
    "cortex_m::quantized_avg_pool2d.out(Tensor input, int[] kernel_size, int[] stride,"
    " int[] padding, bool ceil_mode, int zero_point, int multiplier, int shift, Tensor scratch, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    scratch_c=_AVG_SCRATCH,
    reference=reference_avg,
    check=check_avg,
    scratch_bytes=quantized_avg_pool2d_scratch_bytes,
    variants=KernelVariants(AVG_VARIANTS, avg_variants),
    npu=Npu(
        lower=lower_tosa_avg,
        support=npu_support_avg,
        doc="TOSA AVG_POOL2D (odd tap counts), else an exact int32 sum (DEPTHWISE_CONV2D, ADD,"
        " REDUCE_SUM) and an exact RESCALE",
    ),
    contract=AVG_CONTRACT,
)

QUANTIZED_AVG_POOL2D_NHWC = nhwc_variant(QUANTIZED_AVG_POOL2D)

QUANTIZED_MAX_POOL2D = op(
    "cortex_m::quantized_max_pool2d.out(Tensor input, int[] kernel_size, int[] stride,"
    " int[] padding, int[] dilation, bool ceil_mode, int input_zero_point, int output_zero_point,"
    " int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference_max,
    check=check_max,
    npu=Npu(lower=lower_tosa_max, support=npu_support_max,
            doc="TOSA MAX_POOL2D (+ CLAMP), a ceil-mode partial window as padding after;"
            " dilation 1 only"),
    contract=MAX_CONTRACT,
)

QUANTIZED_MAX_POOL2D_NHWC = nhwc_variant(QUANTIZED_MAX_POOL2D)


ADAPTIVE_AVG_CONTRACT = """\
- `input`/`out` int8 4-D activations, legacy `[N, C, H, W]` sizes with NHWC memory, same N
  and C; `out`'s H and W are the output size (any sizes >= 1).
- Output `(i, j)` averages the window rows `[floor(i*H/OH), ceil((i+1)*H/OH))` and columns
  likewise (torch's adaptive windows; sizes that do not divide give windows of unequal and
  overlapping extent), as quantized_avg_pool2d: the raw int8 sum divided by the tap count,
  rounded half away from zero. The output keeps the input's qparams.
- Emitted where the windows are unequal; a dividing output size is quantized_avg_pool2d."""
ADAPTIVE_MAX_CONTRACT = """\
- Layout and windows as quantized_adaptive_avg_pool2d; `out = clamp(max of the window,
  activation_min, activation_max)`, qparams the input's."""

def _adaptive_op(kind: str, scalars: str, check: Callable[[Bound], None],
                 reference: Callable[[Any], np.ndarray], contract: str,
                 variants: KernelVariants | None = None) -> Any:
    name = f"quantized_adaptive_{kind}_pool2d"
    return op(
        f"torchmcu::{name}.out(Tensor input,{scalars} *, Tensor(a!) out) -> Tensor(a!)",
        family="int8",
        kernel=Kernel(f"tm_torchmcu_{name}_out", f"cortex_m/quantized_{kind}_pool2d.c"),
        reference=reference,
        check=check,
        no_npu="adaptive windows of unequal size (the output size does not divide the input)",
        contract=contract,
        variants=variants,
    )


QUANTIZED_ADAPTIVE_AVG_POOL2D = _adaptive_op(
    "avg", "", check_adaptive_avg, reference_adaptive_avg, ADAPTIVE_AVG_CONTRACT,
    KernelVariants(AVG_VARIANTS, adaptive_avg_variants))
QUANTIZED_ADAPTIVE_MAX_POOL2D = _adaptive_op(
    "max", " int activation_min, int activation_max,", check_adaptive_max, reference_adaptive_max,
    ADAPTIVE_MAX_CONTRACT)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _same_qparams(k: Any, node: Any, x: Any, qp: Any) -> None:
    if not k.same_qparams(x.scale, x.zero_point, qp):
        raise k.unsupported(node, "pooling needs equal input and output qparams (annotate it with "
                            "torchmcu's quantizer)")


def _window_values(k: Any, kernel: tuple[int, int], stride: tuple[int, int],
                   padding: tuple[int, int]) -> dict[str, int]:
    """The window's int lists, created in schema order (a k.call's kernel_size, stride, padding)."""
    return {"kernel_size": k.int_list(kernel), "stride": k.int_list(stride),
            "padding": k.int_list(padding)}


def _aten_window(k: Any, node: Any) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(kernel, stride, padding) of a max/avg pool node; stride defaults to the kernel."""
    kernel = k.pair(k.aten_arg(node, "kernel_size"), (1, 1))
    stride = k.pair(k.aten_arg(node, "stride") or list(kernel), kernel)
    padding = k.pair(k.aten_arg(node, "padding", 0), (0, 0))
    return kernel, stride, padding


def _max_pool(k: Any, node: Any, x: Any, kernel: tuple[int, int], stride: tuple[int, int],
              padding: tuple[int, int], dilation: tuple[int, int], ceil_mode: bool,
              out_sizes: Sequence[int], out_nhwc: bool = False) -> None:
    """Emit the max pool of NHWC x (legacy out sizes `out_sizes`) and bind node's output, a view
    of it with node's shape (NHWC if out_nhwc)."""
    qs, act, qp = k.output_quant(node, allow_activation=True)
    _same_qparams(k, node, x, qp)
    act_min, act_max = k.activation_range(act, qp)
    out = k.new_int8(node.name, out_sizes, qp, nhwc=True)
    k.call(
        QUANTIZED_MAX_POOL2D,
        node,
        input=x.vi,
        **_window_values(k, kernel, stride, padding),
        dilation=k.int_list(dilation),
        ceil_mode=k.bool_(ceil_mode),
        input_zero_point=k.int_(qp.zero_point),
        output_zero_point=k.int_(qp.zero_point),
        activation_min=k.int_(act_min),
        activation_max=k.int_(act_max),
        out=out.vi,
    )
    k.bind_output(qs, act, _as_node_shape(k, node, out, out_nhwc))


def _as_node_shape(k: Any, node: Any, out: Any, nhwc: bool = False) -> Any:
    """A pool's NHWC out as node's value: itself, or a view of its bytes with node's shape (a
    reduction's, a 1-D pool's [N, C, L]), NHWC or contiguous: the callers pool views whose
    output memory is in that order."""
    shape = list(k.shape_of(node))
    return out if shape == out.sizes else k.alias(out, shape, nhwc=nhwc)


def lower_max_pool2d(k: Any, node: Any) -> None:
    x = k.as_nhwc(k.input_value(node.args[0]))
    kernel, stride, padding = _aten_window(k, node)
    dilation = k.pair(k.aten_arg(node, "dilation", 1), (1, 1))
    ceil_mode = bool(k.aten_arg(node, "ceil_mode", False))
    _max_pool(k, node, x, kernel, stride, padding, dilation, ceil_mode, k.shape_of(node))


def _avg_pool(k: Any, node: Any, x: Any, kernel: tuple[int, int], stride: tuple[int, int],
              padding: tuple[int, int], ceil_mode: bool, count_include_pad: bool,
              out_sizes: list[int], qp: Any) -> Any:
    """Emit the avg pool (after an explicit pad when padding counts) and return its output."""
    _same_qparams(k, node, x, qp)
    if count_include_pad and padding != (0, 0):
        # Materialise the zero-point padding so the kernel's count excludes nothing.
        n, c, h, w = x.sizes
        padded = k.new_int8(f"{node.name}.pad", [n, c, h + 2 * padding[0], w + 2 * padding[1]],
                            qp, nhwc=True)
        pre = [0, padding[0], padding[1], 0]
        k.call(PAD, node, input=x.vi, pre_pad=k.int_list(pre), post_pad=k.int_list(pre),
               pad_value=k.int_(qp.zero_point), out=padded.vi)
        x, padding = padded, (0, 0)
    out = k.new_int8(node.name, out_sizes, qp, nhwc=True)
    m, s = quantize_multiplier(qp.scale)
    scratch = k.kernel_scratch(node.name, QUANTIZED_AVG_POOL2D, x)  # created before the scalars
    k.call(
        QUANTIZED_AVG_POOL2D,
        node,
        input=x.vi,
        **_window_values(k, kernel, stride, padding),
        ceil_mode=k.bool_(ceil_mode),
        zero_point=k.int_(qp.zero_point),
        multiplier=k.int_(m),
        shift=k.int_(s),
        scratch=scratch,
        out=out.vi,
    )
    return out


def _avg_pool_node(k: Any, node: Any, x: Any, kernel: tuple[int, int], stride: tuple[int, int],
                   padding: tuple[int, int], out_sizes: list[int], out_nhwc: bool = False) -> None:
    """avg_pool2d / avg_pool1d of NHWC x (legacy out sizes `out_sizes`), bound to node."""
    ceil_mode = bool(k.aten_arg(node, "ceil_mode", False))
    count_include_pad = bool(k.aten_arg(node, "count_include_pad", True))
    if ceil_mode and count_include_pad and padding != (0, 0):
        # torch divides a window by its taps inside the padded input: the kernel's count on an
        # explicitly padded input, as long as ceil mode gives the same number of windows there
        _, _, h, w = x.sizes
        padded = [pool_output_size(size + 2 * p, kk, ss, 0, True)
                  for size, p, kk, ss in zip((h, w), padding, kernel, stride)]
        if padded != list(out_sizes[2:]):
            raise k.unsupported(node, f"ceil_mode with count_include_pad: the padded input has "
                                f"{padded[0]}x{padded[1]} windows, torch's output fewer")
    qs, act, qp = k.output_quant(node, allow_activation=False)
    out = _avg_pool(k, node, x, kernel, stride, padding, ceil_mode, count_include_pad,
                    out_sizes, qp)
    k.bind_output(qs, act, _as_node_shape(k, node, out, out_nhwc))


def lower_avg_pool2d(k: Any, node: Any) -> None:
    x = k.as_nhwc(k.input_value(node.args[0]))
    kernel, stride, padding = _aten_window(k, node)
    if k.aten_arg(node, "divisor_override", None) is not None:
        raise k.unsupported(node, "divisor_override")
    _avg_pool_node(k, node, x, kernel, stride, padding, k.shape_of(node))


def _own_qparams_mean(k: Any, x: Any, window: tuple[int, int], qp: Any) -> bool:
    """A mean whose output has its own qparams (quantize/quantizer.py _annotate_mean): the
    requantized sum (_sum_node), which needs a window spanning whole axes of NHWC x."""
    if x.scale is None or qp is None or k.same_qparams(x.scale, x.zero_point, qp):
        return False  # (a float input: _avg_pool names the problem)
    return all(wd in (1, extent) for wd, extent in zip(window, x.sizes[2:]))


def _global_pool(k: Any, node: Any, x: Any, out_shape: list[int], kernel: tuple[int, int],
                 pool_sizes: list[int]) -> None:
    """A pool whose window tiles the input; a mean without keepdim ([N, C]) is the same memory."""
    qs, act, qp = k.output_quant(node, allow_activation=False)
    if _own_qparams_mean(k, x, kernel, qp):
        _sum_node(k, node, x, kernel, pool_sizes, False, kernel[0] * kernel[1])
        return
    out = _avg_pool(k, node, x, kernel, kernel, (0, 0), False, False, pool_sizes, qp)
    if out_shape != pool_sizes:
        out = k.alias(out, out_shape, nhwc=False)
    k.bind_output(qs, act, out)


def _adaptive_pool(k: Any, node: Any, x: Any, out_hw: tuple[int, int], kind: str,
                   out_nhwc: bool = False) -> None:
    """adaptive avg/max pool of NHWC x to out_hw: the strided pool when the sizes divide (one
    window size), else the adaptive kernel."""
    n, c, h, w = x.sizes
    oh, ow = out_hw
    if min(oh, ow) < 1:
        raise k.unsupported(node, f"adaptive pooling to {oh}x{ow}")
    sizes = [n, c, oh, ow]
    if h % oh == 0 and w % ow == 0:
        window = (h // oh, w // ow)
        if kind == "avg":
            _avg_global_node(k, node, x, window, sizes, out_nhwc)
        else:
            _max_pool(k, node, x, window, window, (0, 0), (1, 1), False, sizes, out_nhwc)
        return
    allow = kind == "max"
    qs, act, qp = k.output_quant(node, allow_activation=allow)
    _same_qparams(k, node, x, qp)
    out = k.new_int8(node.name, sizes, qp, nhwc=True)
    if kind == "avg":
        k.call(QUANTIZED_ADAPTIVE_AVG_POOL2D, node, input=x.vi, out=out.vi)
    else:
        act_min, act_max = k.activation_range(act, qp)
        k.call(QUANTIZED_ADAPTIVE_MAX_POOL2D, node, input=x.vi, activation_min=k.int_(act_min),
               activation_max=k.int_(act_max), out=out.vi)
    k.bind_output(qs, act, _as_node_shape(k, node, out, out_nhwc))


def lower_adaptive_avg_pool2d(k: Any, node: Any) -> None:
    """adaptive_avg_pool2d to any output size."""
    x = k.as_nhwc(k.input_value(node.args[0]))
    _adaptive_pool(k, node, x, k.pair(k.aten_arg(node, "output_size"), (1, 1)), "avg")


def lower_adaptive_max_pool(k: Any, node: Any) -> None:
    """torchmcu::adaptive_max_pool (quantize/pool_values.py: adaptive_max_pool1d/2d whose
    indices are unused) to any output size."""
    size = [int(s) for s in k.aten_arg(node, "output_size")]
    if len(size) == 1:
        _adaptive_pool(k, node, _as_1d(k, node), (1, size[0]), "max", True)
    else:
        x = k.as_nhwc(k.input_value(node.args[0]))
        _adaptive_pool(k, node, x, k.pair(size, (1, 1)), "max")


# -- 1-D pools: [N, C, L] stored channels-last ([N, L, C], a conv1d's layout; Kit.as_nhwc_1d)
# is NHWC [N, C, 1, L], pooled along W; the output [N, C, OL] keeps that layout
def _as_1d(k: Any, node: Any) -> Any:
    x = k.input_value(node.args[0], channels_last_1d=True)
    if x.rank != 3:
        raise k.unsupported(node, f"a 1-D pool of sizes {x.sizes} (expected [N, C, L])")
    n, c, length = x.sizes
    return k.alias(k.as_nhwc_1d(x), [n, c, 1, length], nhwc=True)


def _1d_out(k: Any, node: Any) -> list[int]:
    n, c, length = k.shape_of(node)
    return [n, c, 1, length]


def _one(k: Any, node: Any, name: str, default: int) -> int:
    """A 1-D pool's int[1] argument (a 2-item list is refused)."""
    v = k.aten_arg(node, name, None)
    if v is None or (isinstance(v, (list, tuple)) and not v):
        return default
    items = list(v) if isinstance(v, (list, tuple)) else [v]
    if len(items) != 1:
        raise k.unsupported(node, f"{name} {items} of a 1-D pool")
    return int(items[0])


def _window_1d(k: Any, node: Any) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    kl = _one(k, node, "kernel_size", 1)
    return (1, kl), (1, _one(k, node, "stride", kl)), (0, _one(k, node, "padding", 0))


def lower_max_pool1d(k: Any, node: Any) -> None:
    x = _as_1d(k, node)
    kernel, stride, padding = _window_1d(k, node)
    dilation = (1, _one(k, node, "dilation", 1))
    ceil_mode = bool(k.aten_arg(node, "ceil_mode", False))
    _max_pool(k, node, x, kernel, stride, padding, dilation, ceil_mode, _1d_out(k, node), True)


def lower_avg_pool1d(k: Any, node: Any) -> None:
    x = _as_1d(k, node)
    kernel, stride, padding = _window_1d(k, node)
    _avg_pool_node(k, node, x, kernel, stride, padding, _1d_out(k, node), True)


def lower_adaptive_avg_pool1d(k: Any, node: Any) -> None:
    _adaptive_pool(k, node, _as_1d(k, node), (1, _one(k, node, "output_size", 1)), "avg", True)


# -- reductions: mean / amax over any dims
def _reduced_dims(k: Any, node: Any, rank: int) -> list[int]:
    dims = k.aten_arg(node, "dim", None)
    items = [] if dims is None else list(dims) if isinstance(dims, (list, tuple)) else [dims]
    red = sorted({int(d) % rank for d in items}) if items else list(range(rank))
    if len(red) != len(items or red):
        raise k.unsupported(node, f"repeated dims {items}")
    return red


def _prod(values: Any) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


def _reduce_view(k: Any, node: Any, x: Any, red: list[int], keepdim: bool) -> tuple[Any, bool] | None:
    """(x's bytes as NHWC [outer, R, 1, inner] - legacy sizes [outer, inner, R, 1] - with the R
    reduced elements of each output one run, whether the output is NHWC) where x's memory order
    allows it, else None."""
    order = x.dim_order
    pos = [order.index(d) for d in red]
    if pos != list(range(pos[0], pos[0] + len(pos))):
        return None
    kept = [d for d in order if d not in red]
    out_nhwc = x.nhwc and keepdim
    if not out_nhwc and kept != sorted(kept):
        return None  # the output's contiguous order is not x's
    outer = _prod(x.sizes[d] for d in order[: pos[0]])
    inner = _prod(x.sizes[d] for d in order[pos[-1] + 1 :])
    length = _prod(x.sizes[d] for d in red)
    return k.alias(x, [outer, inner, length, 1], nhwc=True), out_nhwc


def _lower_reduction(k: Any, node: Any, kind: str) -> None:
    """mean (kind "avg") or amax ("max") over any dims: over H and W (or one of them, keeping
    dims) of an activation it is the pool of the NHWC activation, otherwise the pool of a view
    whose reduced elements are one run of memory: x's own, its contiguous twin's, or a
    transpose's that puts the reduced dims last."""
    x = k.input_value(node.args[0], channels_last_1d=True)
    if x.flatten_chw is not None:
        x = k.as_contiguous(x)
    rank = max(x.rank, 1)
    red = _reduced_dims(k, node, rank)
    keepdim = bool(k.aten_arg(node, "keepdim", False))
    if x.rank == 3 and red == [2]:  # over L of [N, C, L]: the pool of its [N, C, 1, L] view
        n, c, length = x.sizes
        x = k.alias(k.as_nhwc_1d(x), [n, c, 1, length], nhwc=True)
        if kind == "sum":
            _sum_node(k, node, x, (1, length), [n, c, 1, 1], False)
        elif kind == "avg":
            _global_pool(k, node, x, k.shape_of(node), (1, length), [n, c, 1, 1])
        else:
            _max_pool(k, node, x, (1, length), (1, length), (0, 0), (1, 1), False, [n, c, 1, 1])
        return
    if x.rank == 3 and x.nhwc:
        x = k.as_contiguous(x)
    if x.rank == 4 and set(red) <= {2, 3} and (keepdim or red == [2, 3]):
        x = k.as_nhwc(x)
        n, c, h, w = x.sizes
        window = (h if 2 in red else 1, w if 3 in red else 1)
        sizes = [n, c, h // window[0], w // window[1]]
        if kind == "sum":
            _sum_node(k, node, x, window, sizes, keepdim)
        elif kind == "avg" and red == [2, 3]:
            _global_pool(k, node, x, list(k.shape_of(node)), window, sizes)
        elif kind == "avg":
            _avg_global_node(k, node, x, window, sizes, keepdim)
        else:
            _max_pool(k, node, x, window, window, (0, 0), (1, 1), False, sizes)
        return
    view = _reduce_view(k, node, x, red, keepdim)
    if view is None and x.nhwc:
        x = k.as_contiguous(x)
        view = _reduce_view(k, node, x, red, keepdim)
    if view is None:  # gather the reduced dims last: one transpose of the contiguous input
        kept = [d for d in range(x.rank) if d not in red]
        perm = kept + red
        gathered = k.new_int8(f"{node.name}.gather", [x.sizes[d] for d in perm], None,
                              nhwc=False).with_(scale=x.scale, zero_point=x.zero_point)
        k.call(TRANSPOSE, node, input=x.vi, perm=k.int_list(perm), out=gathered.vi)
        view = _reduce_view(k, node, gathered, list(range(len(kept), x.rank)), False)
        assert view is not None
    v, out_nhwc = view
    outer, inner, length, _ = v.sizes
    if length > INT16_MAX:
        raise k.unsupported(node, f"reduction over {length} elements (at most {INT16_MAX})")
    window, sizes = (length, 1), [outer, inner, 1, 1]
    if kind == "sum":
        _sum_node(k, node, v, window, sizes, out_nhwc)
    elif kind == "avg":
        _avg_global_node(k, node, v, window, sizes, out_nhwc)
    else:
        _max_pool(k, node, v, window, window, (0, 0), (1, 1), False, sizes, out_nhwc)


def _avg_global_node(k: Any, node: Any, x: Any, window: tuple[int, int], sizes: list[int],
                     out_nhwc: bool) -> None:
    qs, act, qp = k.output_quant(node, allow_activation=False)
    if _own_qparams_mean(k, x, window, qp):
        _sum_node(k, node, x, window, sizes, out_nhwc, window[0] * window[1])
        return
    out = _avg_pool(k, node, x, window, window, (0, 0), False, False, sizes, qp)
    k.bind_output(qs, act, _as_node_shape(k, node, out, out_nhwc))


def _sum_node(k: Any, node: Any, x: Any, window: tuple[int, int], sizes: list[int],
              out_nhwc: bool, count: int = 1) -> None:
    """The sum (count 1) or mean (count = the window's taps) of each window of NHWC x (the
    window spans the reduced run) with the node's own output qparams: the depthwise
    convolution with all-one weights, input offset -zero point, no bias and the
    requantization s_in / (count * s_out) (exact int32 sums, one rounding)."""
    qs, act, qp = k.output_quant(node, allow_activation=False)
    c = x.sizes[1]
    weight = np.ones((1, window[0], window[1], c), dtype=np.int8)
    mults, shifts = k.per_channel_requant(float(x.scale) / count, np.ones(c), qp.scale)
    out = k.new_int8(node.name, sizes, qp, nhwc=True)
    scratch = k.kernel_scratch(node.name, QUANTIZED_DEPTHWISE_CONV2D, x, weight.shape)
    k.call(
        QUANTIZED_DEPTHWISE_CONV2D,
        node,
        input=x.vi,
        weight=k.constant(weight),
        bias=k.none(),
        stride=k.int_list([1, 1]),
        padding=k.int_list([0, 0]),
        dilation=k.int_list([1, 1]),
        depth_multiplier=k.int_(1),
        input_offset=k.int_(-int(x.zero_point)),
        output_offset=k.int_(qp.zero_point),
        requantize_multipliers=k.constant(np.array(mults, dtype=np.int32)),
        requantize_shifts=k.constant(np.array(shifts, dtype=np.int32)),
        activation_min=k.int_(INT8_MIN),
        activation_max=k.int_(INT8_MAX),
        scratch=scratch,
        out=out.vi,
    )
    k.bind_output(qs, act, _as_node_shape(k, node, out, out_nhwc))


def lower_sum(k: Any, node: Any) -> None:
    """aten::sum.dim_IntList: a sum over any dims (keepdim or not) is the mean's reduction
    (the same views and transposes) with a sum in place of the average: _sum_node."""
    if k.aten_arg(node, "dtype", None) is not None:
        raise k.unsupported(node, "a sum with a dtype")
    _lower_reduction(k, node, "sum")


def lower_mean_dim(k: Any, node: Any) -> None:
    _lower_reduction(k, node, "avg")


def lower_amax(k: Any, node: Any) -> None:
    _lower_reduction(k, node, "max")


_ANCHOR = Annotate("anchor")  # the input's qparams, shared by the output
_MEAN = Annotate("mean")  # global: own qparams (quantize/quantizer.py _annotate_mean)
_GLOBAL_MEANS = (
    "aten::adaptive_avg_pool2d.default", "aten::mean.dim", "aten::adaptive_avg_pool1d.default"
)
# aten target, its int8 rule, the kernels that rule emits
for _target, _lower, _emits in (
    ("aten::max_pool2d.default", lower_max_pool2d, (QUANTIZED_MAX_POOL2D,)),
    ("aten::avg_pool2d.default", lower_avg_pool2d, (QUANTIZED_AVG_POOL2D, PAD)),
    (
        "aten::adaptive_avg_pool2d.default",
        lower_adaptive_avg_pool2d,
        (QUANTIZED_AVG_POOL2D, QUANTIZED_ADAPTIVE_AVG_POOL2D),
    ),
    ("aten::mean.dim", lower_mean_dim, (QUANTIZED_AVG_POOL2D, TRANSPOSE)),
    ("aten::amax.default", lower_amax, (QUANTIZED_MAX_POOL2D, TRANSPOSE)),
    ("aten::max_pool1d.default", lower_max_pool1d, (QUANTIZED_MAX_POOL2D,)),
    ("aten::avg_pool1d.default", lower_avg_pool1d, (QUANTIZED_AVG_POOL2D, PAD)),
    (
        "aten::adaptive_avg_pool1d.default",
        lower_adaptive_avg_pool1d,
        (QUANTIZED_AVG_POOL2D, QUANTIZED_ADAPTIVE_AVG_POOL2D),
    ),
    (
        "torchmcu::adaptive_max_pool.default",
        lower_adaptive_max_pool,
        (QUANTIZED_MAX_POOL2D, QUANTIZED_ADAPTIVE_MAX_POOL2D),
    ),
):
    pattern(_target, annotate=_MEAN if _target in _GLOBAL_MEANS else _ANCHOR, lower=_lower,
            emits=_emits + ((QUANTIZED_DEPTHWISE_CONV2D,) if _target in _GLOBAL_MEANS else ()))
# a sum has its own output qparams (the "binary" annotation of one tensor operand)
pattern("aten::sum.dim_IntList", annotate=Annotate("binary", {"kind": "sum"}), lower=lower_sum,
        emits=(QUANTIZED_DEPTHWISE_CONV2D, TRANSPOSE))
