"""Run ExecuTorch 1.5.1's own inspection and selective-build tools on our files; report as JSON.

Runs inside the ExecuTorch venv (scripts/executorch_venv.sh), never in the project's
environment. Usage:

    python inspect_tools.py REQUEST.json OUT.json

REQUEST.json: {"pte": [paths], "bpte": [paths], "diff": [[a, b], ...], "yaml": [paths],
"merge": [[paths], ...]}. Every tool runs in one process (importing ExecuTorch takes seconds).
What is recorded is what each tool says, parsed from its own output where it prints text:

- pte: exir.print_program.print_program (instruction listing) parsed back per argument,
  exir.print_program.pretty_print (the whole Program) counted per table kind, the delegate
  blobs the deserializer hands back, and codegen/tools/gen_oplist.py run on the file (its C++
  program loader, selective_build.so, lists the operators and the kernel keys).
- bpte: devtools.bundled_program deserialize_from_flatbuffer_to_bundled_program (suites, cases,
  tensors with a hash of their bytes) and print_program of the embedded program.
- diff: devtools/pte_tool/diff_pte.py on two files (what it finds different).
- yaml: torchgen SelectiveBuilder.from_yaml_path (what ExecuTorch's codegen reads), codegen
  gen.py's yaml parsing of the Cortex-M operators.yaml and the portable functions.yaml with that
  selector (which kernels it would register, which kernel keys it selects),
  gen_selected_op_variants.py (the dtypes header), and gen_all_oplist.py on the single file.
  A tool that raises is recorded as {"error": "..."} (rejection is a result, not a crash).
- merge: gen_all_oplist.py over several yaml files (ExecuTorch's combine of model lists).
Always: gen_oplist.py's operator list of the Cortex-M operators.yaml (what the library declares).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import executorch
import torchgen
import yaml

ET_ROOT = Path(next(iter(executorch.__path__)))

# executorch.devtools/__init__ imports the inspector (pandas, not in the venv); only the
# bundled_program and pte_tool subpackages are needed, so register the package bare.
_devtools = types.ModuleType("executorch.devtools")
_devtools.__path__ = [str(ET_ROOT / "devtools")]
sys.modules.setdefault("executorch.devtools", _devtools)

import executorch.devtools.bundled_program.schema as bp_schema
from executorch.codegen import gen as et_codegen
from executorch.codegen.tools import gen_all_oplist, gen_oplist, gen_selected_op_variants
from executorch.devtools.bundled_program.serialize import (
    deserialize_from_flatbuffer_to_bundled_program,
)
from executorch.devtools.pte_tool.diff_pte import diff_pte
from executorch.exir._serialize._program import deserialize_pte_binary
from executorch.exir.print_program import pretty_print, print_program
from suites_json import suites_json  # beside this script
from torchgen.gen import get_custom_build_selector
from torchgen.selective_build.selector import SelectiveBuilder

RESET = "\x1b[0m"
_ARG = re.compile(
    r"^(?P<index>\d+)(?:\x1b\[31mI(?P<input>\d+)\x1b\[0m)?(?:\x1b\[31mO(?P<output>\d+)\x1b\[0m)?"
    r"\x1b\[34m(?P<text>.*)$",
    re.DOTALL,
)
_LINE = re.compile(r"^\s*(?P<seq>\d+): (?P<body>.*)$")


def _quiet(fn: Callable[[], Any]) -> Any:
    """Run a tool that prints progress to stdout without mixing it into our output."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn()


def _guard(fn: Callable[[], Any]) -> Any:
    try:
        return _quiet(fn)
    except BaseException as e:  # noqa: BLE001 - assertion errors and SystemExit are answers too
        return {"error": f"{type(e).__name__}: {e}"}


def parse_listing(text: str) -> dict[str, Any]:
    """print_program's listing back to data: header count, then per instruction its target
    (op.overload or delegate id) and per argument the value index, I/O position and value text."""
    lines = text.splitlines()
    m = re.match(r"The program contains the following (\d+) instructions$", lines[0])
    assert m, lines[0]
    instructions = []
    for line in lines[1:]:
        lm = _LINE.match(line)
        assert lm, line
        target, _, rest = lm.group("body").partition(" ")
        args = []
        for piece in rest.split(RESET + ","):
            am = _ARG.match(piece)
            assert am, piece
            args.append(
                {
                    "index": int(am.group("index")),
                    "input": None if am.group("input") is None else int(am.group("input")),
                    "output": None if am.group("output") is None else int(am.group("output")),
                    "text": am.group("text").removesuffix(RESET),
                }
            )
        instructions.append({"seq": int(lm.group("seq")), "target": target, "args": args})
    return {"count": int(m.group(1)), "instructions": instructions}


