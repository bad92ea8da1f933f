"""Run a runner firmware image: QEMU (mps3-an547) for CPU-only Cortex-M55 images, or the
board's Arm FVP when it is on PATH. Output lines are parsed into numpy arrays so callers can
compare them bit for bit with torchmcu.run_on_host.

corstone-300 images run on QEMU's mps3-an547 machine: AN547 is the FPGA build of the same
SSE-300 subsystem, and our corstone-300 memory map (boards/corstone-300/board.json) uses
exactly its regions and UART, so a CPU-only image needs no change. Programs that use the
Ethos-U NPU need the FVP (QEMU 7.2 has no NPU model).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from torchmcu import doctor, progress
from torchmcu.boards import get_board
from torchmcu.device.io_blob import from_tensor_bytes
from torchmcu.device.profile_records import parse_runner

# Runner exit codes (firmware/runner/exit_codes.h, cmsis/include/tm_cmsis/faults.h).
EXIT_OK = 0
EXIT_LOAD_ERROR = 2
EXIT_MISSING_OPERATOR = 3
EXIT_KERNEL_ERROR = 4
EXIT_OUTPUT_MISMATCH = 5
EXIT_INPUT_ERROR = 6
EXIT_FAULT = 7
EXIT_TIMEOUT = -1  # ours: the emulator was stopped

EXIT_MESSAGES = {
    EXIT_OK: "success",
    EXIT_LOAD_ERROR: "the program was rejected at load (invalid .pte, or buffers too small)",
    EXIT_MISSING_OPERATOR: "an operator of the program has no kernel in this firmware",
    EXIT_KERNEL_ERROR: "a kernel failed while running",
    EXIT_OUTPUT_MISMATCH: "outputs differ from the expected outputs embedded in the image",
    EXIT_INPUT_ERROR: "the embedded inputs do not match the method",
    EXIT_FAULT: "the CPU took a fault (see the TM_FAULT lines for the fault registers)",
}


class FirmwareRunError(RuntimeError):
    """The firmware could not be run here (no emulator for the board, or the emulator failed)."""


RawOutputs = dict[
    int, dict[int, tuple[int, bytes]]
]  # [sample][index] = (scalar_type, memory bytes)


@dataclass
class ProgramRun:
    """One program of a several-program image: its lines between TM_PROGRAM and TM_PROGRAM_END."""

    index: int
    name: str
    raw_outputs: RawOutputs = field(default_factory=dict)
    runs: list[dict[str, int]] = field(default_factory=list)
    status: str = ""  # the TM_PROGRAM_END status (OK, OUTPUT_MISMATCH, FAILED); "" if none printed
    exit_code: int | None = None  # the program's own exit code (0 when OK) once it ended
    errors: list[str] = field(default_factory=list)  # its TM_ERROR / TM_MISMATCH lines


@dataclass
class RunResult:
    exit_code: int
    message: str
    console: str  # the firmware's console (semihosting output)
    emulator_output: str  # the emulator's own stdout and stderr
    uart: str
    command: list[str]
    # outputs[sample][index] = (scalar_type, memory bytes)
    raw_outputs: RawOutputs = field(default_factory=dict)
    runs: list[dict[str, int]] = field(default_factory=list)
    # An image holding several programs: one entry per TM_PROGRAM section, in run order
    # (raw_outputs and runs then stay empty). Empty for a one-program image.
    programs: list[ProgramRun] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    @property
    def profile(self) -> list[dict[str, Any]]:
        """Per-operator records of a profiled image (torchmcu build --profile), one per run, in
        order (torchmcu.device.profile_records.parse_runner): counts from the runner's cycle
        counter, None on QEMU, where torchmcu.device.profile.profile_run takes them from the
        plugin."""
        return [dict(r) for r in parse_runner(self.console)]

    @property
    def generated(self) -> dict[int, list[dict[str, int]]]:
        """The tokens a generation image (build(generate=...), firmware/runner/generate.h)
        produced: sample -> one {"step", "token", "cycles", "instructions"} per TM_TOKEN line."""
        return parse_tokens(self.console)

    def program(self, key: int | str) -> ProgramRun:
        """The section of one program of a several-program image, by index or name."""
        for p in self.programs:
            if p.index == key or p.name == key:
                return p
        shown = ", ".join(f"{p.index}:{p.name}" for p in self.programs) or "none"
        raise FirmwareRunError(f"the firmware printed no program {key!r} (programs: {shown})")

    def outputs(
        self, info: dict[str, Any], sample: int = 0, program: int | str | None = None
    ) -> list[np.ndarray | None]:
        """The outputs of one sample as logical arrays (info: native.program_info of the .pte);
        `program` (index or name) picks a program of a several-program image. A non-tensor
        output is None (the runner prints tensor outputs only)."""
        raw = self.raw_outputs if program is None else self.program(program).raw_outputs
        where = "" if program is None else f" of program {program!r}"
        got = raw.get(sample, {})
        result: list[np.ndarray | None] = []
        for index, meta in enumerate(info["outputs"]):
            if meta is None:
                result.append(None)
                continue
            if index not in got:
                raise FirmwareRunError(
                    f"the firmware printed no output {index} for sample {sample}{where}"
                )
            result.append(from_tensor_bytes(got[index][1], meta))
        return result

    def check(self) -> RunResult:
        """Raise FirmwareRunError with the message and the firmware's error lines unless ok."""
        if not self.ok:
            lines = self.console.splitlines()
            errors = [
                ln
                for ln in lines
                if ln.startswith(("TM_ERROR", "TM_FAULT", "TM_MISMATCH"))
                or (ln.startswith("TM_PROGRAM_END ") and "status=OK" not in ln)
            ]
            detail = "\n".join(errors[:20]) or _tail(self.console + self.emulator_output)
            raise FirmwareRunError(f"firmware exit {self.exit_code}: {self.message}\n{detail}")
        return self


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def exit_message(code: int, timeout: float | None = None) -> str:
    if code == EXIT_TIMEOUT:
        return f"timed out after {timeout} s (the firmware hung or the model is too slow for the timeout)"
    if code in EXIT_MESSAGES:
        return EXIT_MESSAGES[code]
    return (
        f"unexpected exit status {code} (the emulator itself failed, or an unknown firmware error)"
    )


