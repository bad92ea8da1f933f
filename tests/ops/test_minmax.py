"""cortex_m::maximum and minimum (torchmcu/ops/defs/minmax.py): the C kernels bit-exact with
numpy's max/min of the logical int8 arrays (broadcast by numpy, independently of the kernels'
period rule) for equal layouts, a single-element operand and the channel broadcast; the TOSA
lowering bit-exact on the TOSA reference model; every stage naming a refused argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _arg_checks import assert_every_stage_names
from _pte_programs import binary_program
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support, run_tosa_reference
from torchmcu.reference.interpreter import run_program

NHWC = [0, 2, 3, 1]
OPS = {"maximum": np.maximum, "minimum": np.minimum}
# (self sizes, other sizes, out sizes, orders or None for contiguous)
CASES = [
    ([37], [37], [37], None),
    ([2, 5, 3, 4], [2, 5, 3, 4], [2, 5, 3, 4], (NHWC, NHWC, NHWC)),
    ([1, 19, 3, 3], [1, 19, 1, 1], [1, 19, 3, 3], (NHWC, NHWC, NHWC)),
    ([1, 6, 1, 1], [2, 6, 5, 3], [2, 6, 5, 3], (NHWC, NHWC, NHWC)),
    ([3, 50], [1], [3, 50], None),
    ([1, 1, 1], [4, 3, 7], [4, 3, 7], None),
]


def _physical(x: np.ndarray, order) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x, order)) if order else x


@pytest.mark.parametrize("name", list(OPS))
def test_c_kernel_reference_and_tosa_are_numpys_max_min(name: str) -> None:
    rng = np.random.default_rng(7)
    definition = ops.get(f"cortex_m::{name}.out")
    for sizes, orders in ((c[:3], c[3]) for c in CASES):
        o = orders or (None, None, None)
        a = rng.integers(-128, 128, sizes[0], dtype=np.int8)
        b = rng.integers(-128, 128, sizes[1], dtype=np.int8)
        b.reshape(-1)[:1] = a.reshape(-1)[:1]  # a tie
        want = _physical(OPS[name](a, b.reshape(sizes[1])), o[2])  # numpy's broadcast
        out = np.zeros(want.shape, np.int8)
        args = [
            native.TensorArg(_physical(a, o[0]), sizes[0], o[0] or list(range(len(sizes[0])))),
            native.TensorArg(_physical(b, o[1]), sizes[1], o[1] or list(range(len(sizes[1])))),
            native.TensorArg(out, sizes[2], o[2] or list(range(len(sizes[2])))),
        ]
        native.call_kernel(definition.qualified, args)
        assert out.tobytes() == want.tobytes(), (name, sizes)
        program = binary_program(f"cortex_m::{name}", tuple(sizes), {}, orders)
        (reference,) = run_program(program, [a, b])
        assert _physical(reference, o[2]).tobytes() == want.tobytes()
        plan = program.execution_plan[0]
        assert npu_support(plan, 0, "u85") is None
        assert "MAXIMUM/MINIMUM" in npu_support(plan, 0, "u55")
        (got,) = run_tosa_reference(
            lower_to_tosa(program), [_physical(a, o[0]), _physical(b, o[1])]
        )
        assert got.tobytes() == want.tobytes()


BAD = [
    (([1, 3, 2, 2], [1, 3, 2, 3], [1, 3, 2, 2]), "other"),  # no broadcast
    (([1, 3, 2, 3], [1, 3, 2, 2], [1, 3, 2, 2]), "self"),
    (([1, 3, 2, 2], [1, 3, 2, 2], [1, 3, 2, 1]), "out"),
    (([2, 3], [3], [2, 3]), "other"),  # a channel vector of a contiguous out
]


@pytest.mark.parametrize(("sizes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(sizes, bad) -> None:
    definition = ops.get("cortex_m::maximum.out")
    index = getattr(definition.schema.A, bad)
    args = [np.zeros(s, np.int8) for s in sizes]
    with pytest.raises(native.NativeError, match=rf"argument {index}\b"):
        native.call_kernel(definition.qualified, args)
    program = binary_program("cortex_m::maximum", sizes, {})
    assert_every_stage_names(
        definition, program, index, [np.zeros(sizes[0], np.int8), np.zeros(sizes[1], np.int8)]
    )


@pytest.mark.parametrize("name", ["maximum", "minimum", "abs"])
def test_portable_fp32_kernels_are_torchs(name: str) -> None:
    """aten::maximum/minimum/abs.out (the float regions' kernels) against torch, NaNs and
    signed zeros included."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 1, 5)).astype(np.float32)
    b = rng.standard_normal((4, 1)).astype(np.float32)
    a.reshape(-1)[:4] = [np.nan, -0.0, 0.0, np.inf]
    b.reshape(-1)[:2] = [1.0, np.nan]
    if name == "abs":
        want = torch.abs(torch.from_numpy(a)).numpy()
        args = [a, np.zeros_like(a)]
    else:
        want = getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        args = [a, b, np.zeros(want.shape, np.float32)]
    native.call_kernel(f"aten::{name}", args, "out")
    np.testing.assert_array_equal(args[-1], want)