def listing(program: Any) -> dict[str, Any]:
    out = io.StringIO()
    print_program(program, out=out)
    return parse_listing(out.getvalue())


def pretty_counts(program: Any) -> dict[str, Any]:
    """pretty_print's dump of the whole Program, counted per table kind it prints."""
    out = io.StringIO()
    pretty_print(program, out=out)
    text = out.getvalue()
    kinds = (
        "EValue",
        "Instruction",
        "Operator",
        "BackendDelegate",
        "Buffer",
        "Chain",
        "ExecutionPlan",
        "CompileSpec",
    )
    counts = {k: len(re.findall(rf"\b{k}\(", text)) for k in kinds}
    counts["non_const_buffer_sizes"] = [
        json.loads(v) for v in re.findall(r"non_const_buffer_sizes=(\[[\d, ]*\])", text)
    ]
    for key in ("inputs", "outputs"):  # the plan's, then each chain's (short lists print inline)
        counts[key] = [json.loads(v) for v in re.findall(rf"\b{key}=(\[[\d, ]*\])", text)]
    counts["backend_ids"] = re.findall(r"BackendDelegate\(\s*id=(\w+)", text)
    return counts


def oplist_of(path: str) -> dict[str, Any]:
    """gen_oplist.py on a .pte: ExecuTorch's selected_operators.yaml made by its C++ loader."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "selected_operators.yaml"
        _quiet(lambda: gen_oplist.gen_oplist(output_path=out, model_file_path=path))
        return yaml.safe_load(out.read_text())


def describe_pte(path: str) -> dict[str, Any]:
    data = Path(path).read_bytes()
    prog = deserialize_pte_binary(data).program
    plan = prog.execution_plan[0]
    return {
        "listing": listing(prog),
        "pretty": pretty_counts(prog),
        "delegate_blobs": [
            {
                "id": d.id,
                "bytes": len(prog.backend_delegate_data[d.processed.index].data),
                "sha256": hashlib.sha256(
                    bytes(prog.backend_delegate_data[d.processed.index].data)
                ).hexdigest(),
            }
            for d in plan.delegates
        ],
        "gen_oplist": _guard(lambda: oplist_of(path)),
    }


def _bundled_value(v: Any) -> dict[str, Any]:
    val = v.val
    if isinstance(val, bp_schema.Tensor):
        data = bytes(val.data)
        return {
            "kind": "Tensor",
            "scalar_type": int(val.scalar_type),
            "sizes": list(val.sizes),
            "dim_order": [int(d) for d in val.dim_order],
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    return {"kind": type(val).__name__}


def describe_bpte(path: str) -> dict[str, Any]:
    bp = deserialize_from_flatbuffer_to_bundled_program(Path(path).read_bytes())
    program = bytes(bp.program)
    return {
        "program_sha256": hashlib.sha256(program).hexdigest(),
        "suites": suites_json(bp.method_test_suites, _bundled_value),
        "listing": listing(deserialize_pte_binary(program).program),
    }


def describe_diff(a: str, b: str) -> dict[str, Any]:
    r = diff_pte(Path(a).read_bytes(), Path(b).read_bytes())
    plans = []
    for pd in r.plan_diffs:
        plans.append(
            {
                "has_differences": pd.has_differences(),
                "operators_only_in_a": pd.operators_only_in_a,
                "operators_only_in_b": pd.operators_only_in_b,
                "value_count": [pd.value_count_a, pd.value_count_b],
                "instruction_count": [pd.instruction_count_a, pd.instruction_count_b],
                "tensor_diffs": [
                    {
                        "evalue_index": t.tensor_a.evalue_index,
                        "data_buffer_idx": t.tensor_a.data_buffer_idx,
                        "bytes_differ": t.bytes_differ,
                        "num_differing": t.num_differing,
                        "metadata_diffs": [f.field_name for f in t.metadata_diffs],
                        "usages": [[u.name, u.arg_index] for u in t.tensor_a.operator_usages],
                    }
                    for t in pd.tensor_diffs
                ],
                "evalue_diffs": [
                    {
                        "evalue_index": e.evalue_index,
                        "fields": [
                            [f.field_name, repr(f.value_a), repr(f.value_b)] for f in e.field_diffs
                        ],
                        "usages": [[u.name, u.arg_index] for u in e.operator_usages_a],
                    }
                    for e in pd.evalue_diffs
                ],
            }
        )
    return {"bitwise_equal": r.bitwise_equal, "error": r.error, "plan_diffs": plans}


def _codegen_selection(path: str) -> dict[str, Any]:
    """What ExecuTorch's codegen (gen.py) keeps of the Cortex-M kernel yaml (and the portable
    one, for a list naming other operators) under this selection: the operators it would
    register and the kernel keys it selects for each."""
    selector = get_custom_build_selector(None, path)
    native = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native"
    tags = str(native / "tags.yaml")
    cortex_m = str(ET_ROOT / "backends" / "cortex_m" / "ops" / "operators.yaml")
    if all(op.startswith("cortex_m::") for op in selector.operators):
        # gen.py's own parse of a custom-ops yaml with its selection filter; parse_yaml_files
        # would also translate ATen's native_functions.yaml first (seconds, nothing selected).
        functions, index = et_codegen.parse_yaml(
            cortex_m, tags, selector.is_native_function_selected, True
        )
    else:
        parsed, _ = et_codegen.parse_yaml_files(
            aten_yaml_path=str(native / "native_functions.yaml"),
            tags_yaml_path=tags,
            native_yaml_path=str(ET_ROOT / "kernels" / "portable" / "functions.yaml"),
            custom_ops_yaml_path=cortex_m,
            selector=selector,
            use_aten_lib=False,
        )
        functions, index = parsed.native_functions, parsed.kernel_index
    out: dict[str, Any] = {}
    for f in functions:
        name = f"{f.namespace}::{f.func.name}"
        keys = [k.to_native_string() for k in index.get_kernels(f)]
        out[name] = {
            "is_root": selector.is_root_operator(name),
            "selected_kernels": sorted(selector.et_get_selected_kernels(name, keys)),
        }
    return out


def _selector(path: str) -> dict[str, Any]:
    s = SelectiveBuilder.from_yaml_path(path)
    return {
        "include_all_operators": s.include_all_operators,
        "operators": {
            name: {
                "is_root_operator": op.is_root_operator,
                "is_used_for_training": op.is_used_for_training,
                "include_all_overloads": op.include_all_overloads,
                "selected": s.is_operator_selected(name),
            }
            for name, op in s.operators.items()
        },
        "et_kernel_metadata": {k: sorted(v) for k, v in s.et_kernel_metadata.items()},
        "build_features": sorted(s.build_features),
        "include_all_non_op_selectives": s.include_all_non_op_selectives,
    }


def _variants(path: str) -> dict[str, list[str]]:
    """gen_selected_op_variants.py's header, read back: operator -> dtype names it lets in."""
    with tempfile.TemporaryDirectory() as d:
        gen_selected_op_variants.write_selected_op_variants(path, d)
        text = (Path(d) / "selected_op_variants.h").read_text()
    found = re.findall(r'compare\("([^"]+)"\) == 0\)\s*&& \(([^)]*)\)\)', text)
    return {op: sorted(re.findall(r"ScalarType::(\w+)", checks)) for op, checks in found}