def parse_output(text: str) -> tuple[RawOutputs, list[dict[str, int]]]:
    """TM_OUTPUT and TM_RUN lines of the runner -> raw outputs per sample, per-run counters.
    (The lines of a several-program image are split per program by parse_programs.)"""
    outputs: RawOutputs = {}
    runs: list[dict[str, int]] = []
    for line in text.splitlines():
        _parse_line(line, outputs, runs)
    return outputs, runs


def parse_programs(text: str) -> list[ProgramRun]:
    """The TM_PROGRAM ... TM_PROGRAM_END sections of a several-program image, in run order."""
    programs: list[ProgramRun] = []
    current: ProgramRun | None = None
    for line in text.splitlines():
        if line.startswith("TM_PROGRAM "):
            fields = line.split(" ")
            name = next((f[5:] for f in fields[2:] if f.startswith("name=")), "")
            current = ProgramRun(index=int(fields[1]), name=name)
            programs.append(current)
        elif line.startswith("TM_PROGRAM_END "):
            fields = dict(f.split("=", 1) for f in line.split(" ")[2:] if "=" in f)
            if current is not None:
                current.status = fields.get("status", "")
                if current.status == "OK":
                    current.exit_code = EXIT_OK
                elif current.status == "OUTPUT_MISMATCH":
                    current.exit_code = EXIT_OUTPUT_MISMATCH
                else:
                    current.exit_code = int(fields["exit"]) if "exit" in fields else None
            current = None
        elif current is not None:
            if line.startswith(("TM_ERROR", "TM_MISMATCH", "TM_FAULT")):
                current.errors.append(line)
            _parse_line(line, current.raw_outputs, current.runs)
    return programs


