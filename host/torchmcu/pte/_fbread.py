"""A small bounds-checked flatbuffer table reader.

The `flatbuffers` package trusts its input (a bad offset raises IndexError or
reads garbage). Tools that inspect foreign .pte files need the opposite:
every read checked, and errors that say which field and which byte offset.
"""

from __future__ import annotations

import struct

from .validate import ProgramError


class Buf:
    def __init__(self, data: bytes, limit: int | None = None, strict: bool = False) -> None:
        self.data = memoryview(data)
        self.limit = len(data) if limit is None else limit
        # Strict: fields must also lie inside their table's declared size.
        # ExecuTorch's writer (flatbuffers' Python builder) can state too small
        # a size when it shares vtables, so only our own output passes strictly.
        self.strict = strict

    def _need(self, pos: int, n: int, what: str) -> None:
        if pos < 0 or pos + n > self.limit:
            raise ProgramError(
                f"{what}: {n} bytes at byte offset {pos} lie outside the flatbuffer "
                f"({self.limit} bytes)"
            )

    def scalar(self, fmt: str, pos: int, what: str) -> int | float:
        n = struct.calcsize(fmt)
        self._need(pos, n, what)
        return struct.unpack_from(fmt, self.data, pos)[0]

    def root(self) -> "Table":
        off = int(self.scalar("<I", 0, "root offset"))
        return Table(self, off, "Program")


class Table:
    """A table at absolute position `pos`; `path` names it in errors."""

    def __init__(self, buf: Buf, pos: int, path: str) -> None:
        self.buf = buf
        self.pos = pos
        self.path = path
        soff = int(buf.scalar("<i", pos, f"{path} (table)"))
        self.vt = pos - soff
        self.vt_size = int(buf.scalar("<H", self.vt, f"{path} (vtable)"))
        self.tbl_size = int(buf.scalar("<H", self.vt + 2, f"{path} (vtable)"))
        if self.vt_size < 4 or self.vt_size % 2:
            raise ProgramError(
                f"{path}: vtable at byte offset {self.vt} has bad size {self.vt_size}"
            )
        buf._need(self.vt, self.vt_size, f"{path} (vtable)")
        buf._need(pos, max(self.tbl_size, 4), f"{path} (table body)")

    def _field(self, slot: int, name: str, width: int) -> int:
        """Absolute position of a field, or 0 when absent."""
        entry = 4 + 2 * slot
        if entry >= self.vt_size:
            return 0
        rel = int(self.buf.scalar("<H", self.vt + entry, f"{self.path}.{name}"))
        if rel == 0:
            return 0
        self.buf._need(self.pos + rel, width, f"{self.path}.{name}")
        if self.buf.strict and rel + width > self.tbl_size:
            raise ProgramError(
                f"{self.path}.{name}: field at byte offset {self.pos + rel} runs past the end "
                f"of its table ({self.tbl_size} bytes at {self.pos})"
            )
        return self.pos + rel

    def has(self, slot: int) -> bool:
        entry = 4 + 2 * slot
        if entry >= self.vt_size:
            return False
        return int(self.buf.scalar("<H", self.vt + entry, self.path)) != 0

    def scalar(self, slot: int, name: str, fmt: str, default: int | float = 0) -> int | float:
        p = self._field(slot, name, struct.calcsize(fmt))
        if not p:
            return default
        return self.buf.scalar(fmt, p, f"{self.path}.{name}")

    def _indirect(self, slot: int, name: str) -> int:
        p = self._field(slot, name, 4)
        if not p:
            return 0
        return p + int(self.buf.scalar("<I", p, f"{self.path}.{name}"))

    def table(self, slot: int, name: str, path: str | None = None) -> "Table | None":
        target = self._indirect(slot, name)
        if not target:
            return None
        return Table(self.buf, target, path or f"{self.path}.{name}")

    def string(self, slot: int, name: str) -> str | None:
        target = self._indirect(slot, name)
        if not target:
            return None
        what = f"{self.path}.{name}"
        n = int(self.buf.scalar("<I", target, what))
        self.buf._need(target + 4, n, what)
        raw = bytes(self.buf.data[target + 4 : target + 4 + n])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProgramError(f"{what}: string at byte offset {target} is not UTF-8") from e

    def _vector(self, slot: int, name: str, elem: int) -> tuple[int, int] | None:
        target = self._indirect(slot, name)
        if not target:
            return None
        what = f"{self.path}.{name}"
        n = int(self.buf.scalar("<I", target, what))
        self.buf._need(target + 4, n * elem, what)
        return target + 4, n

    def scalars(self, slot: int, name: str, fmt: str) -> list:
        """A vector of scalars (empty when absent)."""
        size = struct.calcsize(fmt)
        v = self._vector(slot, name, size)
        if v is None:
            return []
        start, n = v
        return list(struct.unpack_from(f"<{n}{fmt[-1]}", self.buf.data, start))

    def raw_bytes(self, slot: int, name: str) -> bytes:
        v = self._vector(slot, name, 1)
        if v is None:
            return b""
        start, n = v
        return bytes(self.buf.data[start : start + n])

    def tables(self, slot: int, name: str) -> list["Table"]:
        """A vector of tables (empty when absent)."""
        v = self._vector(slot, name, 4)
        if v is None:
            return []
        start, n = v
        out = []
        for i in range(n):
            p = start + 4 * i
            target = p + int(self.buf.scalar("<I", p, f"{self.path}.{name}[{i}]"))
            out.append(Table(self.buf, target, f"{self.path}.{name}[{i}]"))
        return out
