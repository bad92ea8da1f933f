"""Merge the operator lists of several models (and a board's own needs) into one image's list.

Merging is a union: an operator selected by any list is selected; debug_info and kernel keys
are united. Lists are canonical (sorted), so the result does not depend on the order of the
inputs, and merging a list into a merge that already holds it changes nothing.
A conflict is one operator whose flags (is_root_operator, is_used_for_training,
include_all_overloads) differ between lists. torchgen would or them; we refuse, naming the
operator and the lists, because a silently widened entry (all overloads, training kernels) is not
what either list asked for. Lists torchmcu exports always agree; conflicts come from hand-edited
or foreign lists. The board's operators never conflict: they only add what is absent.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from torchmcu.boards import get_board
from torchmcu.selective.oplist import OpList, OpListError, canonical, empty, read_yaml, write_yaml


class MergeConflict(OpListError):
    """Entries of different lists that cannot be merged; the message names them."""


def board_operators(board: str) -> list[str]:
    """'name.overload' of the operators a board's image always holds (board.json
    selective_build.always_operators; none for the boards in the tree: the runner itself calls
    no kernel, and quantize/dequantize come with the programs that use them)."""
    config = get_board(board).config.get("selective_build", {})
    ops = config.get("always_operators", [])
    if not isinstance(ops, list) or not all(isinstance(o, str) and "::" in o for o in ops):
        raise OpListError(
            f"boards/{board}/board.json: selective_build.always_operators must be a list of "
            f"'namespace::name.overload' strings, got {ops!r}"
        )
    return sorted(ops)


def merge(docs: Iterable[OpList], always: Sequence[str] = (), source: str = "board") -> OpList:
    """The union of `docs`, plus the operators `always` (debug_info `source`)."""
    out = empty()
    docs = [canonical(d) for d in docs]
    _check_conflicts(docs)
    present = {name for d in docs for name in d["operators"]}
    board = _always_doc([op for op in always if op not in present], source)
    for doc in [*docs, board]:
        for flag in ("include_all_non_op_selectives", "include_all_operators"):
            out[flag] = out[flag] or doc[flag]
        out["debug_info"] = sorted({*out["debug_info"], *doc["debug_info"]})
        for name, entry in doc["operators"].items():
            have = out["operators"].setdefault(name, {**entry, "debug_info": []})
            for flag in ("is_root_operator", "is_used_for_training", "include_all_overloads"):
                have[flag] = have[flag] or entry[flag]
            have["debug_info"] = sorted({*have["debug_info"], *entry["debug_info"]})
        for name, keys in doc["et_kernel_metadata"].items():
            have_keys = out["et_kernel_metadata"].get(name, [])
            out["et_kernel_metadata"][name] = sorted({*have_keys, *keys})
        for key in ("custom_classes", "build_features"):
            out[key] = sorted({*out[key], *doc[key]})
        out["kernel_metadata"] = {**out["kernel_metadata"], **doc["kernel_metadata"]}
    return canonical(out)


def merge_files(
    paths: Sequence[str | os.PathLike[str]],
    board: str | None = None,
    output: str | os.PathLike[str] | None = None,
) -> OpList:
    """Merge yaml files (and the board's always-needed operators); write `output` if given."""
    if not paths:
        raise OpListError("nothing to merge: give at least one selected_operators.yaml")
    always = board_operators(board) if board else []
    merged = merge([read_yaml(p) for p in paths], always, source=f"board:{board}")
    if output is not None:
        write_yaml(merged, Path(output))
    return merged


def _always_doc(ops: Sequence[str], source: str) -> OpList:
    entry = {
        "is_root_operator": True,
        "is_used_for_training": False,
        "include_all_overloads": False,
        "debug_info": [source],
    }
    return canonical({"operators": {op: dict(entry) for op in ops}})


_FLAGS = ("is_root_operator", "is_used_for_training", "include_all_overloads")


def _check_conflicts(docs: Sequence[OpList]) -> None:
    seen: dict[str, list[tuple[tuple[bool, ...], list[str]]]] = {}
    for doc in docs:
        for name, entry in doc["operators"].items():
            flags = tuple(entry[f] for f in _FLAGS)
            seen.setdefault(name, []).append((flags, entry["debug_info"] or ["unnamed list"]))
    problems = []
    for name, found in sorted(seen.items()):
        variants = sorted({flags for flags, _ in found})
        if len(variants) > 1:
            differ = [i for i in range(len(_FLAGS)) if len({v[i] for v in variants}) > 1]
            shown = "; ".join(
                ", ".join(f"{_FLAGS[i]}={flags[i]}" for i in differ)
                + " in "
                + ", ".join(sorted({s for fl, src in found if fl == flags for s in src}))
                for flags in variants
            )
            problems.append(f"{name} ({shown})")
    if problems:
        raise MergeConflict("conflicting entries: " + " | ".join(problems))
