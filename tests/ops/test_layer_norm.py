"""torchmcu::quantized_layer_norm, defined once in torchmcu/ops/defs/layer_norm.py: integer
arithmetic only, checked against a float64 layer norm of the dequantized input (within one
output step), the C kernel bit-exact with the reference on random shapes, and the argument
the check names."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.ops.defs.layer_norm import layer_norm_params, quantized_layer_norm

LN = ops.get("torchmcu::quantized_layer_norm.out")
SCHEMA_A = LN.schema.A


def _case(seed: int, shape: list[int], eps_real: float = 1e-5, wide: bool = False):
    """wide: an int16 input (symmetric, zero point 0: the residual stream's)."""
    rng = np.random.default_rng(seed)
    c = shape[-1]
    lo, hi, dtype = (-32768, 32768, np.int16) if wide else (-128, 128, np.int8)
    x = rng.integers(lo, hi, shape, dtype=dtype)
    if rng.random() < 0.3:  # a narrow row: the small-variance end of the inverse square root
        x = rng.integers(-3, 4, shape, dtype=dtype)
    in_scale, in_zp = float(rng.uniform(0.005, 0.1)), int(rng.integers(-20, 20))
    if wide:
        in_scale, in_zp = in_scale / 256, 0
    gamma = rng.uniform(0.5, 1.5, c) * rng.choice([-1, 1], c)
    beta = rng.normal(0, 0.3, c)
    out_scale, out_zp = float(rng.uniform(0.02, 0.06)), int(rng.integers(-10, 10))
    w, b, eps, shift = layer_norm_params(gamma, beta, eps_real, in_scale, out_scale, wide)
    real = (x.astype(np.float64) - in_zp) * in_scale
    mean = real.mean(axis=-1, keepdims=True)
    var = ((real - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (real - mean) / np.sqrt(var + eps_real) * gamma + beta
    want = np.clip(y / out_scale + out_zp, -128, 127)
    return x, w, b, {"eps": eps, "weight_shift": shift, "output_zero_point": out_zp}, want


def _args(x, w, b, p, out):
    named = {"input": x, "weight": w, "bias": b, "out": out, **p}
    return [named[a.name] for a in LN.schema.args]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=2),
    c=st.integers(2, 200),
)
def test_within_one_step_of_float64_and_c_bit_exact(seed, shape, c):
    x, w, b, p, want = _case(seed, [*shape, c])
    got = quantized_layer_norm(x, w, b, **p)
    assert np.abs(got.astype(np.float64) - want).max() <= 1.0
    out = np.zeros(x.shape, dtype=np.int8)
    native.call_kernel("torchmcu::quantized_layer_norm", _args(x, w, b, p, out))
    np.testing.assert_array_equal(out, got)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.lists(st.integers(1, 4), min_size=0, max_size=2),
    c=st.one_of(st.integers(2, 200), st.just(1024)),
)
def test_int16_input_within_one_step_of_float64_and_c_bit_exact(seed, shape, c):
    """The residual stream's layer norm: int16 in (den without the factor C), int8 out."""
    x, w, b, p, want = _case(seed, [*shape, c], wide=True)
    got = quantized_layer_norm(x, w, b, **p)
    assert got.dtype == np.int8
    assert np.abs(got.astype(np.float64) - want).max() <= 1.0
    out = np.zeros(x.shape, dtype=np.int8)
    native.call_kernel("torchmcu::quantized_layer_norm", _args(x, w, b, p, out))
    np.testing.assert_array_equal(out, got)


def test_an_int16_row_longer_than_1024_is_refused_naming_the_input():
    x, w, b, p, _ = _case(3, [2, 1025], wide=True)
    with pytest.raises(ValueError, match="outside"):
        quantized_layer_norm(x, w, b, **p)
    out = np.zeros(x.shape, dtype=np.int8)
    with pytest.raises(Exception, match=f"bad_argument {SCHEMA_A['input']}\\)"):
        native.call_kernel("torchmcu::quantized_layer_norm", _args(x, w, b, p, out))


def test_a_constant_row_gives_the_bias():
    x = np.full((2, 64), 17, dtype=np.int8)
    w, b, eps, shift = layer_norm_params(np.ones(64), np.linspace(-1, 1, 64), 1e-5, 0.05, 0.05)
    got = quantized_layer_norm(x, w, b, eps, shift, 3)
    np.testing.assert_array_equal(got[0], np.round(np.linspace(-1, 1, 64) / 0.05) + 3)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"eps": 0}, "eps"),
        ({"weight_shift": 23}, "weight_shift"),
        ({"output_zero_point": 128}, "output_zero_point"),
        ({"weight": 7}, "weight"),
        ({"out": (3, 9)}, "out"),
    ],
)
def test_the_kernel_names_the_bad_argument(change, named):
    x, w, b, p, _ = _case(5, [3, 8])
    if "weight" in change:
        w = np.zeros(change.pop("weight"), dtype=np.int32)
    out = np.zeros(change.pop("out", (3, 8)), dtype=np.int8)
    p = {**p, **change}
    with pytest.raises(Exception, match=f"bad_argument {SCHEMA_A[named]}\\)"):
        native.call_kernel("torchmcu::quantized_layer_norm", _args(x, w, b, p, out))
