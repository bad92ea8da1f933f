"""torchmcu::quantized_adaptive_avg_pool2d and quantized_adaptive_max_pool2d (torchmcu/ops/defs/
pool.py): the references against torch's adaptive windows written here (start = floor(i*In/Out),
end = ceil((i+1)*In/Out), Fraction means), the C kernels bit-exact with the references (the
interpreter running the definitions) on generated cases including sizes that do not divide and
outputs larger than the input, and the one argument check naming the argument the C kernel
names."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _arg_checks import assert_every_stage_names
from _pte_programs import pool_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.ops.defs.pool import quantized_adaptive_avg_pool2d, quantized_adaptive_max_pool2d
from torchmcu.reference.interpreter import run_program

AVG = ops.get("torchmcu::quantized_adaptive_avg_pool2d.out")
MAX = ops.get("torchmcu::quantized_adaptive_max_pool2d.out")
NHWC_LEGACY = [0, 2, 3, 1]


def _window(i: int, out: int, size: int) -> range:
    """Rows of output i, from torch's definition, in integers: floor and ceil of i*size/out."""
    start = (i * size) // out
    end = -((-(i + 1) * size) // out)
    return range(start, end)


def _half_away(q: Fraction) -> int:
    whole = int(abs(q) + Fraction(1, 2))
    return whole if q >= 0 else -whole


def _taps(x: np.ndarray, n: int, i: int, j: int, ch: int, oh: int, ow: int) -> list[int]:
    _, h, w, _ = x.shape
    return [int(x[n, y, z, ch]) for y in _window(i, oh, h) for z in _window(j, ow, w)]


def _legacy(nhwc: tuple[int, int, int, int]) -> list[int]:
    n, h, w, c = nhwc
    return [n, c, h, w]


def _run_both(op, x: np.ndarray, scalars: dict, out_hw: tuple[int, int]):
    """(the C kernel's out, the interpreter's out), NHWC memory."""
    n, _, _, c = x.shape
    out = np.zeros((n, *out_hw, c), np.int8)
    tensors = {
        "input": native.TensorArg(x, _legacy(x.shape), NHWC_LEGACY),
        "out": native.TensorArg(out, _legacy(out.shape), NHWC_LEGACY),
    }
    native.call_kernel(
        op.qualified, [tensors.get(a.name, scalars.get(a.name)) for a in op.schema.args]
    )
    program = pool_program(op.qualified, _legacy(x.shape), scalars, _legacy(out.shape))
    (logical,) = run_program(program, [np.transpose(x, (0, 3, 1, 2))])
    return out, np.transpose(logical, (0, 2, 3, 1))


sizes = st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 11), st.integers(1, 11))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), hw=sizes, c=st.integers(1, 4), small=st.booleans())
def test_references_follow_torch_s_adaptive_windows(seed, hw, c, small):
    h, w, oh, ow = hw
    rng = np.random.default_rng(seed)
    x = (
        rng.integers(-3, 3, (2, h, w, c), dtype=np.int8)
        if small
        else rng.integers(-128, 128, (2, h, w, c), dtype=np.int8)
    )
    avg = quantized_adaptive_avg_pool2d(x, (oh, ow))
    top = quantized_adaptive_max_pool2d(x, (oh, ow), -100, 90)
    assert avg.shape == top.shape == (2, oh, ow, c)
    for i in np.ndindex(*avg.shape):
        taps = _taps(x, i[0], i[1], i[2], i[3], oh, ow)
        assert avg[i] == _half_away(Fraction(sum(taps), len(taps)))
        assert top[i] == min(max(max(taps), -100), 90)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    hw=sizes,
    n=st.integers(1, 2),
    c=st.sampled_from([1, 3, 8, 16, 17, 24]),
    lo=st.integers(-128, 127),
    width=st.integers(0, 255),
)
def test_c_kernels_are_bit_exact_with_the_references(seed, hw, n, c, lo, width):
    h, w, oh, ow = hw
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    if seed % 3 == 0:  # small values: exact .5 means (the rounding ties) are common
        x = rng.integers(-2, 3, x.shape, dtype=np.int8)
    c_out, reference = _run_both(AVG, x, {}, (oh, ow))
    assert reference.tobytes() == c_out.tobytes()
    act = {"activation_min": lo, "activation_max": min(lo + width, 127)}
    c_out, reference = _run_both(MAX, x, act, (oh, ow))
    assert reference.tobytes() == c_out.tobytes()


def test_a_large_window_takes_the_int32_sums():
    """More than 256 taps per window (the Helium path's int32 sums), unequal windows."""
    x = np.random.default_rng(3).integers(-128, 128, (1, 37, 29, 5), dtype=np.int8)
    c_out, reference = _run_both(AVG, x, {}, (2, 1))
    want = [
        [
            _half_away(Fraction(sum(t), len(t)))
            for t in (
                [int(x[0, y, z, ch]) for y in _window(i, 2, 37) for z in range(29)]
                for ch in range(5)
            )
        ]
        for i in range(2)
    ]
    assert reference.reshape(2, 5).tolist() == want
    assert reference.tobytes() == c_out.tobytes()


# (the op, its scalars, input NHWC, out NHWC, the argument named)
_BAD = [
    (AVG, {}, (1, 6, 6, 2), (1, 4, 4, 3), "out"),  # not the input's channels
    (AVG, {}, (1, 6, 6, 2), (2, 4, 4, 2), "out"),  # not the input's batch
    (AVG, {}, (1, 6, 6, 2), (1, 0, 4, 2), "out"),  # no output rows
    (AVG, {}, (1, 0, 6, 2), (1, 2, 2, 2), "input"),  # no input rows
    (
        MAX,
        {"activation_min": -129, "activation_max": 0},
        (1, 6, 6, 2),
        (1, 4, 4, 2),
        "activation_min",
    ),
    (MAX, {"activation_min": 5, "activation_max": 4}, (1, 6, 6, 2), (1, 4, 4, 2), "activation_max"),
    (MAX, {"activation_min": 0, "activation_max": 4}, (1, 6, 6, 2), (1, 4, 0, 2), "out"),
]


@pytest.mark.parametrize(("op", "scalars", "in_nhwc", "out_nhwc", "bad"), _BAD)
def test_check_names_the_argument_the_c_kernel_names(op, scalars, in_nhwc, out_nhwc, bad):
    index = getattr(op.schema.A, bad)
    x = np.zeros(in_nhwc, np.int8)
    out = np.zeros(out_nhwc, np.int8)
    tensors = {
        "input": native.TensorArg(x, _legacy(in_nhwc), NHWC_LEGACY),
        "out": native.TensorArg(out, _legacy(out_nhwc), NHWC_LEGACY),
    }
    with pytest.raises(native.NativeError, match=rf"argument {index}\b"):
        native.call_kernel(
            op.qualified, [tensors.get(a.name, scalars.get(a.name)) for a in op.schema.args]
        )
    program = pool_program(op.qualified, _legacy(in_nhwc), scalars, _legacy(out_nhwc))
    assert_every_stage_names(op, program, index, [np.transpose(x, (0, 3, 1, 2))])
