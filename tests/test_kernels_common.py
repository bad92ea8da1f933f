"""Shared helpers for the kernel tests (C kernel vs torchmcu.reference, bit-exact)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from torchmcu import native
from torchmcu.reference import quantize_multiplier

NHWC_LEGACY = (0, 2, 3, 1)


def legacy(arr_nhwc: np.ndarray) -> native.TensorArg:
    """An NHWC array as a legacy activation: sizes N,C,H,W with dim order 0,2,3,1."""
    n, h, w, c = arr_nhwc.shape
    return native.TensorArg(np.ascontiguousarray(arr_nhwc), (n, c, h, w), NHWC_LEGACY)


def activation(arr_nhwc: np.ndarray, nhwc_sizes: bool):
    return np.ascontiguousarray(arr_nhwc) if nhwc_sizes else legacy(arr_nhwc)


def int8(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def scratch(nbytes: int = 0) -> np.ndarray:
    return np.zeros((nbytes,), dtype=np.uint8)


seeds = st.integers(0, 2**32 - 1)
channels = st.sampled_from([1, 2, 3, 4, 7, 16, 17, 24, 27])
zero_points = st.integers(-128, 127)


@st.composite
def activation_range(draw) -> tuple[int, int]:
    lo = draw(st.integers(-128, 127))
    hi = draw(st.integers(lo, 127))
    if draw(st.booleans()):
        return -128, 127
    return lo, hi


def multiplier_shift(scale: float) -> tuple[int, int]:
    return quantize_multiplier(scale)
