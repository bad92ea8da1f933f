"""cortex_m::quantized_avg_pool2d and quantized_max_pool2d, each with its _nhwc alias.

Defined here once: the argument checks (the rules firmware/kernels/cortex_m/
quantized_avg_pool2d.c and quantized_max_pool2d.c enforce, naming the same argument), the
references, the scratch size, the TOSA lowerings and their NPU support rules, the contracts,
and the aten rules that emit them (aten::max_pool2d, avg_pool2d, adaptive_avg_pool2d,
mean.dim), which get the lowering Kit (torchmcu/lower/kit.py) as `k`. The fp32 rules of
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
DEPTHWISE_CONV2D summing strips of positions and a REDUCE_SUM of the strips (see
_global_sum_pool; very long rows: TRANSPOSE of the positions into channels and a 1x1 CONV2D),
then the same exact RESCALE.

A window covering the whole (possibly cropped) input is lowered with stride 1: the output is
1x1 either way, and Ethos-U55 accepts no pooling stride above 3.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, ArgError, Bound, Npu, nhwc_variant, op, pattern
from torchmcu.ops.defs.pad import PAD
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
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

INT16_MAX = (1 << 15) - 1  # the window arguments' bound (tm_pool_window_args)
SHIFT_MIN, SHIFT_MAX = -31, 31


# -- the numpy references (NHWC arrays)
_NO_PAD = (0, 0, 0, 0)  # a TOSA window's padding: top, bottom, left, right

def windows(x: np.ndarray, kernel_size: Sequence[int], stride: Sequence[int],
            padding: Sequence[int], ceil_mode: bool) -> tuple[np.ndarray, np.ndarray]:
    """(N, OH, OW, KH, KW, C) windows of x and a matching (OH, OW, KH, KW) in-bounds mask."""
    kh, kw = pair(kernel_size, "kernel_size")
    sh, sw = pair(stride, "stride")
    ph, pw = pair(padding, "padding")
    if min(kh, kw, sh, sw) < 1 or min(ph, pw) < 0 or ph > kh // 2 or pw > kw // 2:
        raise ValueError("pooling needs kernel, stride >= 1 and 0 <= padding <= kernel // 2")
    _, h, w, _ = x.shape
    oh = pool_output_size(h, kh, sh, ph, ceil_mode)
    ow = pool_output_size(w, kw, sw, pw, ceil_mode)
    if oh < 1 or ow < 1:
        raise ValueError("empty pooling output")
    rows = (np.arange(oh) * sh - ph)[:, None] + np.arange(kh)[None, :]  # (OH, KH)
    cols = (np.arange(ow) * sw - pw)[:, None] + np.arange(kw)[None, :]  # (OW, KW)
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
    """Max of the in-bounds taps, clamped to the activation range."""
    if pair(dilation, "dilation") != (1, 1):
        raise ValueError("quantized_max_pool2d supports dilation 1 only")
    if ceil_mode:
        raise ValueError("quantized_max_pool2d does not support ceil_mode")
    check_int("input_zero_point", input_zero_point, INT8_MIN, INT8_MAX)
    if output_zero_point != input_zero_point:
        raise ValueError("quantized_max_pool2d needs output_zero_point == input_zero_point")
    check_activation(activation_min, activation_max)
    win, valid = windows(np.asarray(input, dtype=np.int64), kernel_size, stride, padding, False)
    mask = valid[None, :, :, :, :, None]
    best = np.where(mask, win, INT8_MIN - 1).max(axis=(3, 4))
    return np.clip(best, activation_min, activation_max).astype(np.int8)


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


def _out(b: Bound, dims: tuple[int, int, int, int], window: Any, ceil_mode: bool) -> None:
    """The out activation: the input's N and C, the pooled H and W (tm_window_out_dims)."""
    n, h, w, c = dims
    (kh, kw), (sh, sw), (ph, pw) = window
    oh = pool_output_size(h, kh, sh, ph, ceil_mode)
    ow = pool_output_size(w, kw, sw, pw, ceil_mode)
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
    if b.pair_or_none("dilation", 1, 1, allow_single=True) is None:
        raise b.reject("dilation", "expected [1] or [1, 1]")
    if _ceil_mode(b):
        raise b.reject("ceil_mode", "expected false")
    zp = b.int_in("input_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_zero_point", zp, zp)
    act_min = b.int_in("activation_min", INT8_MIN, INT8_MAX)
    b.int_in("activation_max", act_min, INT8_MAX)
    _out(b, dims, window, False)


