"""Hand-built Programs covering every EValue kind, constants and delegates.

Shared by the .pte round-trip tests and the ExecuTorch cross-check. The
numbers are chosen by hand (not produced by the code under test).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from torchmcu.pte import program as pm


def int8_bytes(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}b", *values)


def int32_bytes(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}i", *values)


def linear_program() -> pm.Program:
    """A cortex_m::quantized_linear call: x[1,4] int8 -> y[1,3] int8 (weights, bias, kernel_sum)."""
    w = int8_bytes([1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12])  # [3,4]
    bias = int32_bytes([100, -200, 300])
    ksum = int32_bytes([7, 8, 9])
    values = [
        pm.Tensor(pm.ScalarType.CHAR, [1, 4], [0, 1], allocation=pm.Allocation(1, 0)),  # 0 x
        pm.Tensor(pm.ScalarType.CHAR, [3, 4], [0, 1], data_buffer_idx=1),  # 1 w
        pm.Tensor(pm.ScalarType.INT, [3], [0], data_buffer_idx=2),  # 2 bias
        pm.Tensor(pm.ScalarType.INT, [3], [0], data_buffer_idx=3),  # 3 kernel_sum
        pm.Int(-128),  # 4 input offset
        pm.Int(5),  # 5 output offset
        pm.Int(1 << 30),  # 6 multiplier
        pm.Int(-7),  # 7 shift
        pm.IntList([6]),  # 8 multipliers
        pm.IntList([7]),  # 9 shifts
        pm.Int(-128),  # 10 act min
        pm.Int(127),  # 11 act max
        pm.Tensor(pm.ScalarType.CHAR, [1, 3], [0, 1], allocation=pm.Allocation(1, 16)),  # 12 y
    ]
    call = pm.KernelCall(0, [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 12])
    plan = one_call_plan(values, call, "cortex_m::quantized_linear", arena=32)
    return pm.Program(execution_plan=[plan], constants=[b"", w, bias, ksum])


def one_call_plan(
    values: list, call: pm.KernelCall, op: str, arena: int, inputs: tuple[int, ...] = (0,)
) -> pm.ExecutionPlan:
    """A "forward" plan of one KernelCall of `op`, from the values `inputs` to the call's out."""
    out = call.args[-1]
    return pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=list(inputs),
        outputs=[out],
        chains=[pm.Chain(inputs=list(inputs), outputs=[out], instructions=[call])],
        operators=[pm.Operator(op, "out")],
        non_const_buffer_sizes=[0, arena],
    )