def parse_tokens(console: str) -> dict[int, list[dict[str, int]]]:
    """The TM_TOKEN lines of a generation image's console (firmware/runner/generate.h):
    sample -> one {"step", "token", "cycles", "instructions"} per generated token."""
    tokens: dict[int, list[dict[str, int]]] = {}
    for line in console.splitlines():
        if line.startswith("TM_TOKEN "):
            _, sample, step, token, *counters = line.split(" ")
            record = {"step": int(step), "token": int(token)}
            record.update({k: int(v) for k, v in (c.split("=") for c in counters)})
            tokens.setdefault(int(sample), []).append(record)
    return tokens


def _parse_line(line: str, outputs: RawOutputs, runs: list[dict[str, int]]) -> None:
    if line.startswith("TM_OUTPUT "):
        _, sample, index, scalar_type, nbytes, *rest = line.split(" ")
        data = bytes.fromhex(rest[0]) if rest else b""
        if len(data) != int(nbytes):
            raise FirmwareRunError(f"truncated output line: {line[:80]}")
        outputs.setdefault(int(sample), {})[int(index)] = (int(scalar_type), data)
    elif line.startswith("TM_RUN "):
        fields = line.split(" ")
        run = {"sample": int(fields[1])}
        run.update({k: int(v) for k, v in (f.split("=") for f in fields[2:])})
        runs.append(run)


def qemu_command(elf: Path, machine: str, console_file: Path, uart_file: Path) -> list[str]:
    """QEMU with semihosting output in a file (QEMU 7.2 otherwise sends it to stderr or stdout
    depending on the terminal), UART0 in another, no monitor, no display."""
    return [
        "qemu-system-arm", "-M", machine, "-display", "none", "-monitor", "none",
        "-chardev", f"file,id=semihosting,path={console_file}",
        "-semihosting-config", "enable=on,target=native,chardev=semihosting",
        "-serial", f"file:{uart_file}", "-kernel", str(elf),
    ]  # fmt: skip


def fvp_command(elf: Path, fvp: dict[str, Any], npu: str | None) -> list[str] | None:
    binary = (fvp.get("binary_by_npu") or {}).get(npu) or fvp["binary"]
    path = shutil.which(binary)
    if path is None:
        return None
    extra = (fvp.get("npu_params") or {}).get(npu, []) if npu else []
    return [path, *fvp["params"], *extra, "-a", str(elf)]


def emulator_for(board: str, *, uses_npu: bool = False, prefer: str | None = None) -> str:
    """'qemu' or 'fvp' for a board, or FirmwareRunError explaining what is missing."""
    run = get_board(board).config.get("run") or {}
    qemu_possible = run.get("qemu") is not None and not uses_npu
    fvp = run.get("fvp")
    fvp_ok = fvp is not None and shutil.which(fvp["binary"]) is not None
    reason = "the program uses the NPU, which QEMU does not model" if uses_npu else (
        f"{board} has no QEMU model of its CPU"
    )
    if prefer == "qemu" or (
        prefer is None and qemu_possible and (shutil.which("qemu-system-arm") or not fvp_ok)
    ):
        if not qemu_possible:
            raise FirmwareRunError(f"cannot run on {board} with QEMU: {reason}")
        doctor.require("qemu")  # QEMU is the board's emulator: name the missing package
        return "qemu"
    if fvp_ok:
        return "fvp"
    if fvp is None:
        raise FirmwareRunError(f"{board} has no FVP configured")
    note = f"{reason}; " if not qemu_possible else ""
    raise FirmwareRunError(
        f"cannot run on {board}: {note}the Arm FVP {fvp['binary']} is not on PATH. "
        "Install the Corstone FVP from Arm (developer.arm.com, Arm Ecosystem FVPs) and add it to PATH."
    )


