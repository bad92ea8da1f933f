"""A readable listing of a command stream: one line per command, operations marked."""

from __future__ import annotations

from torchmcu.npu.model.decode import command_stream, decode
from torchmcu.npu.model.registers import OPERATIONS


def dump(payload: bytes) -> str:
    """Vela's driver payload (or a bare register command stream) as text."""
    stream = command_stream(payload) if payload[:4] == b"COP1" else payload
    lines = []
    for cmd in decode(stream):
        mark = ">>" if cmd.name in OPERATIONS else "  "
        lines.append(f"{mark}{cmd}")
    return "\n".join(lines)
