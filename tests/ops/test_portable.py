"""The portable fp32 kernels, defined in torchmcu/ops/defs/portable_*.py: each C kernel
(through the native module) against its definition's reference (through the interpreter,
which runs the check first) on generated calls, and the one argument check naming the argument
the C kernel names, for the interpreter too. The numpy references against torch, the
independent reference, are tests/test_kernels_portable_fp32.py; the fp32 lowering end to end is
test_portable_lowering.py."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from _arg_checks import check_index
from _portable_calls import one_call, outs_logical
from torchmcu import native, ops
from torchmcu.ops.core import OpDef
from torchmcu.reference.interpreter import InterpreterError, run_program

F32 = np.float32
NHWC = (0, 2, 3, 1)
PORTABLE = {o.key: o for o in ops.ops("portable")}
COPIES = {"aten::view_copy.out", "aten::permute_copy.out", "aten::cat.out", "aten::flip.out",
          "dim_order_ops::_clone_dim_order.out"}


def _r(rng: np.random.Generator, *shape: int, scale: float = 2.0) -> np.ndarray:
    return np.asarray(rng.standard_normal(size=shape) * scale, F32)


def _z(*shape: int, dtype=F32) -> np.ndarray:
    return np.zeros(shape, dtype)


def _nhwc(x: np.ndarray) -> native.TensorArg:
    """A logical NCHW array in channels-last memory."""
    return native.TensorArg(np.ascontiguousarray(x.transpose(NHWC)), x.shape, NHWC)


def _layer_norm(x, shape, w, b, eps, outs) -> list:
    return [x, list(shape), w, b, eps, *outs, [native.ValueRef(5), native.ValueRef(6), native.ValueRef(7)]]


# op key -> builders of a call (rng -> call_kernel arguments, out(s) zeroed)
Case = Callable[[np.random.Generator], list]
CASES: dict[str, list[Case]] = {
    "dim_order_ops::_clone_dim_order.out": [
        lambda g: [_r(g, 1, 3, 2, 4), False, list(NHWC), _nhwc(_z(1, 3, 2, 4))],
        lambda g: [_nhwc(_r(g, 2, 3, 2, 2)), False, None, _z(2, 3, 2, 2)],
        lambda g: [g.integers(-9, 9, (3, 4)).astype(np.int8), True, None, _z(3, 4, dtype=np.int8)],
    ],
    "aten::addmm.out": [
        lambda g: [_r(g, 4), _r(g, 3, 5), _r(g, 5, 4), 1, 1, _z(3, 4)],
        lambda g: [_r(g, 3, 1), _r(g, 3, 5), _r(g, 5, 2), 0.5, -2.0, _z(3, 2)],
        lambda g: [_r(g), _r(g, 2, 3), native.TensorArg(_r(g, 4, 3), (3, 4), (1, 0)), 0, 1.5, _z(2, 4)],
    ],
    "torchmcu::upsample2d.out": [
        lambda g: [_r(g, 1, 3, 4, 5), 0, 0.5, 0.5, _z(1, 3, 8, 10)],
        lambda g: [_r(g, 2, 2, 3, 4), 2, float(F32(3 / 7)), float(F32(4 / 9)), _z(2, 2, 7, 9)],
        lambda g: [_r(g, 1, 1, 5, 3), 3, 0.5, 0.5, _z(1, 1, 9, 5)],
    ],
    "aten::mm.out": [
        lambda g: [_r(g, 3, 5), _r(g, 5, 4), _z(3, 4)],
        lambda g: [_r(g, 1, 7), native.TensorArg(_r(g, 2, 7), (7, 2), (1, 0)), _z(1, 2)],
    ],
    "aten::convolution.out": [
        lambda g: [_r(g, 1, 3, 6, 5), _r(g, 4, 3, 3, 2), _r(g, 4), [1, 2], [1, 0], [1, 1], False, [0, 0], 1,
                   _z(1, 4, 6, 2)],
        lambda g: [_nhwc(_r(g, 2, 4, 7, 5)), _r(g, 6, 2, 2, 2), None, [2], [1], [2], False, [0, 0], 2,
                   _nhwc(_z(2, 6, 4, 3))],
        lambda g: [_r(g, 1, 2, 9), _r(g, 3, 2, 3), _r(g, 3), [2], [1], [1], False, [], 1, _z(1, 3, 5)],
    ],
    "aten::add.out": [
        lambda g: [_r(g, 2, 3, 4), _r(g, 3, 1), 1, _z(2, 3, 4)],
        lambda g: [_nhwc(_r(g, 1, 3, 2, 2)), _r(g, 1, 3, 1, 1), 0.25, _nhwc(_z(1, 3, 2, 2))],
        lambda g: [_r(g), _r(g, 5), True, _z(5)],
    ],
    "aten::mul.out": [
        lambda g: [_r(g, 4, 1), _r(g, 1, 5), _z(4, 5)],
        lambda g: [_nhwc(_r(g, 2, 3, 2, 2)), _r(g), _z(2, 3, 2, 2)],
    ],
    "aten::relu.out": [
        lambda g: [_r(g, 3, 4), _z(3, 4)],
        lambda g: [_nhwc(_r(g, 1, 3, 2, 2)), _nhwc(_z(1, 3, 2, 2))],
    ],
    "aten::sigmoid.out": [lambda g: [_r(g, 3, 4, scale=20.0), _z(3, 4)], lambda g: [_r(g), _z()]],
    "aten::tanh.out": [lambda g: [_r(g, 2, 5, scale=5.0), _z(2, 5)]],
    "aten::hardsigmoid.out": [lambda g: [_r(g, 3, 7, scale=5.0), _z(3, 7)]],
    "aten::hardswish.out": [lambda g: [_nhwc(_r(g, 1, 3, 2, 2, scale=5.0)), _nhwc(_z(1, 3, 2, 2))]],
    "aten::silu.out": [lambda g: [_r(g, 4, 5, scale=20.0), _z(4, 5)]],
    "aten::leaky_relu.out": [lambda g: [_r(g, 3, 4), 0.2, _z(3, 4)], lambda g: [_r(g, 5), 1, _z(5)]],
    "aten::hardtanh.out": [
        lambda g: [_nhwc(_r(g, 1, 2, 3, 3, scale=3.0)), -0.5, 2, _nhwc(_z(1, 2, 3, 3))],
    ],
    "aten::gelu.out": [
        lambda g: [_r(g, 2, 6, scale=4.0), "none", _z(2, 6)],
        lambda g: [_nhwc(_r(g, 1, 2, 3, 3)), "tanh", _nhwc(_z(1, 2, 3, 3))],
    ],
    "aten::_softmax.out": [
        lambda g: [_r(g, 3, 5, scale=6.0), -1, False, _z(3, 5)],
        lambda g: [_nhwc(_r(g, 1, 4, 2, 3)), 1, False, _nhwc(_z(1, 4, 2, 3))],
    ],
    "aten::maximum.out": [
        lambda g: [_r(g, 2, 3), _r(g, 3), _z(2, 3)],
        lambda g: [_nhwc(_r(g, 1, 3, 2, 2)), _r(g, 1, 3, 1, 1), _z(1, 3, 2, 2)],
    ],
    "aten::minimum.out": [
        lambda g: [np.array([1.0, np.nan, -2.0, 0.0], F32), np.array([np.nan, 3.0, -1.0, -0.5], F32), _z(4)],
        lambda g: [_r(g, 4, 1), _r(g, 1, 5), _z(4, 5)],
    ],
    "aten::abs.out": [
        lambda g: [_r(g, 3, 4), _z(3, 4)],
        lambda g: [_nhwc(_r(g, 1, 2, 3, 3)), _nhwc(_z(1, 2, 3, 3))],
    ],
    "aten::mean.out": [
        lambda g: [_r(g, 2, 3, 4), [1], False, None, _z(2, 4)],
        lambda g: [_nhwc(_r(g, 1, 3, 4, 5)), [-1, -2], True, 6, _z(1, 3, 1, 1)],
        lambda g: [_r(g, 2, 3), None, False, None, _z()],
    ],
    "aten::amax.out": [
        lambda g: [_r(g, 2, 3, 4), [0, 2], False, _z(3)],
        lambda g: [_nhwc(_r(g, 1, 3, 4, 5)), [1], True, _nhwc(_z(1, 1, 4, 5))],
        lambda g: [np.array([[1, np.nan, 3], [-1, -2, -3]], F32), [1], False, _z(2)],
    ],
    "aten::view_copy.out": [
        lambda g: [_r(g, 2, 3, 4), [4, -1], _z(4, 6)],
        lambda g: [g.integers(-9, 9, (6,)).astype(np.int32), [2, 1, 3], _z(2, 1, 3, dtype=np.int32)],
    ],
    "aten::permute_copy.out": [
        lambda g: [_r(g, 2, 3, 4), [2, 0, 1], _z(4, 2, 3)],
        lambda g: [_nhwc(_r(g, 1, 2, 3, 4)), [0, -1, 1, 2], _z(1, 4, 2, 3)],
    ],
    "aten::flip.out": [
        lambda g: [_r(g, 2, 3, 4), [2, 0], _z(2, 3, 4)],
        lambda g: [_nhwc(_r(g, 1, 3, 2, 4)), [-1, 1], _z(1, 3, 2, 4)],  # NHWC in, contiguous out
        lambda g: [g.integers(-9, 9, (3, 5)).astype(np.int8), [], _z(3, 5, dtype=np.int8)],
        lambda g: [_r(g), [-1], _z()],
    ],
    "aten::cat.out": [
        lambda g: [[_r(g, 2, 3), _r(g, 2, 1)], 1, _z(2, 4)],
        lambda g: [[_r(g, 1, 3), _z(0), _r(g, 2, 3)], 0, _z(3, 3)],
        lambda g: [[_nhwc(_r(g, 1, 2, 2, 2)), _r(g, 1, 3, 2, 2)], 1, _nhwc(_z(1, 5, 2, 2))],
    ],
    "aten::native_layer_norm.out": [
        lambda g: _layer_norm(_r(g, 3, 4) + 2, [4], _r(g, 4), _r(g, 4), 1e-5, [_z(3, 4), _z(3, 1), _z(3, 1)]),
        lambda g: _layer_norm(_r(g, 2, 2, 3), [2, 3], None, None, 1e-3, [_z(2, 2, 3), _z(2, 1, 1), _z(2, 1, 1)]),
    ],
}


def test_every_portable_op_is_defined_whole() -> None:
    assert set(CASES) == set(PORTABLE)
    for o in PORTABLE.values():
        assert o.reference is not None and o.check is not None and o.contract, o.key


def _kernel_and_reference(op: OpDef, args: list) -> tuple[list[np.ndarray], list[np.ndarray]]:
    call = one_call(op, args)  # before the kernel writes the outs
    native.call_kernel(op.qualified, args, op.schema.overload)
    return outs_logical(op, args), run_program(call.program, call.inputs)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "key, k", [(key, k) for key, cases in CASES.items() for k in range(len(cases))], ids=str
)
def test_reference_matches_the_kernel(key: str, k: int, seed: int) -> None:
    op = PORTABLE[key]
    args = CASES[key][k](np.random.default_rng(seed))
    got, want = _kernel_and_reference(op, args)
    assert len(got) == len(want) == len(op.schema.outs)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if key in COPIES or key in (
            "aten::relu.out",
            "aten::leaky_relu.out",
            "aten::hardtanh.out",
            "aten::maximum.out",
            "aten::minimum.out",
            "aten::abs.out",
        ):
            np.testing.assert_array_equal(g, w)
        else:  # float32 sums in the kernels' order, libm functions: see docs/operators.md
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4, err_msg=key)


def _overlapping(in_shape, out_shape, shift: int = 1):
    """(input, out) as views of one buffer, out starting `shift` elements into the input: a
    planned offset moved off the start, which start-address checks let through."""
    n_in, n_out = int(np.prod(in_shape)), int(np.prod(out_shape))
    memory = _z(n_in + n_out + shift)
    return memory[:n_in].reshape(in_shape), memory[shift : shift + n_out].reshape(out_shape)


def _cat_input_inside_out() -> list:
    """An input one element into out's bytes (a planned offset moved: not out's start)."""
    memory = _z(16)
    return [[memory[1:7].reshape(2, 3), _z(2, 3)], 1, memory[:12].reshape(2, 6)]


def _overlap_case(name: str) -> list:
    """An out one element into the input's bytes."""
    if name == "permute_copy":
        x, out = _overlapping((2, 3), (3, 2))
        return [x, [1, 0], out]
    if name == "flip":
        x, out = _overlapping((2, 3), (2, 3))
        return [x, [0], out]
    if name == "mean":
        x, out = _overlapping((2, 3), (2, 1))
        return [x, [1], True, None, out]
    if name == "mm":
        a, out = _overlapping((2, 3), (2, 4))
        return [a, _z(3, 4), out]
    x, out = _overlapping((1, 1, 4, 4), (1, 1, 3, 3))  # convolution, 2x2 kernel
    return _conv(x, _z(1, 1, 2, 2), out=out)


