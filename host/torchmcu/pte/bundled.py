"""Bundled programs (.bpte): a .pte plus test cases, in ExecuTorch's BundledProgram format.

A bundled program lets the device check itself: the runner feeds each test case's inputs
and compares the method's outputs with the expected ones (tolerances are not part of the
format; the runner takes them as build options). The layout follows ExecuTorch 1.5.1's
devtools/bundled_program/schema/bundled_program_schema.fbs (file identifier "BP08"):

    BundledProgram { version: uint; method_test_suites: [BundledMethodTestSuite];
                     program: [ubyte] (32-byte aligned) }
    BundledMethodTestSuite { method_name: string; test_cases: [BundledMethodTestCase] }
    BundledMethodTestCase { inputs: [Value]; expected_outputs: [Value] }
    Value { val: union { Tensor = 1, Int = 2, Bool = 3, Double = 4 } }
    Tensor { scalar_type: byte; sizes: [int]; data: [ubyte] (16-byte aligned); dim_order: [ubyte] }

Tensor data is the tensor's memory (dim order applied): a channels-last input with logical
sizes [N,C,H,W] and dim order [0,2,3,1] holds NHWC bytes, exactly what the runtime copies.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np

from ._fbread import Buf, Table
from .program import ELEMENT_SIZE, Bool, Double, Int, ScalarType
from .validate import ProgramError
from .writer import _new_builder, _vec_i32, _vec_tables

FILE_IDENTIFIER = b"BP08"
SCHEMA_VERSION = 2  # what ExecuTorch 1.5.1 writes (devtools/bundled_program/version.py)
PROGRAM_ALIGNMENT = 32
TENSOR_DATA_ALIGNMENT = 16


class _ValueTypes:
    NONE = 0
    Tensor = 1
    Int = 2
    Bool = 3
    Double = 4


# Field slots in declaration order (a union takes two: type byte, then table).
class _BundledProgramF:
    version = 0
    method_test_suites = 1
    program = 2
    COUNT = 3


class _SuiteF:
    method_name = 0
    test_cases = 1
    COUNT = 2


class _CaseF:
    inputs = 0
    expected_outputs = 1
    COUNT = 2


class _ValueF:
    val_type = 0
    val = 1
    COUNT = 2


class _TensorF:
    scalar_type = 0
    sizes = 1
    data = 2
    dim_order = 3
    COUNT = 4


@dataclass
class BundledTensor:
    """A tensor value: its memory bytes (dim order applied) and logical sizes."""

    scalar_type: ScalarType
    sizes: list[int]
    dim_order: list[int]
    data: bytes

    def to_numpy(self) -> np.ndarray:
        """The tensor as a contiguous array in logical sizes."""
        from torchmcu.native import dtype_of

        physical = np.frombuffer(self.data, dtype=dtype_of(int(self.scalar_type)))
        physical = physical.reshape([self.sizes[d] for d in self.dim_order])
        if not self.sizes:
            return physical.copy()
        return np.ascontiguousarray(physical.transpose(np.argsort(self.dim_order)))


BundledValue = BundledTensor | Int | Bool | Double


@dataclass
class BundledTestCase:
    inputs: list[BundledValue]
    expected_outputs: list[BundledValue]


@dataclass
class BundledMethodTestSuite:
    method_name: str
    test_cases: list[BundledTestCase] = field(default_factory=list)


@dataclass
class BundledProgram:
    program: bytes  # the .pte bytes
    method_test_suites: list[BundledMethodTestSuite] = field(default_factory=list)
    version: int = SCHEMA_VERSION


# --- writing -----------------------------------------------------------------------------


def _aligned_bytes(b: flatbuffers.Builder, data: bytes, alignment: int) -> int:
    """A [ubyte] vector whose first element is `alignment`-aligned in the finished buffer."""
    b.StartVector(1, len(data), alignment)
    b.head = b.Head() - len(data)
    b.Bytes[b.Head() : b.Head() + len(data)] = data
    return b.EndVector()


def _check_tensor(t: BundledTensor, where: str) -> None:
    try:
        st = ScalarType(int(t.scalar_type))
    except ValueError:
        raise ProgramError(f"{where}: unsupported scalar type {t.scalar_type}") from None
    if sorted(t.dim_order) != list(range(len(t.sizes))):
        raise ProgramError(
            f"{where}: dim_order {t.dim_order} is not a permutation of {len(t.sizes)} dims"
        )
    if any(s < 0 for s in t.sizes):
        raise ProgramError(f"{where}: negative size in {t.sizes}")
    numel = int(np.prod(t.sizes, dtype=np.int64)) if t.sizes else 1
    if len(t.data) != numel * ELEMENT_SIZE[st]:
        raise ProgramError(
            f"{where}: {len(t.data)} data bytes for {st.name}{list(t.sizes)} "
            f"({numel * ELEMENT_SIZE[st]} expected)"
        )


def _value(b: flatbuffers.Builder, v: BundledValue, where: str) -> int:
    T = _ValueTypes
    if isinstance(v, BundledTensor):
        _check_tensor(v, where)
        sizes = _vec_i32(b, list(v.sizes))
        data = _aligned_bytes(b, bytes(v.data), TENSOR_DATA_ALIGNMENT)
        dim_order = b.CreateByteVector(bytes(v.dim_order))
        b.StartObject(_TensorF.COUNT)
        b.PrependInt8Slot(_TensorF.scalar_type, int(v.scalar_type), 0)
        b.PrependUOffsetTRelativeSlot(_TensorF.sizes, sizes, 0)
        b.PrependUOffsetTRelativeSlot(_TensorF.data, data, 0)
        b.PrependUOffsetTRelativeSlot(_TensorF.dim_order, dim_order, 0)
        tag, body = T.Tensor, b.EndObject()
    elif isinstance(v, Int):
        b.StartObject(1)
        b.PrependInt64Slot(0, v.value, 0)
        tag, body = T.Int, b.EndObject()
    elif isinstance(v, Bool):
        b.StartObject(1)
        b.PrependBoolSlot(0, v.value, False)
        tag, body = T.Bool, b.EndObject()
    elif isinstance(v, Double):
        b.StartObject(1)
        b.PrependFloat64Slot(0, v.value, 0.0)
        tag, body = T.Double, b.EndObject()
    else:
        raise ProgramError(
            f"{where}: a bundled value must be a tensor, Int, Bool or Double, not {type(v).__name__}"
        )
    b.StartObject(_ValueF.COUNT)
    b.PrependUint8Slot(_ValueF.val_type, tag, 0)
    b.PrependUOffsetTRelativeSlot(_ValueF.val, body, 0)
    return b.EndObject()


def serialize_bundled(bp: BundledProgram) -> bytes:
    """The .bpte bytes (deterministic: same BundledProgram, same bytes)."""
    if bp.program[4:8] != b"ET12":
        raise ProgramError("program: not a .pte (file identifier is not ET12)")
    b = _new_builder()
    suites = []
    for s, suite in enumerate(bp.method_test_suites):
        cases = []
        for c, case in enumerate(suite.test_cases):
            where = f"method_test_suites[{s}].test_cases[{c}]"
            ins = [_value(b, v, f"{where}.inputs[{i}]") for i, v in enumerate(case.inputs)]
            outs = [
                _value(b, v, f"{where}.expected_outputs[{i}]")
                for i, v in enumerate(case.expected_outputs)
            ]
            ins_vec, outs_vec = _vec_tables(b, ins), _vec_tables(b, outs)
            b.StartObject(_CaseF.COUNT)
            b.PrependUOffsetTRelativeSlot(_CaseF.inputs, ins_vec, 0)
            b.PrependUOffsetTRelativeSlot(_CaseF.expected_outputs, outs_vec, 0)
            cases.append(b.EndObject())
        name = b.CreateString(suite.method_name)
        cases_vec = _vec_tables(b, cases)
        b.StartObject(_SuiteF.COUNT)
        b.PrependUOffsetTRelativeSlot(_SuiteF.method_name, name, 0)
        b.PrependUOffsetTRelativeSlot(_SuiteF.test_cases, cases_vec, 0)
        suites.append(b.EndObject())
    suites_vec = _vec_tables(b, suites)
    program = _aligned_bytes(b, bytes(bp.program), PROGRAM_ALIGNMENT)
    P = _BundledProgramF
    b.StartObject(P.COUNT)
    b.PrependUint32Slot(P.version, bp.version, 0)
    b.PrependUOffsetTRelativeSlot(P.method_test_suites, suites_vec, 0)
    b.PrependUOffsetTRelativeSlot(P.program, program, 0)
    root = b.EndObject()
    b.Finish(root, file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


def save_bundled(bp: BundledProgram, path: str | os.PathLike[str]) -> None:
    """Write the .bpte through a temporary name, so a failure leaves no truncated file."""
    data = serialize_bundled(bp)
    target = Path(path)
    tmp = target.with_name(f".{target.name}.partial")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


# --- reading -----------------------------------------------------------------------------


def _aligned_vector(t: Table, slot: int, name: str, alignment: int) -> bytes:
    data = t.raw_bytes(slot, name)
    if data:
        p = t._indirect(slot, name) + 4
        if p % alignment:
            raise ProgramError(
                f"{t.path}.{name}: data at byte offset {p} is not {alignment}-byte aligned"
            )
    return data


def _read_value(t: Table) -> BundledValue:
    T = _ValueTypes
    tag = int(t.scalar(_ValueF.val_type, "val_type", "<B"))
    names = {T.Tensor: "Tensor", T.Int: "Int", T.Bool: "Bool", T.Double: "Double"}
    if tag not in names:
        raise ProgramError(f"{t.path}.val_type: bad union tag {tag} (table at byte offset {t.pos})")
    body = t.table(_ValueF.val, "val", f"{t.path} ({names[tag]})")
    if body is None:
        raise ProgramError(f"{t.path}.val: missing {names[tag]} table (at byte offset {t.pos})")
    if tag == T.Int:
        return Int(int(body.scalar(0, "int_val", "<q")))
    if tag == T.Bool:
        return Bool(bool(body.scalar(0, "bool_val", "<B")))
    if tag == T.Double:
        return Double(float(body.scalar(0, "double_val", "<d", 0.0)))
    st = int(body.scalar(_TensorF.scalar_type, "scalar_type", "<b"))
    try:
        scalar_type = ScalarType(st)
    except ValueError:
        raise ProgramError(f"{body.path}.scalar_type: unsupported scalar type {st}") from None
    tensor = BundledTensor(
        scalar_type=scalar_type,
        sizes=body.scalars(_TensorF.sizes, "sizes", "<i"),
        dim_order=body.scalars(_TensorF.dim_order, "dim_order", "<B"),
        data=_aligned_vector(body, _TensorF.data, "data", TENSOR_DATA_ALIGNMENT),
    )
    _check_tensor(tensor, f"{body.path} (at byte offset {body.pos})")
    return tensor


def parse_bundled(data: bytes) -> BundledProgram:
    """A .bpte back into a BundledProgram; every read bounds-checked, errors name the field."""
    if len(data) < 8:
        raise ProgramError(f"a bundled program needs at least 8 bytes, got {len(data)}")
    if bytes(data[4:8]) != FILE_IDENTIFIER:
        raise ProgramError(
            f"file identifier at byte offset 4 is {bytes(data[4:8])!r}, expected {FILE_IDENTIFIER!r}"
        )
    buf = Buf(bytes(data))
    root = Table(buf, int(buf.scalar("<I", 0, "root offset")), "BundledProgram")
    P = _BundledProgramF
    program = _aligned_vector(root, P.program, "program", PROGRAM_ALIGNMENT)
    if not program:
        raise ProgramError(
            f"BundledProgram.program: missing or empty (table at byte offset {root.pos})"
        )
    suites = []
    for st in root.tables(P.method_test_suites, "method_test_suites"):
        name = st.string(_SuiteF.method_name, "method_name")
        if name is None:
            raise ProgramError(f"{st.path}.method_name: missing (table at byte offset {st.pos})")
        cases = [
            BundledTestCase(
                inputs=[_read_value(v) for v in ct.tables(_CaseF.inputs, "inputs")],
                expected_outputs=[
                    _read_value(v) for v in ct.tables(_CaseF.expected_outputs, "expected_outputs")
                ],
            )
            for ct in st.tables(_SuiteF.test_cases, "test_cases")
        ]
        suites.append(BundledMethodTestSuite(name, cases))
    return BundledProgram(
        program=program,
        method_test_suites=suites,
        version=int(root.scalar(P.version, "version", "<I")),
    )


def load_bundled(path: str | os.PathLike[str]) -> BundledProgram:
    return parse_bundled(Path(path).read_bytes())


# --- making test cases ---------------------------------------------------------------------


def tensor_value(x: Any, meta: dict[str, Any], where: str = "tensor") -> BundledTensor:
    """A logical array as the bundled tensor of a method input/output (native.program_info meta)."""
    arr = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
    dtype = np.dtype(meta["dtype"])
    if arr.dtype != dtype or tuple(arr.shape) != tuple(meta["sizes"]):
        raise ProgramError(
            f"{where}: expected {dtype}{list(meta['sizes'])}, got {arr.dtype}{list(arr.shape)}"
        )
    order = list(meta["dim_order"])
    physical = np.ascontiguousarray(arr.transpose(order) if arr.ndim else arr)
    return BundledTensor(
        ScalarType(meta["scalar_type"]), list(meta["sizes"]), order, physical.tobytes()
    )


def _quantize_input(x: np.ndarray, q: dict[str, Any]) -> np.ndarray:
    """Float sample -> the int8 an int8-I/O program takes (round half to even, like torch)."""
    v = np.rint(x.astype(np.float64) / float(q["scale"])) + int(q["zero_point"])
    return np.clip(v, -128, 127).astype(np.int8)


def bundle(
    pte: bytes,
    samples: Sequence[Sequence[Any]],
    *,
    expected: Sequence[Sequence[Any]] | None = None,
    method: str = "forward",
    io_quant: Sequence[dict[str, Any]] | None = None,
) -> BundledProgram:
    """Bundle `pte` with one test case per sample (a sequence of logical arrays per input).

    expected: outputs per sample; by default the host runtime computes them, so the test
    cases state the program's own integer semantics and a device must reproduce them.
    io_quant: per input {scale, zero_point} (the export report's "inputs"), used to quantize
    float samples for a program whose inputs are int8.
    """
    from torchmcu import native

    if not samples:
        raise ProgramError("no samples to bundle")
    if expected is not None and len(expected) != len(samples):
        raise ProgramError(f"{len(expected)} expected-output sets for {len(samples)} samples")
    info = native.program_info(pte, method)
    cases = []
    for s, sample in enumerate(samples):
        if len(sample) != len(info["inputs"]):
            raise ProgramError(
                f"sample {s}: {len(sample)} inputs given, method {method!r} takes {len(info['inputs'])}"
            )
        arrays = []
        for i, (x, meta) in enumerate(zip(sample, info["inputs"])):
            arr = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
            if np.dtype(meta["dtype"]) == np.int8 and arr.dtype.kind == "f":
                if io_quant is None:
                    raise ProgramError(
                        f"sample {s} input {i}: float data for an int8 input needs io_quant"
                    )
                arr = _quantize_input(arr, io_quant[i])
            arrays.append(arr)
        inputs = [
            tensor_value(x, m, f"sample {s} input {i}")
            for i, (x, m) in enumerate(zip(arrays, info["inputs"]))
        ]
        outs = native.run_program(pte, arrays, method) if expected is None else list(expected[s])
        if len(outs) != len(info["outputs"]):
            raise ProgramError(
                f"sample {s}: {len(outs)} expected outputs, the method has {len(info['outputs'])}"
            )
        expected_values = [
            tensor_value(y, m, f"sample {s} expected output {i}")
            for i, (y, m) in enumerate(zip(outs, info["outputs"]))
        ]
        cases.append(BundledTestCase(inputs, expected_values))
    return BundledProgram(
        program=bytes(pte), method_test_suites=[BundledMethodTestSuite(method, cases)]
    )


def program_of(data: bytes) -> bytes:
    """The .pte inside a .bpte (or the bytes themselves when they already are a .pte)."""
    if bytes(data[4:8]) == FILE_IDENTIFIER:
        return parse_bundled(data).program
    return bytes(data)
