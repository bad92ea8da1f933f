"""Reference semantics of quantized_linear, quantized_conv2d and quantized_depthwise_conv2d.

4-D activations are numpy arrays in NHWC order (their memory layout, for both
the legacy and the `_nhwc` operator names); conv weights are OHWI
[Cout, KH, KW, Cin/groups], depthwise weights [1, KH, KW, Cout], linear weights
[Cout, Cin]. Accumulation is exact (int64).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# quantized_linear is defined in torchmcu/ops/defs/linear.py; the stages import it from here
from torchmcu.ops.defs.linear import check_offsets as _check_offsets
from torchmcu.ops.defs.linear import quantized_linear  # noqa: F401
from torchmcu.reference.ops_elementwise import _check_activation
from torchmcu.reference.quant import requantize


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


def _conv_operands(input: np.ndarray, weight: np.ndarray, input_offset: int, output_offset: int,
                   activation_min: int, activation_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Checks the scalar arguments conv and depthwise share; returns (input, int64 weight)."""
    _check_offsets(input_offset, output_offset)
    _check_activation(activation_min, activation_max)
    return np.asarray(input), np.asarray(weight, dtype=np.int64)


def _finish(acc: np.ndarray, bias, mult, shifts, output_offset, activation_min, activation_max) -> np.ndarray:
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
    x, w = _conv_operands(input, weight, input_offset, output_offset, activation_min, activation_max)
    cout, kh, kw, cin_g = w.shape
    cin = x.shape[3]
    if cin % cin_g or cout % (cin // cin_g):
        raise ValueError(f"channels do not split into groups: Cin={cin}, weight Cin={cin_g}, Cout={cout}")
    groups = cin // cin_g
    win = _conv_nhwc(x, (kh, kw), stride, padding, dilation, input_offset)  # N,OH,OW,KH,KW,Cin
    n, oh, ow = win.shape[:3]
    cout_g = cout // groups
    acc = np.empty((n, oh, ow, cout), dtype=np.int64)
    for g in range(groups):
        patch = win[..., g * cin_g : (g + 1) * cin_g].reshape(n, oh, ow, -1)
        wg = w[g * cout_g : (g + 1) * cout_g].reshape(cout_g, -1)
        acc[..., g * cout_g : (g + 1) * cout_g] = patch @ wg.T
    return _finish(acc, bias, requantize_multipliers, requantize_shifts, output_offset,
                   activation_min, activation_max)


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
    x, w = _conv_operands(input, weight, input_offset, output_offset, activation_min, activation_max)
    one, kh, kw, cout = w.shape
    cin = x.shape[3]
    if one != 1 or depth_multiplier < 1 or cout != cin * depth_multiplier:
        raise ValueError(f"depthwise weight {w.shape} does not match Cin={cin} x depth_multiplier={depth_multiplier}")
    win = _conv_nhwc(x, (kh, kw), stride, padding, dilation, input_offset)  # N,OH,OW,KH,KW,Cin
    win = np.repeat(win, depth_multiplier, axis=-1)  # channel oc <- input oc // dm
    acc = np.einsum("nabhwc,hwc->nabc", win, w[0])
    return _finish(acc, bias, requantize_multipliers, requantize_shifts, output_offset,
                   activation_min, activation_max)
