"""Per-operator profiles of a profiled runner image (`torchmcu build --profile`).

The runner (firmware/runner/profile.c) prints, after each run's TM_RUN line,

    TM_PROFILE <sample> counter=<pmu_cycles|dwt_cycles|none> overhead=<n|-> marks=<n> arena=<hex>
    TM_PROF <sample> <instruction> <operator.overload> <count|-> <planned arena bytes>

one TM_PROF line per kernel call. On an FVP or hardware its cycle counter gives the counts.
QEMU has no cycle counter (the runner prints "-"): there the instruction-count plugin ticks on
the same marks (the executor's tm_profile_instruction) and also counts the arena bytes each
call loads, stores and touches, and profile_run merges its ticks with the runner's records in
order. Why merge on the host rather than let the plugin print the records: the plugin (QEMU
7.2, plugin API 1) cannot read guest registers, so it cannot see which instruction a mark is
for; the runner knows that and the planned bytes, the plugin knows the counts, and both see
the marks in the same order, which the merge checks mark for mark.

Per run, the marks are: two calibration marks (an empty pair: one mark's own cost, the
`overhead`), then one before each kernel call and one after the last. The plugin's ticks are
the intervals between consecutive marks; those that span runner code between runs are
dropped.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, TypedDict

ARENA_START, ARENA_END = "__tm_arena_start", "__tm_arena_end"
_PROFILE = re.compile(r"^TM_PROFILE (\d+) (.*)$")
_PROF = re.compile(r"^TM_PROF (\d+) (\d+) (\S+) (\d+|-) (\d+)$")


class ProfileError(RuntimeError):
    """The profile could not be read: not a profiled image, or runner and plugin disagree."""


class OperatorProfile(TypedDict):
    instruction: int  # index in the method's instruction list
    op: str  # "cortex_m::quantized_conv2d.out"
    count: int | None  # instructions (QEMU plugin) or cycles (runner's counter); one mark included
    arena_planned: int  # union of the arena byte ranges of its tensor arguments (runner)
    arena_touched: int | None  # distinct arena bytes loaded or stored (QEMU plugin only)
    arena_loaded: int | None  # arena bytes loaded, counting every access
    arena_stored: int | None


class RunProfile(TypedDict):
    sample: int
    program: int | None  # TM_PROGRAM index in a several-program image, else None
    counter: str  # the runner's counter: "pmu_cycles", "dwt_cycles" or "none"
    overhead: int | None  # one mark's cost (an empty mark pair), in `unit`
    inference: int | None  # the whole method call, in `unit`
    unattributed: int | None  # inference - sum of counts: executor entry/exit and the last mark
    operators: list[OperatorProfile]


class Profile(TypedDict):
    unit: str  # "instructions" (QEMU plugin) or "cycles" (runner's counter)
    source: str  # "qemu-plugin" or the runner's counter name
    board: str
    arena: list[int]  # [first address, end address) of the watched arena (QEMU)
    runs: list[RunProfile]


def parse_runner(text: str) -> list[RunProfile]:
    """The runner's TM_PROFILE / TM_PROF lines -> one record per run, in output order.

    Counts are the runner's (None where it had no counter); inference comes from the run's
    TM_RUN cycles when the runner had a counter. A malformed or incomplete block raises.
    """
    runs: list[RunProfile] = []
    program: int | None = None
    cycles: dict[int, int] = {}
    expected = 0
    for line in text.splitlines():
        line = line.rstrip("\r")
        if line.startswith("TM_PROGRAM "):
            program = int(line.split()[1])
        elif line.startswith("TM_RUN "):
            fields = line.split()
            kv = dict(f.split("=", 1) for f in fields[2:] if "=" in f)
            cycles[int(fields[1])] = int(kv.get("cycles", "0"))
        elif line.startswith("TM_PROFILE "):
            if expected:
                raise ProfileError(f"profile of run {len(runs) - 1} lacks {expected} TM_PROF lines")
            m = _PROFILE.match(line)
            if m is None:
                raise ProfileError(f"malformed profile header: {line[:120]}")
            kv = dict(f.split("=", 1) for f in m.group(2).split() if "=" in f)
            if "overflow" in kv:
                raise ProfileError(
                    f"the runner recorded {kv['overflow']} marks too many (raise "
                    "TM_PROFILE_MAX_MARKS in firmware/runner/profile.c)"
                )
            sample, counter = int(m.group(1)), kv.get("counter", "none")
            marks = int(kv["marks"])
            expected = max(marks - 1, 0)
            timed = counter != "none"
            runs.append(
                RunProfile(
                    sample=sample,
                    program=program,
                    counter=counter,
                    overhead=int(kv["overhead"]) if timed else None,
                    inference=cycles.get(sample) if timed else None,
                    unattributed=None,
                    operators=[],
                )
            )
        elif line.startswith("TM_PROF "):
            m = _PROF.match(line)
            if m is None or not runs or expected == 0 or int(m.group(1)) != runs[-1]["sample"]:
                raise ProfileError(f"unexpected profile record: {line[:120]}")
            count = None if m.group(4) == "-" else int(m.group(4))
            runs[-1]["operators"].append(
                OperatorProfile(
                    instruction=int(m.group(2)),
                    op=m.group(3),
                    count=count,
                    arena_planned=int(m.group(5)),
                    arena_touched=None,
                    arena_loaded=None,
                    arena_stored=None,
                )
            )
            expected -= 1
    if expected:
        raise ProfileError(f"profile of run {len(runs) - 1} lacks {expected} TM_PROF lines")
    for run in runs:
        _fill_unattributed(run)
    return runs


def _fill_unattributed(run: RunProfile) -> None:
    counts = [op["count"] for op in run["operators"]]
    if run["inference"] is not None and all(c is not None for c in counts):
        run["unattributed"] = run["inference"] - sum(c for c in counts if c is not None)


def merge_ticks(
    runs: list[RunProfile],
    ticks: list[int],
    arena: list[dict[str, int]] | None,
    inference: list[int],
) -> None:
    """Fill each run's counts (and arena bytes) from the plugin's ticks on the mark function.

    Per run: [the interval since the previous run's last mark (not for the first)], the
    calibration pair, the interval from it to the first kernel mark, then one tick per call.
    """
    if len(inference) != len(runs):
        raise ProfileError(f"{len(inference)} inference regions for {len(runs)} profiled runs")
    at = 0
    for r, run in enumerate(runs):
        at += 1 if r > 0 else 0  # from the previous run's last mark to this run's calibration
        if at >= len(ticks):
            raise ProfileError(f"the plugin saw fewer marks than the runner printed (run {r})")
        run["overhead"] = ticks[at]
        at += 2  # the empty pair, then calibration -> first kernel mark
        ops = run["operators"]
        if at + len(ops) > len(ticks):
            raise ProfileError(f"the plugin saw fewer marks than the runner printed (run {r})")
        for k, op in enumerate(ops):
            op["count"] = ticks[at + k]
            if arena is not None:
                op["arena_touched"] = arena[at + k]["touched"]
                op["arena_loaded"] = arena[at + k]["loaded"]
                op["arena_stored"] = arena[at + k]["stored"]
        at += len(ops)
        run["inference"] = inference[r]
        _fill_unattributed(run)
    if at != len(ticks):
        raise ProfileError(
            f"the plugin saw {len(ticks)} mark intervals, the runner's profile accounts for {at}: "
            "is the image built with this runner?"
        )


def _data_symbols(elf: str | os.PathLike[str]) -> dict[str, int]:
    from torchmcu.firmware.icount import IcountError, nm_symbols

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
    from torchmcu.firmware.icount import PROFILE_MARKER, count_instructions, symbol_addresses
    from torchmcu.firmware.run import emulator_for, run

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
