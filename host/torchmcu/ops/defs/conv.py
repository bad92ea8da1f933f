"""cortex_m::quantized_conv2d and quantized_depthwise_conv2d, each with its _nhwc alias: int8
2-D convolutions of NHWC activations (legacy N,C,H,W sizes, or N,H,W,C for _nhwc).

Defined here once: the argument checks (the rules firmware/kernels/cortex_m/quantized_conv2d.c
and quantized_depthwise_conv2d.c enforce, naming the same argument), the references, the
scratch sizes (the C tm_*_scratch_bytes), the MAC counts, the TOSA lowerings and their NPU
rules, the pad fold, the contracts, and the aten rule that emits them (aten::conv2d.default),
which gets the lowering Kit (torchmcu/lower/kit.py) as `k`.

4-D activations are numpy arrays in NHWC order (their memory layout); conv weights are OHWI
[Cout, KH, KW, Cin/groups], depthwise weights [1, KH, KW, Cout]. Accumulation is exact (int64).
On the NPU each is TOSA CONV2D / DEPTHWISE_CONV2D (int32 accumulator) then the requantizing
RESCALE. Our accumulator is sum((x + input_offset) * w) + bias; TOSA's is sum((x - input_zp) *
(w - weight_zp)) + bias, with padding taps contributing zero in both, so input_zp =
-input_offset, and a cortex_m::pad whose value is the input zero point folds into the padding
(npu.pad_fold; npu/tosa/ops_layout.foldable_pad).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, KernelVariants, Npu, nhwc_variant, op, pattern
from torchmcu.ops.defs.linear import bias_of, check_offsets, contiguous, int32_vector
from torchmcu.ops.global_sum import global_sum
from torchmcu.ops.intmath import INT8_MAX, INT8_MIN, INT16_MAX, check_activation, requantize
from torchmcu.ops.layout import activation_dims, fit_window, is_scratch, pair
from torchmcu.ops.npu_limits import stride_reason
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
SHIFT_MIN, SHIFT_MAX = -31, 31
CONV_MVE_COLUMNS = 4  # output pixels the MVE conv computes at once (quantized_conv2d.c)

# The bodies of their docs/operators.md sections (hand-kept until step 8 generates them; the
# scratch line comes from scratch_bytes then)
CONV_CONTRACT = """\
- `input` int8 4-D activation (legacy `[N,Cin,H,W]`/NHWC bytes or `_nhwc` `[N,H,W,Cin]`);
  `weight` int8 `[Cout, KH, KW, Cin_g]`; `groups = Cin / Cin_g` (must divide; `Cout % groups == 0`).
- `bias` None or int32 `[Cout]`. `requantize_multipliers`, `requantize_shifts`: int32
  tensors with Cout elements (per channel; per-tensor quantization repeats the value).
- `stride`, `padding`, `dilation`: lists `[h, w]`; stride, dilation >= 1; padding >= 0,
  symmetric (top = bottom = pad_h, left = right = pad_w).
- `out` int8 4-D activation of the same layout kind, sizes `[N, Cout, OH, OW]` with
  `OH = (H + 2*pad_h - dil_h*(KH-1) - 1) // stride_h + 1` (same for W); must be >= 1.
- `acc[n,oh,ow,oc] = bias[oc] + sum_{kh,kw,c} (x[n, ih, iw, g*Cin_g + c] + input_offset) * w[oc,kh,kw,c]`
  with `g = oc // (Cout/groups)`, `ih = oh*stride_h - pad_h + kh*dil_h`, and taps outside the
  input contributing 0 (padding is the input zero point).
- `out = clamp(requantize(acc, m[oc], s[oc]) + output_offset, activation_min, activation_max)`.
- aten::conv1d on `[N, C, L]` is this call with H = 1: the `[N, C, 1, L]` view of the
  activation's `[N, L, C]` bytes, weight `[Cout, 1, K, Cin_g]` (so for the depthwise form)."""
DEPTHWISE_CONTRACT = """\
- As conv2d, but `weight` int8 `[1, KH, KW, Cout]`, `Cout = Cin * depth_multiplier`
  (`depth_multiplier >= 1`), and output channel `oc` reads input channel `oc // depth_multiplier`:
  `acc[n,oh,ow,oc] = bias[oc] + sum_{kh,kw} (x[n, ih, iw, oc // dm] + input_offset) * w[0,kh,kw,oc]`.
- ExecuTorch uses it only for batch 1; we accept any N. ExecuTorch always passes a bias
  (zeros if the model had none); None is accepted."""


