"""The per-operator records of a profiled runner image (`torchmcu build --profile`).

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
parse_runner reads the records, merge_ticks puts the plugin's counts into them.

Per run, the marks are: two calibration marks (an empty pair: one mark's own cost, the
`overhead`), then one before each kernel call and one after the last. The plugin's ticks are
the intervals between consecutive marks; those that span runner code between runs are
dropped.

This module imports nothing of ours, so that run.py (RunResult.profile), icount.py
(profile_instructions) and profile.py (profile_run, above both) can all read the records.
"""

from __future__ import annotations

import re
from typing import TypedDict

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
