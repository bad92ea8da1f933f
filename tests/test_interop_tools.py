"""ExecuTorch 1.5.1's own tools on our files: they must see what our reader sees.

tests/executorch/inspect_tools.py runs in the ExecuTorch venv (scripts/executorch_venv.sh) and
reports what each tool says about our files:
- .pte: exir.print_program.print_program (instruction listing), pretty_print (whole Program),
  the deserializer's delegate blobs, codegen/tools/gen_oplist.py (its C++ program loader lists
  operators and kernel keys), devtools/pte_tool/diff_pte.py (on deliberately changed copies);
- .bpte: devtools.bundled_program deserialize_from_flatbuffer_to_bundled_program;
- selected_operators.yaml: torchgen SelectiveBuilder.from_yaml_path (ExecuTorch's reader),
  codegen gen.py's kernel-yaml parsing with that selector, gen_selected_op_variants.py,
  gen_all_oplist.py (also over several lists, against `torchmcu ops merge`).
The expected side comes from our reader (torchmcu.pte.reader / bundled / selective), never
from the tool's output. The four MLPerf Tiny models plus a hand-built program with one
DelegateCall to "EthosUBackend" are checked. Without the venv these tests fail; set
TORCHMCU_ALLOW_NO_EXECUTORCH=1 to skip (the conftest convention).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from torchmcu.examples import models
from torchmcu.npu.blob import VelaTensor, pack_blob
from torchmcu.pte import load, save
from torchmcu.pte import program as pm
from torchmcu.pte.bundled import BundledTensor, load_bundled
from torchmcu.selective import read_yaml
from torchmcu.selective.oplist import from_program, op_key, program_operators

pytestmark = pytest.mark.executorch

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tests" / "executorch" / "inspect_tools.py"

# The suites' JSON shape, shared with the ExecuTorch-side scripts (a plain module beside them).
_spec = importlib.util.spec_from_file_location("suites_json", TOOLS.with_name("suites_json.py"))
assert _spec is not None and _spec.loader is not None
_suites_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_suites_module)
_suites_json = _suites_module.suites_json
MODELS = list(models.MLPERF_TINY)
DELEGATE = "ethos_u_delegate"
NPU = "ds_cnn_npu"  # DS-CNN exported for ethos-u55-128: a real Vela blob in one delegate

# ExecuTorch's print_program dtype suffixes (exir/print_program.py, _scalar_type_str).
DTYPE_CODE = {
    pm.ScalarType.BYTE: "bt",
    pm.ScalarType.CHAR: "c",
    pm.ScalarType.SHORT: "s",
    pm.ScalarType.INT: "i",
    pm.ScalarType.LONG: "l",
    pm.ScalarType.HALF: "h",
    pm.ScalarType.FLOAT: "f",
    pm.ScalarType.DOUBLE: "d",
    pm.ScalarType.BOOL: "b",
}
# ScalarType names in gen_selected_op_variants.py's header (c10 spelling).
DTYPE_NAME = {0: "Byte", 1: "Char", 2: "Short", 3: "Int", 4: "Long", 6: "Float", 7: "Double"}


def ethos_u_program() -> pm.Program:
    """x int8[1,16] -> one DelegateCall to EthosUBackend -> y int8[1,16], with a small blob
    in ExecuTorch's Vela block layout (16-byte command stream, 16 weight bytes)."""
    io = [VelaTensor([1, 1, 1, 1, 1, 16], 1, offset, 1) for offset in (0, 16)]
    blob = pack_blob(b"COP1" + bytes(range(12)), bytes(range(16)), 32, io[:1], io[1:])
    values = [
        pm.Tensor(pm.ScalarType.CHAR, [1, 16], [0, 1], allocation=pm.Allocation(1, 0)),
        pm.Tensor(pm.ScalarType.CHAR, [1, 16], [0, 1], allocation=pm.Allocation(1, 16)),
    ]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[1],
        chains=[pm.Chain(inputs=[0], outputs=[1], instructions=[pm.DelegateCall(0, [0, 1])])],
        operators=[],
        delegates=[
            pm.BackendDelegate(
                "EthosUBackend",
                segment_index=0,
                compile_specs=[
                    pm.CompileSpec("compile_flags", b"--accelerator-config=ethos-u55-128")
                ],
            )
        ],
        non_const_buffer_sizes=[0, 32],
    )
    return pm.Program(execution_plan=[plan], segments_data=[blob])


