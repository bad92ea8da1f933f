"""The runner's own per-operator profile on every MLPerf Tiny model, and the FVP/PMU build.

Each model is exported, built once as a profiled runner (one CMake build directory, so only
the program and link change between models) and run once on QEMU with the instruction-count
plugin watching the arena. What the profile cannot make up is checked against things it
does not produce:
  - the records name exactly the kernel calls of the .pte, read here with the reader;
  - the per-operator counts sum to the whole-inference count measured around the method call
    (the plugin's region between the runner's bench markers), short of it by the executor's
    entry/exit and the last mark only: the same few instructions for every model, at most one
    mark's overhead (which the runner measures, as an empty mark pair) plus a small constant;
  - the planned arena bytes the runner prints equal the union of the byte ranges of each
    call's planned tensors, computed here from the .pte's allocations;
  - the arena bytes the plugin measured are > 0, cover at least the out tensor (every output
    byte must be stored) and stay within the planned bytes (no kernel touches arena memory
    outside its arguments).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torchmcu
from torchmcu import device
from torchmcu.device.profile import profile_run, read_json
from torchmcu.device.profile_records import ProfileError, parse_runner
from torchmcu.examples import models
from torchmcu.pte import reader
from torchmcu.pte.program import KernelCall, Tensor, TensorList

pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs("arm-gcc", "newlib", "qemu", "host-gcc"),
]

BOARD = "qemu-an547"
MAX_MARK = 24  # instructions of one mark: index move, call, counter read, two stores, count
EXECUTOR_ENTRY_EXIT = 64  # executor prologue/epilogue and the bench marker calls, instructions


def _export(name: str, out: Path) -> Path:
    model, example = models.build(name)
    calibration = models.calibration(name, 2)
    exported = torchmcu.export(model, example, calibration=calibration, board=BOARD)
    return Path(exported.save(out / name))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("profile-runner")


@pytest.fixture(scope="module")
def profiles(root: Path) -> dict[str, tuple[Path, dict]]:
    out: dict[str, tuple[Path, dict]] = {}
    started = time.monotonic()
    for name in models.MLPERF_TINY:
        pte = _export(name, root)
        image = device.build(pte, BOARD, root / "build", profile=True)
        profile, _ = profile_run(image.elf, BOARD, timeout=120)
        out[name] = (pte, dict(profile))
    print(f"export, build and profile of {len(out)} models: {time.monotonic() - started:.1f} s")
    return out


def _planned_union(plan, args: list[int]) -> int:
    """Bytes of the union of the arena ranges of a call's planned tensors (lists expanded)."""
    ranges = []

    def visit(index: int) -> None:
        v = plan.values[index]
        if isinstance(v, TensorList):
            for item in v.items:
                visit(item)
        elif isinstance(v, Tensor) and v.allocation is not None and v.nbytes:
            ranges.append((v.allocation.offset, v.allocation.offset + v.nbytes))

    for a in args:
        visit(a)
    total, end = 0, -1
    for lo, hi in sorted(ranges):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def _calls(pte: Path) -> list[tuple[int, str, int, int]]:
    """(index, op.overload, planned arena bytes, out tensor bytes) of every kernel call."""
    plan = reader.load(pte).execution_plan[0]
    calls = []
    for index, ins in enumerate(plan.chains[0].instructions):
        if isinstance(ins, KernelCall):
            op = plan.operators[ins.op_index]
            name = f"{op.name}.{op.overload}" if op.overload else op.name
            out = plan.values[ins.args[-1]]
            calls.append((index, name, _planned_union(plan, list(ins.args)), out.nbytes))
    return calls


@pytest.mark.parametrize("name", models.MLPERF_TINY)
def test_records_name_the_programs_kernel_calls(profiles: dict, name: str) -> None:
    pte, profile = profiles[name]
    (run,) = profile["runs"]
    calls = _calls(pte)
    assert len(calls) > 3
    assert [(op["instruction"], op["op"]) for op in run["operators"]] == [c[:2] for c in calls]
    assert [op["arena_planned"] for op in run["operators"]] == [c[2] for c in calls]


