"""The control ops (torch.cond predicates, torch.map loops), defined once in
torchmcu/ops/defs/control.py: the references against numpy, the C kernels bit-exact with the
references (the predicates and select_copy one call at a time, the loop ops as the torch.map
loop form run by the C runtime and by the interpreter), the argument checks naming the
argument the C kernels name, and the stage tables that are views of them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _arg_checks import check_index, refused
from _pte_programs import control_call_program, map_loop_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu import partition, subprogram
from torchmcu.pte import program as pm
from torchmcu.pte.writer import serialize
from torchmcu.reference import ops_predicate
from torchmcu.reference.interpreter import InterpreterError, run_program

SUM = ops.get("aten::sum.IntList_out")
COMPARES = {
    "gt": np.greater,
    "ge": np.greater_equal,
    "lt": np.less,
    "le": np.less_equal,
}
SELECT_COPY = ops.get("aten::select_copy.int_out")
ST = {np.int8: pm.ScalarType.CHAR, np.int32: pm.ScalarType.INT, np.int64: pm.ScalarType.LONG}
LONG, BOOL = pm.ScalarType.LONG, pm.ScalarType.BOOL


@st.composite
def integer_tensors(draw, dtypes=tuple(ST)):
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))  # rank 0: see the notes
    dtype = draw(st.sampled_from(dtypes))
    info = np.iinfo(dtype)
    seed = draw(st.integers(0, 2**31 - 1))
    x = np.random.default_rng(seed).integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return np.asarray(x, dtype=dtype)


def _sum_program(x: np.ndarray, *, keepdim=False, dtype=int(LONG), out=([], LONG)):
    """One aten::sum.IntList_out call, dim None; the defaults are the accepted form."""
    return control_call_program(
        "aten::sum.IntList_out",
        {"self": (list(x.shape), ST[x.dtype.type]), "out": out},
        {"dim": pm.Null(), "keepdim": pm.Bool(keepdim), "dtype": pm.Int(dtype)},
    )


@settings(max_examples=40, deadline=None)
@given(x=integer_tensors())
def test_sum_is_the_wrapping_int64_sum_in_c_and_the_reference(x):
    want = np.int64(0)
    for v in x.reshape(-1).tolist():  # int64 two's complement, one item at a time
        want = np.int64(((int(want) + v + 2**63) % 2**64) - 2**63)
    out = np.zeros((), np.int64)
    native.call_kernel("aten::sum", [x, None, False, int(LONG), out], overload="IntList_out")
    (reference,) = run_program(_sum_program(x), [x])
    assert out == want and reference.dtype == np.int64 and reference == want


@settings(max_examples=40, deadline=None)
@given(x=integer_tensors(), other=st.integers(-200, 200), name=st.sampled_from(list(COMPARES)))
def test_compare_in_c_and_the_reference(x, other, name):
    want = COMPARES[name](x.astype(np.int64), other)
    out = np.zeros(x.shape, np.bool_)
    native.call_kernel(f"aten::{name}", [x, other, out], overload="Scalar_out")
    program = control_call_program(
        f"aten::{name}.Scalar_out",
        {"self": (list(x.shape), ST[x.dtype.type]), "out": (list(x.shape), BOOL)},
        {"other": pm.Int(other)},
    )
    (reference,) = run_program(program, [x])
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(reference, want)


def test_compare_is_elementwise_in_memory_order_across_ranks():
    """An out of another rank takes the elements in self's memory order (predicate.c)."""
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    program = control_call_program(
        "aten::ge.Scalar_out",
        {"self": ([2, 3], pm.ScalarType.CHAR), "out": ([6], BOOL)},
        {"other": pm.Int(2)},
    )
    (reference,) = run_program(program, [x])
    out = np.zeros(6, np.bool_)
    native.call_kernel("aten::ge", [x, 2, out], overload="Scalar_out")
    np.testing.assert_array_equal(reference, [False, False, True, True, True, True])
    np.testing.assert_array_equal(out, reference)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    dtype=st.sampled_from([np.int8, np.int32, np.float32]),
    data=st.data(),
)
def test_select_copy_in_c_and_the_reference(shape, dtype, data):
    index = data.draw(st.integers(0, shape[0] - 1))
    x = (np.random.default_rng(index).standard_normal(shape) * 50).astype(dtype)
    out = np.zeros(shape[1:], dtype)
    native.call_kernel("aten::select_copy", [x, 0, index, out], overload="int_out")
    scalar_type = {
        np.int8: pm.ScalarType.CHAR,
        np.int32: pm.ScalarType.INT,
        np.float32: pm.ScalarType.FLOAT,
    }[dtype]
    program = control_call_program(
        "aten::select_copy.int_out",
        {"self": (shape, scalar_type), "out": (shape[1:], scalar_type)},
        {"dim": pm.Int(0), "index": pm.Int(index)},
    )
    (reference,) = run_program(program, [x])
    np.testing.assert_array_equal(out, x[index])
    assert reference.tobytes() == out.tobytes()


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    dtype=st.sampled_from([np.int8, np.int32, np.float32]),
    reverse=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_map_loop_in_the_c_runtime_and_the_reference(shape, dtype, reverse, seed):
    """sym_size, select_copy, et_copy_index and executorch_prim add/sub/eq as torch.map's loop:
    the output is xs (reversed: count - 1 - i through two subs) only when each op does its
    part, on the C runtime and in the interpreter alike."""
    x = (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)
    scalar_type = {
        np.int8: pm.ScalarType.CHAR,
        np.int32: pm.ScalarType.INT,
        np.float32: pm.ScalarType.FLOAT,
    }[dtype]
    program = map_loop_program(shape, scalar_type, reverse=reverse)
    want = x[::-1] if reverse else x
    (reference,) = run_program(program, [x])
    (c,) = native.run_program(serialize(program), [x], runs=2)  # i is back at 0 for run 2
    np.testing.assert_array_equal(reference, want)
    assert c.tobytes() == reference.tobytes()


