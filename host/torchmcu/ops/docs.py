"""docs/operators.md's per-operator sections, written from the definitions.

The hand-written prose of docs/operators.md (the conventions every operator follows) stays as it
is; between each pair of markers

    <!-- generated: int8 operators (python -m torchmcu.ops.docs) -->
    <!-- end generated: int8 operators -->

the sections of one family are rewritten from the registry: the heading, the signature, the
definition's contract text, then the facts that the definition knows and a hand-kept page would
let drift (the C entry point, the scratch rule, where it runs on the NPU, the aten ops that
emit it). Operators sharing one contract (add.out and mul.out) share a section.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from torchmcu import ops
from torchmcu.ops.core import OpDef

SOURCE_ROOT = Path(__file__).resolve().parents[3]
DOCS = Path("docs/operators.md")
COMMAND = "python -m torchmcu.ops.docs"

# family -> (the marker's name, the namespace its headings leave out)
BLOCKS = {
    "int8": ("int8 operators", "cortex_m"),
    "portable": ("portable fp32 operators", "aten"),
    "control": ("control-flow operators", ""),
}


class DocsError(ValueError):
    """docs/operators.md lacks a block's markers, or a definition lacks its contract."""


def begin_marker(family: str) -> str:
    return f"<!-- generated: {BLOCKS[family][0]} ({COMMAND}) -->"


def end_marker(family: str) -> str:
    return f"<!-- end generated: {BLOCKS[family][0]} -->"


def _label(o: OpDef, namespace: str) -> str:
    s = o.schema
    name = f"{s.name}.{s.overload}" if s.overload else s.name
    return name if s.namespace == namespace else f"{s.namespace}::{name}"


def _signature(o: OpDef) -> str:
    text = str(o.schema)
    args = text[text.index("(") :]
    return args.split(" -> ", 1)[0] if o.call == "out" else args


def _emitted_for(o: OpDef) -> list[str]:
    keys = {o.key, *(v.key for v in _variants(o))}
    return [t for p in ops.patterns() if any(e.key in keys for e in p.emits) for t in p.aten]


def _variants(o: OpDef) -> list[OpDef]:
    return [v for v in ops.ops() if v.variant_of == o.key]


def _facts(o: OpDef) -> list[str]:
    facts = [f"- C: `{o.kernel.symbol}` in `firmware/kernels/{o.kernel.source}`."]
    if o.scratch_bytes is not None:
        c = f" (C: `{o.kernel.scratch_c}`)" if o.kernel.scratch_c else ""
        doc = " ".join((o.scratch_bytes.__doc__ or "").strip().split("\n\n")[0].split())
        facts.append(f"- Scratch: {doc.rstrip('.') or 'sized by its definition'}{c}.")
    if o.npu is not None and o.npu.lower is not None:
        facts.append(f"- On the NPU: {o.npu.doc or 'lowered to TOSA'}.")
    elif o.no_npu:
        facts.append(f"- Not on the NPU: {o.no_npu}.")
    else:
        facts.append("- CPU only: no TOSA lowering.")
    emitted = _emitted_for(o)
    if emitted:
        facts.append("- Emitted for: " + ", ".join(f"`{t}`" for t in emitted) + ".")
    return facts


def _groups(definitions: Sequence[OpDef]) -> list[list[OpDef]]:
    """Consecutive definitions that share one contract text form one section."""
    groups: list[list[OpDef]] = []
    for o in definitions:
        if groups and o.contract and o.contract == groups[-1][0].contract:
            groups[-1].append(o)
        else:
            groups.append([o])
    return groups


def section(group: Sequence[OpDef], namespace: str) -> str:
    """One '## ...' section for definitions sharing a contract (variants folded in)."""
    labels = []
    for o in group:
        variants = [_label(v, namespace) for v in _variants(o)]
        labels.append(_label(o, namespace) + (f" (and {', '.join(variants)})" if variants else ""))
    lines = ["## " + " / ".join(labels)]
    if len(group) == 1:
        lines.append(f"`{_signature(group[0])}`")
    else:
        lines += [f"`{o.schema.name}: {_signature(o)}`" for o in group]
    lines.append("")
    lines.append(group[0].contract.rstrip())
    facts = [_facts(o) for o in group]
    shared = [f for f in facts[0] if all(f in other for other in facts[1:])]
    lines += shared  # said once when every operator of the section has it
    for o, own in zip(group, facts):
        lines += [f.replace("- ", f"- {o.schema.name}: ", 1) for f in own if f not in shared]
    return "\n".join(lines)


def block(family: str) -> str:
    """The generated text between the family's markers (without them)."""
    label, namespace = BLOCKS[family]
    definitions = [o for o in ops.ops(family) if o.variant_of is None]
    missing = [o.key for o in definitions if not o.contract.strip()]
    if missing:
        raise DocsError(f"{label}: no contract text in the definition of {', '.join(missing)}")
    return "\n\n".join(section(g, namespace) for g in _groups(definitions))


def operators_md(text: str) -> str:
    """`text` (docs/operators.md) with every generated block rewritten from the registry."""
    for family in BLOCKS:
        begin, end = begin_marker(family), end_marker(family)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)
        if len(pattern.findall(text)) != 1:
            raise DocsError(f"docs/operators.md: expected one '{begin}' ... '{end}' block")
        generated = f"{begin}\n\n{block(family)}\n\n{end}"
        text = pattern.sub(lambda _m, new=generated: new, text)
    return text


def stale(root: Path = SOURCE_ROOT) -> bool:
    """docs/operators.md under `root` differs from what the registry writes."""
    text = (root / DOCS).read_text(encoding="utf-8")
    return operators_md(text) != text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report a stale copy (exit 1)")
    parser.add_argument("--root", type=Path, default=SOURCE_ROOT, help="source tree (%(default)s)")
    args = parser.parse_args(argv)
    path = args.root / DOCS
    try:
        text = path.read_text(encoding="utf-8")
        new = operators_md(text)
    except (OSError, DocsError) as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    if new == text:
        return 0
    if args.check:
        print(f"{DOCS} is stale: run `{COMMAND}`", file=sys.stderr)
        return 1
    path.write_text(new, encoding="utf-8")
    print(f"wrote {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
