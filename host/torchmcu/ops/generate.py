"""The C tables generated from the operator registry. No copy is kept in the tree: CMake writes
them at configure time into <build>/generated (cmake/ops.cmake, tm_generate_op_tables), so none
can be stale.

- kernels.json: operator -> C entry point and translation unit (cmake/selective.cmake compiles
  and registers the selected kernels from it; torchmcu.selective reads it with --table);
- op_args.h: one enum of argument positions per operator, so C and Python share one numbering;
- kernel_entries.h: every kernel's TM_DECLARE_KERNEL and the prototypes of the scratch-size
  functions (Kernel.scratch_c, as its translation unit defines it);
- control_ops.inc: the loop kernels the runtime runs as loop instructions
  (firmware/runtime/src/method.c's LOOP_OPS: the ops whose call is a loop role).

    python -m torchmcu.ops.generate --out DIR                # write those that differ into DIR
    python -m torchmcu.ops.generate --out DIR --check        # exit 1, naming them, if any differs
    python -m torchmcu.ops.generate --out DIR --inputs FILE  # and list the files read in FILE
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from torchmcu import ops
from torchmcu.ops.core import OpDef

SOURCE_ROOT = Path(__file__).resolve().parents[3]
KERNELS_JSON = "kernels.json"
OP_ARGS_H = "op_args.h"
KERNEL_ENTRIES_H = "kernel_entries.h"
CONTROL_OPS_INC = "control_ops.inc"
KERNELS_DIR = Path("firmware/kernels")
COMMAND = "python -m torchmcu.ops.generate"

# The table's fixed parts, as cmake/selective.cmake reads them.
_ABOUT = (
    "The kernels of the tree: operator 'namespace::name.overload' -> C entry point and the"
    " translation unit holding it (relative to firmware/kernels), generated from the operator"
    " registry (host/torchmcu/ops) by `" + COMMAND + "`. cmake/selective.cmake compiles the"
    " sources of the selected operators (all of them without TORCHMCU_OPS_YAML) plus"
    " common_sources, and generates the registry from this table; every .c under the kernel"
    " directories must be listed here. An _nhwc alias shares its operator's translation unit"
    " (same kernel body): registered only when selected, its small unused entry point is"
    " dropped by --gc-sections."
)
_HEADERS = ("kernel_entries.h",)  # what the generated registry includes
_COMMON_SOURCES = ("cortex_m/kernel_args.c",)


def _list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def kernels_json(definitions: Sequence[OpDef]) -> str:
    """kernels.json: one line per kernel, in registry order (a diff shows one line per op)."""
    rows = [
        "    "
        + json.dumps(
            {"operator": o.key, "symbol": o.kernel.symbol, "source": o.kernel.source}
            | ({"prepare": o.kernel.prepare_symbol} if o.kernel.prepare else {})
        )
        for o in definitions
    ]
    return (
        "{\n"
        f'  "about": {json.dumps(_ABOUT)},\n'
        f'  "headers": {_list(_HEADERS)},\n'
        f'  "common_sources": {_list(_COMMON_SOURCES)},\n'
        '  "kernels": [\n' + ",\n".join(rows) + "\n  ]\n}\n"
    )


_OP_ARGS_HEAD = f"""\
/* Argument positions of every operator: one enum per operator, named after its C entry point
 * (tm_cortex_m_pad_out -> CORTEX_M_PAD). TM_ARG(CORTEX_M_PAD, PRE_PAD) is the position of
 * pre_pad in a cortex_m::pad.out call, TM_NARGS(CORTEX_M_PAD) the number of schema arguments;
 * a KernelCall passes one returned value after them when the schema returns one.
 *
 * Generated from host/torchmcu/ops/defs by `{COMMAND}` (cmake/ops.cmake, at configure time).
 */
#ifndef TM_OP_ARGS_H
#define TM_OP_ARGS_H