@pytest.mark.parametrize("name", models.MLPERF_TINY)
def test_counts_sum_to_the_whole_inference(profiles: dict, name: str) -> None:
    _, profile = profiles[name]
    (run,) = profile["runs"]
    assert profile["unit"] == "instructions" and run["counter"] == "none"  # QEMU: no PMU
    overhead = run["overhead"]
    assert 0 < overhead <= MAX_MARK
    counts = [op["count"] for op in run["operators"]]
    assert all(c > overhead for c in counts)  # every call does work beyond its mark
    unattributed = run["inference"] - sum(counts)
    assert unattributed == run["unattributed"]
    # Short of the whole by the last mark and the executor's entry/exit only.
    assert overhead <= unattributed <= overhead + EXECUTOR_ENTRY_EXIT


@pytest.fixture(scope="module")
def plain_inference(profiles: dict, root: Path) -> dict[str, int]:
    """Whole-inference instructions of each model's image built without the profile."""
    from torchmcu.device.icount import count_instructions

    out = {}
    for name, (pte, _) in profiles.items():
        image = device.build(pte, BOARD, root / "build-plain", profile=False)
        (out[name],) = count_instructions(image.elf, BOARD)["regions"]["inference"]
    return out


@pytest.mark.parametrize("name", models.MLPERF_TINY)
def test_profile_minus_its_marks_is_the_plain_inference(
    profiles: dict, plain_inference: dict, name: str
) -> None:
    """What the profile costs is what it reports: the profiled whole inference is the plain
    image's plus one measured overhead per mark, give or take the executor's code generation
    around the call: at most one instruction per mark (11-31 in all, about one per mark, since
    the runtime features became compile-time switches). The counts without their marks fall
    short of the plain inference by the executor's entry/exit only (37)."""
    _, profile = profiles[name]
    (run,) = profile["runs"]
    k, mark = len(run["operators"]), run["overhead"]
    plain = plain_inference[name]
    assert abs(run["inference"] - (k + 1) * mark - plain) <= k + 1
    net = sum(op["count"] - mark for op in run["operators"])
    assert 0 < plain - net <= EXECUTOR_ENTRY_EXIT


def test_unattributed_part_is_the_same_for_every_model(profiles: dict) -> None:
    """It is the executor's entry/exit and one mark: nothing model-dependent leaks into it."""
    values = {name: p["runs"][0]["unattributed"] for name, (_, p) in profiles.items()}
    assert len(set(values.values())) == 1, values


@pytest.mark.parametrize("name", models.MLPERF_TINY)
def test_arena_bytes_measured_within_the_plan(profiles: dict, name: str) -> None:
    pte, profile = profiles[name]
    (run,) = profile["runs"]
    lo, hi = profile["arena"]
    assert hi - lo >= max(op["arena_planned"] for op in run["operators"])
    for op, (_, _, planned, out_bytes) in zip(run["operators"], _calls(pte), strict=True):
        where = f"{name} instruction {op['instruction']} {op['op']}"
        assert op["arena_touched"] > 0, where
        assert op["arena_touched"] <= planned, where
        assert op["arena_stored"] >= out_bytes, where  # every output byte is written
        assert op["arena_touched"] >= out_bytes, where
        assert op["arena_loaded"] + op["arena_stored"] >= op["arena_touched"], where


def test_parser_rejects_incomplete_or_foreign_records() -> None:
    good = (
        "TM_RUN 0 cycles=1000 instructions=0\n"
        "TM_PROFILE 0 counter=pmu_cycles overhead=7 marks=3 arena=0x21000000\n"
        "TM_PROF 0 0 cortex_m::quantize_per_tensor.out 100 64\n"
        "TM_PROF 0 2 cortex_m::quantized_linear.out 850 80\n"
    )
    (run,) = parse_runner(good)
    assert [op["count"] for op in run["operators"]] == [100, 850]
    assert run["inference"] == 1000 and run["unattributed"] == 50 and run["overhead"] == 7
    with pytest.raises(ProfileError, match="lacks 1"):
        parse_runner(good.rsplit("TM_PROF", 1)[0])
    with pytest.raises(ProfileError, match="unexpected"):
        parse_runner(good + "TM_PROF 0 3 x 1 1\n")
    with pytest.raises(ProfileError, match="TM_PROFILE_MAX_MARKS"):
        parse_runner(good.replace("marks=3", "marks=3 overflow=2"))


# --- the FVP / hardware path: the PMU cycle counter -----------------------------------------


