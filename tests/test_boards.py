"""Board descriptions: one file per board read by both CMake and Python, consistent with itself."""

from __future__ import annotations

import itertools
import json

import pytest
from torchmcu.boards import BoardError, available_boards, boards_dir, get_board

BOARDS = ["corstone-300", "corstone-320", "qemu-an547"]


def test_the_three_boards_exist() -> None:
    assert set(BOARDS) <= set(available_boards())


@pytest.mark.parametrize("name", BOARDS)
def test_board_regions_are_consistent(name: str) -> None:
    board = get_board(name)
    mem = board.config["memory"]
    regions = board.regions
    for role in ("code_region", "data_region", "arena_region", "program_region"):
        assert mem[role] in regions, f"{name}: {role} {mem[role]!r} is not a declared region"
    # The limits the exporter checks equal the regions the linker places into.
    assert board.arena_bytes_max == regions[mem["arena_region"]][1]
    assert board.program_bytes_max == regions[mem["program_region"]][1]
    # Regions do not overlap.
    spans = sorted(regions.values())
    for (a0, alen), (b0, _) in itertools.pairwise(spans):
        assert a0 + alen <= b0, f"{name}: regions overlap at {b0:#x}"
    # The vector table must sit where the core boots (QEMU's AN547 boots from ITCM at 0).
    assert regions[mem["code_region"]][0] == 0
    assert int(board.config["uart"]["base"], 0) == 0x49303000  # CMSDK UART0 of SSE-300/320 (NS)
    fault = int(board.config["fault_test_address"], 0)
    assert not any(o <= fault < o + n for o, n in regions.values()), (
        "fault address must be unmapped"
    )


def test_cpu_flags() -> None:
    assert "-mcpu=cortex-m55" in get_board("qemu-an547").cpu_flags
    assert "-mcpu=cortex-m55" in get_board("corstone-300").cpu_flags
    m85 = get_board("corstone-320").cpu_flags
    assert any(f.startswith("-march=armv8.1-m.main") and "mve.fp" in f for f in m85)
    for name in BOARDS:
        assert "-mfloat-abi=hard" in get_board(name).cpu_flags


def test_vela_options_follow_the_npu() -> None:
    c300 = get_board("corstone-300")
    assert c300.vela_options() == {
        "accelerator_config": "ethos-u55-128",
        "config": "ethos_u/vela.ini",
        "system_config": "Ethos_U55_High_End_Embedded",
        "memory_mode": "Shared_Sram",
    }
    assert c300.vela_options("ethos-u65-256")["system_config"] == "Ethos_U65_High_End"
    assert get_board("corstone-320").vela_options()["system_config"].startswith("Ethos_U85")
    with pytest.raises(BoardError, match="not 'ethos-u85-256'"):
        c300.vela_options("ethos-u85-256")
    with pytest.raises(BoardError, match="has no NPU"):
        get_board("qemu-an547").vela_options()


def test_vela_names_exist_in_vela_ini() -> None:
    ethosu = pytest.importorskip("ethosu.vela")
    from pathlib import Path

    ini = (Path(ethosu.__file__).parent.parent / "config_files" / "Arm" / "vela.ini").read_text()
    for name in ("corstone-300", "corstone-320"):
        npu = get_board(name).config["npu"]
        for accel in npu["choices"]:
            opts = get_board(name).vela_options(accel)
            assert f"[System_Config.{opts['system_config']}]" in ini
            assert f"[Memory_Mode.{opts['memory_mode']}]" in ini


def test_board_files_are_plain_json() -> None:
    for name in BOARDS:
        json.loads((boards_dir() / name / "board.json").read_text())


def test_unknown_board_and_misfit_messages() -> None:
    with pytest.raises(BoardError, match="unknown board 'nope'"):
        get_board("nope")
    with pytest.raises(BoardError, match=r"needs 5,000,000 bytes .* 4,194,304 bytes of sram2"):
        get_board("qemu-an547").check_fits(arena_bytes=5_000_000, program_bytes=10)
