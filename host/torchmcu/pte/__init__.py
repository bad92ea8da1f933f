"""The .pte container: in-memory Program model, writer, reader, validation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .program import Program
from .reader import load, parse
from .validate import ProgramError, validate

if TYPE_CHECKING:
    from .writer import prune_unused, save, serialize

__all__ = [
    "Program",
    "ProgramError",
    "load",
    "parse",
    "prune_unused",
    "save",
    "serialize",
    "validate",
]

_WRITER = ("prune_unused", "save", "serialize")


def __getattr__(name: str) -> Any:
    # Lazy: the writer needs flatbuffers, and torchmcu.ops (which imports pte.program) must
    # import with numpy alone, as CMake runs it at configure time (cmake/ops.cmake).
    if name in _WRITER:
        from . import writer

        return getattr(writer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
