"""TOSA 1.0 (PRO-INT) lowering of an NPU sub-Program, and its run on the TOSA reference model.

The sub-Program (torchmcu.npu.subprogram.carve) holds cortex_m KernelCalls on int8 NHWC
tensors. Each of our tensors becomes a TOSA tensor of its *physical* shape (sizes in
dim order), so TOSA graph inputs and outputs have exactly the bytes of our arena
tensors. Views (tensor values sharing bytes) become RESHAPEs. Requantization is RESCALE
with DOUBLE_ROUND and our own (multiplier, shift) values, which is CMSIS-NN's arithmetic
(see tosa/graph.py), so the TOSA reference model is bit-exact with our reference
interpreter; the op families live in torchmcu.npu.tosa.ops_*.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from torchmcu.npu.subprogram import Storage, trace_storage
from torchmcu.npu.tosa import ops_conv, ops_elementwise, ops_layout, ops_pool
from torchmcu.npu.tosa.graph import Args, Graph, Tensor, TosaLoweringError, physical_shape
from torchmcu.npu.tosa.support import npu_support
from torchmcu.pte import program as pm

__all__ = ["TosaGraph", "TosaLoweringError", "lower_to_tosa", "npu_support", "run_tosa_reference"]

Lowering = Callable[[Graph, Args, Callable[[int], Tensor]], Tensor]

LOWERINGS: dict[str, Lowering] = {
    "cortex_m::quantized_conv2d": ops_conv.conv2d,
    "cortex_m::quantized_conv2d_nhwc": ops_conv.conv2d,
    "cortex_m::quantized_depthwise_conv2d": ops_conv.depthwise_conv2d,
    "cortex_m::quantized_depthwise_conv2d_nhwc": ops_conv.depthwise_conv2d,
    "cortex_m::quantized_linear": ops_conv.linear,
    "cortex_m::quantized_avg_pool2d": ops_pool.avg_pool2d,
    "cortex_m::quantized_avg_pool2d_nhwc": ops_pool.avg_pool2d,
    "cortex_m::quantized_max_pool2d": ops_pool.max_pool2d,
    "cortex_m::quantized_max_pool2d_nhwc": ops_pool.max_pool2d,
    "cortex_m::quantized_add": ops_elementwise.add,
    "cortex_m::quantized_mul": ops_elementwise.mul,
    "cortex_m::pad": ops_layout.pad,
    "cortex_m::transpose": ops_layout.transpose,
}


@dataclass
class TosaGraph:
    """A TOSA 1.0 flatbuffer and the sub-Program value indices of its inputs and outputs,
    in graph order (= the sub-Program's order)."""

    flatbuffer: bytes
    inputs: list[int]
    outputs: list[int]


def lower_to_tosa(program: pm.Program) -> TosaGraph:
    """The first plan of `program` (KernelCalls on int8 tensors) as one TOSA graph."""
    plan = program.execution_plan[0]
    trace = trace_storage(plan)
    g = Graph()
    storages: dict[Storage, Tensor] = {}
    views: dict[tuple[Storage, tuple[int, ...]], Tensor] = {}

    def view(storage: Storage, shape: tuple[int, ...]) -> Tensor:
        key = (storage, shape)
        if key not in views:
            views[key] = g.reshape(storages[storage], shape)
        return views[key]

    for k, vi in enumerate(plan.inputs):
        t = plan.values[vi]
        if not isinstance(t, pm.Tensor) or t.scalar_type != pm.ScalarType.CHAR:
            raise TosaLoweringError(f"plan input {k} (value {vi}) is not an int8 tensor")
        storages[("in", k)] = g.placeholder(physical_shape(t), "INT8")
    for i, instr in enumerate(plan.chains[0].instructions):
        if isinstance(instr, pm.FreeCall):
            continue
        assert isinstance(instr, pm.KernelCall)
        name = plan.operators[instr.op_index].name
        where = f"instruction {i} ({name})"
        lowering = LOWERINGS.get(name)
        if lowering is None:
            raise TosaLoweringError(f"{where}: no TOSA lowering for this operator")
        args = Args(program, plan, instr, where)
        reads = trace.reads[i]

        def read(pos: int, reads=reads, args=args) -> Tensor:
            if pos not in reads:
                raise args.error(f"argument {pos} is not an activation tensor")
            return view(reads[pos], physical_shape(args.tensor(pos)))

        try:
            result = lowering(g, args, read)
        except (ValueError, KeyError, IndexError) as exc:
            if isinstance(exc, TosaLoweringError):
                raise
            raise TosaLoweringError(f"{where}: {exc}") from exc
        out_shape = physical_shape(args.tensor(len(instr.args) - 2))
        if int(np.prod(result.shape)) != int(np.prod(out_shape)) or result.dtype != "INT8":
            raise TosaLoweringError(
                f"{where}: lowered to {result.dtype}{list(result.shape)}, out tensor is "
                f"int8{list(out_shape)}"
            )
        storages[trace.writes[i][0]] = result
    for k, (storage, vi) in enumerate(zip(trace.outputs, plan.outputs)):
        if storage[0] == "in":
            raise TosaLoweringError(
                f"plan output {k} (value {vi}) is a plan input; nothing computes it"
            )
        g.mark_output(view(storage, physical_shape(plan.values[vi])))  # type: ignore[arg-type]
    return TosaGraph(g.serialize(), list(plan.inputs), list(plan.outputs))


def run_tosa_reference(graph: TosaGraph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Runs the graph on the TOSA reference model; int8 arrays in physical (NHWC) layout."""
    os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")  # else an invalid graph attaches gdb
    import tosa_reference_model

    if len(inputs) != len(graph.inputs):
        raise ValueError(f"the graph takes {len(graph.inputs)} inputs, got {len(inputs)}")
    arrays = [np.ascontiguousarray(x, dtype=np.int8) for x in inputs]
    outputs, status = tosa_reference_model.run(graph.flatbuffer, arrays)
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        raise TosaLoweringError(f"TOSA reference model: graph status {status}")
    return [np.asarray(o) for o in outputs]
