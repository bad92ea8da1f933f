"""Describe .pte files as JSON using ExecuTorch's own deserializer.

Runs inside the ExecuTorch venv (scripts/executorch_venv.sh), never in the
project's environment. Usage:

    python dump_pte.py OUT.json FILE.pte [FILE.pte ...] [--reserialize-dir DIR]

For each file it records what ExecuTorch 1.5.1 reads: the extended header,
operators, values (kind and fields), instructions, delegates (with a hash of
their blob) and one hash per constant, over the bytes its tensors view (the
deserializer hands back constants with their alignment padding, so the
padding length and whether it is zero are recorded separately).
With --reserialize-dir it also writes each program back out with ExecuTorch's
serializer, so the caller can check our reader against ExecuTorch's writer.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from executorch.exir._serialize._program import (
    _get_extended_header,
    deserialize_pte_binary,
    serialize_pte_binary,
)
from suites_json import reserialize_option  # beside this script

# Bytes per element by ExecuTorch ScalarType number (the ones a .pte of ours uses).
ELEMENT_SIZE = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1}


def tensor_view_bytes(t) -> int:
    numel = 1
    for s in t.sizes:
        numel *= s
    return (numel + t.storage_offset) * ELEMENT_SIZE[int(t.scalar_type)]


def describe_value(v) -> dict:
    kind = type(v).__name__
    if kind == "Tensor":
        a = v.allocation_info
        return {
            "kind": kind,
            "scalar_type": int(v.scalar_type),
            "sizes": list(v.sizes),
            "dim_order": list(v.dim_order),
            "storage_offset": v.storage_offset,
            "data_buffer_idx": v.data_buffer_idx,
            "allocation": None if a is None else [a.memory_id, a.memory_offset],
            "shape_dynamism": int(v.shape_dynamism),
        }
    if kind == "Int":
        return {"kind": kind, "value": v.int_val}
    if kind == "Bool":
        return {"kind": kind, "value": bool(v.bool_val)}
    if kind == "Double":
        return {"kind": kind, "value": float(v.double_val).hex()}
    if kind == "String":
        return {"kind": kind, "value": v.string_val}
    if kind == "DoubleList":
        return {"kind": kind, "items": [float(x).hex() for x in v.items]}
    if kind == "BoolList":
        return {"kind": kind, "items": [bool(x) for x in v.items]}
    if kind in ("IntList", "TensorList", "OptionalTensorList"):
        return {"kind": kind, "items": list(v.items)}
    if kind == "Null":
        return {"kind": kind}
    raise TypeError(f"unexpected value kind {kind}")


def describe_instruction(ins) -> list:
    a = ins.instr_args
    kind = type(a).__name__
    if kind == "KernelCall":
        return [kind, a.op_index, list(a.args)]
    if kind == "DelegateCall":
        return [kind, a.delegate_index, list(a.args)]
    if kind == "MoveCall":
        return [kind, a.move_from, a.move_to]
    if kind == "JumpFalseCall":
        return [kind, a.cond_value_index, a.destination_instruction]
    if kind == "FreeCall":
        return [kind, a.value_index]
    raise TypeError(f"unexpected instruction kind {kind}")


def describe(data: bytes) -> dict:
    eh = _get_extended_header(data)
    pte = deserialize_pte_binary(data)
    prog = pte.program
    need: dict[int, int] = {}
    plans = []
    for plan in prog.execution_plan:
        for v in plan.values:
            if type(v.val).__name__ == "Tensor" and v.val.data_buffer_idx > 0:
                i = v.val.data_buffer_idx
                need[i] = max(need.get(i, 0), tensor_view_bytes(v.val))
        delegates = []
        for d in plan.delegates:
            blob = bytes(prog.backend_delegate_data[d.processed.index].data)
            delegates.append(
                {
                    "id": d.id,
                    "location": int(d.processed.location),
                    "compile_specs": [[c.key, bytes(c.value).hex()] for c in d.compile_specs],
                    "data_sha256": hashlib.sha256(blob).hexdigest(),
                    "data_len": len(blob),
                }
            )
        plans.append(
            {
                "name": plan.name,
                "inputs": list(plan.inputs),
                "outputs": list(plan.outputs),
                "operators": [[o.name, o.overload] for o in plan.operators],
                "non_const_buffer_sizes": list(plan.non_const_buffer_sizes),
                "values": [describe_value(v.val) for v in plan.values],
                "chains": [
                    {
                        "inputs": list(c.inputs),
                        "outputs": list(c.outputs),
                        "instructions": [describe_instruction(i) for i in c.instructions],
                    }
                    for c in plan.chains
                ],
                "delegates": delegates,
            }
        )
    constants = []
    for i, buf in enumerate(prog.constant_buffer):
        raw = bytes(buf.storage)
        n = need.get(i, len(raw))
        constants.append(
            {
                "sha256": hashlib.sha256(raw[:n]).hexdigest(),
                "len": n,
                "stored_len": len(raw),
                "padding_is_zero": raw[n:] == bytes(len(raw) - n),
            }
        )
    return {
        "extended_header": None
        if eh is None
        else {
            "program_size": eh.program_size,
            "segment_base_offset": eh.segment_base_offset,
            "segment_data_size": eh.segment_data_size,
        },
        "version": prog.version,
        "plans": plans,
        "constants": constants,
    }


def main(argv: list[str]) -> int:
    argv, reser_dir = reserialize_option(argv)
    out, files = argv[0], argv[1:]
    result = {}
    for f in files:
        data = Path(f).read_bytes()
        result[f] = describe(data)
        if reser_dir is not None:
            pte = deserialize_pte_binary(data)
            again = serialize_pte_binary(pte, extract_delegate_segments=True)
            (reser_dir / (Path(f).stem + ".et.pte")).write_bytes(bytes(again))
    Path(out).write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