#define TM_ARG(op, a) TM_##op##_ARG_##a
#define TM_NARGS(op) TM_##op##_NARGS
"""


def _wrap_schema(text: str, width: int = 96) -> list[str]:
    """`text` as comment lines, broken after the commas between arguments."""
    pieces = [p + "," for p in text.split(", ")]
    pieces[-1] = pieces[-1][:-1]
    lines = ["/* " + pieces[0]]
    for piece in pieces[1:]:
        if len(lines[-1]) + 1 + len(piece) > width:
            lines.append(" *   " + piece)
        else:
            lines[-1] += " " + piece
    return lines


def _enum(o: OpDef) -> str:
    prefix = f"TM_{o.kernel.c_name}"
    comment = _wrap_schema(str(o.schema))
    members = [f"  {prefix}_ARG_{a.name.upper()}," for a in o.schema.args]
    return "\n".join(
        [*comment[:-1], comment[-1] + " */", "enum {", *members, f"  {prefix}_NARGS", "};"]
    )


def _variant_defaults(o: OpDef) -> str:
    """Every kernel variant of `o` compiled unless the build defines its macro 0."""
    if o.variants is None or o.variant_of is not None:
        return ""
    lines = [f"/* Kernel variants of {o.qualified} (1: compiled; a selective build defines 0). */"]
    for v in o.variants.names:
        macro = o.variant_macro(v)
        lines += [f"#ifndef {macro}", f"#define {macro} 1", "#endif"]
    return "\n" + "\n".join(lines) + "\n"


def op_args_h(definitions: Sequence[OpDef]) -> str:
    """op_args.h: the enums in registry order, each operator's kernel-variant defaults after."""
    return (
        _OP_ARGS_HEAD
        + "".join(f"\n{_enum(o)}\n{_variant_defaults(o)}" for o in definitions)
        + "\n#endif\n"
    )


_DO_NOT_EDIT = f"Generated from host/torchmcu/ops/defs by `{COMMAND}` (cmake/ops.cmake)."

_KERNEL_ENTRIES_HEAD = f"""\
/* Entry points of every kernel (the registry's Kernel.symbol), for the kernel registry and the
 * kernels' own translation units, then the scratch-size functions of the kernels with a scratch
 * argument. Hand-written helpers stay in cortex_m/cortex_m_kernels.h and
 * portable/portable_kernels.h, which include this.
 *
 * {_DO_NOT_EDIT}
 */
#ifndef TM_KERNEL_ENTRIES_H
#define TM_KERNEL_ENTRIES_H

#include <stddef.h>
#include <stdint.h>

#include "torchmcu/types.h"

#define TM_DECLARE_KERNEL(name) tm_status name(tm_kernel_context *ctx, tm_value *const *args, size_t nargs)

"""


def scratch_prototype(name: str, source: str, root: Path = SOURCE_ROOT) -> str:
    """`size_t <name>(<parameters>)` as firmware/kernels/<source> defines it: the parameters
    are the C kernel's (the registry holds only the name)."""
    path = root / KERNELS_DIR / source
    text = path.read_text(encoding="utf-8")
    found = re.search(rf"^size_t {re.escape(name)}\(([^)]*)\)\s*\{{", text, re.MULTILINE)
    if found is None:
        raise ValueError(f"{path} does not define `size_t {name}(...) {{`")
    return f"size_t {name}({' '.join(found.group(1).split())})"


def kernel_entries_h(definitions: Sequence[OpDef], root: Path = SOURCE_ROOT) -> str:
    """kernel_entries.h: the declarations in registry order, each scratch function once."""
    lines = [f"TM_DECLARE_KERNEL({o.kernel.symbol}); /* {o.key} */" for o in definitions]
    lines += [
        f"TM_DECLARE_KERNEL({o.kernel.prepare_symbol}); /* {o.key}: its prepare step */"
        for o in definitions
        if o.kernel.prepare
    ]
    scratch = {o.kernel.scratch_c: o.kernel.source for o in definitions if o.kernel.scratch_c}
    lines += [
        "",
        "/* Bytes a kernel's `scratch` argument must hold (0 for the scalar paths); mirrored by",
        " * torchmcu.reference.scratch. */",
        *(f"{scratch_prototype(n, src, root)};" for n, src in scratch.items()),
    ]
    return _KERNEL_ENTRIES_HEAD + "\n".join(lines) + "\n\n#endif\n"


