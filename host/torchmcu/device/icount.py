"""Exact executed-instruction counts of a firmware image on QEMU, with our TCG plugin.

QEMU has no timing model, so instructions are the figure we can measure deterministically.
The plugin (tools/qemu_icount/icount.c) counts every executed guest instruction and, per
region, the instructions between two marker functions (by default the runner's
tm_bench_begin/tm_bench_end around one inference), once per occurrence:

    counts = count_instructions("build/qemu-an547/firmware.elf", "qemu-an547")
    counts["regions"]["inference"]  # [instructions of run 0, run 1, ...]
    counts["total"]                 # the whole run, reset to exit

A region counts from the first instruction of its begin marker up to, not including, the
first instruction of its end marker: with the runner's empty markers that is the inference
plus four instructions (the begin marker's return, the call setup and the call of the end
marker).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from torchmcu.boards import get_board
from torchmcu.device.profile_records import ProfileError, merge_ticks, parse_runner
from torchmcu.device.run import EXIT_TIMEOUT, emulator_for, exit_message, qemu_command

PLUGIN_SOURCES = ("icount.c", "plugin_api.h")
DEFAULT_REGIONS: dict[str, tuple[str, str]] = {"inference": ("tm_bench_begin", "tm_bench_end")}
_LINE = re.compile(r"^icount (region|arena|error|summary|total) (.*)$")


class IcountError(RuntimeError):
    """The plugin could not be built, a marker is missing, or the counted run failed."""


class ArenaBytes(TypedDict):
    loaded: int  # bytes loaded inside the watched range, every access counted
    stored: int
    touched: int  # distinct bytes of the range loaded or stored


class Counts(TypedDict):
    total: int  # instructions executed from reset to exit
    regions: dict[str, list[int]]  # region name -> instructions per occurrence, in order
    arena: dict[str, list[ArenaBytes]]  # with arena=: region name -> per occurrence
    exit_code: int
    console: str  # the firmware's semihosting output
    command: list[str]


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def plugin_source_dir() -> Path:
    return _repo_root() / "tools" / "qemu_icount"


def plugin_path(build_dir: str | os.PathLike[str] | None = None) -> Path:
    """The plugin .so, compiled with the host gcc on first use and cached under build/.

    The file name carries a hash of the sources, so an edited plugin is rebuilt and
    concurrent test processes never see a half-written library.
    """
    src = plugin_source_dir()
    missing = [n for n in PLUGIN_SOURCES if not (src / n).is_file()]
    if missing:
        raise IcountError(f"plugin sources missing in {src}: {', '.join(missing)}")
    digest = hashlib.sha256(b"".join((src / n).read_bytes() for n in PLUGIN_SOURCES)).hexdigest()
    out_dir = Path(build_dir) if build_dir is not None else _repo_root() / "build" / "qemu_icount"
    lib = out_dir / f"libicount-{digest[:12]}.so"
    if lib.is_file():
        return lib
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise IcountError("no host C compiler (gcc) on PATH to build the QEMU plugin")
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".libicount-", suffix=".so", dir=out_dir)
    os.close(fd)
    cmd = [
        cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        "-fvisibility=hidden", "-o", tmp, str(src / "icount.c"),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise IcountError(f"building the QEMU plugin failed:\n{proc.stdout}{proc.stderr}")
    os.replace(tmp, lib)
    return lib


def nm_symbols(elf: str | os.PathLike[str], kinds: str | None = None) -> dict[str, int]:
    """Symbol addresses of an ELF (arm-none-eabi-nm), first definition of a name kept;
    kinds: the nm type letters to keep (None: every defined symbol)."""
    nm = shutil.which("arm-none-eabi-nm")
    if nm is None:
        raise IcountError("arm-none-eabi-nm is not on PATH (scripts/setup.sh installs it)")
    proc = subprocess.run([nm, str(elf)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise IcountError(f"arm-none-eabi-nm {elf} failed: {proc.stderr.strip()}")
    symbols: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and (kinds is None or parts[1] in kinds):
            symbols.setdefault(parts[2], int(parts[0], 16))
    return symbols


def symbol_addresses(elf: str | os.PathLike[str]) -> dict[str, int]:
    """Function and object symbols of an ELF (arm-none-eabi-nm), Thumb bit included."""
    return nm_symbols(elf, "TtWw")


def region_args(
    elf: str | os.PathLike[str], regions: Mapping[str, tuple[str | int, str | int]]
) -> list[str]:
    """Plugin arguments `region=NAME:BEGIN:END`, markers given by symbol name or address."""
    symbols: dict[str, int] | None = None
    args = []
    for name, markers in regions.items():
        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,47}", name):
            raise IcountError(f"region name {name!r}: use 1-47 letters, digits, '_', '.', '-'")
        addresses = []
        for marker in markers:
            if isinstance(marker, int):
                addresses.append(marker)
                continue
            if symbols is None:
                symbols = symbol_addresses(elf)
            if marker not in symbols:
                raise IcountError(
                    f"region {name}: marker function {marker!r} is not a symbol of {elf} "
                    "(a firmware built before the markers existed? rebuild it)"
                )
            addresses.append(symbols[marker])
        begin, end = addresses
        args.append(f"region={name}:{begin & ~1:#x}:{end & ~1:#x}")
    return args


def parse_log(
    text: str, names: list[str], arena: dict[str, list[ArenaBytes]] | None = None
) -> tuple[int, dict[str, list[int]]]:
    """The plugin's log lines -> (total, counts per region); plugin-reported problems raise.
    arena: filled with the per-occurrence arena bytes when the plugin watched a range."""
    total: int | None = None
    counts: dict[str, list[int]] = {n: [] for n in names}
    summaries: dict[str, int] = {}
    errors = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        kind, rest = m.groups()
        fields = rest.split()
        if kind == "total":
            total = int(fields[0])
        elif kind == "region":
            name, occurrence, value = fields[0], int(fields[1]), int(fields[2])
            if occurrence != len(counts[name]):
                raise IcountError(f"region {name}: occurrence {occurrence} out of order")
            counts[name].append(value)
        elif kind == "arena":
            name, occurrence = fields[0], int(fields[1])
            kv = {k: int(v) for k, v in (f.split("=", 1) for f in fields[2:])}
            if arena is not None:
                got = arena.setdefault(name, [])
                if occurrence != len(got):
                    raise IcountError(f"region {name}: arena occurrence {occurrence} out of order")
                got.append(
                    ArenaBytes(loaded=kv["loaded"], stored=kv["stored"], touched=kv["touched"])
                )
        elif kind == "summary":
            summaries[fields[0]] = int(fields[1].split("=")[1])
        else:
            errors.append(rest)
    if errors:
        raise IcountError("unbalanced markers: " + "; ".join(errors))
    if total is None:
        raise IcountError("the plugin printed no total (QEMU did not exit normally?)")
    for name in names:
        if summaries.get(name) != len(counts[name]):
            raise IcountError(f"region {name}: summary and region lines disagree")
    return total, counts


def count_instructions(
    elf: str | os.PathLike[str],
    board: str,
    regions: Mapping[str, tuple[str | int, str | int]] | None = None,
    *,
    timeout: float = 120.0,
    check: bool = True,
    arena: tuple[int, int] | None = None,
) -> Counts:
    """Run `elf` on QEMU for `board` with the counting plugin; return the counts.

    regions: name -> (begin marker, end marker), each a symbol name or an address;
    default: the runner's inference markers. check: raise IcountError unless the firmware
    exited with 0 (counts of a failed run are rarely meaningful). arena: an address range
    [start, end) whose loaded, stored and touched bytes each region occurrence also reports
    (Counts["arena"]); the memory callbacks slow QEMU down, so only when asked.
    """
    elf_path = Path(elf).resolve()
    if not elf_path.is_file():
        raise IcountError(f"{elf_path} does not exist")
    regions = dict(DEFAULT_REGIONS if regions is None else regions)
    if emulator_for(board, prefer="qemu") != "qemu":
        raise IcountError(f"{board} does not run on QEMU")
    machine = get_board(board).config["run"]["qemu"]["machine"]
    plugin_args = [str(plugin_path()), *region_args(elf_path, regions)]
    if arena is not None:
        plugin_args.append(f"arena={arena[0]:#x}:{arena[1]:#x}")
    plugin = ",".join(plugin_args)
    with tempfile.TemporaryDirectory(prefix="torchmcu-icount-") as tmp:
        console_file, log_file = Path(tmp) / "console.txt", Path(tmp) / "icount.log"
        cmd = qemu_command(elf_path, machine, console_file, Path(tmp) / "uart0.txt")
        cmd += ["-plugin", plugin, "-d", "plugin", "-D", str(log_file)]
        try:
            proc = subprocess.run(
                cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False
            )
            code = proc.returncode
            emulator_output = (proc.stdout + proc.stderr).decode(errors="replace")
        except subprocess.TimeoutExpired:
            code, emulator_output = EXIT_TIMEOUT, ""
        console = console_file.read_text(errors="replace") if console_file.is_file() else ""
        log = log_file.read_text(errors="replace") if log_file.is_file() else ""
    if check and code != 0:
        detail = "\n".join(console.strip().splitlines()[-10:] + [emulator_output.strip()])
        raise IcountError(f"firmware exit {code}: {exit_message(code, timeout)}\n{detail}".strip())
    arena_bytes: dict[str, list[ArenaBytes]] = {}
    try:
        total, counts = parse_log(log, list(regions), arena_bytes)
    except IcountError as e:
        raise IcountError(f"{e}\n{emulator_output.strip()}".strip()) from None
    return Counts(
        total=total,
        regions=counts,
        arena=arena_bytes,
        exit_code=code,
        console=console,
        command=cmd,
    )


# --- per-kernel profile (firmware built with profile=True) -----------------------------------

PROFILE_MARKER = "tm_profile_instruction"


class KernelCount(TypedDict):
    instruction: int  # index of the kernel call in the method's instruction list
    op: str  # operator name and overload, e.g. "cortex_m::quantized_conv2d.out"
    instructions: int  # from this call's mark to the next: checks, the kernel, following frees


class Profile(TypedDict):
    kernels: list[list[KernelCount]]  # per inference, one entry per kernel call, in order
    inference: list[int]  # whole inference per run between the runner markers (marks included)
    executor: list[int]  # inference - sum of its kernels: executor entry/exit + the bench markers
    overhead: list[int]  # per inference: one profile mark's own cost (an empty mark pair)
    total: int
    exit_code: int
    console: str
    command: list[str]


def kernel_calls(
    pte: str | os.PathLike[str] | bytes, method: str | None = None
) -> list[tuple[int, str]]:
    """(instruction index, "op.overload") of every kernel call of a method, in execution order
    (a DelegateCall as "delegate:<backend id>", as the profiled runner prints it).

    method None: the first execution plan (what the runner runs).
    """
    from torchmcu.pte import reader
    from torchmcu.pte.program import DelegateCall, KernelCall

    program = reader.parse(pte) if isinstance(pte, bytes) else reader.load(pte)
    plans = program.execution_plan
    if not plans:
        raise IcountError("the program has no execution plan")
    plan = plans[0] if method is None else next((p for p in plans if p.name == method), None)
    if plan is None:
        raise IcountError(
            f"no method {method!r} in the program ({', '.join(p.name for p in plans)})"
        )
    if len(plan.chains) != 1:
        raise IcountError(f"method {plan.name}: {len(plan.chains)} chains, the runtime runs one")
    calls = []
    for index, ins in enumerate(plan.chains[0].instructions):
        if isinstance(ins, KernelCall):
            op = plan.operators[ins.op_index]
            calls.append((index, f"{op.name}.{op.overload}" if op.overload else op.name))
        elif isinstance(ins, DelegateCall):  # marked too; the runner names it by backend id
            calls.append((index, f"delegate:{plan.delegates[ins.delegate_index].id}"))
    return calls


def profile_instructions(
    elf: str | os.PathLike[str],
    board: str,
    pte: str | os.PathLike[str] | bytes,
    *,
    method: str | None = None,
    timeout: float = 120.0,
    check: bool = True,
) -> Profile:
    """Instructions of each kernel call of an image built with device.build(..., profile=True).

    The executor calls tm_profile_instruction before each kernel instruction and once after the
    last; a tick region on it makes every kernel call one occurrence (K per inference), merged
    with the runner's own records in order (torchmcu.device.profile_records.merge_ticks).
    `pte` is the embedded program: the runner's records must name its kernel calls. Each count
    includes one mark (Profile["overhead"], measured by the runner as an empty mark pair): the
    counts of a profiled image exceed an unprofiled image's by that overhead. For the arena bytes and the
    FVP's cycles, see torchmcu.device.profile.profile_run.
    """
    if PROFILE_MARKER not in symbol_addresses(elf):
        raise IcountError(
            f"{elf} has no {PROFILE_MARKER}: build it with device.build(..., profile=True) "
            "(CMake -DTORCHMCU_PROFILE=ON)"
        )
    calls = kernel_calls(pte, method)
    regions = {**DEFAULT_REGIONS, "kernel": (PROFILE_MARKER, PROFILE_MARKER)}
    counts = count_instructions(elf, board, regions, timeout=timeout, check=check)
    inference = counts["regions"]["inference"]
    try:
        runs = parse_runner(counts["console"])
        merge_ticks(runs, counts["regions"]["kernel"], None, inference)
    except ProfileError as e:
        raise IcountError(f"{e}: is {elf} built with this program?") from None
    kernels: list[list[KernelCount]] = []
    for run in runs:
        got = [(op["instruction"], op["op"]) for op in run["operators"]]
        if got != calls:
            diff = next(i for i, (a, b) in enumerate(zip([*got, None], [*calls, None])) if a != b)
            raise IcountError(
                f"the runner profiled {len(got)} calls, the program has {len(calls)} kernel calls "
                f"(they differ from call {diff} on): is {elf} built with this program?"
            )
        kernels.append(
            [
                KernelCount(
                    instruction=op["instruction"], op=op["op"], instructions=op["count"] or 0
                )
                for op in run["operators"]
            ]
        )
    executor = [
        whole - sum(c["instructions"] for c in run) for whole, run in zip(inference, kernels)
    ]
    return Profile(
        kernels=kernels,
        inference=inference,
        executor=executor,
        overhead=[run["overhead"] or 0 for run in runs],
        total=counts["total"],
        exit_code=counts["exit_code"],
        console=counts["console"],
        command=counts["command"],
    )
