"""The kernels' local argument enums (`enum { A_INPUT, ..., A_OUT, N_SCHEMA };` in their .c
files) against the registry's schemas: the same count, and the out where the C names it.

The kernels do not use op_args.h yet (docs/design/operator-registry.md, step 10); until they
do, this is what keeps the two numberings equal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from torchmcu import ops
from torchmcu.ops.core import OpDef

KERNELS = Path(__file__).resolve().parents[2] / "firmware" / "kernels"
# An enum whose last member counts the ones before it (N_SCHEMA, N_ARGS, N_SUM...).
_ENUM = re.compile(r"enum\s*\{([^}]*)\}\s*;")
# predicate.c holds two operators' enums, told apart by their count's name.
_NAMED_COUNTS = {
    "N_SUM": ("aten::sum.IntList_out",),
    "N_CMP": (
        "aten::gt.Scalar_out",
        "aten::ge.Scalar_out",
        "aten::lt.Scalar_out",
        "aten::le.Scalar_out",
    ),
}


def argument_enums(source: str) -> list[tuple[list[str], str]]:
    """(members before the count, count name) of each counting enum of a C source."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.DOTALL)
    found = []
    for body in _ENUM.findall(text):
        members = [m.strip().split("=")[0].strip() for m in body.split(",") if m.strip()]
        if members and members[-1].startswith("N_"):
            found.append((members[:-1], members[-1]))
    return found


def test_argument_enums_parse() -> None:
    src = (
        "/* enum { X, N_X }; */\nenum { A_SELF, A_DIM, /* the out */ A_OUT,\n N_SCHEMA };\n"
        "enum { DW_SET_ALL, DW_SETS };\n"
    )
    assert argument_enums(src) == [(["A_SELF", "A_DIM", "A_OUT"], "N_SCHEMA")]


def _ops_of(source: str) -> list[OpDef]:
    return [o for o in ops.ops() if o.kernel.source == source]


def _cases() -> list[tuple[str, OpDef, list[str], str]]:
    cases = []
    for path in sorted(KERNELS.glob("*/*.c")):
        rel = path.relative_to(KERNELS).as_posix()
        for members, count in argument_enums(path.read_text()):
            named = _NAMED_COUNTS.get(count)
            for o in _ops_of(rel):
                if named is None or o.key in named:
                    cases.append((rel, o, members, count))
    return cases


CASES = _cases()


def test_every_cortex_m_kernel_with_a_local_enum_is_checked() -> None:
    with_enum = {rel for rel, *_ in CASES if rel.startswith("cortex_m/")}
    cortex_m = {o.kernel.source for o in ops.ops() if o.kernel.source.startswith("cortex_m/")}
    assert with_enum == cortex_m  # all 14 translation units of the 18 cortex_m kernels
    assert len({rel for rel, *_ in CASES}) == 26  # and 12 portable ones


@pytest.mark.parametrize(
    "source, definition, members, count", CASES, ids=[f"{o.key}" for _, o, _, _ in CASES]
)
def test_local_enum_matches_the_schema(
    source: str, definition: OpDef, members: list[str], count: str
) -> None:
    schema = definition.schema
    # N_ARGS (native_layer_norm.c) also counts the returned TensorList; the others only the
    # schema's arguments, which is op_args.h's NARGS.
    expected = schema.n_call_args if count == "N_ARGS" else len(schema.args)
    assert len(members) == expected, f"{source}: {members} for {schema}"
    for out in schema.outs:
        c_name = f"A_{out.name.upper()}"
        if c_name in members:
            assert members.index(c_name) == out.index, f"{source}: {c_name}"
