"""A readable listing of a command stream: one line per command, operations marked."""

from __future__ import annotations

from torchmcu.npu.model.decode import command_stream, decode, payload_product


def dump(payload: bytes, product: int | None = None) -> str:
    """Vela's driver payload (or a bare register command stream) as text. The opcode table is
    the payload's NPU (CONFIG.product: U55/U65 or U85) unless `product` is given; a bare
    stream is read as the U55's."""
    if payload[:4] == b"COP1":
        stream = command_stream(payload)
        if product is None:
            product = payload_product(payload)
    else:
        stream = payload
    lines = []
    for cmd in decode(stream, product or 0):
        mark = ">>" if cmd.name.startswith("NPU_OP_") else "  "
        lines.append(f"{mark}{cmd}")
    return "\n".join(lines)