def value_text(v: Any) -> str:
    """How ExecuTorch's listing shows one value (its documented grammar, from our Program)."""
    if isinstance(v, pm.Tensor):
        if v.data_buffer_idx > 0:
            head = "CT"
        else:
            a = v.allocation
            head = "T" + ("m." if a is None else f"m{a.memory_id}.{a.offset}")
        return f"{head}{list(v.sizes)}{DTYPE_CODE[pm.ScalarType(v.scalar_type)]}"
    prefixes = {
        pm.IntList: "IL",
        pm.DoubleList: "DL",
        pm.BoolList: "BL",
        pm.TensorList: "TL",
        pm.OptionalTensorList: "OTL",
    }
    if type(v) in prefixes:
        return prefixes[type(v)] + str(list(v.items))
    if isinstance(v, pm.Bool):
        return f"B{int(v.value)}"
    if isinstance(v, pm.Int):
        return f"I{v.value}"
    if isinstance(v, pm.Double):
        return f"D{float(v.value)}"
    if isinstance(v, pm.String):
        return f"S{v.value}"
    assert isinstance(v, pm.Null)
    return "N"


def expected_listing(p: pm.Program) -> dict[str, Any]:
    plan = p.execution_plan[0]
    instructions = []
    for seq, ins in enumerate(plan.chains[0].instructions):
        if isinstance(ins, pm.KernelCall):
            op = plan.operators[ins.op_index]
            target = op_key(op.name, op.overload)
        else:
            assert isinstance(ins, pm.DelegateCall)
            target = plan.delegates[ins.delegate_index].id
        args = [
            {
                "index": i,
                "input": plan.inputs.index(i) if i in plan.inputs else None,
                "output": plan.outputs.index(i) if i in plan.outputs else None,
                "text": value_text(plan.values[i]),
            }
            for i in ins.args
        ]
        instructions.append({"seq": seq, "target": target, "args": args})
    return {"count": len(instructions), "instructions": instructions}


def usages(p: pm.Program, index: int) -> list[list[Any]]:
    """[operator or 'delegate:<id>', argument position] of every call that takes value `index`."""
    plan = p.execution_plan[0]
    out = []
    for ins in plan.chains[0].instructions:
        if isinstance(ins, pm.KernelCall):
            op = plan.operators[ins.op_index]
            name = op_key(op.name, op.overload)
        else:
            name = f"delegate:{plan.delegates[ins.delegate_index].id}"
        out += [[name, pos] for pos, v in enumerate(ins.args) if v == index]
    return out


def bundled_value(v: Any) -> dict[str, Any]:
    assert isinstance(v, BundledTensor)
    return {
        "kind": "Tensor",
        "scalar_type": int(v.scalar_type),
        "sizes": list(v.sizes),
        "dim_order": list(v.dim_order),
        "bytes": len(v.data),
        "sha256": hashlib.sha256(v.data).hexdigest(),
    }


# Deliberately broken lists: (name, change to a valid list, does ExecuTorch reject it?).
# Where ExecuTorch accepts and we reject, the reason is the documented difference (README).
BAD_YAMLS = [
    ("typo_top_level", lambda d: d.update(operator=d.pop("operators")), True),
    ("flag_not_bool", lambda d: d.__setitem__("include_all_operators", "false"), True),
    ("op_flag_not_bool", lambda d: _first_op(d).__setitem__("is_root_operator", "yes"), True),
    ("op_unknown_key", lambda d: _first_op(d).__setitem__("is_root", True), True),
    ("operators_not_mapping", lambda d: d.__setitem__("operators", sorted(d["operators"])), True),
    # ExecuTorch does not look inside kernel keys or check they name selected operators.
    (
        "bad_kernel_key",
        lambda d: d["et_kernel_metadata"].__setitem__(
            next(iter(d["et_kernel_metadata"])), ["v2/1;0,1"]
        ),
        False,
    ),
    (
        "metadata_of_unselected_op",
        lambda d: d["et_kernel_metadata"].__setitem__(
            "cortex_m::softmax.out", ["v1/1;0,1|1;0,1|1;0,1"]
        ),
        False,
    ),
]


