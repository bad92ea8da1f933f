"""Board descriptions, read from boards/<name>/board.json (the same files CMake reads)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# In a source checkout the boards live at the repository root; a wheel carries a copy.
_CANDIDATE_DIRS = (
    Path(__file__).resolve().parents[2] / "boards",
    Path(__file__).resolve().parent / "boards",
)


class BoardError(ValueError):
    """A board that does not exist, or a model that does not fit it."""


@dataclass(frozen=True)
class Board:
    name: str
    cpu: str
    npu: str | None
    arena_bytes_max: int
    program_bytes_max: int
    config: dict[str, Any]

    @property
    def regions(self) -> dict[str, tuple[int, int]]:
        """Memory regions of the board: name -> (origin, length) in bytes."""
        return {
            name: (int(r["origin"], 0), int(r["length"]))
            for name, r in self.config["memory"].get("regions", {}).items()
        }

    @property
    def cpu_flags(self) -> list[str]:
        """Compiler flags selecting the board's CPU (what CMake passes to every object)."""
        return list(self.config.get("cpu_flags", []))

    def vela_options(self, npu: str | None = None) -> dict[str, str]:
        """Vela settings for the board's NPU (or `npu`, one of its choices): accelerator,
        system config and memory mode (names in Vela's Arm/vela.ini). BoardError when the board
        has no NPU or `npu` is not one it offers: Vela itself accepts mismatched pairings."""
        cfg = self.config.get("npu")
        if not cfg:
            raise BoardError(f"{self.name} has no NPU")
        accel = npu or cfg["default"]
        if accel not in cfg["choices"]:
            raise BoardError(f"{self.name} offers NPUs {', '.join(cfg['choices'])}, not {accel!r}")
        vela = cfg["vela"]
        return {
            "accelerator_config": accel,
            "config": vela["config"],
            "system_config": vela["system_config"][accel],
            "memory_mode": vela["memory_mode"][accel],
        }

    def check_fits(self, *, arena_bytes: int, program_bytes: int) -> None:
        """Raise BoardError naming the sizes when the planned arena or the program is too big."""
        if arena_bytes > self.arena_bytes_max:
            raise BoardError(
                f"the activation arena needs {arena_bytes:,} bytes but {self.name} has "
                f"{self.arena_bytes_max:,} bytes of {self.config['memory']['arena_region']} for it "
                f"({arena_bytes - self.arena_bytes_max:,} bytes over)"
            )
        if program_bytes > self.program_bytes_max:
            raise BoardError(
                f"the program is {program_bytes:,} bytes but {self.name} has "
                f"{self.program_bytes_max:,} bytes of {self.config['memory']['program_region']} for it"
            )


def boards_dir() -> Path:
    for candidate in _CANDIDATE_DIRS:
        if candidate.is_dir():
            return candidate
    raise BoardError(
        "board descriptions not found (looked in: {})".format(", ".join(map(str, _CANDIDATE_DIRS)))
    )


def available_boards() -> list[str]:
    return sorted(p.parent.name for p in boards_dir().glob("*/board.json"))


def get_board(name: str) -> Board:
    path = boards_dir() / name / "board.json"
    if not path.is_file():
        raise BoardError(f"unknown board {name!r}; available: {', '.join(available_boards())}")
    config = json.loads(path.read_text())
    npu = config.get("npu")
    return Board(
        name=config["name"],
        cpu=config["cpu"],
        npu=npu["default"] if npu else None,
        arena_bytes_max=int(config["memory"]["arena_bytes_max"]),
        program_bytes_max=int(config["memory"]["program_bytes_max"]),
        config=config,
    )
