"""Per-operator profiles of a profiled runner image (`torchmcu build --profile`): profile_run,
the terminal table and the profile.json file.

On an FVP or hardware the runner's cycle counter gives the counts; on QEMU the
instruction-count plugin does, between the same marks, and also counts the arena bytes each
call touches. The runner's records, and how the plugin's ticks are merged into them:
profile_records.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypedDict

from torchmcu.device.profile_records import ProfileError, RunProfile, merge_ticks, parse_runner

ARENA_START, ARENA_END = "__tm_arena_start", "__tm_arena_end"


class Profile(TypedDict):
    unit: str  # "instructions" (QEMU plugin) or "cycles" (runner's counter)
    source: str  # "qemu-plugin" or the runner's counter name
    board: str
    arena: list[int]  # [first address, end address) of the watched arena (QEMU)
    runs: list[RunProfile]


def _data_symbols(elf: str | os.PathLike[str]) -> dict[str, int]:
    from torchmcu.device.icount import IcountError, nm_symbols

    try:
        return nm_symbols(elf)
    except IcountError as e:
        raise ProfileError(str(e)) from None


def arena_range(elf: str | os.PathLike[str]) -> tuple[int, int]:
    """The image's activation arena [start, end): the linker sized it from the program's plan."""
    symbols = _data_symbols(elf)
    if ARENA_START not in symbols or ARENA_END not in symbols:
        raise ProfileError(f"{elf} has no {ARENA_START}/{ARENA_END}: not a runner image")
    return symbols[ARENA_START], symbols[ARENA_END]


def profile_run(
    elf: str | os.PathLike[str],
    board: str,
    *,
    emulator: str | None = None,
    timeout: float = 120.0,
    check: bool = True,
) -> tuple[Profile, str]:
    """Run a profiled image; return its per-operator profile and the firmware's console.

    QEMU: counts are executed instructions and arena bytes are measured, both by the plugin
    between the marks; elsewhere (an FVP): cycles from the runner's own counter.
    """
    from torchmcu.device.icount import PROFILE_MARKER, count_instructions, symbol_addresses
    from torchmcu.device.run import emulator_for, run

    if PROFILE_MARKER not in symbol_addresses(elf):
        raise ProfileError(
            f"{elf} has no {PROFILE_MARKER}: build it with profile=True (torchmcu build --profile, "
            "CMake -DTORCHMCU_PROFILE=ON)"
        )
    kind = emulator_for(board, prefer=emulator)
    if kind != "qemu":
        result = run(elf, board, timeout, emulator=kind)
        if check:
            result.check()
        runs = parse_runner(result.console)
        if not runs:
            raise ProfileError(f"{elf} printed no profile (TM_PROFILE lines)")
        if any(r["counter"] == "none" for r in runs):
            raise ProfileError(f"the cycle counter of {board} did not advance (no PMU/DWT?)")
        cycles = Profile(unit="cycles", source=runs[0]["counter"], board=board, arena=[], runs=runs)
        return cycles, result.console
    lo, hi = arena_range(elf)
    regions = {"inference": ("tm_bench_begin", "tm_bench_end"), "kernel": (PROFILE_MARKER,) * 2}
    counts = count_instructions(elf, board, regions, timeout=timeout, check=check, arena=(lo, hi))
    runs = parse_runner(counts["console"])
    if not runs:
        raise ProfileError(f"{elf} printed no profile (TM_PROFILE lines)")
    merge_ticks(
        runs,
        counts["regions"]["kernel"],
        counts["arena"]["kernel"],
        counts["regions"]["inference"],
    )
    profile = Profile(
        unit="instructions", source="qemu-plugin", board=board, arena=[lo, hi], runs=runs
    )
    return profile, counts["console"]


def table(profile: Profile, run: int = 0) -> str:
    """A per-operator table of one run for the terminal."""
    r = profile["runs"][run]
    unit = profile["unit"]
    total = sum(op["count"] or 0 for op in r["operators"]) or 1
    head = f"{'#':>4}  {'operator':<44} {unit:>12} {'%':>6} {'arena planned':>14} {'touched':>9}"
    lines = [head, "-" * len(head)]
    for op in r["operators"]:
        touched = "-" if op["arena_touched"] is None else f"{op['arena_touched']:,}"
        count = op["count"] or 0
        lines.append(
            f"{op['instruction']:>4}  {op['op']:<44} {count:>12,} {100 * count / total:>5.1f}% "
            f"{op['arena_planned']:>14,} {touched:>9}"
        )
    lines.append("-" * len(head))
    where = f"sample {r['sample']}" + ("" if r["program"] is None else f", program {r['program']}")
    lines.append(
        f"{where}: sum {total:,} {unit}; whole method call {r['inference'] or 0:,}; "
        f"unattributed {r['unattributed'] if r['unattributed'] is not None else '-'}; "
        f"profiler overhead {r['overhead']} {unit} per mark (included once in each count)"
    )
    return "\n".join(lines)


def write_json(profile: Profile, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    out.write_text(json.dumps(profile, indent=1) + "\n")
    return out


def read_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or "runs" not in data:
        raise ProfileError(f"{path} is not a torchmcu profile.json (no runs)")
    return data
