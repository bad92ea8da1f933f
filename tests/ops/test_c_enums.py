"""The C kernels take their argument positions from op_args.h (generated from the registry's
schemas), so C and Python share one numbering: no kernel keeps a local argument enum
(`enum { A_INPUT, ..., A_OUT, N_SCHEMA };`) or reads an argument by a literal position, and each
kernel's translation unit includes op_args.h and names its own operators' positions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from torchmcu import ops
from torchmcu.ops.core import OpDef

KERNELS = Path(__file__).resolve().parents[2] / "firmware" / "kernels"
# An enum whose last member counts the ones before it (N_SCHEMA, N_ARGS, N_SUM...).
_ENUM = re.compile(r"enum\s*\{([^}]*)\}\s*;")
# An argument read by its number, or an argument count given as a number.
_LITERAL = re.compile(r"\bargs\[\s*\d|\btm_check_arg_count\([^;]*,\s*\d+u?\s*\)")
_POSITION = re.compile(r"\bTM_N?ARGS?\(\s*([A-Z0-9_]+)")
_INCLUDE = re.compile(r'^#include "op_args\.h"$', re.MULTILINE)


def _code(source: str) -> str:
    """`source` without its comments."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.DOTALL)


def argument_enums(source: str) -> list[tuple[list[str], str]]:
    """(members before the count, count name) of each counting enum of a C source."""
    found = []
    for body in _ENUM.findall(_code(source)):
        members = [m.strip().split("=")[0].strip() for m in body.split(",") if m.strip()]
        if members and members[-1].startswith("N_"):
            found.append((members[:-1], members[-1]))
    return found


def literal_positions(source: str) -> list[str]:
    return [m.group(0) for m in _LITERAL.finditer(_code(source))]


def test_the_scanners_find_what_they_look_for() -> None:
    src = (
        "/* enum { X, N_X }; args[0] */\nenum { A_SELF, A_DIM, /* the out */ A_OUT,\n N_SCHEMA };\n"
        "enum { DW_SET_ALL, DW_SETS };\n"
        "x = args[2]->u.i; y = args[A(DIM)]; st = tm_check_arg_count(ctx, args, nargs, 4u);\n"
        "st = tm_check_arg_count(ctx, args, nargs, TM_NARGS(PORTABLE_MM));\n"
    )
    assert argument_enums(src) == [(["A_SELF", "A_DIM", "A_OUT"], "N_SCHEMA")]
    assert literal_positions(src) == ["args[2", "tm_check_arg_count(ctx, args, nargs, 4u)"]


SOURCES = sorted(p.relative_to(KERNELS).as_posix() for p in KERNELS.glob("*/*.[ch]"))
BY_SOURCE: dict[str, list[OpDef]] = {}
for _o in ops.ops():
    BY_SOURCE.setdefault(_o.kernel.source, []).append(_o)


def test_every_kernel_source_is_scanned() -> None:
    # (no count: a new operator adds its translation unit without touching this file)
    assert set(BY_SOURCE) <= set(SOURCES)
    assert {s.split("/")[0] for s in BY_SOURCE} == {"cortex_m", "portable"}


@pytest.mark.parametrize("source", SOURCES)
def test_no_local_argument_enum_or_literal_position(source: str) -> None:
    text = (KERNELS / source).read_text()
    assert argument_enums(text) == [], f"{source}: use op_args.h's TM_ARG/TM_NARGS"
    assert literal_positions(text) == [], f"{source}: name the argument (op_args.h)"


@pytest.mark.parametrize("source", sorted(BY_SOURCE))
def test_kernel_names_its_own_operators_positions(source: str) -> None:
    code = _code((KERNELS / source).read_text())
    assert _INCLUDE.search(code), f"{source} does not include op_args.h"
    defined = BY_SOURCE[source]
    own = {o.kernel.c_name for o in defined}
    every = {o.kernel.c_name for o in ops.ops()}
    used = {name for name in _POSITION.findall(code) if name in every}
    assert used and used <= own, f"{source} reads {sorted(used - own)} positions"
    for o in defined:
        # An _nhwc alias shares its operator's body, so its positions are that operator's.
        names = {o.kernel.c_name}
        if o.variant_of is not None:
            names.add(ops.get(o.variant_of).kernel.c_name)
        assert any(re.search(rf"\b{n}\b", code) for n in names), f"{source}: {o.key}"