def _out_is_the_input() -> list:
    a = _z(1, 3)
    return [a, [0], True, None, a]


def _conv(x, w, bias=None, stride=(1, 1), padding=(0, 0), transposed=False, groups=1, out=None) -> list:
    return [x, w, bias, list(stride), list(padding), [1, 1], transposed, [0, 0], groups, out]


# (op, arguments, the argument the C kernel and the check name); from the C kernels' checks
REJECTS = [
    ("add", lambda: [_z(2, 3, dtype=np.int32), _z(2, 3), 1, _z(2, 3)], 0),  # not float32
    ("add", lambda: [_z(2, 3), _z(4, 3), 1, _z(2, 3)], 1),  # not broadcastable
    ("add", lambda: [_z(2, 3), _z(3), 1, _z(3)], 3),  # out not the broadcast shape
    ("add", lambda: [_z(2), _z(2), float("nan"), _z(2)], 2),  # alpha not finite
    ("mul", lambda: [_z(2, 3), _z(3), _z(1, 2, 3)], 2),  # out rank too large
    ("relu", lambda: [_z(2, 3), _z(3, 2)], 1),
    ("maximum", lambda: [_z(2, 3), _z(2, 2), _z(2, 3)], 1),  # not broadcastable
    ("minimum", lambda: [_z(2, 3, dtype=np.int8), _z(2, 3), _z(2, 3)], 0),
    ("abs", lambda: [_z(2, 3), _z(2, 3, dtype=np.int32)], 1),
    ("sigmoid", lambda: [_z(2, 3), _z(2, 3, dtype=np.int8)], 1),
    ("tanh", lambda: [_z(1, 2, 2, 3), _nhwc(_z(1, 2, 2, 3))], 1),  # out in another layout
    ("hardswish", lambda: [_z(2, 3, dtype=np.int8), _z(2, 3)], 0),
    ("silu", lambda: [_z(2, 3), _z(2, 4)], 1),
    ("leaky_relu", lambda: [_z(2, 3), float("inf"), _z(2, 3)], 1),  # slope not finite
    ("hardtanh", lambda: [_z(2, 3), 0, None, _z(2, 3)], 2),  # max_val not a Scalar
    ("gelu", lambda: [_z(4), "erf", _z(4)], 1),  # unknown approximation
    ("gelu", lambda: [_z(4), None, _z(4)], 1),
    ("_softmax", lambda: [_z(2, 3), 2, False, _z(2, 3)], 1),  # dim out of range
    ("_softmax", lambda: [_z(2, 3), 1, True, _z(2, 3)], 2),  # half_to_float
    ("mean", lambda: [_z(2, 3), [1, -1], False, None, _z(2)], 1),  # repeated dim
    ("mean", lambda: [_z(2, 3), [1], False, None, _z(2, 1)], 4),  # keepdim False: [2]
    ("mean", lambda: [_z(2, 3), [1], True, 3, _z(2, 1)], 3),  # dtype int32
    ("mean", _out_is_the_input, 4),
    ("view_copy", lambda: [_z(2, 3), [-1, -1], _z(6)], 1),  # two inferred sizes
    ("view_copy", lambda: [_z(2, 3), [4, -1], _z(4, 1)], 1),  # 6 is not a multiple of 4
    ("view_copy", lambda: [_z(2, 3), [3, 2], _z(2, 3)], 2),  # out sizes differ
    ("view_copy", lambda: [_nhwc(_z(1, 2, 2, 3)), [12], _z(12)], 0),  # not contiguous
    ("permute_copy", lambda: [_z(2, 3), [0, 0], _z(2, 3)], 1),  # not a permutation
    ("permute_copy", lambda: [_z(2, 3), [1, 0], _z(2, 3)], 2),  # out sizes not permuted
    ("flip", lambda: [_z(2, 3), [1, -1], _z(2, 3)], 1),  # a dim twice
    ("flip", lambda: [_z(2, 3), [2], _z(2, 3)], 1),  # dim out of range
    ("flip", lambda: [_z(2, 3), [0], _z(3, 2)], 2),  # out sizes differ
    ("flip", lambda: [_z(2, 3), [0], _z(2, 3, dtype=np.int32)], 2),  # out dtype differs
    ("flip", lambda: _overlap_case("flip"), 2),  # out inside the input
    ("cat", lambda: [[_z(2, 3), _z(3, 3)], 1, _z(2, 6)], 0),  # sizes differ off dim
    ("cat", lambda: [[_z(2, 3), _z(2, 3)], 1, _z(2, 5)], 2),  # sizes do not add up
    ("cat", lambda: [[_z(2, 3)], 2, _z(2, 3)], 1),  # dim out of range
    ("cat", lambda: [[_z(2, 3), _z(2, 3, dtype=np.int32)], 0, _z(4, 3)], 0),  # dtypes differ
    ("cat", _cat_input_inside_out, 0),
    ("permute_copy", lambda: _overlap_case("permute_copy"), 2),  # out inside the input
    ("mean", lambda: _overlap_case("mean"), 4),
    ("mm", lambda: _overlap_case("mm"), 2),
    ("convolution", lambda: _overlap_case("convolution"), 9),
    ("addmm", lambda: [_z(4), _z(2, 3), _z(4, 4), 1, 1, _z(2, 4)], 2),  # inner sizes differ
    ("addmm", lambda: [_z(3), _z(2, 3), _z(3, 4), 1, 1, _z(2, 4)], 0),  # bias not broadcastable
    ("addmm", lambda: [_z(4), _z(2, 3), _z(3, 4), "x", 1, _z(2, 4)], 3),
    ("mm", lambda: [_z(2, 3), _z(3, 4), _z(4, 2)], 2),
    ("convolution", lambda: _conv(_z(1, 4, 5, 5), _z(2, 3, 3, 3), out=_z(1, 2, 3, 3)), 8),  # C != groups * C/g
    ("convolution", lambda: _conv(_z(1, 3, 5, 5), _z(2, 3, 3, 3), groups=2**31 - 1, out=_z(1, 2, 3, 3)), 8),
    ("convolution", lambda: _conv(_z(1, 3, 5, 5), _z(2, 3, 3, 3), transposed=True, out=_z(1, 2, 3, 3)), 6),
    ("convolution", lambda: _conv(_z(1, 3, 5, 5), _z(2, 3, 3, 3), stride=(0, 1), out=_z(1, 2, 3, 3)), 3),
    ("convolution", lambda: _conv(_z(1, 3, 5, 5), _z(2, 3, 3, 3), _z(3), out=_z(1, 2, 3, 3)), 2),  # bias size
    ("convolution", lambda: _conv(_z(1, 3, 5, 5), _z(2, 3, 3, 3), out=_z(1, 2, 4, 3)), 9),  # out size
    ("convolution", lambda: _conv(_z(1, 3, 2, 2), _z(2, 3, 3, 3), out=_z(1, 2, 1, 1)), 9),  # no output
    ("native_layer_norm", lambda: _layer_norm(_z(2, 3), [2], None, None, 1e-5, [_z(2, 3), _z(2, 1), _z(2, 1)]), 1),
    ("native_layer_norm", lambda: _layer_norm(_z(2, 3), [3], _z(2), None, 1e-5, [_z(2, 3), _z(2, 1), _z(2, 1)]), 2),
    ("native_layer_norm", lambda: _layer_norm(_z(2, 3), [3], None, None, -1.0, [_z(2, 3), _z(2, 1), _z(2, 1)]), 4),
    ("native_layer_norm", lambda: _layer_norm(_z(2, 3), [3], None, None, 1e-5, [_z(2, 3), _z(2), _z(2, 1)]), 6),
]
_QUALIFIED = {o.schema.name: o for o in PORTABLE.values()}


@pytest.mark.parametrize("name, make, bad", REJECTS, ids=[f"{r[0]}-{i}" for i, r in enumerate(REJECTS)])
def test_the_check_names_the_argument_the_kernel_names(name: str, make, bad: int) -> None:
    op = _QUALIFIED[name]
    args = make()
    call = one_call(op, args)
    with pytest.raises(native.NativeError, match=rf"INVALID_ARGUMENT.*bad_argument {bad}\)"):
        native.call_kernel(op.qualified, args)
    assert check_index(op, call.program) == bad
    with pytest.raises(InterpreterError, match=rf"argument {bad} \({op.schema.args[bad].name}\)"):
        run_program(call.program, call.inputs)
