"""The kernel table (operator -> C entry point -> translation unit) and what a selection takes
from it. The table is the operator registry's (torchmcu.ops): CMake generates it as
<build>/generated/kernels.json (cmake/ops.cmake) and passes that file; without one, it is built
from the registry itself.

CMake asks this module which table entries a yaml selects (`python -m torchmcu.selective
--yaml Y`), so the yaml is interpreted in one place: include_all_operators selects every
kernel, include_all_overloads every overload of the name, otherwise the exact 'name.overload'.
Delegate backends (`--delegates IDS`: the ids the tree offers) are selected by their
build_features entry 'delegate:<id>', or all of them by include_all_non_op_selectives.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torchmcu import ops
from torchmcu.ops import generate
from torchmcu.selective.oplist import (
    OpList,
    OpListError,
    canonical,
    delegate_ids,
    kernel_variant_defines,
    read_yaml,
    runtime_features,
    split_key,
)


@dataclass(frozen=True)
class KernelEntry:
    operator: str  # 'namespace::name.overload'
    symbol: str
    source: str  # relative to the table's directory


@dataclass(frozen=True)
class KernelTable:
    path: Path | None  # None: built from the registry
    kernels: tuple[KernelEntry, ...]
    common_sources: tuple[str, ...]
    headers: tuple[str, ...] = ()  # what the generated C registry includes

    @property
    def operators(self) -> list[str]:
        return [k.operator for k in self.kernels]

    def select(self, doc: OpList) -> list[KernelEntry]:
        """The entries `doc` selects, in table order; an operator with no kernel is an error."""
        doc = canonical(doc)
        if doc["include_all_operators"]:
            return list(self.kernels)
        chosen: set[str] = set()
        unknown = []
        for name, entry in doc["operators"].items():
            base, overload = split_key(name)
            hits = [
                k.operator
                for k in self.kernels
                if split_key(k.operator)[0] == base
                and (entry["include_all_overloads"] or split_key(k.operator)[1] == overload)
            ]
            if not hits:
                unknown.append(name)
            chosen.update(hits)
        if unknown:
            raise OpListError(
                f"selected operators with no kernel in {self.path or 'the operator registry'}: "
                f"{', '.join(sorted(unknown))}"
            )
        return [k for k in self.kernels if k.operator in chosen]

    def sources(self, entries: Iterable[KernelEntry]) -> list[str]:
        """Translation units to compile for `entries` (common ones first, each once)."""
        out = list(self.common_sources)
        for k in entries:
            if k.source not in out:
                out.append(k.source)
        return out


def load_table(path: str | os.PathLike[str] | None = None) -> KernelTable:
    """The table of a kernels.json (CMake's generated one), or the registry's without `path`."""
    p = Path(path) if path is not None else None
    raw = json.loads(p.read_text() if p is not None else generate.kernels_json(ops.ops()))
    kernels = tuple(KernelEntry(k["operator"], k["symbol"], k["source"]) for k in raw["kernels"])
    return KernelTable(
        p, kernels, tuple(raw.get("common_sources", [])), tuple(raw.get("headers", []))
    )


def missing_operators(program_ops: Iterable[str], doc: OpList) -> list[str]:
    """'name.overload' of a program that `doc` does not select, sorted."""
    doc = canonical(doc)
    if doc["include_all_operators"]:
        return []
    whole_names = {
        split_key(n)[0] for n, e in doc["operators"].items() if e["include_all_overloads"]
    }
    return sorted(
        op
        for op in set(program_ops)
        if op not in doc["operators"] and split_key(op)[0] not in whole_names
    )


def missing_delegates(program_delegates: Iterable[str], doc: OpList) -> list[str]:
    """Backend ids of a program that `doc` does not select, sorted."""
    doc = canonical(doc)
    if doc["include_all_non_op_selectives"]:
        return []
    return sorted(set(program_delegates) - set(delegate_ids(doc)))


def select_delegates(doc: OpList, available: Iterable[str]) -> list[str]:
    """The backend ids `doc` selects, in `available` order (the backends the image's delegate
    directories offer: a board without an NPU offers no EthosUBackend); a selected id that is
    not offered is an error."""
    doc = canonical(doc)
    offered = list(dict.fromkeys(available))
    if doc["include_all_non_op_selectives"]:
        return offered
    wanted = delegate_ids(doc)
    unknown = [d for d in wanted if d not in offered]
    if unknown:
        raise OpListError(
            f"selected delegates with no backend offered for this image: {', '.join(unknown)} "
            f"(offered: {', '.join(offered) or 'none'})"
        )
    return [d for d in offered if d in wanted]


def main(argv: list[str] | None = None) -> int:
    """For CMake: print the selected table operators, ';'-separated (a CMake list); with
    --delegates, the selected backend ids among those given instead; with --runtime-features,
    the runtime features selected (oplist.RUNTIME_FEATURES)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--yaml", required=True)
    parser.add_argument("--table", help="a kernels.json (default: the operator registry's)")
    parser.add_argument(
        "--delegates", metavar="IDS", help="backend ids the tree offers, ',' or ';' separated"
    )
    parser.add_argument(
        "--runtime-features", action="store_true", help="the runtime features the yaml selects"
    )
    parser.add_argument(
        "--kernel-variants",
        action="store_true",
        help="the C defines (TM_VARIANT_...=0) of the kernel variants the yaml leaves out",
    )
    args = parser.parse_args(argv)
    try:
        doc = read_yaml(args.yaml)
        if args.runtime_features:
            print(";".join(runtime_features(doc)))
            return 0
        if args.kernel_variants:
            print(";".join(kernel_variant_defines(doc)))
            return 0
        if args.delegates is not None:
            offered = [d for d in args.delegates.replace(",", ";").split(";") if d]
            print(";".join(select_delegates(doc, offered)))
            return 0
        entries = load_table(args.table).select(doc)
    except (OpListError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(";".join(k.operator for k in entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