def every_kind_program() -> pm.Program:
    """Two methods using every EValue kind, every instruction kind, constants and delegates."""
    conv_w = int8_bytes(list(range(-27, 27)))  # [2,3,3,3] OHWI, 54 bytes (not 16-aligned)
    scale = struct.pack("<2d", 0.5, -1.25)
    values = [
        pm.Tensor(pm.ScalarType.CHAR, [1, 3, 4, 4], [0, 2, 3, 1], allocation=pm.Allocation(1, 0)),  # 0
        pm.Tensor(pm.ScalarType.CHAR, [2, 3, 3, 3], [0, 1, 2, 3], data_buffer_idx=1),  # 1
        pm.Tensor(pm.ScalarType.DOUBLE, [2], [0], data_buffer_idx=2),  # 2
        pm.Null(),  # 3
        pm.Int(-(1 << 63)),  # 4
        pm.Int((1 << 63) - 1),  # 5
        pm.Bool(True),  # 6
        pm.Bool(False),  # 7
        pm.Double(0.0),  # 8
        pm.Double(-3.5e-12),  # 9
        pm.Double(float("inf")),  # 10
        pm.String("hello, pte"),  # 11
        pm.IntList([4, 5]),  # 12
        pm.DoubleList([1.5, -2.25, 1e300]),  # 13
        pm.BoolList([True, False, True]),  # 14
        pm.TensorList([0, 1]),  # 15
        pm.OptionalTensorList([-1, 2, -1]),  # 16
        pm.Tensor(pm.ScalarType.FLOAT, [1, 2, 2, 2], [0, 2, 3, 1], allocation=pm.Allocation(1, 48)),  # 17
        pm.Tensor(pm.ScalarType.INT, [], [], allocation=pm.Allocation(2, 8)),  # 18 scalar tensor
        pm.Tensor(pm.ScalarType.LONG, [0], [0]),  # 19 empty, unplanned
        pm.Tensor(pm.ScalarType.BOOL, [3], [0], allocation=pm.Allocation(1, 1 << 33)),  # 20 high offset
        pm.Tensor(pm.ScalarType.BYTE, [5], [0], data_buffer_idx=3),  # 21 shares nothing
        pm.Tensor(pm.ScalarType.SHORT, [2, 2], [1, 0], data_buffer_idx=4),  # 22 transposed
        pm.Tensor(pm.ScalarType.HALF, [1], [0], allocation=pm.Allocation(2, 0)),  # 23
    ]
    main = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[17, 18],
        chains=[
            pm.Chain(
                inputs=[0],
                outputs=[17],
                instructions=[
                    pm.KernelCall(0, [0, 1, 3, 12, 12, 17, 17]),
                    pm.DelegateCall(0, [0, 17]),
                    pm.MoveCall(17, 17),
                    pm.JumpFalseCall(6, 0),
                    pm.FreeCall(18),
                    pm.DelegateCall(1, [0, 18]),
                    pm.KernelCall(1, [15, 16, 13, 14, 11, 4, 5, 7, 8, 9, 10, 18]),
                ],
            ),
            pm.Chain(inputs=[], outputs=[], instructions=[]),
        ],
        operators=[
            pm.Operator("cortex_m::quantized_conv2d", "out"),
            pm.Operator("aten::cat", ""),
        ],
        delegates=[
            pm.BackendDelegate(
                "EthosUBackend",
                0,
                [pm.CompileSpec("target", b"ethos-u55-128"), pm.CompileSpec("empty", b"")],
            ),
            pm.BackendDelegate("OtherBackend", 1),
        ],
        non_const_buffer_sizes=[0, (1 << 33) + 3, 16],
    )
    second = pm.ExecutionPlan(
        name="helper",
        values=[
            pm.Tensor(pm.ScalarType.CHAR, [2, 3, 3, 3], [0, 1, 2, 3], data_buffer_idx=1),
            pm.Tensor(pm.ScalarType.CHAR, [4], [0], allocation=pm.Allocation(1, 0)),
        ],
        inputs=[],
        outputs=[0],
        chains=[pm.Chain(inputs=[], outputs=[0], instructions=[])],
        operators=[],
        non_const_buffer_sizes=[0, 4],
    )
    blob0 = bytes(range(256)) * 3 + b"tail"
    blob1 = b"\x01"
    return pm.Program(
        execution_plan=[main, second],
        constants=[b"", conv_w, scale, b"\xff\x00\x10\x20\x30", int32_bytes([1, 2])[:8]],
        segments_data=[blob0, blob1],
        version=0,
    )