@pytest.fixture(scope="module")
def corstone_image(profiles: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pte, _ = profiles["deep_autoencoder"]
    build = tmp_path_factory.mktemp("profile-corstone")
    return device.build(pte, "corstone-300", build / "build", profile=True).elf


def test_corstone_image_reads_the_pmu_cycle_counter(corstone_image: Path) -> None:
    """Compile test of the FVP/hardware path: the hook loads the PMU's CCNTR (0xE000307C:
    the PMU base 0xE0003000 from the literal pool, then a load at offset 0x7C)."""
    dump = subprocess.run(
        ["arm-none-eabi-objdump", "-d", "-m", "armv8.1-m.main",
         "--disassemble=tm_profile_instruction", str(corstone_image)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    body = dump.split("<tm_profile_instruction>:", 1)[1]
    assert re.search(r"\.word\s+0xe0003000", body), body
    assert re.search(r"ldr(\.w)?\s+r\d+, \[r\d+, #124\]", body), body
    assert (
        "tm_profile_put_run"
        in subprocess.run(
            ["arm-none-eabi-nm", str(corstone_image)], capture_output=True, text=True, check=True
        ).stdout
    )


def test_without_pmu_the_hook_reads_the_dwt_cycle_counter(tmp_path: Path) -> None:
    """TORCHMCU_PMU=OFF (cores without the Armv8.1-M PMU): the hook loads DWT CYCCNT
    (0xE0001004: the DWT base from the literal pool, then a load at offset 4)."""
    root = Path(__file__).resolve().parents[1]
    obj = tmp_path / "profile.o"
    subprocess.run(
        ["arm-none-eabi-gcc", "-mcpu=cortex-m55", "-mthumb", "-Os", "-std=c11", "-Wall",
         "-Wextra", "-Werror", "-DTORCHMCU_PROFILE=1",
         f"-I{root / 'firmware/runtime/include'}", f"-I{root / 'firmware/runtime/src'}",
         f"-I{root / 'cmsis/include'}", "-c", str(root / "firmware/runner/profile.c"),
         "-o", str(obj)],
        check=True, capture_output=True,
    )  # fmt: skip
    dump = subprocess.run(
        ["arm-none-eabi-objdump", "-d", "-m", "armv8.1-m.main",
         "--disassemble=tm_profile_instruction", str(obj)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert re.search(r"\.word\s+0xe0001000", dump), dump
    assert re.search(r"ldr(\.w)?\s+r\d+, \[r\d+, #4\]", dump), dump
    assert "0xe0003000" not in dump


def test_corstone_image_on_qemu_prints_records_without_counts(
    corstone_image: Path, profiles: dict
) -> None:
    """QEMU runs the corstone-300 image (same SSE-300 map) but its PMU does not count: the
    runner must say so (counter=none, counts "-") rather than print zeros."""
    result = device.run(corstone_image, "corstone-300", emulator="qemu").check()
    (run,) = result.profile  # run.py's parse of the runner's lines
    assert run["counter"] == "none" and run["overhead"] is None
    assert all(op["count"] is None for op in run["operators"])
    pte, _ = profiles["deep_autoencoder"]
    assert [op["instruction"] for op in run["operators"]] == [c[0] for c in _calls(pte)]


def test_corstone_image_on_fvp_counts_cycles(corstone_image: Path) -> None:
    from torchmcu.boards import get_board

    fvp = get_board("corstone-300").config["run"]["fvp"]["binary"]
    if shutil.which(fvp) is None:
        pytest.skip(f"the Arm FVP {fvp} is not on PATH (cannot be installed here)")
    profile, _ = profile_run(corstone_image, "corstone-300", emulator="fvp")
    (run,) = profile["runs"]
    assert profile["unit"] == "cycles" and run["counter"] == "pmu_cycles"
    counts = np.array([op["count"] for op in run["operators"]])
    assert (counts > run["overhead"]).all()
    assert 0 <= run["unattributed"] <= run["overhead"] + 4 * EXECUTOR_ENTRY_EXIT


def test_report_and_json_carry_the_runner_profile(profiles: dict, tmp_path: Path) -> None:
    from torchmcu import htmlreport
    from torchmcu.device.profile import read_json, write_json

    pte, profile = profiles["ds_cnn"]
    saved = read_json(write_json(profile, tmp_path / "profile.json"))
    assert saved == profile
    data = htmlreport.collect(reader.load(pte), pte.stat().st_size, {}, saved)
    (run,) = profile["runs"]
    assert [(r.instruction, r.instructions, r.arena_measured) for r in data.rows] == [
        (op["instruction"], op["count"], op["arena_touched"]) for op in run["operators"]
    ]
    assert data.inference == run["inference"] and data.mark == run["overhead"]
    assert data.overhead == run["unattributed"]
    page = htmlreport.render(data)
    assert "arena bytes touched (measured)" in page and 'id="time-chart"' in page


def test_cli_run_profile_table_json_and_report(
    profiles: dict, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`torchmcu run --profile` on the image the fixture built last (same build directory and
    program: nothing to rebuild) prints the table and writes the same profile; `torchmcu
    report --profile-json` renders it."""
    from torchmcu.cli import main

    name = models.MLPERF_TINY[-1]
    pte, profile = profiles[name]
    args = ["run", str(pte), "--board", BOARD, "--profile", "--build-dir", str(root / "build")]
    assert main(args) == 0
    out = capsys.readouterr().out
    saved = pte.with_suffix(".profile.json")
    assert read_json(saved)["runs"] == profile["runs"]  # counts are deterministic
    (run,) = profile["runs"]
    for op in run["operators"]:
        assert re.search(
            rf"^ *{op['instruction']} +{re.escape(op['op'])} +{op['count']:,} ", out, re.MULTILINE
        )
    assert f"unattributed {run['unattributed']};" in out
    html = root / "report.html"
    assert main(["report", str(pte), "--profile-json", str(saved), "-o", str(html)]) == 0
    page = html.read_text()
    assert "arena bytes touched (measured)" in page and f"{run['operators'][0]['count']:,}" in page


ARENA_BASE = 0x21000100  # tools/qemu_icount/selftest/arena.S


@pytest.mark.parametrize("words", [1, 100, 3000])
def test_plugin_arena_bytes_are_exact(tmp_path: Path, words: int) -> None:
    """The plugin's arena accounting on an assembly image with a known access pattern:
    `words` word stores, two loads of each, one store below and one past them."""
    from torchmcu.device.icount import count_instructions, plugin_source_dir

    elf = tmp_path / "arena.elf"
    subprocess.run(
        ["arm-none-eabi-gcc", "-mcpu=cortex-m55", "-mthumb", "-nostdlib", "-Wl,-Ttext=0",
         "-Wl,-e,reset", f"-DARENA_WORDS={words}", "-o", str(elf),
         str(plugin_source_dir() / "selftest" / "arena.S")],
        check=True, capture_output=True,
    )  # fmt: skip
    n = 4 * words
    cases = {
        (ARENA_BASE, ARENA_BASE + n): (2 * n, n, n),
        (ARENA_BASE + 2, ARENA_BASE + n): (2 * n - 4, n - 2, n - 2),  # first word straddles
        (ARENA_BASE - 4, ARENA_BASE + n + 4): (2 * n, n + 8, n + 8),  # both outer stores
        (ARENA_BASE + n + 4, ARENA_BASE + 2 * n + 8): (0, 0, 0),
    }
    for arena, (loaded, stored, touched) in cases.items():
        got = count_instructions(elf, BOARD, arena=arena, timeout=30)["arena"]["inference"]
        assert got == [{"loaded": loaded, "stored": stored, "touched": touched}], arena


def test_several_program_image_profiles_each_program(profiles: dict, root: Path) -> None:
    """An image running two programs in turn: the plugin's ticks are split per run by the
    runner's own records, so each program's profile equals its one-program image's."""
    names = ["deep_autoencoder", "ds_cnn"]
    ptes = [profiles[n][0] for n in names]
    image = device.build(ptes, BOARD, root / "build", profile=True)  # relink only
    profile, _ = profile_run(image.elf, BOARD, timeout=120)
    assert [r["program"] for r in profile["runs"]] == [0, 1]
    for run, name in zip(profile["runs"], names, strict=True):
        (alone,) = profiles[name][1]["runs"]
        assert run["operators"] == alone["operators"], name
        assert (run["overhead"], run["unattributed"]) == (alone["overhead"], alone["unattributed"])


def test_cli_build_profile(profiles: dict, root: Path) -> None:
    """`torchmcu build --profile` links the runner's profile; without it there is no hook."""
    from torchmcu.cli import main
    from torchmcu.device.icount import PROFILE_MARKER, symbol_addresses

    pte, _ = profiles[models.MLPERF_TINY[-1]]
    for flag, present in (["--profile"], True), ([], False):
        out = root / ("build" if present else "build-plain")  # the fixtures' directories
        assert main(["build", str(pte), "--board", BOARD, "--build-dir", str(out), *flag]) == 0
        symbols = symbol_addresses(out / "firmware.elf")
        assert (PROFILE_MARKER in symbols) is present
        assert ("tm_profile_put_run" in symbols) is present