@pytest.mark.parametrize(
    ("key", "a", "b", "want"),
    [
        ("executorch_prim::add.Scalar", 2**63 - 1, 1, pm.Int(-(2**63))),
        ("executorch_prim::sub.Scalar", -(2**63), 1, pm.Int(2**63 - 1)),
        ("executorch_prim::add.Scalar", -5, 3, pm.Int(-2)),
        ("executorch_prim::eq.Scalar", 7, 7, pm.Bool(True)),
        ("executorch_prim::eq.Scalar", 7, -7, pm.Bool(False)),
    ],
)
def test_prim_scalars_wrap_like_int64(key, a, b, want):
    definition = ops.get(key)
    bound = SimpleNamespace(scalar={"a": a, "b": b}.__getitem__)
    assert definition.reference(bound) == want


def _bind(key: str, values: list[pm.EValue], args: list[int]):
    from torchmcu.ops.core import ArgError, bind

    try:
        bind(ops.get(key), values, args).check()
    except ArgError as exc:
        return exc.index
    return None


# (sum's arguments changed from the accepted form, the argument named)
SUM_BAD = [
    ({"x": np.zeros(3, np.int16)}, SUM.schema.A.self),
    ({"x": np.zeros(3, np.float32)}, SUM.schema.A.self),
    ({"dim": [0]}, SUM.schema.A.dim),
    ({"keepdim": True}, SUM.schema.A.keepdim),
    ({"dtype": int(pm.ScalarType.INT)}, SUM.schema.A.dtype),
    ({"out": ([2], LONG)}, SUM.schema.A.out),
    ({"out": ([], pm.ScalarType.INT)}, SUM.schema.A.out),
]


@pytest.mark.parametrize(("change", "bad"), SUM_BAD)
def test_sum_check_names_the_argument_the_c_kernel_names(change, bad):
    x = change.get("x", np.zeros((2, 3), np.int8))
    dim = change.get("dim")
    keepdim = change.get("keepdim", False)
    dtype = change.get("dtype", int(LONG))
    out_sizes, out_type = change.get("out", ([], LONG))
    out = np.zeros(out_sizes, native.dtype_of(int(out_type)))
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel("aten::sum", [x, dim, keepdim, dtype, out], overload="IntList_out")
    if x.dtype.type not in ST or dim is not None:
        return  # test_sum_check_refuses_a_non_empty_dim_and_int16_self
    program = _sum_program(x, keepdim=keepdim, dtype=dtype, out=(out_sizes, out_type))
    assert check_index(SUM, program) == bad
    name = SUM.schema.args[bad].name
    with pytest.raises(InterpreterError, match=rf"argument {bad} \({name}\)"):
        run_program(program, [x])


