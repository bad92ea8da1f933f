"""Portable float32 aten:: kernels (firmware/kernels/portable/) against torch, the independent
reference, and our numpy reference (torchmcu.reference.ops_float) against torch too.

Tolerances (|got - torch| <= atol + rtol * |torch|), per op:
- relu, view_copy, permute_copy, flip, cat: exact (copies and a compare).
- add, mul: rtol 1e-6; add also atol 1e-6 * max(|self| + |alpha * other|) (alpha * other
  rounded or fused: one operand rounding, large relative to a cancelling sum).
- sigmoid, tanh, gelu, _softmax: rtol 1e-5, atol 1e-6 (expf/tanhf/erff differ by libm).
- addmm, mm, convolution, mean, native_layer_norm: rtol 1e-5, atol 1e-5 * the largest sum of
  |terms| (|a| @ |b|, the convolution of |x| with |w|, the mean of |x|; for the layer norm's
  normalised output max|torch|): float32 sums in another order than torch's, and a cancelling
  sum near zero keeps the rounding of its terms.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native
from torchmcu.ops.defs.portable_reduce import amax as amax_reference
from torchmcu.pte import program as pm
from torchmcu.pte import writer
from torchmcu.reference import ops_float as ref

F32 = np.float32
SETTINGS = settings(max_examples=60, deadline=None)
NHWC = (0, 2, 3, 1)

small_shape = st.lists(st.integers(1, 5), min_size=1, max_size=4)


def _rand(rng: np.random.Generator, shape, scale: float = 2.0) -> np.ndarray:
    return np.asarray(rng.standard_normal(size=shape) * scale, F32)  # 0-d stays an array


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(x, dtype=x.dtype, copy=True))  # keeps 0-d


def _close(got: np.ndarray, want, rtol: float, atol: float = 0.0, what: str = "") -> None:
    want = want.numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def _sum_atol(want: torch.Tensor) -> float:
    """1e-5 of the largest magnitude: `want` is a sum of |terms| or, for a chain, the result."""
    return 1e-5 * float(want.abs().max()) if want.numel() else 0.0


def _nhwc(x: np.ndarray) -> native.TensorArg:
    """A logical NCHW array in channels-last memory (dim order 0, 2, 3, 1)."""
    return native.TensorArg(np.ascontiguousarray(x.transpose(NHWC)), x.shape, NHWC)


def _from_nhwc(arg: native.TensorArg) -> np.ndarray:
    return np.ascontiguousarray(arg.array.transpose(0, 3, 1, 2))


def _call(op: str, args: list) -> None:
    native.call_kernel(f"aten::{op}", args)


# ---- elementwise ---------------------------------------------------------------------------


@st.composite
def broadcast_pair(draw):
    """Two shapes broadcasting to a third (dims dropped or set to 1 on either side)."""
    out = draw(st.lists(st.integers(1, 5), min_size=0, max_size=4))
    shapes = []
    for _ in range(2):
        drop = draw(st.integers(0, len(out)))
        s = [1 if draw(st.booleans()) else d for d in out[drop:]]
        shapes.append(s)
    return shapes[0], shapes[1]


@SETTINGS
@given(shapes=broadcast_pair(), seed=st.integers(0, 2**31), alpha=st.sampled_from([1, -1, 0.5, 2.25]))
def test_add_mul_broadcast(shapes, seed, alpha) -> None:
    rng = np.random.default_rng(seed)
    a, b = _rand(rng, shapes[0]), _rand(rng, shapes[1])
    want_add = torch.add(_t(a), _t(b), alpha=alpha)
    want_mul = torch.mul(_t(a), _t(b))
    # alpha * other may be rounded or fused (torch fuses): one operand rounding, which
    # cancellation near zero makes large relative to the sum
    add_atol = 1e-6 * float(np.max(np.abs(a) + np.abs(F32(alpha) * b), initial=0.0))
    out = np.zeros(want_add.shape, F32)
    _call("add", [a, b, alpha, out])
    _close(out, want_add, 1e-6, add_atol, what="add")
    _close(ref.add(a, b, alpha), want_add, 1e-6, add_atol, what="ref add")
    out = np.zeros(want_mul.shape, F32)
    _call("mul", [a, b, out])
    _close(out, want_mul, 1e-6, what="mul")
    _close(ref.mul(a, b), want_mul, 1e-6, what="ref mul")


def test_add_channels_last_with_per_channel_operand() -> None:
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (2, 3, 4, 5)), _rand(rng, (1, 3, 1, 1))
    out = _nhwc(np.zeros((2, 3, 4, 5), F32))
    _call("add", [_nhwc(a), b, 2, out])
    _close(_from_nhwc(out), torch.add(_t(a), _t(b), alpha=2), 1e-6)
    out = _nhwc(np.zeros((2, 3, 4, 5), F32))
    _call("mul", [b, _nhwc(a), out])
    _close(_from_nhwc(out), _t(a) * _t(b), 1e-6)


UNARY = {
    "relu": (torch.relu, ref.relu, 0.0, 0.0),
    "sigmoid": (torch.sigmoid, ref.sigmoid, 1e-5, 1e-6),
    "tanh": (torch.tanh, ref.tanh, 1e-5, 1e-6),
}


@SETTINGS
@given(shape=small_shape, seed=st.integers(0, 2**31), op=st.sampled_from(sorted(UNARY)),
       scale=st.sampled_from([0.1, 3.0, 40.0]))
def test_unary(shape, seed, op, scale) -> None:
    fn, ref_fn, rtol, atol = UNARY[op]
    x = _rand(np.random.default_rng(seed), shape, scale)
    want = fn(_t(x))
    out = np.zeros_like(x)
    _call(op, [x, out])
    _close(out, want, rtol, atol, op)
    _close(ref_fn(x), want, rtol, atol, f"ref {op}")


@SETTINGS
@given(shape=small_shape, seed=st.integers(0, 2**31), approximate=st.sampled_from(["none", "tanh"]),
       scale=st.sampled_from([0.5, 3.0, 12.0]))
def test_gelu(shape, seed, approximate, scale) -> None:
    x = _rand(np.random.default_rng(seed), shape, scale)
    want = torch.nn.functional.gelu(_t(x), approximate=approximate)
    out = np.zeros_like(x)
    _call("gelu", [x, approximate, out])
    _close(out, want, 1e-5, 1e-6, approximate)
    _close(ref.gelu(x, approximate), want, 1e-5, 1e-6, f"ref {approximate}")


def test_unary_channels_last_and_specials() -> None:
    x = np.array([-np.inf, -100, -1, -0.0, 0, 1e-8, 1, 100, np.inf], F32).reshape(1, 1, 3, 3)
    for op, (fn, _, rtol, atol) in UNARY.items():
        out = _nhwc(np.zeros_like(x))
        _call(op, [_nhwc(x), out])
        _close(_from_nhwc(out), fn(_t(x)), rtol, atol, op)
    out = np.zeros(1, F32)
    _call("relu", [np.array([np.nan], F32), out])
    assert np.isnan(out[0])


# ---- softmax, mean, layer norm -------------------------------------------------------------


@SETTINGS
@given(shape=small_shape, seed=st.integers(0, 2**31), data=st.data(), channels_last=st.booleans())
def test_softmax(shape, seed, data, channels_last) -> None:
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _rand(np.random.default_rng(seed), shape, 5.0)
    want = torch.softmax(_t(x), dim)
    if channels_last and len(shape) == 4:
        out = _nhwc(np.zeros_like(x))
        _call("_softmax", [_nhwc(x), dim, False, out])
        got = _from_nhwc(out)
    else:
        got = np.zeros_like(x)
        _call("_softmax", [x, dim, False, got])
    _close(got, want, 1e-5, 1e-6)
    _close(ref._softmax(x, dim), want, 1e-5, 1e-6, "ref")


@SETTINGS
@given(shape=small_shape, seed=st.integers(0, 2**31), data=st.data(), keepdim=st.booleans())
def test_mean(shape, seed, data, keepdim) -> None:
    dims = data.draw(st.one_of(st.none(), st.just([]), st.lists(st.integers(-len(shape), len(shape) - 1),
                                                                min_size=1, max_size=len(shape), unique_by=lambda d: d % len(shape))))
    x = _rand(np.random.default_rng(seed), shape)
    want = torch.ops.aten.mean.dim(_t(x), dims, keepdim) if dims is not None else torch.ops.aten.mean.dim(_t(x), [], keepdim)
    atol = _sum_atol(torch.ops.aten.mean.dim(_t(np.abs(x)), dims or [], keepdim))
    out = np.zeros(want.shape, F32)
    _call("mean", [x, dims, keepdim, None, out])
    _close(out, want, 1e-5, atol)
    _close(ref.mean(x, dims, keepdim), want, 1e-5, atol, "ref")


def test_mean_channels_last_spatial() -> None:
    """The global average pool of a float region: mean over H, W of an NHWC tensor."""
    x = _rand(np.random.default_rng(3), (2, 5, 3, 7))
    out = np.zeros((2, 5, 1, 1), F32)
    _call("mean", [_nhwc(x), [-1, -2], True, 6, out])
    want = _t(x).mean(dim=(-1, -2), keepdim=True)
    _close(out, want, 1e-5, _sum_atol(want))


def _layer_norm_args(x, shape, w, b, eps, outs):
    return [x, list(shape), w, b, eps, *outs, [native.ValueRef(5), native.ValueRef(6), native.ValueRef(7)]]


@SETTINGS
@given(shape=small_shape, seed=st.integers(0, 2**31), data=st.data(), affine=st.booleans(),
       eps=st.sampled_from([1e-5, 1e-3]))
def test_native_layer_norm(shape, seed, data, affine, eps) -> None:
    k = data.draw(st.integers(1, len(shape)))
    rng = np.random.default_rng(seed)
    x = _rand(rng, shape) + F32(3.0)
    norm = shape[len(shape) - k:]
    w = _rand(rng, norm) if affine else None
    b = _rand(rng, norm) if affine else None
    want = torch.ops.aten.native_layer_norm(_t(x), norm, None if w is None else _t(w), None if b is None else _t(b), eps)
    outs = [np.zeros(t.shape, F32) for t in want]
    _call("native_layer_norm", _layer_norm_args(x, norm, w, b, eps, outs))
    mean_abs = torch.ops.aten.mean.dim(_t(np.abs(x)), list(range(len(shape) - k, len(shape))), True)
    # x - mean cancels: float32 loses ~2^-24 * |x| there, which rstd magnifies (a row of two
    # close values has rstd near 1/sqrt(eps)); torch's float32 result carries that error.
    cancel = 8 * 2.0**-24 * float(np.abs(x).max()) * float(want[2].abs().max())
    scale = float(np.abs(w).max()) if w is not None and w.size else 1.0
    atols = [_sum_atol(want[0]) + cancel * scale, _sum_atol(mean_abs), _sum_atol(want[2])]
    for got, exp_, r, atol in zip(outs, want, ref.native_layer_norm(x, norm, w, b, eps), atols):
        _close(got, exp_, 1e-5, atol)
        _close(r, exp_, 1e-5, atol, "ref")


# ---- matmul and convolution ----------------------------------------------------------------


@SETTINGS
@given(m=st.integers(1, 6), k=st.integers(1, 17), n=st.integers(1, 9), seed=st.integers(0, 2**31),
       bias_shape=st.sampled_from(["n", "1n", "m1", "mn", "1", "scalar"]), beta=st.sampled_from([1, 0.5, 0]),
       alpha=st.sampled_from([1, -2.0]), transposed_weight=st.booleans())
def test_addmm_and_mm(m, k, n, seed, bias_shape, beta, alpha, transposed_weight) -> None:
    rng = np.random.default_rng(seed)
    a = _rand(rng, (m, k))
    w = _rand(rng, (n, k))  # a linear weight [out, in]
    bshape = {"n": (n,), "1n": (1, n), "m1": (m, 1), "mn": (m, n), "1": (1,), "scalar": ()}[bias_shape]
    bias = _rand(rng, bshape)
    want = torch.addmm(_t(bias), _t(a), _t(w).t(), beta=beta, alpha=alpha)
    # mat2 = w^T: either a contiguous copy or w's memory read through dim order [1, 0]
    mat2 = native.TensorArg(w, (k, n), (1, 0)) if transposed_weight else np.ascontiguousarray(w.T)
    terms = _t(np.abs(a)) @ _t(np.abs(w)).t()
    atol = _sum_atol(abs(alpha) * terms + abs(beta) * _t(np.abs(bias)))
    out = np.zeros((m, n), F32)
    _call("addmm", [bias, a, mat2, beta, alpha, out])
    _close(out, want, 1e-5, atol)
    _close(ref.addmm(bias, a, np.ascontiguousarray(w.T), beta, alpha), want, 1e-5, atol, "ref")
    want = _t(a) @ _t(w).t()
    out = np.zeros((m, n), F32)
    _call("mm", [a, mat2, out])
    _close(out, want, 1e-5, _sum_atol(terms), "mm")
    _close(ref.mm(a, np.ascontiguousarray(w.T)), want, 1e-5, _sum_atol(terms), "ref mm")


def test_addmm_beta_zero_ignores_nan_bias() -> None:
    a, w = np.ones((2, 3), F32), np.ones((3, 4), F32)
    out = np.zeros((2, 4), F32)
    _call("addmm", [np.full(4, np.nan, F32), a, w, 0, 1, out])
    np.testing.assert_array_equal(out, np.full((2, 4), 3, F32))


@st.composite
def conv_case(draw):
    one_d = draw(st.booleans())
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cpg = draw(st.integers(1, 3))
    opg = draw(st.integers(1, 3))
    kh = 1 if one_d else draw(st.integers(1, 3))
    kw = draw(st.integers(1, 3))
    stride = [draw(st.integers(1, 2)) for _ in range(1 if one_d else 2)]
    padding = [draw(st.integers(0, 2)) for _ in range(1 if one_d else 2)]
    dilation = [draw(st.integers(1, 2)) for _ in range(1 if one_d else 2)]
    h = 1 if one_d else draw(st.integers(kh + (kh - 1), 8))
    w = draw(st.integers(kw + (kw - 1), 9))
    n = draw(st.integers(1, 2))
    bias = draw(st.booleans())
    return one_d, groups, cpg, opg, kh, kw, stride, padding, dilation, n, h, w, bias


@SETTINGS
@given(case=conv_case(), seed=st.integers(0, 2**31), channels_last=st.booleans())
def test_convolution(case, seed, channels_last) -> None:
    one_d, groups, cpg, opg, kh, kw, stride, padding, dilation, n, h, w, has_bias = case
    rng = np.random.default_rng(seed)
    cin, cout = groups * cpg, groups * opg
    x = _rand(rng, (n, cin, w) if one_d else (n, cin, h, w))
    wt = _rand(rng, (cout, cpg, kw) if one_d else (cout, cpg, kh, kw))
    bias = _rand(rng, (cout,)) if has_bias else None
    want = torch.ops.aten.convolution(_t(x), _t(wt), None if bias is None else _t(bias), stride, padding,
                                      dilation, False, [0] * len(stride), groups)
    terms = torch.ops.aten.convolution(_t(np.abs(x)), _t(np.abs(wt)), None if bias is None else _t(np.abs(bias)),
                                       stride, padding, dilation, False, [0] * len(stride), groups)
    args = [bias, stride, padding, dilation, False, [0] * len(stride), groups]
    if channels_last and not one_d:
        out = _nhwc(np.zeros(want.shape, F32))
        _call("convolution", [_nhwc(x), wt, *args, out])
        got = _from_nhwc(out)
    else:
        got = np.zeros(want.shape, F32)
        _call("convolution", [x, wt, *args, got])
    _close(got, want, 1e-5, _sum_atol(terms))
    _close(ref.convolution(x, wt, bias, stride, padding, dilation, False, [0] * len(stride), groups), want,
           1e-5, _sum_atol(terms), "ref")


# ---- views, permutes, flip, cat ------------------------------------------------------------------


@SETTINGS
@given(shape=small_shape, seed=st.integers(0, 2**31), data=st.data())
def test_view_permute(shape, seed, data) -> None:
    x = _rand(np.random.default_rng(seed), shape)
    perm = data.draw(st.permutations(range(len(shape))))
    dims = [p - len(shape) if data.draw(st.booleans()) else p for p in perm]
    want = torch.permute(_t(x), dims).contiguous()
    out = np.zeros(want.shape, F32)
    _call("permute_copy", [x, dims, out])
    _close(out, want, 0.0)
    _close(ref.permute_copy(x, dims), want, 0.0, what="ref")
    size = [int(np.prod(shape[:1])), -1]
    want = _t(x).reshape(size)
    out = np.zeros(want.shape, F32)
    _call("view_copy", [x, size, out])
    _close(out, want, 0.0)
    _close(ref.view_copy(x, size), want, 0.0, what="ref")
    flipped = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True))
    dims = [d - len(shape) if data.draw(st.booleans()) else d for d in flipped]
    want = torch.flip(_t(x), dims)
    for layout in ([x, _nhwc(x)] if len(shape) == 4 else [x]):
        out = np.zeros(want.shape, F32)
        _call("flip", [layout, dims, out])
        _close(out, want, 0.0)
    _close(ref.flip(x, dims), want, 0.0, what="ref")


@SETTINGS
@given(shape=small_shape, seed=st.integers(0, 2**31), data=st.data(), count=st.integers(1, 4))
def test_cat(shape, seed, data, count) -> None:
    rng = np.random.default_rng(seed)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for _ in range(count):
        s = list(shape)
        s[dim] = data.draw(st.integers(0, 3))
        parts.append(_rand(rng, s))
    if data.draw(st.booleans()):
        parts.insert(data.draw(st.integers(0, len(parts))), np.zeros((0,), F32))  # skipped, as torch
    want = torch.cat([_t(p) for p in parts], dim)
    out = np.zeros(want.shape, F32)
    _call("cat", [parts, dim, out])
    _close(out, want, 0.0)
    _close(ref.cat(parts, dim), want, 0.0, what="ref")


def test_cat_channels_last_along_channels() -> None:
    rng = np.random.default_rng(5)
    a, b = _rand(rng, (1, 2, 3, 4)), _rand(rng, (1, 3, 3, 4))
    out = _nhwc(np.zeros((1, 5, 3, 4), F32))
    _call("cat", [[_nhwc(a), b], 1, out])
    _close(_from_nhwc(out), torch.cat([_t(a), _t(b)], 1), 0.0)


# ---- argument validation: tests/ops/test_portable.py (the C kernels and the definitions' checks
# name the same argument); the returned TensorList is the runtime's call shape, not a check


def test_layer_norm_refuses_its_returned_list_out_of_order() -> None:
    z = np.zeros
    args = _layer_norm_args(z((2, 3), F32), [3], None, None, 1e-5, [z((2, 3), F32), z((2, 1), F32), z((2, 1), F32)])
    args[-1] = [native.ValueRef(5), native.ValueRef(7), native.ValueRef(6)]
    with pytest.raises(native.NativeError, match=r"bad_argument 8\)"):
        _call("native_layer_norm", args)


# ---- through a program: String and TensorList values resolved by the runtime ---------------


def test_program_cat_gelu_layer_norm() -> None:
    """x [2, 3] -> cat([x, x], 1) -> gelu(tanh) -> native_layer_norm over 6: the loader resolves
    the String argument and both TensorLists (cat's input, layer norm's returned tuple)."""
    f32 = pm.ScalarType.FLOAT

    def planned(sizes, offset):
        return pm.Tensor(f32, sizes, list(range(len(sizes))), allocation=pm.Allocation(1, offset))

    values = [
        planned([2, 3], 0),  # 0 x
        pm.TensorList([0, 0]),  # 1
        pm.Int(1),  # 2
        planned([2, 6], 32),  # 3 cat out
        pm.String("tanh"),  # 4
        planned([2, 6], 96),  # 5 gelu out
        pm.Int(6),  # 6
        pm.IntList([6]),  # 7
        pm.Null(),  # 8
        pm.Double(1e-5),  # 9
        planned([2, 6], 160),  # 10 out0
        planned([2, 1], 224),  # 11 mean
        planned([2, 1], 240),  # 12 rstd
        pm.TensorList([10, 11, 12]),  # 13
    ]
    calls = [
        pm.KernelCall(0, [1, 2, 3, 3]),
        pm.KernelCall(1, [3, 4, 5, 5]),
        pm.KernelCall(2, [5, 7, 8, 8, 9, 10, 11, 12, 13]),
    ]
    plan = pm.ExecutionPlan(
        name="forward", values=values, inputs=[0], outputs=[10, 11, 12],
        chains=[pm.Chain([0], [10, 11, 12], calls)],
        operators=[pm.Operator("aten::cat", "out"), pm.Operator("aten::gelu", "out"),
                   pm.Operator("aten::native_layer_norm", "out")],
        non_const_buffer_sizes=[0, 256],
    )
    x = _rand(np.random.default_rng(9), (2, 3))
    got = native.run_program(writer.serialize(pm.Program(execution_plan=[plan])), [x])
    y = torch.nn.functional.gelu(torch.cat([_t(x), _t(x)], 1), approximate="tanh")
    want = torch.ops.aten.native_layer_norm(y, [6], None, None, 1e-5)
    for g, w in zip(got, want):
        _close(g, w, 1e-5, _sum_atol(w))


# ---- every kernel in one program: host runtime and Cortex-M55 (QEMU) against torch ----------


class _Builder:
    """A float program under construction: planned tensors packed in one arena."""

    def __init__(self) -> None:
        self.values: list = []
        self.constants: list[bytes] = [b""]
        self.arena = 0
        self.ops: list[str] = []
        self.calls: list[pm.KernelCall] = []

    def value(self, v) -> int:
        self.values.append(v)
        return len(self.values) - 1

    def planned(self, sizes, order=None) -> int:
        order = list(order or range(len(sizes)))
        t = pm.Tensor(pm.ScalarType.FLOAT, list(sizes), order, allocation=pm.Allocation(1, self.arena))
        self.arena += (int(np.prod(sizes)) * 4 + 15) // 16 * 16
        return self.value(t)

    def const(self, arr: np.ndarray, order=None) -> int:
        order = list(order or range(arr.ndim))
        self.constants.append(np.ascontiguousarray(np.transpose(arr, order), F32).tobytes())
        return self.value(pm.Tensor(pm.ScalarType.FLOAT, list(arr.shape), order, data_buffer_idx=len(self.constants) - 1))

    def ints(self, xs) -> int:
        return self.value(pm.IntList([self.value(pm.Int(x)) for x in xs]))

    def call(self, op: str, args: list[int]) -> None:
        if op not in self.ops:
            self.ops.append(op)
        self.calls.append(pm.KernelCall(self.ops.index(op), args))

    def program(self, inputs: list[int], outputs: list[int]) -> pm.Program:
        plan = pm.ExecutionPlan("forward", self.values, inputs, outputs, [pm.Chain(inputs, outputs, self.calls)],
                             [pm.Operator(f"aten::{op}", "out") for op in self.ops],
                             non_const_buffer_sizes=[0, self.arena])
        return pm.Program(execution_plan=[plan], constants=self.constants)


def _all_ops_program(rng: np.random.Generator):
    """Every portable fp32 kernel on edge geometry (channels-last tensors, groups, dilation, 1-D
    conv, broadcasting, a 0-d operand, a skipped empty cat input, a dim-order [1, 0] weight),
    and the same computation in torch (input -> outputs)."""
    b = _Builder()
    w_conv, w_conv1, b_conv1 = _rand(rng, (4, 3, 3, 2)), _rand(rng, (2, 4, 3)), _rand(rng, (2,))
    k_add, k_mul = _rand(rng, (6, 1, 1)), _rand(rng, ())
    bias_mm, w_lin, ln_b, w_mm = _rand(rng, (6, 1)), _rand(rng, (3, 10)), _rand(rng, (3,)), _rand(rng, (3, 4))
    x = b.planned([2, 6, 7, 5], NHWC)
    c = b.planned([2, 4, 3, 1])
    b.call("convolution", [x, b.const(w_conv), b.value(pm.Null()), b.ints([2, 3]), b.ints([1, 0]), b.ints([2, 2]),
                           b.value(pm.Bool(False)), b.ints([0, 0]), b.value(pm.Int(2)), c, c])
    v = b.planned([2, 4, 3])
    b.call("view_copy", [c, b.ints([2, 4, -1]), v, v])
    c1 = b.planned([2, 2, 3])
    b.call("convolution", [v, b.const(w_conv1), b.const(b_conv1), b.ints([1]), b.ints([1]), b.ints([1]),
                           b.value(pm.Bool(False)), b.ints([]), b.value(pm.Int(1)), c1, c1])
    chain = c1
    for op in ("tanh", "sigmoid", "relu"):
        nxt = b.planned([2, 2, 3])
        b.call(op, [chain, nxt, nxt])
        chain = nxt
    ad = b.planned([2, 6, 7, 5], NHWC)
    b.call("add", [x, b.const(k_add), b.value(pm.Double(0.5)), ad, ad])
    mu_ = b.planned([2, 6, 7, 5])
    b.call("mul", [ad, b.const(k_mul), mu_, mu_])
    sm = b.planned([2, 6, 7, 5], NHWC)
    b.call("_softmax", [ad, b.value(pm.Int(1)), b.value(pm.Bool(False)), sm, sm])
    mn = b.planned([6, 5])
    b.call("mean", [mu_, b.ints([0, 2]), b.value(pm.Bool(False)), b.value(pm.Int(6)), mn, mn])
    pc = b.planned([5, 2, 7, 6], [1, 0, 2, 3])
    b.call("permute_copy", [sm, b.ints([3, 0, 2, 1]), pc, pc])
    empty = b.planned([0])
    ct = b.planned([6, 10])
    b.call("cat", [b.value(pm.TensorList([mn, empty, mn])), b.value(pm.Int(-1)), ct, ct])
    am = b.planned([6, 3])
    b.call("addmm", [b.const(bias_mm), ct, b.const(np.ascontiguousarray(w_lin.T), [1, 0]), b.value(pm.Double(0.25)),
                     b.value(pm.Int(-1)), am, am])
    ln, mean, rstd = b.planned([6, 3]), b.planned([6, 1]), b.planned([6, 1])
    b.call("native_layer_norm", [am, b.ints([3]), b.value(pm.Null()), b.const(ln_b), b.value(pm.Double(1e-3)),
                                 ln, mean, rstd, b.value(pm.TensorList([ln, mean, rstd]))])
    g = b.planned([6, 3])
    b.call("gelu", [ln, b.value(pm.String("tanh")), g, g])
    g2 = b.planned([6, 3])
    b.call("gelu", [g, b.value(pm.String("none")), g2, g2])
    out = b.planned([6, 4])
    b.call("mm", [g2, b.const(w_mm), out, out])
    program = b.program([x], [chain, pc, out, mean, rstd])

    def torch_forward(xin: np.ndarray) -> list[torch.Tensor]:
        t = _t(xin)
        c = torch.nn.functional.conv2d(t, _t(w_conv), None, [2, 3], [1, 0], [2, 2], 2).reshape(2, 4, 3)
        r = torch.relu(torch.sigmoid(torch.tanh(torch.nn.functional.conv1d(c, _t(w_conv1), _t(b_conv1), 1, 1))))
        ad = torch.add(t, _t(k_add), alpha=0.5)
        mn = (ad * _t(k_mul)).mean(dim=(0, 2))
        pc = torch.softmax(ad, 1).permute(3, 0, 2, 1)
        ct = torch.cat([mn, mn], -1)
        am = torch.addmm(_t(bias_mm), ct, _t(w_lin).t(), beta=0.25, alpha=-1)
        ln, mean, rstd = torch.ops.aten.native_layer_norm(am, [3], None, _t(ln_b), 1e-3)
        g = torch.nn.functional.gelu(torch.nn.functional.gelu(ln, approximate="tanh"))
        return [r, pc, g @ _t(w_mm), mean, rstd]

    return program, torch_forward


def _check_outputs(got: list[np.ndarray], want: list[torch.Tensor], what: str) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        _close(g, w, 1e-5, _sum_atol(w), f"{what} output {i}")


def test_all_ops_program_on_host() -> None:
    program, forward = _all_ops_program(np.random.default_rng(11))
    pte = writer.serialize(program)
    for seed in (1, 2):
        x = _rand(np.random.default_rng(seed), (2, 6, 7, 5))
        _check_outputs(native.run_program(pte, [x]), forward(x), "host")


@pytest.mark.needs("arm-gcc", "newlib", "qemu")
def test_all_ops_program_on_cortex_m55(tmp_path) -> None:
    """The all-kernels qemu-an547 image (Cortex-M55, FPU, newlib libm, -O3) runs the program."""
    from torchmcu import device

    program, forward = _all_ops_program(np.random.default_rng(11))
    pte_path = tmp_path / "fp32.pte"
    pte_path.write_bytes(writer.serialize(program))
    info = native.program_info(pte_path.read_bytes())
    xs = [_rand(np.random.default_rng(seed), (2, 6, 7, 5)) for seed in (1, 2)]
    image = device.build(pte_path, "qemu-an547", tmp_path / "fw", inputs=device.write_io_blob(info, [[x] for x in xs]))
    result = device.run(image.elf, "qemu-an547", timeout=120)
    assert result.exit_code == 0, result.message + result.console[-2000:]
    for s, x in enumerate(xs):
        _check_outputs(result.outputs(info, sample=s), forward(x), f"QEMU sample {s}")



@pytest.mark.parametrize(("dims", "keepdim"), [([1], False), ([0, 2], True), ([], False)])
def test_amax(dims, keepdim) -> None:
    """amax.out and its reference exactly torch's (NaN propagates)."""
    x = np.random.default_rng(7).standard_normal((3, 4, 5)).astype(np.float32)
    x[2, 1, 3] = np.nan
    want = torch.ops.aten.amax.default(_t(x), dims, keepdim)
    out = np.zeros(tuple(want.shape), np.float32)
    _call("amax", [x, dims, keepdim, out])
    np.testing.assert_array_equal(out, want.numpy())
    np.testing.assert_array_equal(amax_reference(x, dims, keepdim), want.numpy())
