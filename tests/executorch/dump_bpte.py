"""Describe .bpte files as JSON using ExecuTorch's own bundled-program deserializer.

Runs inside the ExecuTorch venv (scripts/executorch_venv.sh). Usage:

    python dump_bpte.py OUT.json FILE.bpte [FILE.bpte ...] [--reserialize-dir DIR]

For each file it records what ExecuTorch 1.5.1 reads (flatc decodes the buffer against
bundled_program_schema.fbs, checking the "BP08" identifier): the schema version, a hash of
the embedded program, and per method test suite every test case's values (kind, scalar type,
sizes, dim order, data as hex). With --reserialize-dir it also writes each bundled program
back with ExecuTorch's serializer, so the caller can read that with our reader.
"""

from __future__ import annotations

import hashlib
import json
import sys
import types
from pathlib import Path

import executorch

# executorch.devtools/__init__ imports the inspector (pandas, not in the venv); only the
# bundled_program subpackage is needed, so register the package without running its __init__.
_devtools = types.ModuleType("executorch.devtools")
_devtools.__path__ = [str(Path(next(iter(executorch.__path__))) / "devtools")]
sys.modules.setdefault("executorch.devtools", _devtools)

import executorch.devtools.bundled_program.schema as bp_schema
from executorch.devtools.bundled_program.serialize import (
    _bundled_program_schema_to_flatbuffer,
    deserialize_from_flatbuffer_to_bundled_program,
)
from suites_json import reserialize_option, suites_json  # beside this script


def _value(v) -> dict:
    val = v.val
    if isinstance(val, bp_schema.Tensor):
        return {
            "kind": "Tensor",
            "scalar_type": int(val.scalar_type),
            "sizes": list(val.sizes),
            "dim_order": [int(d) for d in val.dim_order],
            "data": bytes(val.data).hex(),
        }
    if isinstance(val, bp_schema.Int):
        return {"kind": "Int", "value": int(val.int_val)}
    if isinstance(val, bp_schema.Bool):
        return {"kind": "Bool", "value": bool(val.bool_val)}
    if isinstance(val, bp_schema.Double):
        return {"kind": "Double", "value": float(val.double_val)}
    return {"kind": type(val).__name__}


def describe(bp) -> dict:
    program = bytes(bp.program)
    return {
        "version": int(bp.version),
        "program_sha256": hashlib.sha256(program).hexdigest(),
        "program_bytes": len(program),
        "suites": suites_json(bp.method_test_suites, _value),
    }


def main(argv: list[str]) -> int:
    argv, reserialize = reserialize_option(argv)
    out, files = argv[0], argv[1:]
    result = {}
    for f in files:
        bp = deserialize_from_flatbuffer_to_bundled_program(Path(f).read_bytes())
        result[f] = describe(bp)
        if reserialize is not None:
            # The flatc JSON round trip leaves data as int lists; the packer wants bytes.
            for s in bp.method_test_suites:
                for c in s.test_cases:
                    for v in list(c.inputs) + list(c.expected_outputs):
                        if isinstance(v.val, bp_schema.Tensor):
                            v.val.data = bytes(v.val.data)
                            v.val.dim_order = bytes(v.val.dim_order)
            bp.program = bytes(bp.program)
            target = reserialize / (Path(f).stem + ".et.bpte")
            target.write_bytes(_bundled_program_schema_to_flatbuffer(bp))
            result[f]["reserialized"] = str(target)
    Path(out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
