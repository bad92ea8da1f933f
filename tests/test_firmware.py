"""Firmware end to end: export -> cross build for a board -> QEMU -> outputs bit-exact with the
host runtime on the same inputs; plus the failure classes (fault, mismatch, arena too big) and
the Cortex-M85 image, which cannot run here and is checked as an ELF.

One build directory per board serves the whole session: the runtime and kernel libraries are
compiled once and every further program is a relink.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torchmcu
from torchmcu import device, native
from torchmcu.device.run import EXIT_FAULT, EXIT_OUTPUT_MISMATCH

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

MODELS = ["mlp", "small_cnn", "ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder"]
RUNNABLE_BOARDS = ["qemu-an547", "corstone-300"]


@pytest.fixture(scope="session")
def build_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("firmware")


@pytest.fixture(scope="session")
def exported(build_root: Path):
    """Export each example model once per session: name -> (pte bytes, program_info)."""
    from torchmcu.examples import models

    cache: dict[str, tuple[bytes, dict]] = {}

    def get(name: str) -> tuple[bytes, dict]:
        if name not in cache:
            model, example = models.build(name)
            exp = torchmcu.export(model, example, calibration=models.calibration(name, 8, seed=1))
            cache[name] = (exp.pte_bytes, native.program_info(exp.pte_bytes))
        return cache[name]

    return get


def _samples(name: str, n: int) -> list[list[np.ndarray]]:
    from torchmcu.examples import models

    return [[x.numpy() for x in s] for s in models.calibration(name, n, seed=77)]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.slow
@pytest.mark.parametrize("board", RUNNABLE_BOARDS)
@pytest.mark.parametrize("name", MODELS)
def test_device_outputs_bit_exact_with_host(
    name: str, board: str, exported, build_root: Path
) -> None:
    pte, info = exported(name)
    samples = _samples(name, 2)
    outs, result = device.run_samples(pte, board, samples, build_root / board, timeout=120)
    assert f"TM_BEGIN board={board}" in result.console
    assert "TM_END status=OK samples=2" in result.console
    for sample, on_device in zip(samples, outs):
        host = torchmcu.run_on_host(pte, sample)
        assert len(on_device) == len(host) == len(info["outputs"])
        for d, h in zip(on_device, host):
            assert _same_bits(d, h), (
                f"{name} on {board}: device output differs from the host runtime"
            )
    # The image reserves exactly the planned arena, and the device's metadata fits the host bound.
    m = re.search(r"TM_MEMORY meta=(\d+)/(\d+) arena=(\d+)/(\d+)", result.console)
    assert m and int(m[3]) == int(m[4]) == info["arena_bytes"]
    assert int(m[1]) <= int(m[2])


def test_default_input_matches_host_replica(exported, build_root: Path) -> None:
    pte, info = exported("mlp")
    pte_path = build_root / "mlp.pte"
    pte_path.write_bytes(pte)
    image = device.build(pte_path, "qemu-an547", build_root / "qemu-an547")
    result = device.run(image.elf, "qemu-an547", timeout=60).check()
    x = device.default_inputs(info)
    # The replica's floats are k / 2^23 - 1: check the formula independently on a few values.
    assert x[0].dtype == np.float32 and np.all(x[0] >= -1) and np.all(x[0] < 1)
    assert np.all(
        (x[0].astype(np.float64) + 1) * 2**23 == np.round((x[0].astype(np.float64) + 1) * 2**23)
    )
    assert _same_bits(result.outputs(info)[0], torchmcu.run_on_host(pte, x)[0])


def test_expected_outputs_checked_on_device(exported, build_root: Path) -> None:
    pte, info = exported("small_cnn")
    samples = _samples("small_cnn", 2)
    expected = [torchmcu.run_on_host(pte, s) for s in samples]
    device.run_samples(pte, "qemu-an547", samples, build_root / "qemu-an547", expected=expected)
    wrong = [list(e) for e in expected]
    flipped = wrong[1][0].copy()
    flipped.view(np.uint8).reshape(-1)[0] ^= 1  # one bit of sample 1's output
    wrong[1][0] = flipped
    blob = device.write_io_blob(info, samples, wrong)
    image = device.build(
        build_root / "qemu-an547" / "program.pte",
        "qemu-an547",
        build_root / "qemu-an547",
        inputs=blob,
    )
    result = device.run(image.elf, "qemu-an547", timeout=60)
    assert result.exit_code == EXIT_OUTPUT_MISMATCH, result.console
    assert "TM_MISMATCH sample=1 output=0" in result.console
    assert "TM_MISMATCH sample=0" not in result.console
    with pytest.raises(device.FirmwareRunError, match="outputs differ"):
        result.check()


def test_fault_reports_registers_and_exits_nonzero(exported, build_root: Path) -> None:
    pte, _ = exported("mlp")
    pte_path = build_root / "fault.pte"
    pte_path.write_bytes(pte)
    image = device.build(
        pte_path, "qemu-an547", build_root / "fault", defines={"TORCHMCU_RUNNER_FAULT_TEST": "ON"}
    )
    result = device.run(image.elf, "qemu-an547", timeout=30)
    assert result.exit_code == EXIT_FAULT, result.console
    # A precise data bus error on a load from the unmapped address: CFSR.BFARVALID (bit 15) and
    # CFSR.PRECISERR (bit 9) set, BFAR holding the address (Armv8-M ARM, BusFault status).
    line = next(ln for ln in result.console.splitlines() if ln.startswith("TM_FAULT "))
    regs = dict(kv.split("=") for kv in line.split()[2:] if "=" in kv)
    assert line.split()[1] == "BusFault"
    assert int(regs["CFSR"], 16) & (1 << 15) and int(regs["CFSR"], 16) & (1 << 9)
    assert int(regs["BFAR"], 16) == 0x0A000000
    assert "TM_FAULT_FRAME" in result.console and "PC=0x" in result.console


def _big_arena_pte() -> bytes:
    """A program whose planned arena exceeds 4 MiB: two 32-channel 256x256 int8 activations live
    at once. Lowered without the board check of torchmcu.export, which would refuse it."""
    import torch
    from torchmcu.lower import lower_to_program
    from torchmcu.pte.writer import serialize
    from torchmcu.quantize import quantize

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3, padding=1)
    ).eval()
    example = (torch.rand(1, 3, 256, 256),)
    quantized = quantize(model, example, [example])
    program, _ = lower_to_program(quantized, example)
    return serialize(program)


def test_arena_that_does_not_fit_fails_with_sizes(build_root: Path) -> None:
    import torch
    from torchmcu.boards import BoardError

    pte = _big_arena_pte()
    arena = native.program_info(pte)["arena_bytes"]
    assert arena > 4 * 1024 * 1024
    # Export time: torchmcu.export refuses it for the board, naming both sizes.
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3, padding=1)
    )
    x = (torch.rand(1, 3, 256, 256),)
    with pytest.raises(
        BoardError, match=r"arena needs [\d,]+ bytes but qemu-an547 has 4,194,304 bytes"
    ):
        torchmcu.export(model.eval(), x, calibration=[x], board="qemu-an547")
    # Build time: the firmware configure step refuses it too, with the sizes.
    path = build_root / "big.pte"
    path.write_bytes(pte)
    with pytest.raises(device.FirmwareBuildError) as err:
        device.build(path, "corstone-300", build_root / "big")
    assert f"{arena:,}" in str(err.value) and "4,194,304" in str(err.value)


def _readelf(*args: str) -> str:
    return subprocess.run(
        ["arm-none-eabi-readelf", *args], capture_output=True, text=True, check=True
    ).stdout


def test_corstone_320_links_for_cortex_m85(exported, build_root: Path) -> None:
    pte, info = exported("ds_cnn")
    pte_path = build_root / "ds_cnn.pte"
    pte_path.write_bytes(pte)
    image = device.build(pte_path, "corstone-320", build_root / "corstone-320")
    for path in (image.elf, image.bin, image.hex, image.program_bin):
        assert path.stat().st_size > 0
    attrs = _readelf("-A", str(image.elf))
    assert re.search(r"Tag_CPU_arch: v8\.1-M\.mainline", attrs)
    assert re.search(r"Tag_CPU_arch_profile: Microcontroller", attrs)
    assert re.search(r"Tag_MVE_arch: MVE Integer and FP", attrs)
    assert re.search(r"Tag_FP_arch: FPv5/FP-D16 for ARMv8", attrs)
    assert "Tag_ABI_VFP_args: VFP registers" in attrs  # hard-float ABI
    header = _readelf("-h", str(image.elf))
    assert "Machine:                           ARM" in header
    assert "Entry point address:" in header
    sections = {}
    for m in re.finditer(
        r"\]\s+(\S+)\s+\S+\s+([0-9a-f]{8}) [0-9a-f]{6} ([0-9a-f]{6})",
        _readelf("-S", "-W", str(image.elf)),
    ):
        sections[m[1]] = (int(m[2], 16), int(m[3], 16))
    assert sections[".vectors"][0] == 0x0
    addr, size = sections[".tm_program"]
    assert addr % 16 == 0 and addr >= 0x60000000 and size >= len(pte)
    assert sections[".tm_arena"][1] == info["arena_bytes"]
    assert 0x21000000 <= sections[".tm_arena"][0] < 0x21400000
    # The embedded program is byte-identical to the .pte.
    blob = image.program_bin.read_bytes()
    assert blob[: len(pte)] == pte
    # The runner cannot run here (QEMU has no Cortex-M85); the run driver says so.
    if shutil.which("FVP_Corstone_SSE-320") is None:
        with pytest.raises(device.FirmwareRunError, match="FVP_Corstone_SSE-320 is not on PATH"):
            device.run(image.elf, "corstone-320")


def test_cli_build_and_run(exported, build_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from torchmcu.cli import main

    pte, _info = exported("mlp")
    pte_path = build_root / "cli.pte"
    pte_path.write_bytes(pte)
    x = np.stack([s[0][0] for s in _samples("mlp", 3)])  # 3 samples of shape (64,) -> (1, 64) each
    npz = build_root / "inputs.npz"
    np.savez(npz, x=x[:, None, :])
    build_dir = build_root / "cli-build"
    assert (
        main(
            [
                "build",
                str(pte_path),
                "--board",
                "corstone-300",
                "--build-dir",
                str(build_dir),
                "--inputs",
                str(npz),
            ]
        )
        == 0
    )
    assert "firmware.elf" in capsys.readouterr().out
    assert main(["run", str(build_dir / "firmware.elf"), "--board", "corstone-300"]) == 0
    out = capsys.readouterr().out
    assert "TM_END status=OK samples=3" in out
    host = torchmcu.run_on_host(pte, [x[2][None, :]])[0]
    shown = np.array2string(host.reshape(-1)[:16], precision=4, separator=", ")
    assert (
        main(
            [
                "run",
                str(pte_path),
                "--board",
                "qemu-an547",
                "--build-dir",
                str(build_dir),
                "--inputs",
                str(npz),
            ]
        )
        == 0
    )
    assert f"sample 2 output 0: shape [1, 10] float32 {shown}" in capsys.readouterr().out
    assert main(["run", str(build_dir / "firmware.elf"), "--board", "corstone-320"]) == 2
    assert "FVP_Corstone_SSE-320 is not on PATH" in capsys.readouterr().err


def test_uart_console_image(exported, build_root: Path) -> None:
    """TORCHMCU_OUTPUT=uart: output through the CMSDK UART0 (no semihosting), status line at the end."""
    pte, info = exported("mlp")
    pte_path = build_root / "uart.pte"
    pte_path.write_bytes(pte)
    image = device.build(
        pte_path, "qemu-an547", build_root / "uart", defines={"TORCHMCU_OUTPUT": "uart"}
    )
    result = device.run(image.elf, "qemu-an547", timeout=3)  # the image sleeps after TM_EXIT
    assert result.exit_code == 0, result.console + result.emulator_output
    assert "TM_EXIT 0" in result.uart
    expected = torchmcu.run_on_host(pte, device.default_inputs(info))[0]
    assert _same_bits(result.outputs(info)[0], expected)


def test_image_without_console_prints_nothing_and_exits_with_the_check(
    exported, build_root: Path
) -> None:
    """TORCHMCU_CONSOLE=OFF (the size-measured runner): no output at all, and the exit code
    still says whether the outputs matched the expected ones embedded with the inputs."""
    pte, info = exported("mlp")
    pte_path = build_root / "quiet.pte"
    pte_path.write_bytes(pte)
    samples = _samples("mlp", 2)
    expected = [list(torchmcu.run_on_host(pte, s)) for s in samples]
    wrong = [list(e) for e in expected]
    flipped = wrong[0][0].copy()
    flipped.view(np.uint8).reshape(-1)[0] ^= 1
    wrong[0][0] = flipped
    for outputs, code in ((expected, 0), (wrong, EXIT_OUTPUT_MISMATCH)):
        image = device.build(
            pte_path,
            "qemu-an547",
            build_root / "quiet",
            inputs=device.write_io_blob(info, samples, outputs),
            defines={"TORCHMCU_CONSOLE": "OFF"},
        )
        result = device.run(image.elf, "qemu-an547", timeout=30)
        assert result.exit_code == code, result.console + result.emulator_output
        assert result.console == "" and result.uart == ""