def slice_copy_program(
    sizes: list[int],
    dim: int,
    start: int,
    end: int,
    step: int,
    scalar_type: pm.ScalarType = pm.ScalarType.CHAR,
    *,
    out_sizes: list[int] | None = None,
    out_offset: int | None = None,
) -> pm.Program:
    """One torchmcu::slice_copy call on contiguous tensors: values 0 self (arena offset 0),
    1..4 dim/start/end/step, 5 out (after self, 16-byte aligned, unless out_offset says
    otherwise). out_sizes defaults to the valid slice's sizes."""
    from torchmcu.pte.program import ELEMENT_SIZE

    if out_sizes is None:
        out_sizes = list(sizes)
        out_sizes[dim] = max(0, (end - start + step - 1) // step)
    esize = ELEMENT_SIZE[scalar_type]
    in_bytes = esize * _numel(sizes)
    if out_offset is None:
        out_offset = (in_bytes + 15) // 16 * 16
    arena = max(in_bytes, out_offset + esize * _numel(out_sizes))
    values = [
        pm.Tensor(scalar_type, list(sizes), list(range(len(sizes))), allocation=pm.Allocation(1, 0)),
        pm.Int(dim),
        pm.Int(start),
        pm.Int(end),
        pm.Int(step),
        pm.Tensor(
            scalar_type,
            list(out_sizes),
            list(range(len(out_sizes))),
            allocation=pm.Allocation(1, out_offset),
        ),
    ]
    call = pm.KernelCall(0, [0, 1, 2, 3, 4, 5, 5])
    plan = one_call_plan(values, call, "torchmcu::slice_copy", arena)
    return pm.Program(execution_plan=[plan], constants=[b""])


def _numel(sizes: list[int]) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def transpose_program(
    sizes: list[int],
    perm: list[int],
    scalar_type: pm.ScalarType = pm.ScalarType.CHAR,
    *,
    dim_order: list[int] | None = None,
    out_sizes: list[int] | None = None,
    out_offset: int | None = None,
) -> pm.Program:
    """One cortex_m::transpose call: values 0 input (arena offset 0, `dim_order`, contiguous
    by default), 1..len(perm) the perm items, then the perm IntList, then out (contiguous,
    after the input, 16-byte aligned, unless out_offset says otherwise). out_sizes defaults to
    the permuted sizes."""
    from torchmcu.pte.program import ELEMENT_SIZE

    if out_sizes is None:
        out_sizes = [sizes[p % len(sizes)] for p in perm]
    esize = ELEMENT_SIZE[scalar_type]
    in_bytes = esize * _numel(sizes)
    if out_offset is None:
        out_offset = (in_bytes + 15) // 16 * 16
    arena = max(in_bytes, out_offset + esize * _numel(out_sizes))
    order = list(range(len(sizes))) if dim_order is None else list(dim_order)
    items = [pm.Int(p) for p in perm]
    values = [
        pm.Tensor(scalar_type, list(sizes), order, allocation=pm.Allocation(1, 0)),
        *items,
        pm.IntList(list(range(1, 1 + len(items)))),
        pm.Tensor(
            scalar_type,
            list(out_sizes),
            list(range(len(out_sizes))),
            allocation=pm.Allocation(1, out_offset),
        ),
    ]
    out = len(values) - 1
    call = pm.KernelCall(0, [0, out - 1, out, out])
    plan = one_call_plan(values, call, "cortex_m::transpose", arena)
    return pm.Program(execution_plan=[plan], constants=[b""])


def pad_program(
    sizes: list[int],
    pre: list[int],
    post: list[int],
    value: int,
    *,
    dim_order: list[int] | None = None,
    out_sizes: list[int] | None = None,
    out_dim_order: list[int] | None = None,
    out_offset: int | None = None,
) -> pm.Program:
    """One cortex_m::pad call on int8 tensors: value 0 the input (arena offset 0, `dim_order`,
    contiguous by default), then the pre and post items and IntLists, the pad value, and out
    (with the input's dim order, after the input, 16-byte aligned, unless told otherwise).
    out_sizes defaults to the padded sizes: pre/post are per pad dim (N,H,W,C for a
    channels-last input, else the sizes right-aligned to 4-D)."""
    from torchmcu.ops.layout import NHWC, is_channels_last

    order = list(range(len(sizes))) if dim_order is None else list(dim_order)
    if out_sizes is None:
        out_sizes = list(sizes)
        lead = 4 - len(sizes)
        axes = NHWC if is_channels_last(sizes, order) else range(-lead, len(sizes))
        for k, d in enumerate(axes):
            if d >= 0:
                out_sizes[d] += pre[k] + post[k]
    in_bytes = _numel(sizes)
    if out_offset is None:
        out_offset = (in_bytes + 15) // 16 * 16
    arena = max(in_bytes, out_offset + _numel(out_sizes))
    pre_items = [pm.Int(p) for p in pre]
    post_items = [pm.Int(p) for p in post]
    values = [
        pm.Tensor(pm.ScalarType.CHAR, list(sizes), order, allocation=pm.Allocation(1, 0)),
        *pre_items,
        *post_items,
    ]
    first = 1
    values.append(pm.IntList(list(range(first, first + len(pre)))))
    values.append(pm.IntList(list(range(first + len(pre), first + len(pre) + len(post)))))
    values.append(pm.Int(value))
    out_order = order if out_dim_order is None else list(out_dim_order)
    values.append(
        pm.Tensor(pm.ScalarType.CHAR, list(out_sizes), out_order, allocation=pm.Allocation(1, out_offset))
    )
    out = len(values) - 1
    call = pm.KernelCall(0, [0, out - 3, out - 2, out - 1, out, out])
    plan = one_call_plan(values, call, "cortex_m::pad", arena)
    return pm.Program(execution_plan=[plan], constants=[b""])


def activation_table_program(
    sizes: list[int],
    lut: bytes,
    *,
    dim_order: list[int] | None = None,
    lut_sizes: list[int] | None = None,
    out_sizes: list[int] | None = None,
    out_dim_order: list[int] | None = None,
) -> pm.Program:
    """One cortex_m::quantized_activation call on int8 tensors: values 0 input (arena offset 0,
    `dim_order`, contiguous by default), 1 the lut constant (lut_sizes: [len(lut)]), 2 out
    (the input's sizes and dim order unless told otherwise, after the input, 16-byte
    aligned)."""
    order = list(range(len(sizes))) if dim_order is None else list(dim_order)
    out_sizes = list(sizes) if out_sizes is None else list(out_sizes)
    out_order = order if out_dim_order is None else list(out_dim_order)
    in_bytes = _numel(sizes)
    out_offset = (in_bytes + 15) // 16 * 16
    values = [
        pm.Tensor(pm.ScalarType.CHAR, list(sizes), order, allocation=pm.Allocation(1, 0)),
        pm.Tensor(pm.ScalarType.CHAR, lut_sizes or [len(lut)], list(range(len(lut_sizes or [0]))),
               data_buffer_idx=1),
        pm.Tensor(pm.ScalarType.CHAR, out_sizes, out_order, allocation=pm.Allocation(1, out_offset)),
    ]
    call = pm.KernelCall(0, [0, 1, 2, 2])
    plan = one_call_plan(values, call, "cortex_m::quantized_activation",
                         out_offset + _numel(out_sizes))
    return pm.Program(execution_plan=[plan], constants=[b"", lut])


def binary_program(
    op: str,
    sizes: tuple[list[int], list[int], list[int]],
    scalars: dict[str, int],
    orders: tuple[list[int], list[int], list[int]] | None = None,
    types: tuple[pm.ScalarType, pm.ScalarType, pm.ScalarType] | None = None,
) -> pm.Program:
    """One cortex_m::quantized_add or quantized_mul (or torchmcu::quantized_add16) call:
    self, other and out (sizes and dim orders, contiguous by default; int8 unless `types`)
    planned one after another (16-byte aligned), the scalar arguments by name as Ints in
    schema order. Inputs: self and other."""
    from torchmcu import ops

    definition = ops.get(f"{op}.out")
    if orders is None:
        orders = tuple(list(range(len(s))) for s in sizes)  # type: ignore[assignment]
    types = types or (pm.ScalarType.CHAR,) * 3
    tensors, offset = {}, 0
    for name, s, o, t in zip(("self", "other", "out"), sizes, orders, types):  # type: ignore[arg-type]
        tensors[name] = pm.Tensor(t, list(s), list(o), allocation=pm.Allocation(1, offset))
        size = 2 if t == pm.ScalarType.SHORT else 1
        offset = (offset + size * _numel(s) + 15) // 16 * 16
    values, args = [], []
    for a in definition.schema.args:
        args.append(len(values))
        values.append(tensors[a.name] if a.name in tensors else pm.Int(scalars[a.name]))
    call = pm.KernelCall(0, [*args, args[-1]])
    inputs = (args[definition.schema.A.self], args[definition.schema.A.other])
    plan = one_call_plan(values, call, op, offset, inputs=inputs)
    return pm.Program(execution_plan=[plan], constants=[b""])


def softmax_program(
    sizes: list[int],
    scalars: dict[str, int],
    *,
    dim_order: list[int] | None = None,
    out_sizes: list[int] | None = None,
    mask: np.ndarray | None = None,
    mask_type: pm.ScalarType = pm.ScalarType.BOOL,
) -> pm.Program:
    """One cortex_m::softmax call on int8 tensors: value 0 the input (arena offset 0,
    contiguous unless `dim_order`), the scalar arguments by name as Ints in schema order, then
    out (contiguous, the input's sizes unless out_sizes, 16-byte aligned after the input).
    With `mask`, one torchmcu::masked_softmax call, the mask a constant (of `mask_type`)."""
    from torchmcu import ops

    key = "cortex_m::softmax.out" if mask is None else "torchmcu::masked_softmax.out"
    definition = ops.get(key)
    order = list(range(len(sizes))) if dim_order is None else list(dim_order)
    out_sizes = list(sizes) if out_sizes is None else list(out_sizes)
    out_offset = (_numel(sizes) + 15) // 16 * 16
    tensors = {
        "input": pm.Tensor(pm.ScalarType.CHAR, list(sizes), order, allocation=pm.Allocation(1, 0)),
        "out": pm.Tensor(pm.ScalarType.CHAR, out_sizes, list(range(len(out_sizes))),
                      allocation=pm.Allocation(1, out_offset)),
    }
    constants = [b""]
    if mask is not None:
        m = np.ascontiguousarray(mask)
        tensors["mask"] = pm.Tensor(mask_type, list(m.shape), list(range(m.ndim)), data_buffer_idx=1)
        constants.append(m.astype(np.uint8).tobytes())
    values, args = [], []
    for a in definition.schema.args:
        args.append(len(values))
        values.append(tensors[a.name] if a.name in tensors else pm.Int(scalars[a.name]))
    call = pm.KernelCall(0, [*args, args[-1]])
    plan = one_call_plan(values, call, definition.qualified, out_offset + _numel(out_sizes))
    return pm.Program(execution_plan=[plan], constants=constants)


def control_call_program(key: str, tensors: dict[str, tuple], scalars: dict[str, object],
                         inputs: tuple[str, ...] = ("self",)) -> pm.Program:
    """One call of a control op with an out tensor (torchmcu/ops/defs/control.py: the
    predicates, select_copy): `tensors` name -> (sizes, scalar_type[, dim_order]) planned one
    after another (16-byte aligned), `scalars` name -> EValue, in schema order; the out passed
    twice. Inputs: the tensors named in `inputs`."""
    from torchmcu import ops
    from torchmcu.pte.program import ELEMENT_SIZE

    definition = ops.get(key)
    values, args, offset = [], [], 0
    for a in definition.schema.args:
        args.append(len(values))
        if a.name in tensors:
            sizes, scalar_type, *order = tensors[a.name]
            dim_order = list(order[0]) if order else list(range(len(sizes)))
            values.append(pm.Tensor(scalar_type, list(sizes), dim_order,
                                 allocation=pm.Allocation(1, offset)))
            offset = (offset + ELEMENT_SIZE[scalar_type] * _numel(sizes) + 15) // 16 * 16
        else:
            values.append(scalars[a.name])
    call = pm.KernelCall(0, [*args, args[-1]])
    plan = one_call_plan(values, call, definition.qualified, max(offset, 16),
                         inputs=tuple(args[definition.schema.A[n]] for n in inputs))
    plan.operators = [pm.Operator(definition.qualified, definition.schema.overload)]
    return pm.Program(execution_plan=[plan], constants=[b""])


def map_loop_program(sizes: list[int], scalar_type: pm.ScalarType = pm.ScalarType.CHAR, *,
                     reverse: bool = False) -> pm.Program:
    """The torch.map loop form (lower/rules_control.py's emit_map) around no body: result[i] =
    xs[i] (reverse: xs[count - 1 - i], the index computed with two executorch_prim::sub), so
    the output is xs (reversed along dim 0) only when every loop op does its part. Values: 0 xs
    (the input), 1 result (the output), 2 the slot, then the Ints and the Bool."""
    from torchmcu.pte.program import ELEMENT_SIZE

    slot = list(sizes[1:])
    whole_bytes = (ELEMENT_SIZE[scalar_type] * _numel(sizes) + 15) // 16 * 16
    values = [
        pm.Tensor(scalar_type, list(sizes), list(range(len(sizes))), allocation=pm.Allocation(1, 0)),
        pm.Tensor(scalar_type, list(sizes), list(range(len(sizes))),
               allocation=pm.Allocation(1, whole_bytes)),
        pm.Tensor(scalar_type, slot, list(range(len(slot))), allocation=pm.Allocation(1, 2 * whole_bytes)),
        pm.Int(0),  # 3 dim 0
        pm.Int(0),  # 4 i
        pm.Int(0),  # 5 count
        pm.Bool(False),  # 6 done
        pm.Int(1),  # 7 one
        pm.Int(0),  # 8 count - i
        pm.Int(0),  # 9 count - 1 - i
    ]
    names = [("aten::sym_size", "int"), ("aten::select_copy", "int_out"),
             ("executorch_prim::et_copy_index", "tensor"), ("executorch_prim::add", "Scalar"),
             ("executorch_prim::eq", "Scalar"), ("executorch_prim::sub", "Scalar")]
    size, select, copy, add, eq, sub = range(len(names))
    index = 9 if reverse else 4
    body = [pm.KernelCall(sub, [5, 4, 8]), pm.KernelCall(sub, [8, 7, 9])] if reverse else []
    instructions = [
        pm.KernelCall(size, [0, 3, 5]),
        *body,  # the loop starts here (instruction 1)
        pm.KernelCall(select, [0, 3, index, 2, 2]),
        pm.KernelCall(copy, [1, 2, 4]),  # result[i]
        pm.KernelCall(add, [4, 7, 4]),
        pm.KernelCall(eq, [4, 5, 6]),
        pm.JumpFalseCall(6, 1),
        pm.KernelCall(sub, [4, 5, 4]),
    ]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[1],
        chains=[pm.Chain(inputs=[0], outputs=[1], instructions=instructions)],
        operators=[pm.Operator(n, o) for n, o in names],
        non_const_buffer_sizes=[0, 2 * whole_bytes + (whole_bytes or 16)],
    )
    return pm.Program(execution_plan=[plan], constants=[b""])