# -- numpy
def conv_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _conv_nhwc(
    x: np.ndarray,
    kernel_hw: tuple[int, int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    input_offset: int,
) -> np.ndarray:
    """Gathers the receptive fields: returns (N, OH, OW, KH, KW, C) int64 windows of x + input_offset,
    with zeros where a tap falls into the padding."""
    n, h, w, c = x.shape
    kh, kw = kernel_hw
    sh, sw = (int(v) for v in stride)
    ph, pw = (int(v) for v in padding)
    dh, dw = (int(v) for v in dilation)
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError("stride and dilation must be >= 1, padding >= 0")
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    if oh < 1 or ow < 1:
        raise ValueError("empty convolution output")
    padded = np.zeros((n, h + 2 * ph, w + 2 * pw, c), dtype=np.int64)
    padded[:, ph : ph + h, pw : pw + w, :] = np.asarray(x, dtype=np.int64) + input_offset
    rows = (np.arange(oh) * sh)[:, None] + (np.arange(kh) * dh)[None, :]  # (OH, KH)
    cols = (np.arange(ow) * sw)[:, None] + (np.arange(kw) * dw)[None, :]  # (OW, KW)
    # -> (N, OH, KH, OW, KW, C) then reorder
    win = padded[:, rows[:, :, None, None], cols[None, None, :, :], :]
    return win.transpose(0, 1, 3, 2, 4, 5)


def _conv_operands(
    input: np.ndarray,
    weight: np.ndarray,
    input_offset: int,
    output_offset: int,
    activation_min: int,
    activation_max: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Checks the scalar arguments conv and depthwise share; returns (input, int64 weight)."""
    check_offsets(input_offset, output_offset)
    check_activation(activation_min, activation_max)
    return np.asarray(input), np.asarray(weight, dtype=np.int64)


def _finish(
    acc: np.ndarray, bias, mult, shifts, output_offset, activation_min, activation_max
) -> np.ndarray:
    cout = acc.shape[-1]
    if bias is not None:
        b = np.asarray(bias, dtype=np.int64).reshape(-1)
        if b.size != cout:
            raise ValueError(f"bias has {b.size} items, expected {cout}")
        acc = acc + b
    m = np.asarray(mult, dtype=np.int64).reshape(-1)
    s = np.asarray(shifts, dtype=np.int64).reshape(-1)
    if m.size != cout or s.size != cout:
        raise ValueError(f"requantize_multipliers/shifts need {cout} items, got {m.size}/{s.size}")
    out = requantize(acc, m, s) + output_offset
    return np.clip(out, activation_min, activation_max).astype(np.int8)


def quantized_conv2d(
    input: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    input_offset: int,
    output_offset: int,
    requantize_multipliers: np.ndarray,
    requantize_shifts: np.ndarray,
    activation_min: int,
    activation_max: int,
    scratch: np.ndarray | None = None,
) -> np.ndarray:
    """NHWC input, OHWI weight (grouped when weight's Cin divides input's C) -> NHWC int8."""
    del scratch
    x, w = _conv_operands(
        input, weight, input_offset, output_offset, activation_min, activation_max
    )
    cout, kh, kw, cin_g = w.shape
    cin = x.shape[3]
    if cin % cin_g or cout % (cin // cin_g):
        raise ValueError(
            f"channels do not split into groups: Cin={cin}, weight Cin={cin_g}, Cout={cout}"
        )
    groups = cin // cin_g
    win = _conv_nhwc(x, (kh, kw), stride, padding, dilation, input_offset)  # N,OH,OW,KH,KW,Cin
    n, oh, ow = win.shape[:3]
    cout_g = cout // groups
    acc = np.empty((n, oh, ow, cout), dtype=np.int64)
    for g in range(groups):
        patch = win[..., g * cin_g : (g + 1) * cin_g].reshape(n, oh, ow, -1)
        wg = w[g * cout_g : (g + 1) * cout_g].reshape(cout_g, -1)
        acc[..., g * cout_g : (g + 1) * cout_g] = patch @ wg.T
    return _finish(
        acc,
        bias,
        requantize_multipliers,
        requantize_shifts,
        output_offset,
        activation_min,
        activation_max,
    )


def quantized_depthwise_conv2d(
    input: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    depth_multiplier: int,
    input_offset: int,
    output_offset: int,
    requantize_multipliers: np.ndarray,
    requantize_shifts: np.ndarray,
    activation_min: int,
    activation_max: int,
    scratch: np.ndarray | None = None,
) -> np.ndarray:
    """NHWC input, [1, KH, KW, Cout] weight; output channel oc reads input channel oc // depth_multiplier."""
    del scratch
    x, w = _conv_operands(
        input, weight, input_offset, output_offset, activation_min, activation_max
    )
    one, kh, kw, cout = w.shape
    cin = x.shape[3]
    if one != 1 or depth_multiplier < 1 or cout != cin * depth_multiplier:
        raise ValueError(
            f"depthwise weight {w.shape} does not match Cin={cin} x depth_multiplier={depth_multiplier}"
        )
    win = _conv_nhwc(x, (kh, kw), stride, padding, dilation, input_offset)  # N,OH,OW,KH,KW,Cin
    win = np.repeat(win, depth_multiplier, axis=-1)  # channel oc <- input oc // dm
    acc = np.einsum("nabhwc,hwc->nabc", win, w[0])
    return _finish(
        acc,
        bias,
        requantize_multipliers,
        requantize_shifts,
        output_offset,
        activation_min,
        activation_max,
    )


# -- scratch: what the memory planner reserves for `scratch` (the C tm_*_scratch_bytes). The
# scalar kernels need none and accept any scratch; the Helium (MVE) paths want these sizes and
# fall back to the scalar path with less, so the planner reserves them for every target (one
# .pte runs on host and device).
def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def quantized_conv2d_scratch_bytes(
    input_nhwc: tuple[int, int, int, int], weight_ohwi: tuple[int, int, int, int]
) -> int:
    """16 bytes alignment slack, int32 per-channel constants, interleaved and staging columns."""
    del input_nhwc
    cout, kh, kw, cin_g = weight_ohwi
    staging = 1 if kh * kw > 1 else 0  # im2col staging column (1x1 columns are copied directly)
    return (
        16 + 4 * _round_up(cout, 4) + (CONV_MVE_COLUMNS + staging) * _round_up(kh * kw * cin_g, 16)
    )


def quantized_depthwise_conv2d_scratch_bytes(
    input_nhwc: tuple[int, int, int, int], weight_1hwc: tuple[int, int, int, int]
) -> int:
    del input_nhwc, weight_1hwc
    return 0


# -- the checks: the C kernels' TM_ARG_CHECKs in their order
def _nhwc_sizes(b: Bound) -> bool:
    """The _nhwc alias: activations with N,H,W,C sizes (contiguous)."""
    return b.op.variant_of is not None


def _activation(b: Bound, name: str) -> tuple[int, int, int, int]:
    """tm_activation_arg: (N, H, W, C) of argument `name` (else its ArgError)."""
    t = b.value(name)
    dims = activation_dims(t, _nhwc_sizes(b)) if isinstance(t, pm.Tensor) else None
    if dims is None:
        layout = "N,H,W,C contiguous" if _nhwc_sizes(b) else "N,C,H,W sizes in NHWC memory"
        raise b.reject(name, f"expected a 4-D int8 activation ({layout})")
    return dims


def _weight(b: Bound) -> tuple[int, int, int, int]:
    w = b.value("weight")
    if not contiguous(w, pm.ScalarType.CHAR, 4, 4):
        raise b.reject("weight", "expected a contiguous 4-D int8 tensor")
    return tuple(int(s) for s in w.sizes)  # type: ignore[return-value]


def _window(b: Bound) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """tm_conv_window_args: stride, padding, dilation pairs."""
    return (
        b.pair_in("stride", 1, INT16_MAX),
        b.pair_in("padding", 0, INT16_MAX),
        b.pair_in("dilation", 1, INT16_MAX),
    )


def per_channel(
    b: Bound, name: str, channels: int, lo: int | None = None, hi: int | None = None
) -> None:
    """tm_per_channel_mults / _shifts: an int32 tensor of `channels` items (within [lo, hi])."""
    t = b.value(name)
    ok = (
        isinstance(t, pm.Tensor)
        and t.scalar_type == pm.ScalarType.INT
        and 1 <= len(t.sizes) <= MAX_DIMS
        and t.numel == channels
    )
    values = b.data(name) if ok and lo is not None else None  # where the stage reads them
    if values is not None:
        ok = bool(np.all((values >= lo) & (values <= hi)))
    if not ok:
        bounds = f" in [{lo}, {hi}]" if lo is not None else ""
        raise b.reject(name, f"expected an int32 tensor of {channels} items{bounds}")


def _quant(b: Bound, channels: int) -> None:
    """tm_conv_quant_args: the offsets, per-channel requantization and the activation range."""
    b.int_in("input_offset", -INT8_MAX, -INT8_MIN)
    b.int_in("output_offset", INT8_MIN, INT8_MAX)
    per_channel(b, "requantize_multipliers", channels)
    per_channel(b, "requantize_shifts", channels, SHIFT_MIN, SHIFT_MAX)
    act_min = b.int_in("activation_min", INT8_MIN, INT8_MAX)
    b.int_in("activation_max", act_min, INT8_MAX)


def _out(
    b: Bound,
    dims: tuple[int, int, int, int],
    kernel: tuple[int, int],
    window: tuple[tuple[int, int], tuple[int, int], tuple[int, int]],
    cout: int,
) -> None:
    """The out activation holds (N, OH, OW, Cout), OH and OW >= 1 (tm_window_out_dims)."""
    n, h, w, _ = dims
    (sh, sw), (ph, pw), (dh, dw) = window
    want = (
        n,
        conv_output_size(h, kernel[0], sh, ph, dh),
        conv_output_size(w, kernel[1], sw, pw, dw),
        cout,
    )
    t = b.value("out")
    got = activation_dims(t, _nhwc_sizes(b)) if isinstance(t, pm.Tensor) else None
    if got != want or min(want[1:3]) < 1:
        raise b.reject("out", f"expected a 4-D int8 activation of N,OH,OW,C {list(want)}")


def check_conv(b: Bound) -> None:
    """quantized_conv2d.c's checks, in its order, on a bound call."""
    dims = _activation(b, "input")
    cout, kh, kw, cin_g = _weight(b)
    cin = dims[3]
    if not (cout > 0 and kh > 0 and kw > 0 and cin_g > 0 and cin % cin_g == 0):
        raise b.reject("weight", f"expected [Cout, KH, KW, Cin_g] with Cin_g dividing {cin}")
    groups = cin // cin_g
    if not (groups > 0 and cout % groups == 0):
        raise b.reject("weight", f"expected Cout divisible by the {groups} groups")
    if not int32_vector(b, "bias", cout):
        raise b.reject("bias", f"expected None or an int32 tensor of {cout} items")
    window = _window(b)
    _quant(b, cout)
    if not is_scratch(b.value("scratch"), 0):
        raise b.reject("scratch", "expected a 1-D byte tensor")
    _out(b, dims, (kh, kw), window, cout)


def check_depthwise(b: Bound) -> None:
    """quantized_depthwise_conv2d.c's checks, in its order, on a bound call."""
    dims = _activation(b, "input")
    one, kh, kw, cout = _weight(b)
    if not (one == 1 and kh > 0 and kw > 0 and cout > 0):
        raise b.reject("weight", "expected [1, KH, KW, Cout]")
    if not int32_vector(b, "bias", cout):
        raise b.reject("bias", f"expected None or an int32 tensor of {cout} items")
    window = _window(b)
    dm = b.int_in("depth_multiplier", 1, INT16_MAX)
    if dims[3] * dm != cout:
        raise b.reject("depth_multiplier", f"input channels {dims[3]} x {dm} != Cout {cout}")
    _quant(b, cout)
    needed = quantized_depthwise_conv2d_scratch_bytes(dims, (one, kh, kw, cout))
    if not is_scratch(b.value("scratch"), needed):
        raise b.reject("scratch", f"expected a 1-D byte tensor of {needed} bytes or more")
    _out(b, dims, (kh, kw), window, cout)


# -- references (b: the interpreter's Bound) -> the physical out
def _operands(b: Any) -> dict[str, Any]:
    """The arrays and scalars both references read, by name."""
    nhwc = _nhwc_sizes(b)
    return {
        "input": b.nhwc("input", nhwc),
        "weight": b.physical("weight").reshape(b.tensor("weight").sizes),
        "bias": b.physical("bias"),
        "stride": b.stride,
        "padding": b.padding,
        "dilation": b.dilation,
        "input_offset": b.input_offset,
        "output_offset": b.output_offset,
        "requantize_multipliers": b.physical("requantize_multipliers"),
        "requantize_shifts": b.physical("requantize_shifts"),
        "activation_min": b.activation_min,
        "activation_max": b.activation_max,
    }


def reference_conv(b: Any) -> np.ndarray:
    return quantized_conv2d(**_operands(b))


def reference_depthwise(b: Any) -> np.ndarray:
    return quantized_depthwise_conv2d(depth_multiplier=b.depth_multiplier, **_operands(b))


def macs_conv(b: Bound) -> int:
    """One multiply-accumulate per out element and weight tap of its group."""
    _, kh, kw, cin_g = b.tensor("weight").sizes
    return b.tensor("out").numel * kh * kw * cin_g


def macs_depthwise(b: Bound) -> int:
    _, kh, kw, _ = b.tensor("weight").sizes
    return b.tensor("out").numel * kh * kw


# -- TOSA (g: tosa Graph, a: its Bound)
def _source(g: Any, a: Any, read: Callable[[int], Any]) -> tuple[Any, tuple[int, int]]:
    """The NHWC input and extra (top, left) padding: a pad folded into this call is read
    through (its bottom/right amounts follow from the output size, see fit_window)."""
    folded = getattr(read, "folded_pad", None)
    fold = folded(a.index("input")) if folded is not None else None
    if fold is not None:
        x, (top, _, left, _) = fold
        return x, (top, left)
    n, h, w, c = a.nhwc_shape("input")
    return g.reshape(read(a.index("input")), (n, h, w, c)), (0, 0)


def tosa_window(
    b: Bound,
    in_hw: tuple[int, int],
    out_hw: tuple[int, int],
    kernel: tuple[int, int],
    extra: tuple[int, int] = (0, 0),
) -> tuple[list[int], tuple[int, int], tuple[int, int], tuple[int, int]]:
    """TOSA's [top, bottom, left, right] padding, the stride to use, the dilation, and the
    rows and columns to crop from the input's end (fit_window) for a call's window; `extra`
    is a folded pad's (top, left)."""
    stride, padding, dilation = pair(b.stride), pair(b.padding), pair(b.dilation)
    # An axis with one output position reads one window: its stride does not matter.
    stride = (1 if out_hw[0] == 1 else stride[0], 1 if out_hw[1] == 1 else stride[1])
    top, left = padding[0] + extra[0], padding[1] + extra[1]
    pb, crop_h = fit_window(in_hw[0], out_hw[0], kernel[0], stride[0], dilation[0], top)
    pr, crop_w = fit_window(in_hw[1], out_hw[1], kernel[1], stride[1], dilation[1], left)
    return [top, pb, left, pr], stride, dilation, (crop_h, crop_w)


ONLY_PADDING = "a convolution whose windows leave whole input rows or columns unread, past padding"


def _windowed_input(
    g: Any,
    a: Any,
    x: Any,
    out_hw: tuple[int, int],
    kernel: tuple[int, int],
    extra: tuple[int, int],
) -> tuple[Any, list[int], tuple[int, int], tuple[int, int]]:
    """The input (cropped where needed), TOSA's padding, the stride to use and the dilation."""
    n, h, w, c = x.shape
    pad, stride, dilation, (crop_h, crop_w) = tosa_window(a, (h, w), out_hw, kernel, extra)
    if crop_h >= h or crop_w >= w:
        raise a.error(f"{ONLY_PADDING} has no TOSA form")
    if crop_h or crop_w:
        x = g.slice(x, [0, 0, 0, 0], [n, h - crop_h, w - crop_w, c])
    return x, pad, stride, dilation


def _requantized(g: Any, a: Any, acc: Any, channels: slice = slice(None)) -> Any:
    """The RESCALE (and CLAMP) of the accumulators of output `channels`."""
    return g.requantize(
        acc, a.ints("requantize_multipliers")[channels], a.ints("requantize_shifts")[channels],
        int(a.output_offset), int(a.activation_min), int(a.activation_max),
    )  # fmt: skip


def lower_tosa_conv(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """CONV2D and RESCALE; a grouped convolution is, per group, a SLICE of its input
    channels, CONV2D and RESCALE, then one CONCAT of the groups' int8 outputs."""
    a.checked()
    x, extra = _source(g, a, read)
    n, cin = x.shape[0], x.shape[3]
    weight = a.constant("weight")  # OHWI
    cout, kh, kw, cin_g = weight.shape
    groups = cin // cin_g
    cout_g = cout // groups
    _, oh, ow, _ = a.nhwc_shape("out")
    x, pad, stride, dilation = _windowed_input(g, a, x, (oh, ow), (kh, kw), extra)
    bias = bias_of(a, "bias", cout)
    outs = []
    for i in range(groups):
        xi = x if groups == 1 else g.slice(x, [0, 0, 0, i * cin_g], [*x.shape[:3], cin_g])
        part = slice(i * cout_g, (i + 1) * cout_g)
        acc = g.conv(
            "CONV2D", xi, weight[part], bias[part], -int(a.input_offset), (n, oh, ow, cout_g),
            pad, stride, dilation,
        )  # fmt: skip
        outs.append(_requantized(g, a, acc, part))
    return outs[0] if groups == 1 else g.concat(outs, 3)


def _equal_global_weight(
    a: Any, x: Any, weight: np.ndarray, out_hw: tuple[int, int], extra: tuple[int, int]
) -> int | None:
    """The one weight of a depthwise convolution that sums its whole input per channel
    (1x1 output, a kernel spanning the unpadded input, equal weights, no bias), else None:
    that is a global sum, which Vela runs far faster as ops/global_sum.py's strips."""
    _, h, w, c = x.shape
    if out_hw != (1, 1) or extra != (0, 0) or weight.shape != (1, h, w, c):
        return None
    if any(pair(a.padding)) or pair(a.dilation) != (1, 1) or int(a.depth_multiplier) != 1:
        return None
    if bias_of(a, "bias", c).any() or not np.all(weight == weight.flat[0]) or weight.flat[0] == 0:
        return None
    return int(weight.flat[0])


def lower_tosa_depthwise(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    a.checked()
    x, extra = _source(g, a, read)
    n, cin = x.shape[0], x.shape[3]
    weight = a.constant("weight")  # [1, KH, KW, C*M]
    _, kh, kw, cout = weight.shape
    multiplier = int(a.depth_multiplier)
    _, oh, ow, _ = a.nhwc_shape("out")
    equal = _equal_global_weight(a, x, weight, (oh, ow), extra)
    if equal is not None:  # a global mean with its own qparams (ops/defs/pool.py _sum_node)
        return _requantized(g, a, global_sum(g, x, equal, -int(a.input_offset)))
    x, pad, stride, dilation = _windowed_input(g, a, x, (oh, ow), (kh, kw), extra)
    # Output channel c*M + m reads input channel c: exactly TOSA's [KH, KW, C, M] order.
    tosa_weight = weight.reshape(kh, kw, cin, multiplier)
    acc = g.conv(
        "DEPTHWISE_CONV2D", x, tosa_weight, bias_of(a, "bias", cout), -int(a.input_offset),
        (n, oh, ow, cout), pad, stride, dilation,
    )  # fmt: skip
    return _requantized(g, a, acc)


def _window_reason(b: Bound, family: str) -> str | None:
    """The NPU rule both convolutions share (on a checked call): the stride limit, and a
    window the TOSA padding cannot express (only padding under one output row or column,
    with input rows or columns past it: TOSA pads exactly, so those would be cropped away
    entirely)."""
    _, h, w, _ = _activation(b, "input")
    _, oh, ow, _ = activation_dims(b.tensor("out"), _nhwc_sizes(b))  # type: ignore[misc]
    _, kh, kw, _ = b.tensor("weight").sizes
    *_, (crop_h, crop_w) = tosa_window(b, (h, w), (oh, ow), (kh, kw))
    if crop_h >= h or crop_w >= w:
        return ONLY_PADDING
    return stride_reason("convolution", family, b.stride, (oh, ow))


# -- variants: the C kernels' dispatch on Helium (TM_VARIANT_*; a selective image compiles the
# paths its programs take)
def _right_shifts_only(b: Bound) -> bool:
    """Every channel's shift is a right shift (tm_mve_right_shifts_only: the shorter
    requantization); False when the shifts are not constants."""
    shifts = b.data("requantize_shifts")
    return shifts is not None and bool(np.all(np.asarray(shifts) < 0))


def conv_variants(b: Bound) -> list[str]:
    """tm_conv_mve's paths: a pointwise matrix product (1x1, stride 1, no padding) or windows
    gathered by im2col (with their chunk copy); the requantization for right shifts only, or
    the general one."""
    cin = _activation(b, "input")[3]
    _, kh, kw, cin_g = _weight(b)
    (sh, sw), (ph, pw), (_, dw) = _window(b)
    pointwise = (kh, kw, sh, sw, ph, pw) == (1, 1, 1, 1, 0, 0)
    used = ["pointwise" if pointwise else "window"]
    # interior windows copied as whole 16-byte chunks: a kernel row of all channels, or a tap's
    # channels of the group (tm_conv_mve's chunk_segments; recorded whether or not a pixel is
    # interior)
    segment = kw * cin if dw == 1 and cin_g == cin else cin_g
    if (kh, kw) != (1, 1) and segment % 16 == 0:
        used.append("window_chunks")
    return used + ["shift_right" if _right_shifts_only(b) else "shift_any"]


DW_BLOCK = 16  # channels of one Helium block (quantized_depthwise_conv2d.c)
_DW_ALL, _DW_NO_LEFT, _DW_NO_RIGHT = 7, 6, 3  # its DW_COLS_* tap-column masks


def _dw_needs_pixels(
    h: int, w: int, oh_n: int, ow_n: int, window: tuple[tuple[int, int], ...]
) -> bool:
    """A 3x3 block with rows the row runs cannot take (dw_geometry's rows_ok, and a row whose
    centre kernel row or both outer ones fall outside): those pixels take nine tap pointers."""
    (sh, sw), (ph, pw), (dh, dw) = window

    def cols(ow: int) -> int:
        return sum(1 << kx for kx in range(3) if 0 <= ow * sw - pw + kx * dw < w)

    lo, hi = 0, ow_n
    while lo < ow_n and cols(lo) != _DW_ALL:
        lo += 1
    while hi > lo and cols(hi - 1) != _DW_ALL:
        hi -= 1
    want = [_DW_NO_LEFT if o < lo else _DW_ALL if o < hi else _DW_NO_RIGHT for o in range(ow_n)]
    if any(cols(o) != want[o] for o in range(ow_n)):
        return True
    for oh in range(oh_n):
        inside = [0 <= oh * sh - ph + r * dh < h for r in range(3)]
        if not (inside[1] and (inside[0] or inside[2])):
            return True
    return False


def depthwise_variants(b: Bound) -> list[str]:
    """quantized_depthwise_conv2d.c's paths: depth multiplier 1 in 16-channel blocks (3x3 row
    runs, their per-pixel form, any other kernel shape; a channel count not a multiple of 16
    takes the predicated tail), one input channel as a convolution, any other multiplier."""
    dims = _activation(b, "input")
    _, kh, kw, _ = _weight(b)
    dm = b.int_in("depth_multiplier", 1, INT16_MAX)
    if dm > 1:
        return ["single_channel" if dims[3] == 1 else "multiplier"]
    window = _window(b)
    if (kh, kw) != (3, 3):
        used = ["general"]
    else:
        (sh, sw), (ph, pw), (dh, dw) = window
        oh_n = conv_output_size(dims[1], kh, sh, ph, dh)
        ow_n = conv_output_size(dims[2], kw, sw, pw, dw)
        used = ["3x3"]
        if _dw_needs_pixels(dims[1], dims[2], oh_n, ow_n, window):
            used.append("3x3_pixel")
    return used + (["tail"] if dims[3] % DW_BLOCK else [])


_CONV_SCRATCH = "tm_quantized_conv2d_scratch_bytes"
_DEPTHWISE_SCRATCH = "tm_quantized_depthwise_conv2d_scratch_bytes"

QUANTIZED_CONV2D = op(
    "cortex_m::quantized_conv2d.out(Tensor input, Tensor weight, Tensor? bias, int[] stride,"
    " int[] padding, int[] dilation, int input_offset, int output_offset,"
    " Tensor requantize_multipliers, Tensor requantize_shifts, int activation_min,"
    " int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    scratch_c=_CONV_SCRATCH,
    prepare=True,
    reference=reference_conv,
    check=check_conv,
    scratch_bytes=quantized_conv2d_scratch_bytes,
    macs=macs_conv,
    variants=KernelVariants(
        ("pointwise", "window", "window_chunks", "shift_right", "shift_any"), conv_variants
    ),
    npu=Npu(
        lower=lower_tosa_conv,
        support=_window_reason,
        pad_fold="input_offset",
        doc="TOSA CONV2D and RESCALE (grouped: per group SLICE, CONV2D, RESCALE; then CONCAT)",
    ),
    contract=CONV_CONTRACT,
)

QUANTIZED_CONV2D_NHWC = nhwc_variant(QUANTIZED_CONV2D)

QUANTIZED_DEPTHWISE_CONV2D = op(
    "cortex_m::quantized_depthwise_conv2d.out(Tensor input, Tensor weight, Tensor? bias,"
    " int[] stride, int[] padding, int[] dilation, int depth_multiplier, int input_offset,"
    " int output_offset, Tensor requantize_multipliers, Tensor requantize_shifts,"
    " int activation_min, int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    scratch_c=_DEPTHWISE_SCRATCH,
    prepare=True,
    reference=reference_depthwise,
    check=check_depthwise,
    scratch_bytes=quantized_depthwise_conv2d_scratch_bytes,
    macs=macs_depthwise,
    variants=KernelVariants(
        ("3x3", "3x3_pixel", "general", "tail", "single_channel", "multiplier"),
        depthwise_variants,
    ),
    npu=Npu(
        lower=lower_tosa_depthwise,
        support=_window_reason,
        pad_fold="input_offset",
        doc="TOSA DEPTHWISE_CONV2D and RESCALE",
    ),
    contract=DEPTHWISE_CONTRACT,
)

QUANTIZED_DEPTHWISE_CONV2D_NHWC = nhwc_variant(QUANTIZED_DEPTHWISE_CONV2D)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _padding_arg(k: Any, node: Any, default: list[int]) -> Any:
    padding = k.aten_arg(node, "padding", default)
    if isinstance(padding, str):
        raise k.unsupported(node, f"padding='{padding}' (give explicit padding)")
    return padding


def conv_quantization(k: Any, node: Any, x: Any, out_shape: list[int]) -> tuple[Any, ...]:
    """What every int8 convolution rule reads first: (int8 weight as torch has it, int32 bias,
    quantize users, fused activation, the NHWC out, and a function creating the values of
    input_offset .. activation_max in schema order, called where the call's arguments reach
    them)."""
    cout = out_shape[1]
    w, w_scales = k.weights(node, k.aten_arg(node, "weight"), cout)
    qs, act, qp = k.output_quant(node, allow_activation=True)
    act_min, act_max = k.activation_range(act, qp)
    in_scale, in_zp = float(x.scale), int(x.zero_point)
    bias = k.bias_int32(node, k.aten_arg(node, "bias", None), in_scale * w_scales, cout)
    mults, shifts = k.per_channel_requant(in_scale, w_scales, qp.scale)
    out = k.new_int8(node.name, out_shape, qp, nhwc=True)

    def quant_values() -> dict[str, int]:
        return {
            "input_offset": k.int_(-in_zp),
            "output_offset": k.int_(qp.zero_point),
            "requantize_multipliers": k.constant(np.array(mults, dtype=np.int32)),
            "requantize_shifts": k.constant(np.array(shifts, dtype=np.int32)),
            "activation_min": k.int_(act_min),
            "activation_max": k.int_(act_max),
        }

    return w, bias, qs, act, out, quant_values


def _lower_conv(
    k: Any,
    node: Any,
    x: Any,
    window: tuple[tuple[int, int], tuple[int, int], tuple[int, int]],
    out_shape: list[int],
) -> Any:
    """The int8 call of a (grouped or depthwise) convolution of the NHWC 4-D value x with
    the node's weight (OIHW, H = 1 for conv1d) and window (stride, padding, dilation
    pairs); returns the NHWC out of `out_shape` [N, Cout, OH, OW]."""
    stride, padding, dilation = window
    groups = int(k.aten_arg(node, "groups", 1))
    _, cin, _, _ = x.sizes
    cout = out_shape[1]
    w, bias, qs, act, out, quant_values = conv_quantization(k, node, x, out_shape)
    w = w.reshape(cout, w.shape[1], -1, w.shape[-1])  # conv1d's OIL as OI1L
    depthwise = groups == cin and groups > 1 and w.shape[1] == 1 and cout % cin == 0
    if depthwise:
        definition = QUANTIZED_DEPTHWISE_CONV2D
        w_packed = np.ascontiguousarray(w.transpose(1, 2, 3, 0))  # [1, KH, KW, Cout]
    else:
        definition = QUANTIZED_CONV2D
        w_packed = np.ascontiguousarray(w.transpose(0, 2, 3, 1))  # OHWI
    # The scratch value comes before the argument list (the .pte's value numbering), and the
    # arguments' values are created in schema order.
    scratch = k.kernel_scratch(node.name, definition, x, tuple(w_packed.shape))
    named = {
        "input": x.vi,
        "weight": k.constant(w_packed),
        "bias": k.constant(bias),
        "stride": k.int_list(stride),
        "padding": k.int_list(padding),
        "dilation": k.int_list(dilation),
    }
    if depthwise:
        named["depth_multiplier"] = k.int_(cout // cin)
    named.update(**quant_values(), scratch=scratch, out=out.vi)
    k.call(definition, node, **named)
    return qs, act, out


def lower_conv2d(k: Any, node: Any) -> None:
    """aten::conv2d.default: a depthwise convolution (groups == Cin, one input channel per
    group) or a (grouped) conv2d, NHWC activations, per-channel requantization."""
    x = k.as_nhwc(k.input_value(k.aten_arg(node, "input")))
    stride = k.pair(k.aten_arg(node, "stride", [1, 1]), (1, 1))
    padding = k.pair(_padding_arg(k, node, [0, 0]), (0, 0))
    dilation = k.pair(k.aten_arg(node, "dilation", [1, 1]), (1, 1))
    out_shape = k.shape_of(node)
    if len(out_shape) != 4:
        raise k.unsupported(node, "only 2-D convolution on 4-D inputs")
    qs, act, out = _lower_conv(k, node, x, (stride, padding, dilation), out_shape)
    k.bind_output(qs, act, out)


def _single(k: Any, node: Any, name: str, default: int) -> int:
    """A conv1d window argument: an int or a one-item list."""
    value = k.aten_arg(node, name, [default])
    items = [value] if isinstance(value, int) else list(value)
    if len(items) != 1:
        raise k.unsupported(node, f"conv1d {name} {value} (expected one value)")
    return int(items[0])


def lower_conv1d(k: Any, node: Any) -> None:
    """aten::conv1d.default on [N, C, L]: the 2-D kernels with H = 1 (the [N, C, 1, L] NHWC
    view of [N, L, C] bytes); the out stays [N, L, C] for the next conv1d (Kit.input_value
    makes it contiguous for any other rule)."""
    x = k.input_value(k.aten_arg(node, "input"), channels_last_1d=True)
    out_shape = k.shape_of(node)
    if x.rank != 3 or len(out_shape) != 3:
        raise k.unsupported(node, "only 1-D convolution on 3-D [N, C, L] inputs")
    x = k.as_nhwc_1d(x)
    n, cin, length = x.sizes
    x4 = k.alias(x, [n, cin, 1, length], nhwc=True)
    _padding_arg(k, node, [0])
    window = (
        (1, _single(k, node, "stride", 1)),
        (0, _single(k, node, "padding", 0)),
        (1, _single(k, node, "dilation", 1)),
    )
    n, cout, out_len = out_shape
    qs, act, out = _lower_conv(k, node, x4, window, [n, cout, 1, out_len])
    k.bind_output(qs, act, k.alias(out, out_shape, nhwc=True))


pattern(
    "aten::conv2d.default",
    annotate=Annotate("weighted", {"kind": "conv2d", "per_channel": True}),
    lower=lower_conv2d,
    emits=(QUANTIZED_CONV2D, QUANTIZED_DEPTHWISE_CONV2D),
)


pattern(
    "aten::conv1d.default",
    annotate=Annotate("weighted", {"kind": "conv2d", "per_channel": True}),
    lower=lower_conv1d,
    emits=(QUANTIZED_CONV2D, QUANTIZED_DEPTHWISE_CONV2D),
)