def _first_op(d: dict[str, Any]) -> dict[str, Any]:
    return d["operators"][next(iter(d["operators"]))]


@pytest.fixture(scope="module")
def checked(et_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Export the models (pte, bpte, yaml), build the variants, run every tool once."""
    import torchmcu

    out = tmp_path_factory.mktemp("tools")
    files: dict[str, dict[str, Path]] = {}
    for name in MODELS:
        model, example = models.build(name, seed=2)
        exported = torchmcu.export(model, example, calibration=models.calibration(name, 4))
        samples = [list(s) for s in models.calibration(name, 2, seed=5)]
        pte = exported.save(out / name, name=name, bundle_samples=samples)
        files[name] = {
            "pte": Path(pte),
            "bpte": out / name / f"{name}.bpte",
            "yaml": out / name / "selected_operators.yaml",
        }
    save(ethos_u_program(), out / f"{DELEGATE}.pte")
    files[DELEGATE] = {"pte": out / f"{DELEGATE}.pte"}
    model, example = models.build("ds_cnn", seed=2)
    exported = torchmcu.export(
        model, example, calibration=models.calibration("ds_cnn", 4), npu="ethos-u55-128"
    )
    files[NPU] = {
        "pte": exported.save(out / NPU, name=NPU),
        "yaml": out / NPU / "selected_operators.yaml",
    }

    merged = out / "merged.yaml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchmcu",
            "ops",
            "merge",
            *(str(files[n]["yaml"]) for n in MODELS),
            "-o",
            str(merged),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr

    # Changed copies of DS-CNN for diff_pte: one constant byte, one Int argument.
    base = load(files["ds_cnn"]["pte"])
    plan = base.execution_plan[0]
    const_value = next(
        i for i, v in enumerate(plan.values) if isinstance(v, pm.Tensor) and v.data_buffer_idx > 0
    )
    k = plan.values[const_value].data_buffer_idx
    changed = load(files["ds_cnn"]["pte"])
    changed.constants[k] = bytes([changed.constants[k][0] ^ 0x01]) + changed.constants[k][1:]
    save(changed, out / "ds_cnn.const.pte")
    int_value = next(
        i for i, v in enumerate(plan.values) if isinstance(v, pm.Int) and usages(base, i)
    )
    changed = load(files["ds_cnn"]["pte"])
    changed.execution_plan[0].values[int_value] = pm.Int(plan.values[int_value].value + 1)
    save(changed, out / "ds_cnn.int.pte")

    bad = {}
    for name, change, _ in BAD_YAMLS:
        doc = yaml.safe_load(files["ds_cnn"]["yaml"].read_text())
        change(doc)
        bad[name] = out / f"bad_{name}.yaml"
        bad[name].write_text(yaml.safe_dump(doc))

    request = {
        "pte": [str(f["pte"]) for f in files.values()],
        "bpte": [str(files[n]["bpte"]) for n in MODELS],
        "diff": [
            [str(files["ds_cnn"]["pte"]), str(out / "ds_cnn.const.pte")],
            [str(files["ds_cnn"]["pte"]), str(out / "ds_cnn.int.pte")],
        ],
        "yaml": [str(files[n]["yaml"]) for n in [*MODELS, NPU]]
        + [str(merged)]
        + [str(p) for p in bad.values()],
        "merge": [[str(files[n]["yaml"]) for n in MODELS]],
    }
    (out / "request.json").write_text(json.dumps(request))
    proc = subprocess.run(
        [str(et_python), str(TOOLS), str(out / "request.json"), str(out / "seen.json")],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"ExecuTorch tools failed:\n{proc.stderr[-4000:]}"
    seen = json.loads((out / "seen.json").read_text())
    return {
        "files": files,
        "merged": merged,
        "bad": bad,
        "seen": seen,
        "const": (const_value, k),
        "int": int_value,
    }


@pytest.mark.parametrize("name", [*MODELS, DELEGATE, NPU])
def test_print_program_shows_our_program(name: str, checked: dict[str, Any]) -> None:
    """print_program's listing (targets with overloads, argument values, input/output
    positions, constants, memory offsets) and pretty_print's tables match our reader."""
    f = checked["files"][name]["pte"]
    p = load(f)
    plan = p.execution_plan[0]
    seen = checked["seen"]["pte"][str(f)]
    if name in (DELEGATE, NPU):  # the delegate programs do delegate
        assert [d.id for d in plan.delegates] == ["EthosUBackend"]
    assert seen["listing"] == expected_listing(p)
    pretty = seen["pretty"]
    assert pretty["EValue"] == len(plan.values)
    assert pretty["Instruction"] == sum(len(c.instructions) for c in plan.chains)
    assert pretty["Operator"] == len(plan.operators)
    assert pretty["Chain"] == len(plan.chains)
    assert pretty["Buffer"] == len(p.constants)
    assert pretty["BackendDelegate"] == len(plan.delegates)
    assert pretty["backend_ids"] == [d.id for d in plan.delegates]
    assert pretty["CompileSpec"] == sum(len(d.compile_specs) for d in plan.delegates)
    assert pretty["non_const_buffer_sizes"] == [plan.non_const_buffer_sizes]
    assert pretty["inputs"] == [plan.inputs, *(c.inputs for c in plan.chains)]
    assert pretty["outputs"] == [plan.outputs, *(c.outputs for c in plan.chains)]
    assert seen["delegate_blobs"] == [
        {
            "id": d.id,
            "bytes": len(p.segments_data[d.segment_index]),
            "sha256": hashlib.sha256(p.segments_data[d.segment_index]).hexdigest(),
        }
        for d in plan.delegates
    ]


