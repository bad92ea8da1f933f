"""Which Ethos-U NPU a program is compiled for, and with which Vela memory model.

Vela accepts pairings that make no sense (an Ethos-U55 with an Ethos-U85 system config compiles
without a word), so every choice is checked here, against the board and against the ini we ship,
before Vela sees it. Errors list the valid choices.
"""

from __future__ import annotations

import configparser
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from torchmcu.boards import BoardError, available_boards, boards_dir, get_board

# Vela 5.2.0's --accelerator-config choices: family and MAC count are in the name.
ACCELERATORS: tuple[str, ...] = (
    "ethos-u55-32",
    "ethos-u55-64",
    "ethos-u55-128",
    "ethos-u55-256",
    "ethos-u65-256",
    "ethos-u65-512",
    "ethos-u85-128",
    "ethos-u85-256",
    "ethos-u85-512",
    "ethos-u85-1024",
    "ethos-u85-2048",
)

# The ini torchmcu ships (boards/ethos_u/vela.ini); board.json "npu.vela.config" names it
# relative to the boards directory.
DEFAULT_INI = "ethos_u/vela.ini"

# Settings when no board is given: the ones our boards use for that family.
FAMILY_DEFAULTS: dict[str, tuple[str, str]] = {
    "u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB"),
    "u85": ("Ethos_U85_SYS_DRAM_Mid", "Shared_Sram"),
}

_ACCEL_RE = re.compile(r"^ethos-(u55|u65|u85)-(\d+)$")
_SYSCONF_FAMILY_RE = re.compile(r"^Ethos_U(55|65|85)_")


class NpuConfigError(ValueError):
    """An NPU, system config or memory mode that does not exist or does not fit the others."""


@dataclass(frozen=True)
class NpuTarget:
    accelerator: str  # Vela's --accelerator-config, e.g. "ethos-u55-128"
    family: str  # "u55" | "u65" | "u85"
    macs: int
    system_config: str
    memory_mode: str
    config_ini: Path  # absolute: Vela looks relative names up inside its own package
    board: str | None

    def vela_args(self) -> list[str]:
        """The Vela command-line options selecting this target."""
        return [
            "--accelerator-config",
            self.accelerator,
            "--config",
            str(self.config_ini),
            "--system-config",
            self.system_config,
            "--memory-mode",
            self.memory_mode,
        ]


@dataclass(frozen=True)
class IniChoices:
    """Section names of one Vela ini, with what we need to judge pairings."""

    system_configs: dict[str, str | None]  # name -> family it is written for (from its name)
    memory_modes: dict[str, bool]  # name -> True when it has a dedicated SRAM cache


def _fail(msg: str, choices: list[str] | tuple[str, ...]) -> NpuConfigError:
    listed = ", ".join(choices) if choices else "(none)"
    return NpuConfigError(f"{msg}; valid choices: {listed}")


def parse_accelerator(npu: str) -> tuple[str, int]:
    """(family, MACs) of a Vela accelerator name, or NpuConfigError listing the known names."""
    m = _ACCEL_RE.match(npu)
    if npu not in ACCELERATORS or m is None:
        raise _fail(f"unknown NPU {npu!r}", ACCELERATORS)
    return m.group(1), int(m.group(2))


@functools.lru_cache(maxsize=8)
def read_ini(path: Path) -> IniChoices:
    """System configs and memory modes an ini defines (inherit= is followed for memory modes)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep key case as Vela does
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except (OSError, configparser.Error) as e:
        raise NpuConfigError(f"cannot read Vela config {path}: {e}") from e

    def option(section: str, key: str, depth: int = 0) -> str | None:
        if parser.has_option(section, key):
            return parser.get(section, key)
        parent = parser.get(section, "inherit", fallback=None)
        if parent and depth < 8 and parser.has_section(parent):
            return option(parent, key, depth + 1)
        return None

    systems: dict[str, str | None] = {}
    modes: dict[str, bool] = {}
    for section in parser.sections():
        kind, _, name = section.partition(".")
        if kind == "System_Config" and name:
            m = _SYSCONF_FAMILY_RE.match(name)
            systems[name] = f"u{m.group(1)}" if m else None
        elif kind == "Memory_Mode" and name:
            arena = option(section, "arena_mem_area")
            cache = option(section, "cache_mem_area")
            modes[name] = arena is not None and cache is not None and arena != cache
    return IniChoices(systems, modes)


def ini_path(config: str | Path) -> Path:
    """Absolute path of an ini named in board.json (relative to the boards directory)."""
    path = Path(config)
    if not path.is_absolute():
        path = boards_dir() / path
    path = path.resolve()
    if not path.is_file():
        raise NpuConfigError(f"Vela config {path} does not exist")
    return path


def resolve_target(
    board: str | None,
    npu: str | None,
    system_config: str | None = None,
    memory_mode: str | None = None,
) -> NpuTarget:
    """Validated NPU target: the board's settings for `npu` unless overridden.

    npu=None takes the board's default NPU. Without a board, any Vela accelerator is allowed
    and the family defaults and torchmcu's ini apply.
    """
    config: str | Path = DEFAULT_INI
    if board is not None:
        try:
            board_cfg = get_board(board)
        except BoardError as e:
            raise NpuConfigError(str(e)) from e
        npu_cfg = board_cfg.config.get("npu")
        if not npu_cfg:
            with_npu = [b for b in available_boards() if get_board(b).config.get("npu")]
            raise _fail(f"board {board!r} has no NPU", with_npu)
        npu = npu or npu_cfg["default"]
        choices: list[str] = list(npu_cfg["choices"])
        if npu not in choices:
            raise _fail(f"board {board!r} does not offer NPU {npu!r}", choices)
        vela_cfg = npu_cfg.get("vela", {})
        config = vela_cfg.get("config", DEFAULT_INI)
        system_config = system_config or vela_cfg.get("system_config", {}).get(npu)
        memory_mode = memory_mode or vela_cfg.get("memory_mode", {}).get(npu)
    if npu is None:
        raise NpuConfigError("no NPU given and no board to take its default from")
    family, macs = parse_accelerator(npu)
    default_sys, default_mode = FAMILY_DEFAULTS[family]
    system_config = system_config or default_sys
    memory_mode = memory_mode or default_mode

    path = ini_path(config)
    ini = read_ini(path)
    fitting_sys = sorted(n for n, fam in ini.system_configs.items() if fam == family)
    if system_config not in ini.system_configs:
        raise _fail(
            f"unknown Vela system config {system_config!r} (in {path}) for {npu}", fitting_sys
        )
    sys_family = ini.system_configs[system_config]
    if sys_family != family:
        written_for = f"Ethos-{sys_family.upper()}" if sys_family else "no known Ethos-U"
        raise _fail(
            f"system config {system_config!r} is written for {written_for}, not for {npu}",
            fitting_sys,
        )
    fitting_modes = sorted(
        n for n, dedicated in ini.memory_modes.items() if not (dedicated and family == "u55")
    )
    if memory_mode not in ini.memory_modes:
        raise _fail(
            f"unknown Vela memory mode {memory_mode!r} (in {path}) for {npu}", fitting_modes
        )
    if family == "u55" and ini.memory_modes[memory_mode]:
        raise _fail(
            f"memory mode {memory_mode!r} gives the NPU a dedicated SRAM cache, which the "
            f"Ethos-U55 does not support ({npu})",
            fitting_modes,
        )
    return NpuTarget(
        accelerator=npu,
        family=family,
        macs=macs,
        system_config=system_config,
        memory_mode=memory_mode,
        config_ini=path,
        board=board,
    )
