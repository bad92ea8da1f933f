"""No second hand-kept list of operators outside the registry (issue 16's acceptance).

torchmcu/ops/ defines every operator once; every stage reads it. This walks the rest of the
package's syntax trees and fails on what would start a second list:
- a string naming an operator ("cortex_m::quantized_linear", "aten::add.Tensor"...), other than
  in a docstring or an f-string message;
- a dict, set, tuple or list display holding two or more aten targets (`_aten.conv2d.default,
  _aten.linear.default`), other than in the graph rewrites that match a fixed shape of nodes
  (their lists are the shape, not a table of operators);
- a KernelCall argument read by a literal position (`call.scalar(3)`, `plan.values[call.args[1]]`)
  rather than by its schema name (the -1/-2 of the "out passed twice" convention excepted).
And on the C side: no kernel keeps an argument enum of its own (firmware/kernels/op_args.h is
the one numbering).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "host" / "torchmcu"
OPERATOR_NAME = re.compile(r"^(cortex_m|torchmcu|aten|executorch_prim|dim_order_ops)::\w")
# Graph rewrites whose target lists describe one fixed pattern of nodes
REWRITES = {
    "quantize/fold_bn.py",
    "quantize/recurrent.py",
    "quantize/layout_idioms.py",
    "quantize/control_flow.py",
    "quantize/qdq.py",
    "quantize/pool_values.py",
    "quantize/attention.py",
}
POSITIONAL_READS = ("scalar", "physical", "nhwc", "tensor_meta", "logical")
# the names a stage gives a KernelCall's argument reader (interpreter _Call, TOSA Args, Bound)
CALL_READERS = ("call", "c", "args", "a", "b", "bound")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "ops")


def _exempt_strings(tree: ast.AST) -> set[int]:
    """ids of docstring constants and of everything inside f-strings (messages)."""
    exempt: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            exempt.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            exempt.update(id(inner) for inner in ast.walk(node))
    return exempt


def _is_aten_target(node: ast.AST) -> bool:
    return ast.unparse(node).startswith(("torch.ops.aten.", "_aten.", "aten."))


def findings(path: Path) -> list[str]:
    """What in one module looks like a hand-kept operator table, as 'file:line: what'."""
    rel = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exempt = _exempt_strings(tree)
    found = []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in exempt
            and OPERATOR_NAME.match(node.value)
        ):
            found.append(f"{where}: operator name {node.value!r}")
        if isinstance(node, (ast.Dict, ast.Set, ast.Tuple, ast.List)) and rel not in REWRITES:
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            targets = [e for e in items if e is not None and _is_aten_target(e)]
            if len(targets) >= 2:
                found.append(f"{where}: a display of {len(targets)} aten targets")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in POSITIONAL_READS
            and ast.unparse(node.func.value) in CALL_READERS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, int)
            and node.args[0].value >= 0
        ):
            found.append(f"{where}: argument {node.args[0].value} read by position")
        if (
            isinstance(node, ast.Subscript)
            and ast.unparse(node.value).endswith(("call.args", "instr.args", "instruction.args"))
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
            and node.slice.value >= 0
        ):
            found.append(f"{where}: argument {node.slice.value} read by position")
    return found


def test_the_scan_finds_each_kind(tmp_path: Path) -> None:
    # the scan itself, on a module holding one of each
    bad = PACKAGE / "lower" / "_scan_probe.py"
    bad.write_text(
        '"""cortex_m::in_a_docstring is fine."""\n'
        "import torch\n_aten = torch.ops.aten\n"
        'NAME = "cortex_m::quantized_linear"\n'
        "TABLE = {_aten.conv2d.default: 1, _aten.linear.default: 2}\n"
        "def f(call, plan):\n"
        '    raise ValueError(f"cortex_m::x {call}")\n'
        "    return call.scalar(3), plan.values[call.args[1]], call.args[-2]\n",
        encoding="utf-8",
    )
    try:
        got = findings(bad)
    finally:
        bad.unlink()
    assert [g.split(": ", 1)[1] for g in got] == [
        "operator name 'cortex_m::quantized_linear'",
        "a display of 2 aten targets",
        "argument 3 read by position",
        "argument 1 read by position",
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_hand_kept_operator_table(path: Path) -> None:
    assert findings(path) == []


def test_no_kernel_keeps_its_own_argument_enum() -> None:
    local = re.compile(r"enum\s*\{[^}]*\b(A_\w+|N_SCHEMA|N_ARGS)\b", re.S)
    offenders = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "firmware" / "kernels").rglob("*.[ch]"))
        if local.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
