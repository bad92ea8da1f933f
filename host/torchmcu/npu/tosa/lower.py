"""TOSA 1.0 (PRO-INT) lowering of an NPU sub-Program, and its run on the TOSA reference model.

The sub-Program (torchmcu.npu.subprogram.carve) holds cortex_m KernelCalls on int8 NHWC
tensors. Each of our tensors becomes a TOSA tensor of its *physical* shape (sizes in
dim order), so TOSA graph inputs and outputs have exactly the bytes of our arena
tensors. Views (tensor values sharing bytes) become RESHAPEs. Requantization is RESCALE
with DOUBLE_ROUND and our own (multiplier, shift) values, which is CMSIS-NN's arithmetic
(see graph.py), so the TOSA reference model is bit-exact with our reference
interpreter; the op families live in torchmcu.npu.tosa.ops_*.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from torchmcu.npu.subprogram import ReadPos, Storage, read_value, trace_storage
from torchmcu.npu.tosa import ops_layout
from torchmcu.npu.tosa.graph import (
    Args,
    Graph,
    Tensor,
    TosaLoweringError,
    constant_data,
    physical_shape,
)
from torchmcu.npu.tosa.lowerings import LOWERINGS
from torchmcu.npu.tosa.support import npu_support
from torchmcu.pte import program as pm

__all__ = ["TosaGraph", "TosaLoweringError", "lower_to_tosa", "npu_support", "run_tosa_reference"]


@dataclass
class TosaGraph:
    """A TOSA 1.0 flatbuffer and the sub-Program value indices of its inputs and outputs,
    in graph order (= the sub-Program's order)."""

    flatbuffer: bytes
    inputs: list[int]
    outputs: list[int]


class Reader:
    """Activation arguments of one call as TOSA tensors in their physical shapes. A pad folded
    into this call (see ops_layout.foldable_pad) is offered by folded_pad(); reading the
    padded tensor itself still works (the PAD is then emitted after all)."""

    def __init__(self, lowering: _Lowering, args: Args, reads: dict[ReadPos, Storage]) -> None:
        self.lowering = lowering
        self.args = args
        self.reads = reads

    def __call__(self, pos: ReadPos) -> Tensor:
        """Argument `pos`, or item k of the tensor list argument p for pos = (p, k)."""
        vi = read_value(self.args.plan, self.args.args, pos)
        t = self.args.plan.values[vi]
        if pos not in self.reads:
            # A constant int8 tensor where an activation is read (a recurrent layer's zero
            # initial state, say) is a TOSA CONST of its bytes.
            if not (
                isinstance(t, pm.Tensor)
                and t.data_buffer_idx > 0
                and t.scalar_type == pm.ScalarType.CHAR
            ):
                raise self.args.error(f"argument {pos} is not an activation tensor")
            return self.lowering.constant(vi, t)
        assert isinstance(t, pm.Tensor)
        return self.lowering.view(self.reads[pos], physical_shape(t))

    def only_reader(self, pos: int) -> bool:
        """No other call reads argument pos's tensor and it is no plan output, so a reshape of
        it is only a view (Vela copies a tensor that another op reads in its own shape)."""
        storage = self.reads.get(pos)
        return (
            storage is not None
            and self.lowering.readers.get(storage, 0) == 1
            and (storage not in self.lowering.trace.outputs)
        )

    def folded_pad(self, pos: int) -> tuple[Tensor, tuple[int, int, int, int]] | None:
        """(unpadded NHWC source, (top, bottom, left, right)) when argument pos is a folded pad."""
        fold = self.lowering.folded.get(self.reads.get(pos, ("", -1)))
        if fold is None:
            return None
        pad_args, pad_reads, amounts = fold
        n, h, w, c = pad_args.nhwc_shape(0)
        source = Reader(self.lowering, pad_args, pad_reads)(0)
        return self.lowering.g.reshape(source, (n, h, w, c)), amounts


class _Lowering:
    """State of one lower_to_tosa run: TOSA tensors per storage, views, pending pads."""

    def __init__(self, program: pm.Program, family: str | None = None) -> None:
        self.program = program
        self.plan = program.execution_plan[0]
        self.trace = trace_storage(self.plan)
        self.readers: dict[Storage, int] = {}  # how many (call, argument) reads each storage has
        for reads in self.trace.reads.values():
            for storage in reads.values():
                self.readers[storage] = self.readers.get(storage, 0) + 1
        self.g = Graph(family)
        self.storages: dict[Storage, Tensor] = {}
        self.views: dict[tuple[Storage, tuple[int, ...]], Tensor] = {}
        # storage of a pad folded into its only reader -> (pad args, pad reads, amounts)
        self.folded: dict[
            Storage, tuple[Args, dict[ReadPos, Storage], tuple[int, int, int, int]]
        ] = {}
        self.pending: dict[Storage, int] = {}  # folded pads not emitted (yet)
        self.constants: dict[int, Tensor] = {}  # constant int8 values read as activations

    def constant(self, vi: int, t: pm.Tensor) -> Tensor:
        """Constant value vi (an int8 tensor) as one TOSA CONST however often it is read."""
        if vi not in self.constants:
            self.constants[vi] = self.g.const(constant_data(self.program, t), "INT8")
        return self.constants[vi]

    def view(self, storage: Storage, shape: tuple[int, ...]) -> Tensor:
        if storage not in self.storages and storage in self.pending:
            self.emit(self.pending.pop(storage))
        key = (storage, shape)
        if key not in self.views:
            self.views[key] = self.g.reshape(self.storages[storage], shape)
        return self.views[key]

    def args(self, i: int) -> Args:
        instr = self.plan.chains[0].instructions[i]
        assert isinstance(instr, pm.KernelCall)
        name = self.plan.operators[instr.op_index].name
        return Args(self.program, self.plan, instr, f"instruction {i} ({name})")

    def emit(self, i: int) -> None:
        instr = self.plan.chains[0].instructions[i]
        assert isinstance(instr, pm.KernelCall)
        name = self.plan.operators[instr.op_index].name
        args = self.args(i)
        lowering = LOWERINGS.get(name)
        if lowering is None:
            raise args.error("no TOSA lowering for this operator")
        try:
            result = lowering(self.g, args, Reader(self, args, self.trace.reads[i]))
        except TosaLoweringError:
            raise
        except (ValueError, KeyError, IndexError) as exc:
            raise args.error(str(exc)) from exc
        out_shape = physical_shape(args.tensor(len(instr.args) - 2))
        if int(np.prod(result.shape)) != int(np.prod(out_shape)) or result.dtype != "INT8":
            raise args.error(
                f"lowered to {result.dtype}{list(result.shape)}, out tensor is int8{list(out_shape)}"
            )
        self.storages[self.trace.writes[i][0]] = result

    def find_folds(self) -> None:
        readers: dict[Storage, list[tuple[int, int]]] = {}
        for j, reads in self.trace.reads.items():
            for pos, storage in reads.items():
                readers.setdefault(storage, []).append((j, pos))
        for i, (storage, _) in self.trace.writes.items():
            users = readers.get(storage, [])
            if storage in self.trace.outputs or len(users) != 1 or users[0][1] != 0:
                continue
            fold = ops_layout.foldable_pad(self.args(i), self.args(users[0][0]))
            if fold is not None:
                self.folded[storage] = (self.args(i), self.trace.reads[i], fold)
                self.pending[storage] = i


def lower_to_tosa(program: pm.Program, family: str | None = None) -> TosaGraph:
    """The first plan of `program` (KernelCalls on int8 tensors) as one TOSA graph.
    family: the Ethos-U family it is for ("u55", "u65", "u85"), which picks the faster of
    equivalent op forms where Vela's costs differ; the results are the same integers."""
    state = _Lowering(program, family)
    plan = state.plan
    for k, vi in enumerate(plan.inputs):
        t = plan.values[vi]
        if not isinstance(t, pm.Tensor) or t.scalar_type != pm.ScalarType.CHAR:
            raise TosaLoweringError(f"plan input {k} (value {vi}) is not an int8 tensor")
        state.storages[("in", k)] = state.g.placeholder(physical_shape(t), "INT8")
    state.find_folds()
    for i, instr in enumerate(plan.chains[0].instructions):
        if isinstance(instr, pm.FreeCall) or state.trace.writes[i][0] in state.pending:
            continue
        state.emit(i)
    for k, (storage, vi) in enumerate(zip(state.trace.outputs, plan.outputs)):
        if storage[0] == "in":
            raise TosaLoweringError(
                f"plan output {k} (value {vi}) is a plan input; nothing computes it"
            )
        state.g.mark_output(state.view(storage, physical_shape(plan.values[vi])))  # type: ignore[arg-type]
    return TosaGraph(state.g.serialize(), list(plan.inputs), list(plan.outputs))


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
