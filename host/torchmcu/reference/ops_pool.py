"""Reference semantics of quantized_avg_pool2d and quantized_max_pool2d (NHWC arrays)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from torchmcu.reference.ops_elementwise import _check_activation, _check_int
from torchmcu.reference.quant import INT8_MAX, INT8_MIN, round_half_away


def pair(values: Sequence[int], name: str) -> tuple[int, int]:
    """A 1- or 2-item int list as (h, w)."""
    items = [int(v) for v in values]
    if len(items) == 1:
        return items[0], items[0]
    if len(items) != 2:
        raise ValueError(f"{name} must have 1 or 2 items, got {items}")
    return items[0], items[1]


def pool_output_size(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """torch's pooling output size (dilation 1), including its ceil_mode rule."""
    span = size + 2 * pad - kernel
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _windows(x: np.ndarray, kernel_size, stride, padding, ceil_mode: bool):
    """(N, OH, OW, KH, KW, C) windows of x and a matching (OH, OW, KH, KW) in-bounds mask."""
    kh, kw = pair(kernel_size, "kernel_size")
    sh, sw = pair(stride, "stride")
    ph, pw = pair(padding, "padding")
    if min(kh, kw, sh, sw) < 1 or min(ph, pw) < 0 or ph > kh // 2 or pw > kw // 2:
        raise ValueError("pooling needs kernel, stride >= 1 and 0 <= padding <= kernel // 2")
    n, h, w, c = x.shape
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
    _check_int("zero_point", zero_point, INT8_MIN, INT8_MAX)
    _check_int("multiplier", multiplier, -(1 << 31), (1 << 31) - 1)
    _check_int("shift", shift, -31, 31)
    win, valid = _windows(np.asarray(input, dtype=np.int64), kernel_size, stride, padding, bool(ceil_mode))
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
    _check_int("input_zero_point", input_zero_point, INT8_MIN, INT8_MAX)
    if output_zero_point != input_zero_point:
        raise ValueError("quantized_max_pool2d needs output_zero_point == input_zero_point")
    _check_activation(activation_min, activation_max)
    win, valid = _windows(np.asarray(input, dtype=np.int64), kernel_size, stride, padding, False)
    mask = valid[None, :, :, :, :, None]
    best = np.where(mask, win, INT8_MIN - 1).max(axis=(3, 4))
    return np.clip(best, activation_min, activation_max).astype(np.int8)