def test_sum_check_refuses_a_non_empty_dim_and_int16_self():
    program = _sum_program(np.zeros(3, np.int8))
    plan = program.execution_plan[0]
    args = plan.chains[0].instructions[0].args
    values = list(plan.values) + [pm.Int(0)]
    dim_list = pm.IntList([len(values) - 1])
    values[args[SUM.schema.A.dim]] = dim_list
    assert _bind(SUM.key, values, args) == SUM.schema.A.dim
    values = list(plan.values)
    self_ = values[args[SUM.schema.A.self]]
    values[args[SUM.schema.A.self]] = pm.Tensor(
        pm.ScalarType.SHORT, self_.sizes, self_.dim_order, allocation=self_.allocation
    )
    assert _bind(SUM.key, values, args) == SUM.schema.A.self
    values[args[SUM.schema.A.dim]] = pm.IntList([])  # an empty dim is the whole-tensor sum
    values[args[SUM.schema.A.self]] = self_
    assert _bind(SUM.key, values, args) is None


COMPARE_BAD = [
    (np.zeros(4, np.int16), 1, ([4], BOOL), 0),  # self not int8/int32/int64
    (np.zeros(4, np.int8), 1.5, ([4], BOOL), 1),  # other not an Int
    (np.zeros(4, np.int8), 1, ([3], BOOL), 2),  # element count
    (np.zeros(4, np.int8), 1, ([4], pm.ScalarType.CHAR), 2),  # out not Bool
    (np.zeros((2, 2), np.int8), 1, ([4, 1], BOOL), 2),  # same rank, other sizes
]


@pytest.mark.parametrize(("x", "other", "out", "bad"), COMPARE_BAD)
def test_compare_check_names_the_argument_the_c_kernel_names(x, other, out, bad):
    sizes, out_type = out
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel(
            "aten::lt",
            [x, other, np.zeros(sizes, native.dtype_of(int(out_type)))],
            overload="Scalar_out",
        )
    scalar_type = {np.int8: pm.ScalarType.CHAR, np.int16: pm.ScalarType.SHORT}[x.dtype.type]
    program = control_call_program(
        "aten::lt.Scalar_out",
        {"self": (list(x.shape), scalar_type), "out": (sizes, out_type)},
        {"other": pm.Int(other) if isinstance(other, int) else pm.Double(other)},
    )
    assert check_index(ops.get("aten::lt.Scalar_out"), program) == bad


SELECT_BAD = [
    ([3, 2], [0, 1], 1, 0, [2], [0], SELECT_COPY.schema.A.dim),  # dim 1
    ([3, 2], [0, 1], 0, 3, [2], [0], SELECT_COPY.schema.A.index),  # past dim 0
    ([3, 2], [0, 1], 0, -1, [2], [0], SELECT_COPY.schema.A.index),
    ([3, 2], [0, 1], 0, 1, [3], [0], SELECT_COPY.schema.A.out),  # not a slot's sizes
    ([3, 2], [1, 0], 0, 1, [2], [0], SELECT_COPY.schema.A.self),  # self not contiguous
    ([0, 2], [0, 1], 0, 0, [2], [0], SELECT_COPY.schema.A.self),  # an empty dim 0
]


@pytest.mark.parametrize(
    ("sizes", "order", "dim", "index", "out_sizes", "out_order", "bad"), SELECT_BAD
)
def test_select_copy_check_names_the_argument_the_c_kernel_names(
    sizes, order, dim, index, out_sizes, out_order, bad
):
    x = np.zeros([sizes[d] for d in order], np.int8)
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel(
            "aten::select_copy",
            [native.TensorArg(x, sizes, order), dim, index, np.zeros(out_sizes, np.int8)],
            overload="int_out",
        )
    program = control_call_program(
        "aten::select_copy.int_out",
        {
            "self": (sizes, pm.ScalarType.CHAR, order),
            "out": (out_sizes, pm.ScalarType.CHAR, out_order),
        },
        {"dim": pm.Int(dim), "index": pm.Int(index)},
    )
    assert check_index(SELECT_COPY, program) == bad
    if all(sizes):
        name = SELECT_COPY.schema.args[bad].name
        with pytest.raises(InterpreterError, match=rf"argument {bad} \({name}\)"):
            run_program(program, [np.zeros(sizes, np.int8)])