def pool_program(
    op: str,
    sizes: list[int],
    scalars: dict[str, object],
    out_sizes: list[int],
    *,
    dim_order: list[int] | None = None,
    scratch_sizes: list[int] | None = None,
) -> pm.Program:
    """One cortex_m::quantized_avg_pool2d / quantized_max_pool2d call (or _nhwc): value 0 the
    int8 input (arena offset 0; NHWC memory: dim order 0,2,3,1 for the legacy op, contiguous
    for _nhwc, unless `dim_order`), the list arguments as Int items then their IntList, bools
    as Bool, ints as Int, in schema order; the scratch a BYTE tensor (scratch_sizes, [0] by
    default) and out (`out_sizes`, the input's kind of layout) planned after the input,
    16-byte aligned."""
    from torchmcu import ops

    definition = ops.get(f"{op}.out")
    nhwc_sizes = op.endswith("_nhwc")
    layout = [0, 1, 2, 3] if nhwc_sizes else [0, 2, 3, 1]
    order = layout if dim_order is None else list(dim_order)
    scratch_sizes = [0] if scratch_sizes is None else list(scratch_sizes)
    out_offset = (_numel(sizes) + 15) // 16 * 16
    scratch_offset = (out_offset + _numel(out_sizes) + 15) // 16 * 16
    tensors = {
        "input": pm.Tensor(pm.ScalarType.CHAR, list(sizes), order, allocation=pm.Allocation(1, 0)),
        "scratch": pm.Tensor(pm.ScalarType.BYTE, scratch_sizes, list(range(len(scratch_sizes))),
                          allocation=pm.Allocation(1, scratch_offset)),
        "out": pm.Tensor(pm.ScalarType.CHAR, list(out_sizes), layout, allocation=pm.Allocation(1, out_offset)),
    }
    values: list = []
    args = []
    for a in definition.schema.args:
        value = tensors.get(a.name, scalars.get(a.name))
        if isinstance(value, list):
            first = len(values)
            values.extend(pm.Int(int(v)) for v in value)
            value = pm.IntList(list(range(first, len(values))))
        elif isinstance(value, bool):
            value = pm.Bool(value)
        elif isinstance(value, int):
            value = pm.Int(value)
        args.append(len(values))
        values.append(value)
    call = pm.KernelCall(0, [*args, args[-1]])
    arena = scratch_offset + _numel(scratch_sizes)
    plan = one_call_plan(values, call, op, arena)
    return pm.Program(execution_plan=[plan], constants=[b""])


