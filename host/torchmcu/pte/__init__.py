"""The .pte container: in-memory Program model, writer, reader, validation."""

from __future__ import annotations

from .program import Program
from .reader import load, parse
from .validate import ProgramError, validate
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