def _loop_entry(o: OpDef) -> str:
    name, overload = o.key.rsplit(".", 1)
    return f'{{"{name}", "{overload}", LOOP_{o.call.removeprefix("loop_").upper()}}},'


def control_ops_inc(definitions: Sequence[OpDef]) -> str:
    """control_ops.inc: method.c's LOOP_OPS rows (name, overload, role) and TM_LOOP_BOOL_OP,
    the qualified name of the one loop_scalar op that writes a Bool (the others write an Int).
    method.c tests that name as it tested its hand-written literal, so its code and data, and
    the instruction counts of a method's preparation, are what they were."""
    loops = [o for o in definitions if o.call.startswith("loop_")]
    bools = [o for o in loops if o.call == "loop_scalar" and o.schema.returns[0].type == "bool"]
    if len(bools) != 1:
        raise ValueError(f"method.c takes one Bool-writing loop_scalar op, not {len(bools)}")
    head = (
        "/* The loop kernels (registry ops whose call is loop_scalar, loop_select or\n"
        " * loop_copy_index): name, overload, role. Rows of method.c's LOOP_OPS; the loop_scalar\n"
        f" * op that writes a Bool (the others an Int) is TM_LOOP_BOOL_OP.\n *\n * {_DO_NOT_EDIT}\n"
        " */\n"
        f'#define TM_LOOP_BOOL_OP "{bools[0].qualified}"\n'
    )
    return head + "".join(f"    {_loop_entry(o)}\n" for o in loops)


def generated(
    definitions: Sequence[OpDef] | None = None, root: Path = SOURCE_ROOT
) -> dict[str, str]:
    """File name -> its generated text (the kernel sources of the scratch prototypes are read
    under `root`)."""
    definitions = ops.ops() if definitions is None else definitions
    return {
        KERNELS_JSON: kernels_json(definitions),
        OP_ARGS_H: op_args_h(definitions),
        KERNEL_ENTRIES_H: kernel_entries_h(definitions, root),
        CONTROL_OPS_INC: control_ops_inc(definitions),
    }


def stale(out: Path, texts: dict[str, str]) -> list[str]:
    """The names of `texts` whose file in `out` is missing or differs."""
    return [
        name
        for name, text in texts.items()
        if not (out / name).is_file() or (out / name).read_text(encoding="utf-8") != text
    ]


def inputs(definitions: Sequence[OpDef] | None = None, root: Path = SOURCE_ROOT) -> list[Path]:
    """The files the tables are made from: the torchmcu modules imported (the registry, its
    definitions, what they import) and the kernel sources of the scratch prototypes. CMake
    regenerates when one of them changes."""
    definitions = ops.ops() if definitions is None else definitions
    host = root / "host"
    modules = {
        Path(m.__file__).resolve()
        for m in list(sys.modules.values())
        if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(host)
    }
    sources = {
        (root / KERNELS_DIR / o.kernel.source).resolve() for o in definitions if o.kernel.scratch_c
    }
    return sorted(modules | sources)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory of the tables")
    parser.add_argument("--check", action="store_true", help="only report stale files (exit 1)")
    parser.add_argument("--inputs", type=Path, help="write the files read there, one a line")
    args = parser.parse_args(argv)
    texts = generated()
    outdated = stale(args.out, texts)
    if args.check:
        for name in outdated:
            print(f"{args.out / name} is stale: run `{COMMAND} --out {args.out}`", file=sys.stderr)
        return 1 if outdated else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in outdated:
        (args.out / name).write_text(texts[name], encoding="utf-8")
        print(f"wrote {name}")
    if args.inputs is not None:
        listed = "".join(f"{p.as_posix()}\n" for p in inputs())
        if not args.inputs.is_file() or args.inputs.read_text(encoding="utf-8") != listed:
            args.inputs.write_text(listed, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