def _combine(paths: list[str]) -> dict[str, Any]:
    """gen_all_oplist.py over an @-list of yaml files, its written yaml read back."""
    with tempfile.TemporaryDirectory() as d:
        lst = Path(d) / "models.txt"
        lst.write_text("\n".join(paths))
        out = Path(d) / "out"
        out.mkdir()
        _quiet(
            lambda: gen_all_oplist.main(
                ["--output-dir", str(out), "--model-file-list-path", f"@{lst}"]
            )
        )
        return yaml.safe_load((out / "selected_operators.yaml").read_text())


def describe_yaml(path: str) -> dict[str, Any]:
    return {
        "selector": _guard(lambda: _selector(path)),
        "codegen": _guard(lambda: _codegen_selection(path)),
        "op_variants": _guard(lambda: _variants(path)),
        "gen_all_oplist": _guard(lambda: _combine([path])),
    }


def cortex_m_schema_operators() -> list[str]:
    """gen_oplist.py --ops_schema_yaml_path on the Cortex-M operators.yaml: every operator
    ExecuTorch's Cortex-M kernel library declares."""
    schema = ET_ROOT / "backends" / "cortex_m" / "ops" / "operators.yaml"
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "selected_operators.yaml"
        _quiet(lambda: gen_oplist.gen_oplist(output_path=out, ops_schema_yaml_path=str(schema)))
        return sorted(yaml.safe_load(out.read_text())["operators"])


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    result: dict[str, Any] = {
        "pte": {p: describe_pte(p) for p in request.get("pte", [])},
        "bpte": {p: describe_bpte(p) for p in request.get("bpte", [])},
        "diff": [describe_diff(a, b) for a, b in request.get("diff", [])],
        "yaml": {p: describe_yaml(p) for p in request.get("yaml", [])},
        "merge": [_guard(lambda ps=ps: _combine(ps)) for ps in request.get("merge", [])],
        "cortex_m_schema": cortex_m_schema_operators(),
    }
    Path(argv[1]).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main(sys.argv[1:]))
