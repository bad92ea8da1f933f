"""linear / conv2d / depthwise conv2d kernels vs the reference, bit-exact."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from torchmcu import native
from torchmcu import reference as ref
from torchmcu.reference import ops_linear_conv  # noqa: F401  (ref.ops_linear_conv below)
from test_kernels_common import activation, activation_range, channels, int8, scratch, seeds, zero_points


def _requant_params(rng, count: int, per_channel: bool):
    scales = rng.uniform(1e-4, 2e-2, size=count if per_channel else 1)
    pairs = [ref.quantize_multiplier(float(s)) for s in scales]
    if not per_channel:
        pairs = pairs * count
    # Include a left shift now and then (real scale > 1).
    if rng.random() < 0.2:
        pairs[0] = ref.quantize_multiplier(1.7)
    m = np.array([p[0] for p in pairs], np.int32)
    s = np.array([p[1] for p in pairs], np.int32)
    return m, s


@settings(max_examples=40, deadline=None)
@given(seed=seeds, lead=st.lists(st.integers(1, 4), min_size=0, max_size=2), k=st.integers(1, 40),
       n=channels, zp_in=zero_points, zp_out=zero_points, act=activation_range(),
       form=st.sampled_from(["bias", "none", "kernel_sum"]), per_channel=st.booleans())
def test_quantized_linear(seed, lead, k, n, zp_in, zp_out, act, form, per_channel):
    rng = np.random.default_rng(seed)
    x = int8(rng, (*lead, k))
    w = int8(rng, (n, k))
    bias = rng.integers(-5000, 5000, size=n, dtype=np.int32)
    m, s = _requant_params(rng, n, per_channel)
    mults, shifts = (m.tolist(), s.tolist()) if per_channel else ([int(m[0])], [int(s[0])])
    kernel_sum = None
    b = bias if form == "bias" else None
    if form == "kernel_sum":
        # What ExecuTorch precomputes for CMSIS-NN's MVE path (filter_offset 0).
        kernel_sum = (-zp_in * w.astype(np.int64).sum(axis=1) + bias).astype(np.int32).reshape(1, n)
    out = np.zeros((*lead, n), np.int8)
    native.call_kernel("cortex_m::quantized_linear",
                       [x, w, b, kernel_sum, -zp_in, 0, zp_out, mults, shifts, act[1], act[0], out])
    expected = ref.quantized_linear(x, w, b, kernel_sum, -zp_in, 0, zp_out, mults, shifts, act[1], act[0])
    np.testing.assert_array_equal(out, expected)
    if form == "kernel_sum":  # both forms compute the same accumulator
        same = ref.quantized_linear(x, w, bias, None, -zp_in, 0, zp_out, mults, shifts, act[1], act[0])
        np.testing.assert_array_equal(out, same)


geometry = st.fixed_dictionaries({
    "h": st.integers(1, 9), "w": st.integers(1, 9), "kh": st.integers(1, 4), "kw": st.integers(1, 4),
    "sh": st.integers(1, 3), "sw": st.integers(1, 3), "ph": st.integers(0, 2), "pw": st.integers(0, 2),
    "dh": st.integers(1, 2), "dw": st.integers(1, 2),
})


def _fits(g) -> bool:
    return (ref.ops_linear_conv.conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["dh"]) >= 1
            and ref.ops_linear_conv.conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["dw"]) >= 1)


@settings(max_examples=50, deadline=None)
@given(seed=seeds, g=geometry.filter(_fits), n=st.integers(1, 2), cin_g=st.sampled_from([1, 3, 4, 7, 17]),
       groups=st.sampled_from([1, 1, 2, 3]), cout_g=st.sampled_from([1, 2, 5, 8]), zp_in=zero_points,
       zp_out=zero_points, act=activation_range(), with_bias=st.booleans(), per_channel=st.booleans(),
       nhwc=st.booleans())
def test_quantized_conv2d(seed, g, n, cin_g, groups, cout_g, zp_in, zp_out, act, with_bias, per_channel, nhwc):
    rng = np.random.default_rng(seed)
    cin, cout = cin_g * groups, cout_g * groups
    x = int8(rng, (n, g["h"], g["w"], cin))
    w = int8(rng, (cout, g["kh"], g["kw"], cin_g))
    bias = rng.integers(-20000, 20000, size=cout, dtype=np.int32) if with_bias else None
    m, s = _requant_params(rng, cout, per_channel)
    oh = ref.ops_linear_conv.conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["dh"])
    ow = ref.ops_linear_conv.conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["dw"])
    out = np.zeros((n, oh, ow, cout), np.int8)
    geo = ([g["sh"], g["sw"]], [g["ph"], g["pw"]], [g["dh"], g["dw"]])
    op = "cortex_m::quantized_conv2d_nhwc" if nhwc else "cortex_m::quantized_conv2d"
    native.call_kernel(op, [activation(x, nhwc), w, bias, *geo, -zp_in, zp_out, m, s, act[0], act[1],
                            scratch(), activation(out, nhwc) if not nhwc else out])
    expected = ref.quantized_conv2d(x, w, bias, *geo, -zp_in, zp_out, m, s, act[0], act[1])
    np.testing.assert_array_equal(out, expected)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, g=geometry.filter(_fits), n=st.integers(1, 2), cin=channels, dm=st.sampled_from([1, 1, 2, 3]),
       zp_in=zero_points, zp_out=zero_points, act=activation_range(), with_bias=st.booleans(),
       nhwc=st.booleans())
def test_quantized_depthwise_conv2d(seed, g, n, cin, dm, zp_in, zp_out, act, with_bias, nhwc):
    rng = np.random.default_rng(seed)
    cout = cin * dm
    x = int8(rng, (n, g["h"], g["w"], cin))
    w = int8(rng, (1, g["kh"], g["kw"], cout))
    bias = rng.integers(-20000, 20000, size=cout, dtype=np.int32) if with_bias else None
    m, s = _requant_params(rng, cout, True)
    oh = ref.ops_linear_conv.conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["dh"])
    ow = ref.ops_linear_conv.conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["dw"])
    out = np.zeros((n, oh, ow, cout), np.int8)
    geo = ([g["sh"], g["sw"]], [g["ph"], g["pw"]], [g["dh"], g["dw"]])
    op = "cortex_m::quantized_depthwise_conv2d_nhwc" if nhwc else "cortex_m::quantized_depthwise_conv2d"
    native.call_kernel(op, [activation(x, nhwc), w, bias, *geo, dm, -zp_in, zp_out, m, s, act[0], act[1],
                            scratch(), activation(out, nhwc) if not nhwc else out])
    expected = ref.quantized_depthwise_conv2d(x, w, bias, *geo, dm, -zp_in, zp_out, m, s, act[0], act[1])
    np.testing.assert_array_equal(out, expected)
