"""One native.call_kernel argument list as a one-call Program, so the C kernel (call_kernel) and
the definition (its check and reference, through the interpreter) see the same call.

Every array becomes a planned tensor of one arena; arrays that are views of one buffer keep
their byte distance (an out placed inside an input stays inside it), so the overlap rules see
what the C kernel sees. Python values map as call_kernel maps them: bool -> Bool, int -> Int,
float -> Double, None -> Null, str -> String, a list of ints -> IntList, a list of arrays
(or ValueRefs) -> TensorList."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torchmcu import native
from torchmcu.ops.core import OpDef
from torchmcu.pte import program as pm


@dataclass
class OneCall:
    program: pm.Program
    inputs: list[np.ndarray]  # logical arrays of the plan's inputs, in order


def _root(a: np.ndarray) -> np.ndarray:
    while a.base is not None and isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def one_call(op: OpDef, args: list) -> OneCall:
    """`args` as call_kernel takes them (the out once; a multi-out op ends with its returned
    list of ValueRefs)."""
    values: list[pm.EValue] = []
    regions: dict[int, int] = {}  # id of a root buffer -> its arena offset
    arena = 0
    tensor_of: dict[int, int] = {}  # argument position -> value index of its tensor
    inputs: list[int] = []
    logical: list[np.ndarray] = []
    outs = {a.index for a in op.schema.outs}

    def tensor(x: object, position: int | None) -> int:
        nonlocal arena
        phys, sizes, order = (
            (x.array, list(x.sizes), list(x.dim_order))
            if isinstance(x, native.TensorArg)
            else (x, list(x.shape), list(range(x.ndim)))  # type: ignore[union-attr]
        )
        root = _root(phys)
        if id(root) not in regions:
            regions[id(root)] = arena
            arena += (root.nbytes + 15) // 16 * 16
        offset = regions[id(root)] + _address(phys) - _address(root)
        st = pm.ScalarType(native.scalar_type_of(phys.dtype))
        values.append(pm.Tensor(st, sizes, order, allocation=pm.Allocation(1, offset)))
        vi = len(values) - 1
        if position not in outs:
            inputs.append(vi)
            logical.append(np.transpose(phys, np.argsort(order)))
        return vi

    def value(x: object, position: int) -> int:
        if isinstance(x, (np.ndarray, native.TensorArg)):
            vi = tensor(x, position)
            tensor_of[position] = vi
            return vi
        if isinstance(x, (list, tuple)) and any(
            isinstance(i, (np.ndarray, native.TensorArg, native.ValueRef)) for i in x
        ):
            items = [tensor_of[i.index] if isinstance(i, native.ValueRef) else tensor(i, None) for i in x]
            values.append(pm.TensorList(items))
        elif isinstance(x, (list, tuple)):
            start = len(values)
            values.extend(pm.Int(int(i)) for i in x)
            values.append(pm.IntList(list(range(start, len(values)))))
        elif x is None:
            values.append(pm.Null())
        elif isinstance(x, bool):
            values.append(pm.Bool(x))
        elif isinstance(x, int):
            values.append(pm.Int(x))
        elif isinstance(x, float):
            values.append(pm.Double(x))
        elif isinstance(x, str):
            values.append(pm.String(x))
        else:
            raise TypeError(f"no EValue for {type(x).__name__}")
        return len(values) - 1

    call_args = [value(x, k) for k, x in enumerate(args)]
    if op.call == "out":
        call_args.append(call_args[-1])  # the returned value: the out again
    out_values = [tensor_of[a.index] for a in op.schema.outs if a.index in tensor_of]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=inputs,
        outputs=out_values,
        chains=[pm.Chain(inputs=inputs, outputs=out_values, instructions=[pm.KernelCall(0, call_args)])],
        operators=[pm.Operator(op.qualified, op.schema.overload)],
        non_const_buffer_sizes=[0, max(arena, 16)],
    )
    return OneCall(pm.Program(execution_plan=[plan]), logical)


def outs_logical(op: OpDef, args: list) -> list[np.ndarray]:
    """The out arguments of `args` (after call_kernel wrote them) in logical order."""
    result = []
    for a in op.schema.outs:
        x = args[a.index]
        if isinstance(x, native.TensorArg):
            result.append(np.transpose(x.array, np.argsort(list(x.dim_order))))
        else:
            result.append(np.asarray(x))
    return result