def _loop_call(program: pm.Program, name: str) -> tuple[pm.ExecutionPlan, pm.KernelCall]:
    plan = program.execution_plan[0]
    for ins in plan.chains[0].instructions:
        if isinstance(ins, pm.KernelCall) and plan.operators[ins.op_index].name == name:
            return plan, ins
    raise AssertionError(name)


@pytest.mark.parametrize(
    ("name", "position", "value", "bad"),
    [
        ("executorch_prim::add", 0, pm.Double(1.0), 0),  # a not an Int
        ("executorch_prim::sub", 1, pm.Bool(True), 1),  # b not an Int
        ("executorch_prim::et_copy_index", 2, pm.Double(0.0), 2),  # index not an Int
        ("aten::sym_size", 1, pm.Int(4), 1),  # dim past the rank
    ],
)
def test_loop_op_checks_name_the_argument_the_c_kernel_names(name, position, value, bad):
    program = map_loop_program([3, 2])
    plan, ins = _loop_call(program, name)
    plan.values.append(value)
    ins.args[position] = len(plan.values) - 1
    with pytest.raises(native.NativeError, match=r"INVALID_ARGUMENT") as c_error:
        native.run_program(serialize(program), [np.zeros((3, 2), np.int8)])
    assert f"argument {bad}" in str(c_error.value)
    op_key = f"{name}.{plan.operators[ins.op_index].overload}"
    assert _bind(op_key, plan.values, ins.args) == bad
    with pytest.raises(InterpreterError, match=rf"argument {bad} \("):
        run_program(program, [np.zeros((3, 2), np.int8)])


def test_the_stage_tables_are_the_control_definitions():
    """Hand-written: what the interpreter, the NPU partitioner and the storage tracer must say
    about each control op."""
    assert ops_predicate.PREDICATE_OPS == {
        ("aten::sum", "IntList_out"): 6,
        **{(f"aten::{c}", "Scalar_out"): 4 for c in COMPARES},
    }
    assert ops_predicate.LOOP_OPS == {
        ("aten::sym_size", "int"): 3,
        ("aten::select_copy", "int_out"): 5,
        ("executorch_prim::et_copy_index", "tensor"): 3,
        ("executorch_prim::add", "Scalar"): 3,
        ("executorch_prim::sub", "Scalar"): 3,
        ("executorch_prim::eq", "Scalar"): 3,
    }
    assert ops_predicate.CONTROL_OPS == {**ops_predicate.PREDICATE_OPS, **ops_predicate.LOOP_OPS}
    raw = {
        "executorch_prim::et_copy_index": "write0",
        "executorch_prim::add": "read",
        "executorch_prim::sub": "read",
        "executorch_prim::eq": "read",
        "aten::sym_size": "read",
    }
    barriers = {
        "executorch_prim::et_copy_index",
        "executorch_prim::add",
        "executorch_prim::sub",
        "executorch_prim::eq",
    }
    for o in ops.ops():
        plan = SimpleNamespace(operators=[pm.Operator(o.qualified, o.schema.overload)])
        call = pm.KernelCall(0, [])
        assert subprogram._raw_loop_op(plan, call) == raw.get(o.qualified), o.key
        assert partition.is_barrier(plan, call, None) == (o.qualified in barriers), o.key
    assert partition.is_barrier(SimpleNamespace(operators=[]), pm.JumpFalseCall(0, 0), None)


def test_check_passes_the_accepted_forms():
    x = np.zeros((2, 3), np.int8)
    assert refused(SUM, _sum_program(x)) is None
    program = map_loop_program([3, 2])
    plan = program.execution_plan[0]
    for ins in plan.chains[0].instructions:
        if isinstance(ins, pm.KernelCall):
            op = plan.operators[ins.op_index]
            assert _bind(f"{op.name}.{op.overload}", plan.values, ins.args) is None