def run(
    elf: str | os.PathLike[str],
    board: str,
    timeout: float = 60.0,
    *,
    npu: str | None = None,
    uses_npu: bool = False,
    emulator: str | None = None,
    samples: int | None = None,
) -> RunResult:
    """Run `elf` on the board's emulator with stdin closed and a timeout; parse its output.
    samples: how many the image runs, for the progress report (torchmcu.progress)."""
    elf_path = Path(elf).resolve()
    if not elf_path.is_file():
        raise FirmwareRunError(f"{elf_path} does not exist")
    kind = emulator_for(board, uses_npu=uses_npu, prefer=emulator)
    cfg = get_board(board).config["run"]
    with tempfile.TemporaryDirectory(prefix="torchmcu-run-") as tmp:
        uart_file = Path(tmp) / "uart0.txt"
        console_file = Path(tmp) / "console.txt"
        if kind == "qemu":
            cmd = qemu_command(elf_path, cfg["qemu"]["machine"], console_file, uart_file)
        else:
            cmd = fvp_command(elf_path, cfg["fvp"], npu or get_board(board).npu)
            assert cmd is not None
        with progress.task(f"running on {kind.upper()}", samples, "samples") as shown:
            code, out, err = _run_emulator(cmd, timeout, console_file, shown)
        uart = uart_file.read_text(errors="replace") if uart_file.is_file() else ""
        emulator_output = out.decode(errors="replace") + err.decode(errors="replace")
        if kind == "qemu":
            console = console_file.read_text(errors="replace") if console_file.is_file() else ""
        else:  # the FVP prints semihosting and UART0 output on its stdout
            console = out.decode(errors="replace")
    if not console.strip() and uart.strip():
        # A UART-console image (TORCHMCU_OUTPUT=uart): it cannot end the emulator, it prints
        # "TM_EXIT <code>" and sleeps, so the run ends by timeout and the line gives the status.
        console = uart.replace("\r\n", "\n")
        code = _exit_line_code(console, code)
    if kind == "fvp" and code != EXIT_TIMEOUT:
        code = _exit_line_code(console, code)
    programs = parse_programs(console)
    raw, runs = parse_output(console) if not programs else ({}, [])
    return RunResult(
        exit_code=code,
        message=exit_message(code, timeout),
        console=console,
        emulator_output=emulator_output,
        uart=uart,
        command=cmd,
        raw_outputs=raw,
        runs=runs,
        programs=programs,
    )


def _run_emulator(
    cmd: list[str], timeout: float, console_file: Path, shown: progress.Task
) -> tuple[int, bytes, bytes]:
    """(exit code or EXIT_TIMEOUT, stdout, stderr) of the emulator, killed after `timeout`
    seconds or on any exception (Ctrl-C). While it runs, `shown` counts the samples done (the
    runner's TM_RUN lines in the console file, when progress is on)."""
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                out, err = proc.communicate(
                    timeout=max(0.0, min(0.25, deadline - time.monotonic()))
                )
                _count_samples(console_file, shown)
                return proc.returncode, out, err
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    proc.kill()
                    out, err = proc.communicate()
                    return EXIT_TIMEOUT, out or b"", err or b""
                _count_samples(console_file, shown)
                shown.tick()
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _count_samples(console_file: Path, shown: progress.Task) -> None:
    """The samples the runner finished so far (its TM_RUN lines), when progress is on."""
    if progress.enabled() and console_file.is_file():
        with open(console_file, "rb") as f:
            shown.update(sum(line.startswith(b"TM_RUN ") for line in f))


def _exit_line_code(stdout: str, code: int) -> int:
    """FVPs may not forward the semihosting exit status, and UART images cannot: trust the
    runner's last status line when there is one."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("TM_END status=OK"):
            return EXIT_OK
        if line.startswith("TM_EXIT "):
            return int(line.split()[1])
        if line.startswith("TM_END status=FAILED exit="):  # a several-program image
            return int(line.split()[2].split("=")[1])
    return code