def quantize_program(
    op: str,
    sizes: list[int],
    scalars: dict[str, object],
    *,
    in_type: pm.ScalarType | None = None,
    out_type: pm.ScalarType | None = None,
    dim_order: list[int] | None = None,
    out_sizes: list[int] | None = None,
    out_dim_order: list[int] | None = None,
) -> pm.Program:
    """One cortex_m::quantize_per_tensor or dequantize_per_tensor call: value 0 the input
    (arena offset 0; float32 for quantize, `dtype` for dequantize, unless in_type), the
    scalars by name in schema order (a float as Double, an int as Int), then out (`dtype` for
    quantize, float32 for dequantize unless out_type; the input's sizes and dim order unless
    told otherwise; 16-byte aligned after the input)."""
    from torchmcu import ops
    from torchmcu.pte.program import ELEMENT_SIZE

    definition = ops.get(f"{op}.out")
    quantize = op == "cortex_m::quantize_per_tensor"
    dtype = pm.ScalarType(int(scalars["dtype"]))  # type: ignore[call-overload]
    in_type = in_type if in_type is not None else (pm.ScalarType.FLOAT if quantize else dtype)
    out_type = out_type if out_type is not None else (dtype if quantize else pm.ScalarType.FLOAT)
    order = list(range(len(sizes))) if dim_order is None else list(dim_order)
    out_sizes = list(sizes) if out_sizes is None else list(out_sizes)
    out_order = order if out_dim_order is None else list(out_dim_order)
    out_offset = (ELEMENT_SIZE[in_type] * _numel(sizes) + 15) // 16 * 16
    tensors = {
        "input": pm.Tensor(in_type, list(sizes), order, allocation=pm.Allocation(1, 0)),
        "out": pm.Tensor(out_type, out_sizes, out_order, allocation=pm.Allocation(1, out_offset)),
    }
    values: list = []
    for a in definition.schema.args:
        value = tensors.get(a.name, scalars.get(a.name))
        values.append(pm.Double(value) if isinstance(value, float) else
                      pm.Int(value) if isinstance(value, int) else value)
    args = list(range(len(values)))
    call = pm.KernelCall(0, [*args, args[-1]])
    arena = out_offset + ELEMENT_SIZE[out_type] * _numel(out_sizes)
    plan = one_call_plan(values, call, op, arena)
    return pm.Program(execution_plan=[plan], constants=[b""])