def test_delegate_program_is_what_we_built(checked: dict[str, Any]) -> None:
    """The hand-built Ethos-U program: ExecuTorch lists one call to EthosUBackend on the
    input and output, no operators, and hands back our blob: 7 blocks of a 32-byte header
    each, data padded to 16 (command stream 16, weights 16, scratch size 4 -> 16, inputs and
    outputs 4 + 36 -> 48 each), 368 bytes."""
    seen = checked["seen"]["pte"][str(checked["files"][DELEGATE]["pte"])]
    (call,) = seen["listing"]["instructions"]
    assert call["target"] == "EthosUBackend"
    assert [(a["index"], a["input"], a["output"], a["text"]) for a in call["args"]] == [
        (0, 0, None, "Tm1.0[1, 16]c"),
        (1, None, 0, "Tm1.16[1, 16]c"),
    ]
    assert [b["bytes"] for b in seen["delegate_blobs"]] == [7 * 32 + 16 + 16 + 16 + 48 + 48]
    assert seen["gen_oplist"]["operators"] == {}


@pytest.mark.parametrize("name", [*MODELS, NPU])
def test_gen_oplist_reads_our_pte(name: str, checked: dict[str, Any]) -> None:
    """gen_oplist.py (ExecuTorch's C++ program loader) lists the operators and kernel keys of
    our .pte; they equal our reader's and the selected_operators.yaml our export wrote."""
    files = checked["files"][name]
    p = load(files["pte"])
    et = checked["seen"]["pte"][str(files["pte"])]["gen_oplist"]
    assert "error" not in et, et
    assert sorted(et["operators"]) == program_operators(p)
    assert {k: sorted(v) for k, v in et["et_kernel_metadata"].items()} == from_program(p, name)[
        "et_kernel_metadata"
    ]
    ours = read_yaml(files["yaml"])
    assert sorted(ours["operators"]) == sorted(et["operators"])
    # ExecuTorch's list is one we read too (it marks operators used for training).
    theirs = read_yaml_doc(et)
    assert all(
        e["is_root_operator"] and e["is_used_for_training"] for e in theirs["operators"].values()
    )
    assert theirs["et_kernel_metadata"] == ours["et_kernel_metadata"]
    assert ours["et_kernel_metadata"] == {k: sorted(v) for k, v in et["et_kernel_metadata"].items()}