def reference_avg(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the out's NHWC memory."""
    return quantized_avg_pool2d(b.nhwc("input", _nhwc_sizes(b)), b.kernel_size, b.stride,
                                b.padding, b.ceil_mode, b.zero_point, b.multiplier, b.shift)


def reference_max(b: Any) -> np.ndarray:
    return quantized_max_pool2d(b.nhwc("input", _nhwc_sizes(b)), b.kernel_size, b.stride,
                                b.padding, b.dilation, b.ceil_mode, b.input_zero_point,
                                b.output_zero_point, b.activation_min, b.activation_max)


# -- NPU support (b: a checked Bound) and the TOSA lowerings (g: tosa Graph, a: its Bound)
def _kernel_reason(b: Bound, kind: str) -> str | None:
    kh, kw = pair(b.kernel_size)
    if kh > POOL_KERNEL_Y_MAX or kh * kw > POOL_KERNEL_AREA_MAX:
        return f"{kind} kernel {kh}x{kw} exceeds the NPU's limit (height <= 256, area <= 65536)"
    return None


def _out_hw(b: Bound) -> tuple[int, int]:
    _, oh, ow, _ = activation_dims(b.value("out"), _nhwc_sizes(b))  # type: ignore[misc]
    return oh, ow


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
    x = g.reshape(read(a.index("input")), (n, h, w, c))
    if oh == 1:
        sh = 1
    if ow == 1:
        sw = 1
    pb, crop_h = fit_window(h, oh, kh, sh, 1, 0)
    pr, crop_w = fit_window(w, ow, kw, sw, 1, 0)
    if pb or pr:
        raise a.error("average pool window past the input edge")
    if crop_h or crop_w:
        x = g.slice(x, [0, 0, 0, 0], [n, h - crop_h, w - crop_w, c])
    if avg_pool_is_exact(kh * kw):
        return g.avg_pool2d(x, [kh, kw], [sh, sw], (n, oh, ow, c), -128)
    weight, multiplier, shift = divisor(kh * kw)
    if oh == 1 and ow == 1:
        return _global_sum_pool(g, x, weight, multiplier, shift)
    ones = np.full((kh, kw, c, 1), weight, dtype=np.int8)
    zeros = np.zeros(c, dtype=np.int32)
    acc = g.conv("DEPTHWISE_CONV2D", x, ones, zeros, 0, (n, oh, ow, c), _NO_PAD, [sh, sw], [1, 1])
    return g.rescale(acc, "INT8", [multiplier], [shift])


# Longest axis a one-axis DEPTHWISE_CONV2D of the global sum spans (Vela's kernel limit is
# larger; beyond this the transposing forms below are used).
STRIP_MAX = 64


def _global_sum_pool(g: Any, x: Any, weight: int, multiplier: int, shift: int) -> Any:
    """Mean over all positions of NHWC x: the exact int32 sum (times weight), then the
    dividing RESCALE. The sum is a DEPTHWISE_CONV2D over strips of positions (exact int32
    strip sums) and a REDUCE_SUM of the strips. Any grouping of the positions gives the same
    sum, so the strips are the ones Vela runs fastest (measured on ResNet8's 8x8x64 pool):
    U85 reads the positions as 4 rows and sums columns of 4 (1,172 cycles; 8x8 columns
    1,900, MATMUL 3,796, one 8x8 depthwise 5,490; ExecuTorch's inexact AVG_POOL2D 1,480),
    U55 and U65 sum each row (1,996 cycles; one 8x8 depthwise 6,052). Rows longer than
    STRIP_MAX: TRANSPOSE + 1x1 CONV2D."""
    n, h, w, c = x.shape
    if g.family == "u85":
        rows = 4 if (h * w) % 4 == 0 else 2 if (h * w) % 2 == 0 else 1
        grid, kernel, axis = (rows, h * w // rows), (rows, 1), 2
    else:
        grid, kernel, axis = (h, w), (1, w), 1
    if max(kernel) <= STRIP_MAX:
        strips_shape = (n, 1, grid[1], c) if axis == 2 else (n, grid[0], 1, c)
        acc = g.conv(
            "DEPTHWISE_CONV2D",
            g.reshape(x, (n, *grid, c)),
            np.full((*kernel, c, 1), weight, dtype=np.int8),
            np.zeros(c, dtype=np.int32),
            0,
            strips_shape,
            _NO_PAD,
            [1, 1],
            [1, 1],
        )
        if acc.shape != (n, 1, 1, c):
            acc = g.reduce_sum(acc, axis)
        return g.rescale(acc, "INT8", [multiplier], [shift])
    by_channel = g.transpose(g.reshape(x, (n, h * w, c)), [0, 2, 1])
    acc = g.conv(
        "CONV2D",
        g.reshape(by_channel, (n, c, 1, h * w)),
        np.full((1, 1, 1, h * w), weight, dtype=np.int8),
        np.zeros(1, dtype=np.int32),
        0,
        (n, c, 1, 1),
        _NO_PAD,
        [1, 1],
        [1, 1],
    )
    mean = g.rescale(acc, "INT8", [multiplier], [shift])
    return g.reshape(mean, (n, 1, 1, c))


def lower_tosa_max(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    (n, h, w, c), (_, oh, ow, _) = _checked(a)
    (kh, kw), (sh, sw), (ph, pw) = pair(a.kernel_size), pair(a.stride), pair(a.padding)
    x = g.reshape(read(a.index("input")), (n, h, w, c))
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
- Layout/list rules as avg_pool2d. `dilation` must be `[1, 1]`, `ceil_mode` false,
  `input_zero_point == output_zero_point` (ExecuTorch falls back to a portable op otherwise).
- `out = clamp(max over in-bounds taps, activation_min, activation_max)`; padding taps are
  ignored (not treated as any value)."""

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
    npu=Npu(
        lower=lower_tosa_avg,
        support=npu_support_avg,
        doc="TOSA AVG_POOL2D (odd tap counts), else DEPTHWISE_CONV2D (+ REDUCE_SUM) and an exact"
        " RESCALE",
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
    npu=Npu(lower=lower_tosa_max, support=npu_support_max, doc="TOSA MAX_POOL2D (+ CLAMP)"),
    contract=MAX_CONTRACT,
)

QUANTIZED_MAX_POOL2D_NHWC = nhwc_variant(QUANTIZED_MAX_POOL2D)


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


def lower_max_pool2d(k: Any, node: Any) -> None:
    x = k.as_nhwc(k.input_value(node.args[0]))
    kernel, stride, padding = _aten_window(k, node)
    dilation = k.pair(k.aten_arg(node, "dilation", 1), (1, 1))
    ceil_mode = bool(k.aten_arg(node, "ceil_mode", False))
    if dilation != (1, 1) or ceil_mode:
        raise k.unsupported(node, "max pooling with dilation or ceil_mode")
    qs, act, qp = k.output_quant(node, allow_activation=True)
    _same_qparams(k, node, x, qp)
    act_min, act_max = k.activation_range(act, qp)
    out = k.new_int8(node.name, k.shape_of(node), qp, nhwc=True)
    k.call(
        QUANTIZED_MAX_POOL2D,
        node,
        input=x.vi,
        **_window_values(k, kernel, stride, padding),
        dilation=k.int_list(dilation),
        ceil_mode=k.bool_(False),
        input_zero_point=k.int_(qp.zero_point),
        output_zero_point=k.int_(qp.zero_point),
        activation_min=k.int_(act_min),
        activation_max=k.int_(act_max),
        out=out.vi,
    )
    k.bind_output(qs, act, out)


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


def lower_avg_pool2d(k: Any, node: Any) -> None:
    x = k.as_nhwc(k.input_value(node.args[0]))
    kernel, stride, padding = _aten_window(k, node)
    ceil_mode = bool(k.aten_arg(node, "ceil_mode", False))
    count_include_pad = bool(k.aten_arg(node, "count_include_pad", True))
    if k.aten_arg(node, "divisor_override", None) is not None:
        raise k.unsupported(node, "divisor_override")
    if ceil_mode and count_include_pad and padding != (0, 0):
        raise k.unsupported(node, "ceil_mode with count_include_pad and padding")
    qs, act, qp = k.output_quant(node, allow_activation=False)
    out = _avg_pool(k, node, x, kernel, stride, padding, ceil_mode, count_include_pad,
                    k.shape_of(node), qp)
    k.bind_output(qs, act, out)


def _global_pool(k: Any, node: Any, x: Any, out_shape: list[int], kernel: tuple[int, int],
                 pool_sizes: list[int]) -> None:
    """A pool whose window tiles the input; a mean without keepdim ([N, C]) is the same memory."""
    qs, act, qp = k.output_quant(node, allow_activation=False)
    out = _avg_pool(k, node, x, kernel, kernel, (0, 0), False, False, pool_sizes, qp)
    if out_shape != pool_sizes:
        out = k.alias(out, out_shape, nhwc=False)
    k.bind_output(qs, act, out)


def lower_adaptive_avg_pool2d(k: Any, node: Any) -> None:
    """adaptive_avg_pool2d with an output size dividing the input."""
    x = k.as_nhwc(k.input_value(node.args[0]))
    n, c, h, w = x.sizes
    out_shape = k.shape_of(node)
    oh, ow = k.pair(k.aten_arg(node, "output_size"), (1, 1))
    if h % oh or w % ow:
        raise k.unsupported(node, f"adaptive pooling {h}x{w} -> {oh}x{ow} (sizes must divide)")
    _global_pool(k, node, x, out_shape, (h // oh, w // ow), [n, c, oh, ow])


def lower_mean_dim(k: Any, node: Any) -> None:
    """mean over H and W: a global average pool (of [N, C, L] over L: the [N, C, 1, L] view)."""
    x = k.input_value(node.args[0], channels_last_1d=True)
    if x.rank == 3 and [int(d) % 3 for d in k.aten_arg(node, "dim")] == [2]:
        n, c, length = x.sizes
        x = k.alias(k.as_nhwc_1d(x), [n, c, 1, length], nhwc=True)
        _global_pool(k, node, x, k.shape_of(node), (1, length), [n, c, 1, 1])
        return
    x = k.as_nhwc(x if x.rank != 3 else k.input_value(node.args[0]))
    n, c, h, w = x.sizes
    out_shape = k.shape_of(node)
    dims = k.aten_arg(node, "dim")
    if sorted(int(d) % 4 for d in dims) != [2, 3]:
        raise k.unsupported(node, f"mean over dims {dims} (only over H and W)")
    _global_pool(k, node, x, out_shape, (h, w), [n, c, 1, 1])


_ANCHOR = Annotate("anchor")  # the input's qparams, shared by the output
pattern("aten::max_pool2d.default", annotate=_ANCHOR, lower=lower_max_pool2d,
        emits=(QUANTIZED_MAX_POOL2D,))
pattern("aten::avg_pool2d.default", annotate=_ANCHOR, lower=lower_avg_pool2d,
        emits=(QUANTIZED_AVG_POOL2D, PAD))
pattern("aten::adaptive_avg_pool2d.default", annotate=_ANCHOR, lower=lower_adaptive_avg_pool2d,
        emits=(QUANTIZED_AVG_POOL2D,))
pattern("aten::mean.dim", annotate=_ANCHOR, lower=lower_mean_dim, emits=(QUANTIZED_AVG_POOL2D,))