@dataclass(frozen=True)
class Planned:
    """An arena tensor argument of call_program (contiguous unless dim_order)."""

    sizes: list[int]
    dim_order: list[int] | None = None
    scalar_type: pm.ScalarType = pm.ScalarType.CHAR


@dataclass(frozen=True)
class Const:
    """A constant tensor argument of call_program: its bytes in memory order, its sizes and dim
    order (contiguous unless dim_order)."""

    data: bytes
    sizes: list[int]
    scalar_type: pm.ScalarType
    dim_order: list[int] | None = None


def call_program(key: str, args: dict[str, object]) -> pm.Program:
    """One KernelCall of the registry op `key`, its arguments by schema name: a Planned is an
    arena tensor (planned one after another, 16-byte aligned), a Const a constant, an int an
    Int, a list of ints an IntList, a list of Planned a TensorList of them, None a Null.
    Inputs: the Planned arguments (list items included) but the out and the scratch, in
    schema order; output: the out."""
    from torchmcu import ops

    definition = ops.get(key)
    values: list = []
    constants = [b""]
    offset, call_args, inputs = 0, [], []
    def planned(v: Planned) -> pm.Tensor:
        nonlocal offset
        order = list(range(len(v.sizes))) if v.dim_order is None else list(v.dim_order)
        t = pm.Tensor(v.scalar_type, list(v.sizes), order, allocation=pm.Allocation(1, offset))
        offset = (offset + t.nbytes + 15) // 16 * 16
        return t

    for a in definition.schema.args:
        v = args[a.name]
        if isinstance(v, Planned):
            t = planned(v)
            if not a.mutable and a.name != "scratch":
                inputs.append(len(values))
        elif isinstance(v, list) and v and all(isinstance(item, Planned) for item in v):
            items = []  # a TensorList of arena tensors, each an input
            for item in v:
                items.append(len(values))
                inputs.append(len(values))
                values.append(planned(item))
            t = pm.TensorList(items)
        elif isinstance(v, Const):
            order = list(range(len(v.sizes))) if v.dim_order is None else list(v.dim_order)
            constants.append(v.data)
            t = pm.Tensor(v.scalar_type, list(v.sizes), order, data_buffer_idx=len(constants) - 1)
        elif isinstance(v, list):
            items = []
            for item in v:
                items.append(len(values))
                values.append(pm.Int(int(item)))
            t = pm.IntList(items)
        elif v is None:
            t = pm.Null()
        else:
            t = pm.Int(int(v))  # type: ignore[call-overload]
        call_args.append(len(values))
        values.append(t)
    call = pm.KernelCall(0, [*call_args, call_args[-1]])
    plan = one_call_plan(values, call, definition.qualified, offset, inputs=tuple(inputs))
    return pm.Program(execution_plan=[plan], constants=constants)