@pytest.mark.parametrize("name", MODELS)
def test_bundled_program_deserializer(name: str, checked: dict[str, Any]) -> None:
    """ExecuTorch's bundled-program deserializer: same embedded program, suites, test cases
    and tensors (dtype, sizes, dim order, bytes) as our reader; its listing of the embedded
    program equals our reader's."""
    f = checked["files"][name]["bpte"]
    ours = load_bundled(f)
    seen = checked["seen"]["bpte"][str(f)]
    assert seen["program_sha256"] == hashlib.sha256(ours.program).hexdigest()
    assert ours.program == checked["files"][name]["pte"].read_bytes()
    assert seen["suites"] == _suites_json(ours.method_test_suites, bundled_value)
    assert [len(s["test_cases"]) for s in seen["suites"]] == [2]
    assert seen["listing"] == expected_listing(load(checked["files"][name]["pte"]))


def test_diff_pte_finds_exactly_our_change(checked: dict[str, Any]) -> None:
    """diff_pte.py on DS-CNN and a copy with one constant byte flipped: the tensors viewing
    that buffer, one element each, used where our reader says; with one Int changed: that
    value only."""
    base = load(checked["files"]["ds_cnn"]["pte"])
    values = base.execution_plan[0].values
    const_value, k = checked["const"]
    const_diff, int_diff = checked["seen"]["diff"]
    assert not const_diff["bitwise_equal"] and const_diff["error"] is None
    (plan,) = const_diff["plan_diffs"]
    assert plan["operators_only_in_a"] == plan["operators_only_in_b"] == []
    assert plan["value_count"] == plan["instruction_count"] == [None, None]
    assert plan["evalue_diffs"] == []
    viewing = [
        i for i, v in enumerate(values) if isinstance(v, pm.Tensor) and v.data_buffer_idx == k
    ]
    assert const_value in viewing
    assert plan["tensor_diffs"] == [
        {
            "evalue_index": i,
            "data_buffer_idx": k,
            "bytes_differ": True,
            "num_differing": 1,
            "metadata_diffs": [],
            "usages": usages(base, i),
        }
        for i in viewing
    ]
    (plan,) = int_diff["plan_diffs"]
    i = checked["int"]
    old = values[i].value
    assert plan["tensor_diffs"] == []
    assert plan["evalue_diffs"] == [
        {
            "evalue_index": i,
            "fields": [["int_val", repr(old), repr(old + 1)]],
            "usages": usages(base, i),
        }
    ]


def _check_yaml_read_by_executorch(path: Path, seen: dict[str, Any]) -> None:
    ours = read_yaml(path)
    sel = seen["selector"]
    assert "error" not in sel, sel
    assert sel["include_all_operators"] == ours["include_all_operators"]
    assert sel["operators"] == {
        name: {
            **{
                f: e[f]
                for f in ("is_root_operator", "is_used_for_training", "include_all_overloads")
            },
            "selected": True,
        }
        for name, e in ours["operators"].items()
    }
    assert sel["et_kernel_metadata"] == ours["et_kernel_metadata"]
    assert sel["build_features"] == ours["build_features"]
    assert sel["include_all_non_op_selectives"] == ours["include_all_non_op_selectives"]
    # The kernels ExecuTorch's codegen would register under this selection: exactly ours
    # (their kernel yamls declare one "default" kernel per operator, which every key selects).
    assert seen["codegen"] == {
        name: {"is_root": True, "selected_kernels": ["default"]} for name in ours["operators"]
    }
    dtypes = {
        name: sorted(
            {
                DTYPE_NAME[int(pair.split(";")[0])]
                for key in keys
                for pair in key.split("/", 1)[1].split("|")
            }
        )
        for name, keys in ours["et_kernel_metadata"].items()
    }
    assert seen["op_variants"] == dtypes
    combined = seen["gen_all_oplist"]
    assert read_yaml_doc(combined)["operators"].keys() == ours["operators"].keys()
    assert combined["et_kernel_metadata"] == ours["et_kernel_metadata"]


