"""The C tables torchmcu.ops.generate writes from the registry at configure time: none is kept
in the tree, the generator rewrites only what differs and lists what it read (CMake's
dependencies), and the headers are valid C11 holding the positions and declarations written
out by hand here."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from torchmcu import ops
from torchmcu.ops import generate
from torchmcu.selective.table import load_table

ROOT = Path(__file__).resolve().parents[2]
NAMES = (
    generate.KERNELS_JSON,
    generate.OP_ARGS_H,
    generate.KERNEL_ENTRIES_H,
    generate.CONTROL_OPS_INC,
)


def test_no_copy_in_the_tree() -> None:
    # cmake/ops.cmake refuses these too: a copy would shadow the generated file.
    assert set(generate.generated()) == set(NAMES)
    copies = [p for p in (ROOT / "firmware").rglob("*") if p.name in NAMES]
    assert copies == []
    ops_cmake = (ROOT / "cmake" / "ops.cmake").read_text()
    for name in NAMES:
        assert name in ops_cmake


def test_kernels_json_is_the_registry_in_order(tmp_path: Path) -> None:
    path = tmp_path / "kernels.json"
    path.write_text(generate.generated()[generate.KERNELS_JSON])
    table = load_table(path)
    assert table.operators == [o.key for o in ops.ops()]
    assert [(k.symbol, k.source) for k in table.kernels] == [
        (o.kernel.symbol, o.kernel.source) for o in ops.ops()
    ]
    assert table.common_sources == ("cortex_m/kernel_args.c",)
    # a kernel with a prepare step names it in its row, the others do not
    rows = json.loads(path.read_text())["kernels"]
    assert [r.get("prepare") for r in rows] == [o.kernel.prepare_symbol for o in ops.ops()]
    linear = next(r for r in rows if r["operator"] == "cortex_m::quantized_linear.out")
    assert linear["prepare"] == "tm_cortex_m_quantized_linear_prepare"
    assert (
        sum("prepare" in r for r in rows) >= 7
    )  # linear, conv, depthwise, transposed conv (+ nhwc)
    assert table.headers == ("kernel_entries.h",)
    assert json.loads(path.read_text())["headers"] == ["kernel_entries.h"]
    assert load_table() == type(table)(None, table.kernels, table.common_sources, table.headers)
    # an _nhwc alias comes right after its operator, in the same translation unit
    conv = table.operators.index("cortex_m::quantized_conv2d.out")
    assert table.operators[conv + 1] == "cortex_m::quantized_conv2d_nhwc.out"
    assert table.kernels[conv].source == table.kernels[conv + 1].source


def test_out_writes_only_what_differs_and_check_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "generated"
    texts = generate.generated()
    assert generate.main(["--out", str(out), "--check"]) == 1  # none there yet
    assert generate.main(["--out", str(out), "--inputs", str(tmp_path / "inputs")]) == 0
    assert capsys.readouterr().out == "".join(f"wrote {n}\n" for n in NAMES)
    assert all((out / n).read_text() == text for n, text in texts.items())
    assert generate.main(["--out", str(out), "--check"]) == 0
    stale = out / generate.OP_ARGS_H
    stale.write_text(stale.read_text().replace("_NARGS", "_COUNT", 1))
    before = (out / generate.KERNELS_JSON).stat().st_mtime_ns
    assert generate.main(["--out", str(out), "--check"]) == 1
    assert capsys.readouterr().err == (
        f"{stale} is stale: run `python -m torchmcu.ops.generate --out {out}`\n"
    )
    assert generate.main(["--out", str(out)]) == 0  # rewrites only that one
    assert capsys.readouterr().out == f"wrote {generate.OP_ARGS_H}\n"
    assert stale.read_text() == texts[generate.OP_ARGS_H]
    assert (out / generate.KERNELS_JSON).stat().st_mtime_ns == before


def test_inputs_are_the_definitions_and_the_scratch_sources(tmp_path: Path) -> None:
    listed = tmp_path / "inputs"
    assert generate.main(["--out", str(tmp_path / "g"), "--inputs", str(listed)]) == 0
    read = set(listed.read_text().splitlines())
    defs = ROOT / "host" / "torchmcu" / "ops" / "defs"
    assert {p.resolve().as_posix() for p in defs.glob("*.py")} <= read
    for name in ("core.py", "generate.py", "__init__.py"):
        assert (ROOT / "host" / "torchmcu" / "ops" / name).resolve().as_posix() in read
    kernels = ROOT / "firmware" / "kernels" / "cortex_m"
    for source in ("quantized_conv2d.c", "quantized_depthwise_conv2d.c", "quantized_avg_pool2d.c"):
        assert (kernels / source).resolve().as_posix() in read
    assert all(Path(p).is_file() for p in read)


def _compile(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "generated"
    generate.main(["--out", str(out)])
    (tmp_path / "use.c").write_text(source)
    return subprocess.run(
        [
            "clang",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
            f"-I{out}",
            f"-I{ROOT / 'firmware' / 'runtime' / 'include'}",
            str(tmp_path / "use.c"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.needs("clang")
def test_op_args_h_is_c11(tmp_path: Path) -> None:
    # Positions from docs/operators.md's signatures, written out by hand.
    run = _compile(
        tmp_path,
        '#include "op_args.h"\n'
        '_Static_assert(TM_NARGS(TORCHMCU_SLICE_COPY) == 6, "slice_copy");\n'
        '_Static_assert(TM_ARG(TORCHMCU_SLICE_COPY, STEP) == 4, "slice_copy step");\n'
        '_Static_assert(TM_ARG(CORTEX_M_QUANTIZED_CONV2D_NHWC, SCRATCH) == 12, "conv");\n'
        '_Static_assert(TM_ARG(CORTEX_M_QUANTIZED_LINEAR, ACTIVATION_MIN) == 10, "linear");\n'
        '_Static_assert(TM_NARGS(PORTABLE_NATIVE_LAYER_NORM) == 8, "layer norm");\n'
        '_Static_assert(TM_NARGS(PRIM_SYM_SIZE_INT) == 2, "sym_size");\n',
    )
    assert run.returncode == 0, run.stderr


@pytest.mark.needs("clang")
def test_kernel_entries_h_is_c11(tmp_path: Path) -> None:
    # Declares every entry point with the kernel signature, and the scratch functions as their
    # sources define them (a second, conflicting prototype is an error).
    run = _compile(
        tmp_path,
        '#include "kernel_entries.h"\n'
        "size_t tm_quantized_avg_pool2d_scratch_bytes(const int32_t input_nhwc[4]);\n"
        "static const tm_kernel_fn k[] = {tm_torchmcu_slice_copy_out, tm_prim_eq_scalar};\n"
        "tm_kernel_fn first(void) { return k[0]; }\n",
    )
    assert run.returncode == 0, run.stderr
    entries = generate.generated()[generate.KERNEL_ENTRIES_H]
    for o in ops.ops():
        assert f"TM_DECLARE_KERNEL({o.kernel.symbol});" in entries


def test_control_ops_inc_rows() -> None:
    # method.c's LOOP_OPS as it was kept by hand, with the Bool result of eq that it named.
    method_c = (ROOT / "firmware" / "runtime" / "src" / "method.c").read_text()
    assert re.search(r'LOOP_OPS\[\] = \{\n#include "control_ops.inc"\n\};', method_c)
    text = generate.generated()[generate.CONTROL_OPS_INC]
    rows = [line.strip() for line in text.splitlines() if line.startswith("    {")]
    assert rows == [
        '{"aten::sym_size", "int", LOOP_SCALAR},',
        '{"aten::select_copy", "int_out", LOOP_SELECT},',
        '{"executorch_prim::et_copy_index", "tensor", LOOP_COPY_INDEX},',
        '{"executorch_prim::add", "Scalar", LOOP_SCALAR},',
        '{"executorch_prim::sub", "Scalar", LOOP_SCALAR},',
        '{"executorch_prim::eq", "Scalar", LOOP_SCALAR},',
    ]
    assert '#define TM_LOOP_BOOL_OP "executorch_prim::eq"\n' in text
