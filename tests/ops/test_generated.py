"""The files torchmcu.ops.generate writes from the registry: the checked-in copies are current,
kernels.json is the pre-registry table byte for byte, and op_args.h is valid C11."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
from torchmcu import ops
from torchmcu.ops import generate
from torchmcu.selective.table import load_table

ROOT = Path(__file__).resolve().parents[2]
# sha256 of firmware/kernels/kernels.json: the table kept by hand up to 1ce0fcd (45 kernels,
# 2bbb403b...), with "headers" ["kernel_entries.h"] since the declarations are generated. The
# registry must reproduce it exactly until an operator is added or the table changes on purpose:
# then replace this hash, saying why in the commit.
PRE_REGISTRY_KERNELS_JSON = "2c918f098ecc61229d74507107fad075d5eaae643ae1ea455d6c39adf050ebdb"


def test_checked_in_copies_are_current() -> None:
    outdated = generate.stale(ROOT)
    assert not outdated, (
        f"stale generated files {[str(p) for p in outdated]}: "
        f"run `{generate.COMMAND}` and commit the result"
    )


def test_kernels_json_is_the_pre_registry_table() -> None:
    text = generate.generated()[generate.KERNELS_JSON]
    assert hashlib.sha256(text.encode()).hexdigest() == PRE_REGISTRY_KERNELS_JSON


def test_kernels_json_reads_as_the_selective_table(tmp_path: Path) -> None:
    path = tmp_path / "kernels.json"
    path.write_text(generate.generated()[generate.KERNELS_JSON])
    table = load_table(path)
    assert table.operators == [o.key for o in ops.ops()]
    assert table.common_sources == ("cortex_m/kernel_args.c",)
    assert json.loads(path.read_text())["headers"] == list(generate._HEADERS)


def test_check_names_a_stale_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A tree of its own, so this tests the mechanism whatever state the real copies are in.
    texts = generate.generated()
    (tmp_path / generate.KERNELS_JSON).parent.mkdir(parents=True)
    assert generate.main(["--check", "--root", str(tmp_path)]) == 1  # both missing
    assert generate.main(["--root", str(tmp_path)]) == 0  # writes them
    assert generate.main(["--check", "--root", str(tmp_path)]) == 0
    stale = tmp_path / generate.OP_ARGS_H
    stale.write_text(stale.read_text().replace("_NARGS", "_COUNT", 1))
    capsys.readouterr()
    assert generate.main(["--check", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == f"{generate.OP_ARGS_H} is stale: run `python -m torchmcu.ops.generate`\n"
    assert generate.main(["--root", str(tmp_path)]) == 0  # rewrites only that one
    assert capsys.readouterr().out == f"wrote {generate.OP_ARGS_H}\n"
    assert all((tmp_path / p).read_text() == text for p, text in texts.items())


def _compile(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "use.c").write_text(source)
    include = [ROOT / "firmware" / "kernels", ROOT / "firmware" / "runtime" / "include"]
    return subprocess.run(
        ["clang", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only"]
        + [f"-I{d}" for d in include]
        + [str(tmp_path / "use.c")],
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


def test_control_ops_inc_rows() -> None:
    # method.c's LOOP_OPS as it was kept by hand, with the Bool result of eq that it named.
    method_c = (ROOT / "firmware" / "runtime" / "src" / "method.c").read_text()
    assert re.search(r'LOOP_OPS\[\] = \{\n#include "control_ops.inc"\n\};', method_c)
    rows = [
        line.strip()
        for line in generate.generated()[generate.CONTROL_OPS_INC].splitlines()
        if line.startswith("    {")
    ]
    assert rows == [
        '{"aten::sym_size", "int", LOOP_SCALAR, TM_VALUE_INT},',
        '{"aten::select_copy", "int_out", LOOP_SELECT, TM_VALUE_NONE},',
        '{"executorch_prim::et_copy_index", "tensor", LOOP_COPY_INDEX, TM_VALUE_NONE},',
        '{"executorch_prim::add", "Scalar", LOOP_SCALAR, TM_VALUE_INT},',
        '{"executorch_prim::sub", "Scalar", LOOP_SCALAR, TM_VALUE_INT},',
        '{"executorch_prim::eq", "Scalar", LOOP_SCALAR, TM_VALUE_BOOL},',
    ]