def read_yaml_doc(doc: dict[str, Any]) -> dict[str, Any]:
    from torchmcu.selective.oplist import canonical

    return canonical(doc, "ExecuTorch's output")


def _flags(doc: dict[str, Any]) -> dict[str, dict[str, bool]]:
    """Each operator's flags (debug_info names files, which differ between the tools)."""
    return {
        n: {k: v for k, v in e.items() if k != "debug_info"} for n, e in doc["operators"].items()
    }


@pytest.mark.parametrize("name", [*MODELS, NPU])
def test_executorch_reads_our_selected_operators(name: str, checked: dict[str, Any]) -> None:
    """One model's selected_operators.yaml through ExecuTorch's readers: same operators,
    flags and kernel keys; its codegen selects exactly those kernels."""
    path = checked["files"][name]["yaml"]
    _check_yaml_read_by_executorch(path, checked["seen"]["yaml"][str(path)])
    assert sorted(read_yaml(path)["operators"]) == program_operators(
        load(checked["files"][name]["pte"])
    )


def test_executorch_reads_and_combines_like_our_merge(checked: dict[str, Any]) -> None:
    """`torchmcu ops merge` of the four lists is read by ExecuTorch like any list, and
    gen_all_oplist.py combining the same four lists selects the same operators, flags and keys."""
    merged = checked["merged"]
    _check_yaml_read_by_executorch(merged, checked["seen"]["yaml"][str(merged)])
    ours = read_yaml(merged)
    (combined,) = checked["seen"]["merge"]
    assert "error" not in combined, combined
    theirs = read_yaml_doc(combined)
    assert _flags(theirs) == _flags(ours)
    assert theirs["et_kernel_metadata"] == ours["et_kernel_metadata"]
    union = sorted(
        {op for n in MODELS for op in program_operators(load(checked["files"][n]["pte"]))}
    )
    assert sorted(ours["operators"]) == union


@pytest.mark.parametrize("case", BAD_YAMLS, ids=[c[0] for c in BAD_YAMLS])
def test_broken_lists_rejected(case: tuple[Any, ...], checked: dict[str, Any]) -> None:
    """A list ExecuTorch rejects we reject too (naming the problem); two that it accepts we
    reject as well, on purpose (README: kernel keys are checked, metadata must name a
    selected operator)."""
    from torchmcu.selective import OpListError

    name, _, et_rejects = case
    path = checked["bad"][name]
    seen = checked["seen"]["yaml"][str(path)]
    assert ("error" in seen["selector"]) == et_rejects, seen["selector"]
    assert ("error" in seen["gen_all_oplist"]) == et_rejects, seen["gen_all_oplist"]
    with pytest.raises(OpListError, match=str(path)):
        read_yaml(path)


# ExecuTorch 1.5.1 Cortex-M operators we have no kernel for (README, "Uncovered operators").
UNCOVERED = [
    "cortex_m::quantized_div.out",
]


def test_uncovered_executorch_operators_refused_by_name(checked: dict[str, Any]) -> None:
    """ExecuTorch's Cortex-M library (its operators.yaml, read by gen_oplist.py) declares
    exactly our kernels plus UNCOVERED; a program calling any of those is refused at load
    with MISSING_OPERATOR naming it, before anything runs."""
    import numpy as np
    from torchmcu import native
    from torchmcu.pte import serialize
    from torchmcu.selective import load_table

    ours = {k for k in load_table().operators if k.startswith("cortex_m::")}
    declared = set(checked["seen"]["cortex_m_schema"])
    assert sorted(declared - ours) == UNCOVERED
    assert ours <= declared
    x = np.zeros(models.input_shape("ds_cnn"), np.float32)
    for key in UNCOVERED:
        p = load(checked["files"]["ds_cnn"]["pte"])
        name, _, overload = key.partition(".")
        p.execution_plan[0].operators[0] = pm.Operator(name, overload)
        with pytest.raises(native.NativeError) as e:
            native.run_program(serialize(p), [x])
        assert e.value.status == "MISSING_OPERATOR"
        assert f"(operator {key}, byte offset " in str(e.value)
