"""`torchmcu doctor`: is this machine ready to export, build, run and test?

One line per component: found (with its version), missing, or the wrong version, and how to
fix it. The tests ask the same checks (tests/conftest.py, marker `needs`), so a missing tool
fails a test with the same one line instead of a linker log or a silent skip.

Standard library only: it runs before scripts/setup.sh has made the venv,
`PYTHONPATH=host python3 -m torchmcu.doctor` (scripts/doctor.sh picks the right Python).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout, for an editable install
SETUP = "bash scripts/setup.sh"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
FVP_BINARIES = (
    "FVP_Corstone_SSE-300_Ethos-U55",
    "FVP_Corstone_SSE-300_Ethos-U65",
    "FVP_Corstone_SSE-320",
)


@dataclass(frozen=True)
class Finding:
    """What one check found. `problem` is None when the component is usable."""

    name: str
    detail: str  # the version found, or what is wrong
    problem: str | None = None  # "missing" or "wrong version"
    fix: str = ""

    def line(self) -> str:
        state = "ok" if self.problem is None else self.problem
        text = f"{state:<14} {self.name:<26} {self.detail}"
        return text + (f" -> {self.fix}" if self.problem and self.fix else "")


@dataclass(frozen=True)
class Component:
    name: str
    probe: Callable[[], Finding]
    required: bool = True  # optional ones (an FVP, the ExecuTorch venv) never fail the doctor
    purpose: str = ""


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, **kwargs)  # type: ignore[call-overload]


def _version(cmd: list[str], pattern: str = r"(\d+\.\d+(?:\.\d+)?)") -> str | None:
    try:
        out = _run(cmd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return m.group(1) if m else None


def _apt(package: str) -> str:
    return f"apt-get install {package} (or {SETUP})"


def _tool(
    name: str,
    binary: str,
    package: str,
    version_cmd: list[str] | None = None,
    min_version: tuple[int, ...] = (),
) -> Finding:
    if shutil.which(binary) is None:
        return Finding(name, f"{binary} not on PATH", "missing", _apt(package))
    found = _version(version_cmd or [binary, "--version"])
    if found is None:
        return Finding(name, f"{binary} gives no version", "wrong version", _apt(package))
    if min_version and tuple(int(p) for p in found.split(".")) < min_version:
        want = ".".join(map(str, min_version))
        return Finding(name, f"{found} (need >= {want})", "wrong version", _apt(package))
    return Finding(name, found)


def _compiles(cmd: list[str], source: str, suffix: str = ".c") -> str | None:
    """None if `cmd` builds `source` (file name appended, output in a temp dir); else the first
    line of its error output."""
    with tempfile.TemporaryDirectory(prefix="torchmcu-doctor-") as tmp:
        src = Path(tmp) / f"probe{suffix}"
        src.write_text(source)
        try:
            r = _run([*cmd, str(src), "-o", str(Path(tmp) / "probe.out")], cwd=tmp)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        if r.returncode == 0:
            return None
        lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error" in ln or "cannot find" in ln] or lines or ["failed"]
        return errors[0].strip()


ARM_FLAGS = ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"]


def check_arm_gcc() -> Finding:
    found = _tool(
        "arm-none-eabi-gcc",
        "arm-none-eabi-gcc",
        "gcc-arm-none-eabi",
        ["arm-none-eabi-gcc", "-dumpfullversion"],
        min_version=(12,),
    )
    if found.problem:
        return found
    mve = "#include <arm_mve.h>\nint8x16_t f(int8x16_t a, int8x16_t b) { return vaddq_s8(a, b); }\n"
    error = _compiles(["arm-none-eabi-gcc", *ARM_FLAGS, "-O2", "-c"], mve)
    if error:
        return Finding(
            found.name,
            f"{found.detail}, Helium (MVE) does not compile: {error}",
            "wrong version",
            _apt("gcc-arm-none-eabi"),
        )
    return Finding(found.name, f"{found.detail}, Helium (MVE) for cortex-m55")


def check_newlib() -> Finding:
    if shutil.which("arm-none-eabi-gcc") is None:
        return Finding(
            "newlib (arm-none-eabi)",
            "needs arm-none-eabi-gcc first",
            "missing",
            _apt("gcc-arm-none-eabi libnewlib-arm-none-eabi"),
        )
    missing = []
    for specs, lib in (("rdimon.specs", "libc.a"), ("nano.specs", "libc_nano.a")):
        r = _run(["arm-none-eabi-gcc", *ARM_FLAGS, f"--specs={specs}", f"-print-file-name={lib}"])
        if not Path(r.stdout.strip()).is_absolute():
            missing.append(lib)
    if missing:
        return Finding(
            "newlib (arm-none-eabi)",
            f"{', '.join(missing)} not found for cortex-m55",
            "missing",
            _apt("libnewlib-arm-none-eabi"),
        )
    return Finding("newlib (arm-none-eabi)", "libc.a and libc_nano.a (v8-m.main+dp/hard)")


def check_qemu() -> Finding:
    found = _tool("qemu-system-arm", "qemu-system-arm", "qemu-system-arm", min_version=(7, 2))
    if found.problem:
        return found
    machines = _run(["qemu-system-arm", "-M", "help"]).stdout
    if "mps3-an547" not in machines:
        return Finding(
            found.name,
            f"{found.detail} without the mps3-an547 machine",
            "wrong version",
            _apt("qemu-system-arm"),
        )
    if "-plugin" not in _run(["qemu-system-arm", "-help"]).stdout:
        return Finding(
            found.name,
            f"{found.detail} without TCG plugin support (-plugin)",
            "wrong version",
            "Debian's qemu-system-arm 7.2 has it: " + _apt("qemu-system-arm"),
        )
    return Finding(found.name, f"{found.detail}, mps3-an547, TCG plugins")


def check_host_gcc() -> Finding:
    return _tool("gcc (host)", "gcc", "gcc")


def check_clang() -> Finding:
    return _tool("clang", "clang", "clang", min_version=(14,))


def _clang_link(name: str, flags: list[str], source: str, what: str) -> Finding:
    if shutil.which("clang") is None:
        return Finding(name, "needs clang first", "missing", _apt("clang libclang-rt-14-dev"))
    error = _compiles(["clang", *flags], source)
    if error:
        return Finding(name, f"{what} do not link: {error}", "missing", _apt("libclang-rt-14-dev"))
    return Finding(name, f"{what} link")


def check_sanitizers() -> Finding:
    return _clang_link(
        "clang sanitizer runtimes",
        ["-fsanitize=address,undefined"],
        "int main(void) { return 0; }\n",
        "ASan + UBSan",
    )


def check_libfuzzer() -> Finding:
    fuzz = (
        "#include <stddef.h>\n#include <stdint.h>\n"
        "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n"
    )
    return _clang_link(
        "libFuzzer", ["-fsanitize=fuzzer,address,undefined"], fuzz, "libFuzzer + ASan"
    )


def check_cmake() -> Finding:
    return _tool("cmake", "cmake", "cmake", min_version=(3, 25))


def check_ninja() -> Finding:
    return _tool("ninja", "ninja", "ninja-build", min_version=(1, 10))


def check_chromium() -> Finding:
    return _tool("chromium", "chromium", "chromium")


def requirements() -> list[tuple[str, str | None]]:
    """(package, pinned version or None) from requirements.txt, the list setup.sh installs."""
    out = []
    for raw in REQUIREMENTS.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, _, pin = line.partition("==")
            out.append((name.strip(), pin.strip() or None))
    return out


def check_package(name: str, pin: str | None) -> Finding:
    label = f"{name} (Python)"
    fix = f"{SETUP} (installs into .venv; then use .venv/bin/python)"
    try:
        found = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return Finding(label, f"not installed in {sys.executable}", "missing", fix)
    if pin and found.split("+")[0] != pin:
        return Finding(
            label,
            f"{found} (pinned {pin})",
            "wrong version",
            f"pip install {name}=={pin} (or {SETUP})",
        )
    return Finding(label, found)


def check_tosa_reference() -> Finding:
    name = "TOSA reference model"
    for module in ("tosa_reference_model", "tosa_serializer"):
        if importlib.util.find_spec(module) is None:
            return Finding(
                name,
                f"module {module} not importable",
                "missing",
                f"pip install tosa-tools (or {SETUP})",
            )
    return Finding(name, "tosa_reference_model, tosa_serializer")


def check_native() -> Finding:
    name = "torchmcu._native"
    if importlib.util.find_spec("torchmcu._native") is None:
        return Finding(
            name,
            f"the host build of the runtime is not installed for {sys.executable}",
            "missing",
            SETUP,
        )
    return Finding(name, "host runtime built")


def check_fvp() -> Finding:
    found = [b for b in FVP_BINARIES if shutil.which(b)]
    if not found:
        return Finding(
            "Arm FVP (optional)",
            f"none of {', '.join(FVP_BINARIES)} on PATH",
            "missing",
            "NPU programs run only on an FVP or a board: install Arm's "
            "Corstone FVP and add it to PATH",
        )
    return Finding("Arm FVP (optional)", ", ".join(found))


def executorch_venv() -> Path:
    return Path(os.environ.get("TORCHMCU_ET_VENV") or ROOT / ".venv-executorch")


def check_executorch_venv() -> Finding:
    venv = executorch_venv()
    python = venv / "bin" / "python"
    name = "ExecuTorch venv (optional)"
    if not python.is_file():
        return Finding(
            name,
            f"{venv} does not exist",
            "missing",
            "bash scripts/executorch_venv.sh --ethos-u (the interop tests make it)",
        )
    probe = "import importlib.metadata as m; print(m.version('executorch'))"
    version = _version([str(python), "-c", probe])
    if version != "1.5.1":
        return Finding(
            name,
            f"{venv}: executorch {version or 'not installed'} (want 1.5.1)",
            "wrong version",
            "bash scripts/executorch_venv.sh --ethos-u",
        )
    return Finding(name, f"executorch 1.5.1 in {venv}")


def _python_components() -> list[Component]:
    return [
        Component(
            f"py:{name}", functools.partial(check_package, name, pin), True, "the host package"
        )
        for name, pin in requirements()
    ]


COMPONENTS: list[Component] = [
    Component("arm-gcc", check_arm_gcc, True, "firmware builds"),
    Component("newlib", check_newlib, True, "firmware builds"),
    Component("qemu", check_qemu, True, "firmware runs and instruction counts"),
    Component("host-gcc", check_host_gcc, True, "the native module and the QEMU plugin"),
    Component("clang", check_clang, True, "the second compiler of the C checks"),
    Component("clang-sanitizers", check_sanitizers, True, "ASan/UBSan tests"),
    Component("libfuzzer", check_libfuzzer, True, "fuzz targets"),
    Component("cmake", check_cmake, True, "every C build"),
    Component("ninja", check_ninja, True, "every C build"),
    Component("chromium", check_chromium, True, "the HTML report's rendering test"),
    *_python_components(),
    Component("tosa-reference", check_tosa_reference, True, "NPU lowering checks"),
    Component("native", check_native, True, "host runs of the runtime"),
    Component("fvp", check_fvp, False, "running NPU programs"),
    Component("executorch-venv", check_executorch_venv, False, "interop tests (made on demand)"),
]
BY_NAME = {c.name: c for c in COMPONENTS}


@functools.cache
def check(name: str) -> Finding:
    """The finding for one component by name (cached: the checks compile and link)."""
    try:
        component = BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown component {name!r}; known: {', '.join(BY_NAME)}") from None
    return component.probe()


def problem(name: str) -> str | None:
    """One line naming what is wrong with component `name` and the fix, or None if usable."""
    f = check(name)
    if f.problem is None:
        return None
    return f"{f.name}: {f.problem} ({f.detail}); fix: {f.fix}"


class MissingComponent(RuntimeError):
    """A tool or package this step needs is missing: one line, with the fix."""


def require(*names: str) -> None:
    """Raise MissingComponent naming every component in `names` that is not usable."""
    problems = [p for p in map(problem, names) if p]
    if problems:
        raise MissingComponent("; ".join(problems))


def run(out: Callable[[str], None] = print) -> int:
    """Print every component's line; 1 if a required one is missing or wrong, else 0."""
    bad = 0
    for component in COMPONENTS:
        finding = check(component.name)
        out(finding.line())
        bad += finding.problem is not None and component.required
    if bad:
        out(
            f"{bad} required component(s) missing or wrong: run {SETUP}, then torchmcu doctor again"
        )
        return 1
    out("ready: everything required is present")
    return 0


if __name__ == "__main__":
    sys.exit(run())
