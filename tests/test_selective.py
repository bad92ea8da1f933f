"""Selective build, host side: selected_operators.yaml from programs (checked against the C
loader's operator list and torchgen's reader of ExecuTorch's layout), merge properties, the
kernel table, and `torchmcu build` refusing a program its yaml does not cover."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from _pte_programs import linear_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchgen.selective_build.selector import SelectiveBuilder, combine_selective_builders
from torchmcu import native
from torchmcu.cli import main as cli_main
from torchmcu.device import FirmwareBuildError, build
from torchmcu.ops import generate
from torchmcu.pte.writer import serialize
from torchmcu.selective.oplist import canonical
from torchmcu.selective import (
    MergeConflict,
    OpListError,
    board_operators,
    delegate_ids,
    from_program,
    load_table,
    merge,
    merge_files,
    missing_delegates,
    missing_operators,
    operator_names,
    program_delegates,
    program_operators,
    program_runtime_features,
    read_yaml,
    runtime_features,
    select_delegates,
    write_yaml,
)
from torchmcu.selective.oplist import dumps

ROOT = Path(__file__).resolve().parents[1]


def test_linear_program_oplist_by_hand(tmp_path: Path) -> None:
    doc = from_program(linear_program(), "lin")
    assert operator_names(doc) == ["cortex_m::quantized_linear.out"]
    # tensors x, w, bias, kernel_sum, out, out: int8 [0,1], int8 [0,1], int32 [0], int32 [0], ...
    assert doc["et_kernel_metadata"] == {
        "cortex_m::quantized_linear.out": ["v1/1;0,1|1;0,1|3;0|3;0|1;0,1|1;0,1"]
    }
    entry = doc["operators"]["cortex_m::quantized_linear.out"]
    assert entry == {
        "is_root_operator": True,
        "is_used_for_training": False,
        "include_all_overloads": False,
        "debug_info": ["lin"],
    }
    path = write_yaml(doc, tmp_path / "selected_operators.yaml")
    assert read_yaml(path) == doc


@pytest.fixture(scope="module")
def dscnn_export(tmp_path_factory: pytest.TempPathFactory):
    import torchmcu
    from torchmcu.examples import models

    model, example = models.build("ds_cnn")
    exported = torchmcu.export(model, example, calibration=models.calibration("ds_cnn", 4))
    out = tmp_path_factory.mktemp("dscnn")
    return exported, exported.save(out)


def test_export_writes_executorch_layout(dscnn_export) -> None:
    exported, pte = dscnn_export
    path = pte.parent / "selected_operators.yaml"
    raw = yaml.safe_load(path.read_text())
    # The C loader's own list of the program's operators is the independent reference.
    c_ops = {f"{n}.{o}" for n, o in native.program_info(pte.read_bytes())["operators"]}
    assert set(raw["operators"]) == c_ops == set(program_operators(exported.program))
    assert raw["include_all_operators"] is False and raw["include_all_non_op_selectives"] is False
    # torchgen (PyTorch's reader of this layout, which ExecuTorch's codegen uses) accepts it.
    selector = SelectiveBuilder.from_yaml_dict(raw)
    for op in c_ops:
        assert selector.is_operator_selected(op)
    assert not selector.is_operator_selected("cortex_m::softmax.out")
    for op, keys in raw["et_kernel_metadata"].items():
        assert selector.et_get_selected_kernels(op, [*keys, "v1/6;0"]) == keys
        for key in keys:  # conv/pool activations are int8 NHWC (dim order 0,2,3,1)
            assert re.fullmatch(r"v1/\d+;[\d,]+(\|\d+;[\d,]+)*", key)
    conv = raw["et_kernel_metadata"]["cortex_m::quantized_conv2d.out"]
    assert all(k.startswith("v1/1;0,2,3,1|1;0,1,2,3|") for k in conv)


def _doc(ops: dict[str, list[str]], model: str) -> dict:
    entry = {
        "is_root_operator": True,
        "is_used_for_training": False,
        "include_all_overloads": False,
    }
    return {
        "operators": {op: {**entry, "debug_info": [model]} for op in ops},
        "et_kernel_metadata": {op: keys for op, keys in ops.items() if keys},
    }


_OPS = [f"cortex_m::op{i}.out" for i in range(5)]
_KEYS = ["v1/1;0,1|1;0,1", "v1/3;0|1;0,1", "v1/6;0,1,2,3|1;0,2,3,1", "default"]
_docs = st.builds(
    _doc,
    st.dictionaries(st.sampled_from(_OPS), st.lists(st.sampled_from(_KEYS), max_size=3)),
    st.sampled_from(["a", "b", "c"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_docs, min_size=1, max_size=4), st.randoms())
def test_merge_is_order_independent_and_idempotent(docs, rnd) -> None:
    merged = merge(docs)
    shuffled = list(docs)
    rnd.shuffle(shuffled)
    assert dumps(merge(shuffled)) == dumps(merged)
    assert dumps(merge([merged, *docs])) == dumps(merged)
    assert dumps(merge([merged])) == dumps(merged)
    # Same operators, keys and debug_info as torchgen's own combination of the lists.
    combined = SelectiveBuilder.from_yaml_dict({})
    for d in docs:
        combined = combine_selective_builders(combined, SelectiveBuilder.from_yaml_dict(d))
    assert set(merged["operators"]) == set(combined.operators)
    for name, op in combined.operators.items():
        assert merged["operators"][name]["is_root_operator"] == op.is_root_operator
        assert merged["operators"][name]["debug_info"] == sorted(set(op._debug_info or ()))
    assert merged["et_kernel_metadata"] == {
        k: sorted(set(v)) for k, v in combined.et_kernel_metadata.items()
    }


def test_merge_conflict_names_the_entries() -> None:
    a = _doc({"cortex_m::quantized_add.out": [], "cortex_m::pad.out": []}, "model_a")
    b = _doc({"cortex_m::quantized_add.out": [], "cortex_m::pad.out": []}, "model_b")
    b["operators"]["cortex_m::quantized_add.out"]["include_all_overloads"] = True
    with pytest.raises(
        MergeConflict,
        match=r"quantized_add\.out \(.*include_all_overloads=False in model_a.*include_all_overloads=True in model_b",
    ) as e:
        merge([a, b])
    assert "pad.out" not in str(e.value)
    c = _doc({"cortex_m::quantized_add.out": []}, "model_c")
    c["operators"]["cortex_m::quantized_add.out"]["is_used_for_training"] = True
    with pytest.raises(MergeConflict, match="is_used_for_training=True in model_c"):
        merge([a, c])
    # Keys of different lengths are not a conflict: optional tensors (None) leave the key.
    d = _doc({"cortex_m::quantized_linear.out": ["v1/1;0,1|1;0,1|3;0|1;0,1|1;0,1"]}, "d")
    e2 = _doc({"cortex_m::quantized_linear.out": ["v1/1;0,1|1;0,1|3;0|3;0|1;0,1|1;0,1"]}, "e")
    assert len(merge([d, e2])["et_kernel_metadata"]["cortex_m::quantized_linear.out"]) == 2
    with pytest.raises(OpListError, match="not under operators"):
        merge([{"et_kernel_metadata": {"cortex_m::pad.out": ["default"]}}])
    with pytest.raises(OpListError, match="is_root_operator: expected true or false"):
        merge([{"operators": {"cortex_m::pad.out": {"is_root_operator": "yes"}}}])
    with pytest.raises(OpListError, match="not a kernel key"):
        merge([_doc({"cortex_m::pad.out": ["v2/1"]}, "m")])


def test_board_operators_and_cli_merge(tmp_path: Path, dscnn_export, capsys) -> None:
    assert board_operators("corstone-300") == []  # documented decision: board.json lists none
    extra = merge([_doc({"cortex_m::softmax.out": []}, "m")], always=["cortex_m::pad.out"])
    assert extra["operators"]["cortex_m::pad.out"]["debug_info"] == ["board"]
    _, pte = dscnn_export
    lin = write_yaml(from_program(linear_program(), "lin"), tmp_path / "lin.yaml")
    ds = pte.parent / "selected_operators.yaml"
    out1, out2 = tmp_path / "m1.yaml", tmp_path / "m2.yaml"
    assert (
        cli_main(["ops", "merge", str(ds), str(lin), "--board", "corstone-300", "-o", str(out1)])
        == 0
    )
    assert cli_main(["ops", "merge", str(lin), str(ds), str(out1), "-o", str(out2)]) == 0
    assert out1.read_text() == out2.read_text()
    assert out1.read_text() == dumps(merge_files([ds, lin], board="corstone-300"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("operators: [1, 2]\n")
    assert cli_main(["ops", "merge", str(bad), "-o", str(tmp_path / "x.yaml")]) == 2
    assert "operators must be a mapping" in capsys.readouterr().err


def test_kernel_table_covers_the_tree_and_selects() -> None:
    table = load_table()
    kernel_dir = ROOT / "firmware" / "kernels"
    listed = {k.source for k in table.kernels} | set(table.common_sources)
    present = {str(p.relative_to(kernel_dir)) for p in kernel_dir.glob("*/*.c")}
    assert present == listed
    texts = generate.generated()  # what CMake writes into <build>/generated
    header = "".join(texts[h] for h in table.headers)
    for k in table.kernels:
        assert re.search(rf"\b{k.symbol}\b", header), k.symbol
        assert (kernel_dir / k.source).read_text().count(k.symbol) >= 1
    doc = _doc({"cortex_m::quantized_conv2d.out": []}, "m")
    assert [k.operator for k in table.select(doc)] == ["cortex_m::quantized_conv2d.out"]
    doc["operators"]["cortex_m::quantized_conv2d.out"]["include_all_overloads"] = True
    assert [k.operator for k in table.select(doc)] == ["cortex_m::quantized_conv2d.out"]
    whole = _doc({"cortex_m::quantized_conv2d": []}, "m")
    whole["operators"]["cortex_m::quantized_conv2d"]["include_all_overloads"] = True
    assert [k.operator for k in table.select(whole)] == ["cortex_m::quantized_conv2d.out"]
    assert len(table.select({**merge([]), "include_all_operators": True})) == len(table.kernels)
    with pytest.raises(OpListError, match=r"no kernel in .*: cortex_m::nope\.out"):
        table.select(_doc({"cortex_m::nope.out": []}, "m"))


def test_missing_operators() -> None:
    doc = merge([_doc({"cortex_m::pad.out": []}, "m")])
    assert missing_operators(["cortex_m::pad.out", "cortex_m::softmax.out"], doc) == [
        "cortex_m::softmax.out"
    ]
    assert (
        missing_operators(["cortex_m::softmax.out"], {**doc, "include_all_operators": True}) == []
    )


def test_build_refuses_uncovered_program_before_compiling(tmp_path: Path) -> None:
    pte = tmp_path / "lin.pte"
    pte.write_bytes(serialize(linear_program()))
    only_pad = write_yaml(merge([_doc({"cortex_m::pad.out": []}, "m")]), tmp_path / "pad.yaml")
    out = tmp_path / "build"
    with pytest.raises(FirmwareBuildError, match=r"cortex_m::quantized_linear\.out"):
        build(pte, "qemu-an547", out, ops_yaml=only_pad)
    assert not (out / "CMakeCache.txt").exists()  # refused before CMake ran


def test_cli_build_refuses_uncovered_program(tmp_path: Path, capsys) -> None:
    pte = tmp_path / "lin.pte"
    pte.write_bytes(serialize(linear_program()))
    only_pad = write_yaml(merge([_doc({"cortex_m::pad.out": []}, "m")]), tmp_path / "pad.yaml")
    out = tmp_path / "build"
    argv = ["build", str(pte), "--board", "qemu-an547", "--build-dir", str(out)]
    assert cli_main([*argv, "--ops-yaml", str(only_pad)]) == 2
    assert "does not select: cortex_m::quantized_linear.out" in capsys.readouterr().err
    assert not (out / "CMakeCache.txt").exists()


def _delegated_linear(*backend_ids: str):
    """linear_program() declaring delegates (their blobs are never run by these tests)."""
    from torchmcu.pte.program import BackendDelegate

    program = linear_program()
    for i, backend in enumerate(backend_ids):
        program.execution_plan[0].delegates.append(
            BackendDelegate(backend, len(program.segments_data))
        )
        program.segments_data.append(bytes([i]) * 16)
    return program


def test_delegates_are_build_features_torchgen_reads(tmp_path: Path) -> None:
    doc = from_program(_delegated_linear("EthosUBackend"), "npu")
    # the delegate, and the path its one linear call takes (a kernel variant, selective.variants)
    linear_path = "kernel:cortex_m::quantized_linear/kernel_sum"
    assert doc["build_features"] == ["delegate:EthosUBackend", linear_path]
    assert program_delegates(_delegated_linear("B", "A", "B")) == ["A", "B"]
    text = (write_yaml(doc, tmp_path / "selected_operators.yaml")).read_text()
    assert f"build_features:\n- delegate:EthosUBackend\n- {linear_path}\n" in text
    builder = SelectiveBuilder.from_yaml_dict(yaml.safe_load(text))  # ExecuTorch/torchgen reader
    assert builder.build_features == {"delegate:EthosUBackend", linear_path}
    assert builder.is_operator_selected("cortex_m::quantized_linear.out")
    plain = from_program(linear_program(), "cpu")
    assert plain["build_features"] == [linear_path]
    # merge: the union of the lists' delegates, as torchgen combines build features
    other = from_program(_delegated_linear("OtherBackend"), "other")
    merged = merge([plain, doc, other])
    assert delegate_ids(merged) == ["EthosUBackend", "OtherBackend"]
    assert merge([merged, doc]) == merged
    combined = combine_selective_builders(builder, SelectiveBuilder.from_yaml_dict(other))
    assert sorted(combined.build_features) == merged["build_features"]
    assert read_yaml(tmp_path / "selected_operators.yaml") == doc
    bad = tmp_path / "bad.yaml"
    bad.write_text("build_features:\n- delegate:Ethos U\n")
    with pytest.raises(OpListError, match=r"bad\.yaml: build_features: 'delegate:Ethos U' is not"):
        read_yaml(bad)


def test_select_and_missing_delegates() -> None:
    doc = from_program(_delegated_linear("EthosUBackend"), "npu")
    offered = ["EthosUBackend", "OtherBackend"]
    assert select_delegates(doc, offered) == ["EthosUBackend"]
    assert select_delegates(from_program(linear_program(), "cpu"), offered) == []
    everything = {**doc, "include_all_non_op_selectives": True}
    assert select_delegates(everything, offered) == offered
    with pytest.raises(
        OpListError, match=r"no backend offered for this image: EthosUBackend \(offered: X\)"
    ):
        select_delegates(doc, ["X"])
    assert missing_delegates(["EthosUBackend", "OtherBackend"], doc) == ["OtherBackend"]
    assert missing_delegates(["OtherBackend"], everything) == []


def test_selective_cli_prints_selected_delegates(tmp_path: Path, capsys) -> None:
    from torchmcu.selective.table import main as selective_main

    path = write_yaml(from_program(_delegated_linear("EthosUBackend"), "npu"), tmp_path / "s.yaml")
    assert selective_main(["--yaml", str(path), "--delegates", "OtherBackend;EthosUBackend"]) == 0
    assert capsys.readouterr().out == "EthosUBackend\n"
    assert selective_main(["--yaml", str(path), "--delegates", ""]) == 1
    assert "EthosUBackend" in capsys.readouterr().err


def test_build_refuses_program_with_unselected_delegate(tmp_path: Path) -> None:
    pte = tmp_path / "npu.pte"
    pte.write_bytes(serialize(_delegated_linear("EthosUBackend")))
    cpu_only = write_yaml(from_program(linear_program(), "cpu"), tmp_path / "cpu.yaml")
    out = tmp_path / "build"
    with pytest.raises(
        FirmwareBuildError,
        match=r"npu\.pte needs delegates that .*cpu\.yaml does not select: EthosUBackend",
    ):
        build(pte, "qemu-an547", out, ops_yaml=cpu_only)
    assert not (out / "CMakeCache.txt").exists()  # refused before CMake ran


def test_omitted_operator_flags_read_as_true_like_torchgen() -> None:
    # torchgen's SelectiveBuildOperator defaults each missing flag to true; so do we.
    doc = canonical({"operators": {"cortex_m::quantized_add.out": {}}})
    entry = doc["operators"]["cortex_m::quantized_add.out"]
    assert (
        entry["is_root_operator"]
        and entry["is_used_for_training"]
        and entry["include_all_overloads"]
    )
    doc = canonical({"operators": {"cortex_m::quantized_add.out": {"is_used_for_training": False}}})
    assert doc["operators"]["cortex_m::quantized_add.out"]["is_used_for_training"] is False


def _with_control_flow_and_string():
    """linear_program with a constant-true jump over nothing, a move of a Bool and a String."""
    from torchmcu.pte import program as pm

    program = linear_program()
    plan = program.execution_plan[0]
    plan.values += [pm.Bool(True), pm.Bool(False), pm.String("tag")]
    cond = len(plan.values) - 3
    ins = plan.chains[0].instructions
    ins.insert(0, pm.JumpFalseCall(cond, 1))
    ins.insert(1, pm.MoveCall(cond, cond + 1))
    return program


def test_runtime_features_recorded_and_selected() -> None:
    plain = from_program(linear_program(), "cpu")
    assert program_runtime_features(linear_program()) == [] == runtime_features(plain)
    program = _with_control_flow_and_string()
    assert program_runtime_features(program) == ["control_flow", "string_list_values"]
    doc = from_program(program, "cf")
    runtime = [f for f in doc["build_features"] if not f.startswith("kernel:")]
    assert runtime == ["runtime:control_flow", "runtime:string_list_values"]
    assert runtime_features(doc) == ["control_flow", "string_list_values"]
    # torchgen reads them as build features, and merge unions them
    assert SelectiveBuilder.from_yaml_dict(doc).build_features == set(doc["build_features"])
    assert runtime_features(merge([plain, doc])) == ["control_flow", "string_list_values"]
    # a delegate selects the delegate feature; a loop kernel (executorch_prim::) control flow
    npu = from_program(_delegated_linear("EthosUBackend"), "npu")
    assert runtime_features(npu) == ["delegates"]
    prim = canonical({"operators": {"executorch_prim::add.Scalar": {}}})
    assert runtime_features(prim) == ["control_flow"]
    assert runtime_features({**plain, "include_all_non_op_selectives": True}) == [
        "delegates",
        "control_flow",
        "string_list_values",
    ]
    with pytest.raises(OpListError, match=r"'runtime:delegates' is not a runtime feature"):
        canonical({"build_features": ["runtime:delegates"]})


def test_build_refuses_program_with_unselected_runtime_feature(tmp_path: Path, capsys) -> None:
    from torchmcu.selective.table import main as selective_main

    pte = tmp_path / "cf.pte"
    pte.write_bytes(serialize(_with_control_flow_and_string()))
    cpu_only = write_yaml(from_program(linear_program(), "cpu"), tmp_path / "cpu.yaml")
    out = tmp_path / "build"
    with pytest.raises(
        FirmwareBuildError,
        match=r"cf\.pte needs runtime features that .*cpu\.yaml does not select: control_flow, "
        r"string_list_values \(build_features: runtime:control_flow, runtime:string_list_values\)",
    ):
        build(pte, "qemu-an547", out, ops_yaml=cpu_only)
    assert not (out / "CMakeCache.txt").exists()
    path = write_yaml(from_program(_with_control_flow_and_string(), "cf"), tmp_path / "cf.yaml")
    assert selective_main(["--yaml", str(path), "--runtime-features"]) == 0
    assert capsys.readouterr().out == "control_flow;string_list_values\n"


def test_kernel_variants_of_ds_cnn_and_of_lists_without_records() -> None:
    """DS-CNN's calls take, by its architecture: a 10x4 stride-2 window conv and 1x1 pointwise
    convs, whose shifts are all 0 (so not the right-shift-only requantization); 3x3 depthwise
    on 64 channels (four whole 16-channel blocks, no tail) at 25x5 with padding 1 (every row a
    row run); one linear row in kernel_sum form; a 25x5 = 125-tap average (int16 sums); int8
    quantize and dequantize. A list recording no variant of an operator builds all of its."""
    import torchmcu
    from torchmcu.examples import models
    from torchmcu.selective.oplist import kernel_variant_defines
    from torchmcu.selective.variants import program_kernel_variants

    model, example = models.build("ds_cnn")
    exp = torchmcu.export(model, example, calibration=models.calibration("ds_cnn", 2, seed=1))
    assert program_kernel_variants(exp.program) == [
        "kernel:cortex_m::dequantize_per_tensor/int8",
        "kernel:cortex_m::quantize_per_tensor/int8",
        "kernel:cortex_m::quantized_avg_pool2d/sum16",
        "kernel:cortex_m::quantized_conv2d/pointwise",
        "kernel:cortex_m::quantized_conv2d/shift_any",
        "kernel:cortex_m::quantized_conv2d/window",
        "kernel:cortex_m::quantized_depthwise_conv2d/3x3",
        "kernel:cortex_m::quantized_linear/kernel_sum",
    ]
    doc = from_program(exp.program, "ds_cnn")
    left_out = kernel_variant_defines(doc)
    assert "TM_VARIANT_CORTEX_M_QUANTIZED_DEPTHWISE_CONV2D_TAIL=0" in left_out
    assert "TM_VARIANT_CORTEX_M_QUANTIZED_CONV2D_SHIFT_RIGHT=0" in left_out
    assert not any("CONV2D_WINDOW=" in d or "CONV2D_POINTWISE=" in d for d in left_out)
    # ExecuTorch's lists carry no kernel: entries: every variant of the operators they select
    unrecorded = canonical({**doc, "build_features": []})
    selected = ("QUANTIZED_CONV2D_", "QUANTIZED_DEPTHWISE_CONV2D_", "QUANTIZED_LINEAR_")
    assert not any(s in d for d in kernel_variant_defines(unrecorded) for s in selected)
    assert kernel_variant_defines(canonical({**doc, "include_all_operators": True})) == []
    with pytest.raises(OpListError, match="has no kernel variant wide"):
        canonical({"build_features": ["kernel:cortex_m::quantized_linear/wide"]})
