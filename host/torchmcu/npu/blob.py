"""The EthosUBackend delegate blob: ExecuTorch's "vela bin stream" block layout.

Our blobs must mean the same to ExecuTorch's EthosUBackend and to our firmware delegate, so
the layout and the region numbering follow ExecuTorch 1.5.1 (see boards/ethos_u/README.md).
A blob is a sequence of blocks, each a 32-byte header (16-byte NUL-padded name, u32 data length,
u8 external flag, 11 reserved bytes) followed by the data, zero-padded to 16 bytes.
parse_blob is strict: anything our packer would not write is rejected, naming block and offset.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

# Base-pointer regions of the command stream, as ExecuTorch's EthosUBackend programs them:
# region 0 = weights (used in place from the blob), region 1 = scratch (the arena Vela planned;
# inputs and outputs live in it at their offsets), region 2 = fast scratch (the NPU's own SRAM
# cache in Dedicated_Sram memory modes; a buffer the firmware provides, not described in the blob).
REGION_WEIGHTS = 0
REGION_SCRATCH = 1
REGION_FAST_SCRATCH = 2

HEADER_BLOCK = "vela_bin_stream"
FOOTER_BLOCK = "vela_end_stream"
BLOCK_ORDER = (
    HEADER_BLOCK,
    "cmd_data",
    "weight_data",
    "scratch_size",
    "inputs",
    "outputs",
    FOOTER_BLOCK,
)
ALIGNMENT = 16
SHAPE_DIMS = 6  # Vela reports every I/O tensor with a 6-D shape
COMMAND_STREAM_MAGICS = (b"COP1", b"COP2")

_HEADER = struct.Struct("<16sIB11s")
_IO = struct.Struct("<" + "i" * (SHAPE_DIMS + 3))  # shape[6], elem_size, offset, region
_ELEM_SIZES = (1, 2, 4)


class BlobError(ValueError):
    """A malformed delegate blob (or values that cannot be packed into one)."""


@dataclass(frozen=True)
class VelaTensor:
    """One input or output of a compiled subgraph, where Vela placed it."""

    shape: list[int]  # 6-D, as Vela gives it
    elem_size: int
    offset: int  # byte offset in the region
    region: int

    @property
    def nbytes(self) -> int:
        n = self.elem_size
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class VelaBlob:
    command_stream: bytes
    weights: bytes
    scratch_size: int
    inputs: list[VelaTensor]
    outputs: list[VelaTensor]
    data_offsets: dict[str, int] = field(default_factory=dict)  # block name -> offset of its data


def _padded(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _block(name: str, data: bytes) -> bytes:
    header = _HEADER.pack(name.encode("ascii"), len(data), 0, bytes(11))
    return header + data + bytes(_padded(len(data)) - len(data))


def _pack_ios(kind: str, tensors: Sequence[VelaTensor]) -> bytes:
    out = [struct.pack("<i", len(tensors))]
    for i, t in enumerate(tensors):
        values = [*t.shape, t.elem_size, t.offset, t.region]
        if len(t.shape) != SHAPE_DIMS:
            raise BlobError(f"{kind}[{i}]: shape {t.shape} is not {SHAPE_DIMS}-D")
        if any(not -(2**31) <= v < 2**31 for v in values):
            raise BlobError(f"{kind}[{i}]: a value of {values} does not fit int32")
        out.append(_IO.pack(*values))
    return b"".join(out)


def pack_blob(
    command_stream: bytes,
    weights: bytes,
    scratch_size: int,
    inputs: Sequence[VelaTensor],
    outputs: Sequence[VelaTensor],
) -> bytes:
    """The blob ExecuTorch's EthosUBackend (and our firmware delegate) reads."""
    if command_stream[:4] not in COMMAND_STREAM_MAGICS:
        raise BlobError(f"command stream starts with {command_stream[:4]!r}, not b'COP1'")
    if not 0 <= scratch_size < 2**32:
        raise BlobError(f"scratch size {scratch_size} does not fit u32")
    data = {
        HEADER_BLOCK: b"",
        "cmd_data": bytes(command_stream),
        "weight_data": bytes(weights),
        "scratch_size": struct.pack("<I", scratch_size),
        "inputs": _pack_ios("inputs", inputs),
        "outputs": _pack_ios("outputs", outputs),
        FOOTER_BLOCK: b"",
    }
    return b"".join(_block(name, data[name]) for name in BLOCK_ORDER)


def _error(block: str | None, offset: int, msg: str) -> BlobError:
    where = f"block {block!r} at byte {offset}" if block else f"byte {offset}"
    return BlobError(f"EthosUBackend blob: {where}: {msg}")


def _parse_ios(name: str, data: bytes, base: int) -> list[VelaTensor]:
    if len(data) < 4:
        raise _error(name, base, f"{len(data)} bytes, too short for the tensor count")
    (count,) = struct.unpack_from("<i", data)
    if count < 0 or len(data) != 4 + count * _IO.size:
        raise _error(
            name,
            base,
            f"count {count} does not match the block length {len(data)} "
            f"(expected 4 + {_IO.size} bytes per tensor)",
        )
    tensors = []
    for i in range(count):
        at = 4 + i * _IO.size
        *shape, elem_size, offset, region = _IO.unpack_from(data, at)
        if any(d <= 0 for d in shape):
            raise _error(name, base + at, f"tensor {i} has shape {shape} (dimensions must be >= 1)")
        if elem_size not in _ELEM_SIZES:
            raise _error(name, base + at, f"tensor {i} has element size {elem_size}")
        if offset < 0:
            raise _error(name, base + at, f"tensor {i} has negative offset {offset}")
        if region != REGION_SCRATCH:
            raise _error(
                name,
                base + at,
                f"tensor {i} is in region {region}; inputs and outputs must be in the scratch "
                f"region {REGION_SCRATCH}",
            )
        tensors.append(VelaTensor(list(shape), elem_size, offset, region))
    return tensors


def parse_blob(data: bytes) -> VelaBlob:
    """Read and verify a blob: every block once, header first, footer last, 16-byte aligned,
    zero padding, I/O tensors inside the scratch area. BlobError names block and byte offset."""
    data = bytes(data)
    if len(data) % ALIGNMENT:
        raise _error(None, len(data), f"blob length {len(data)} is not a multiple of {ALIGNMENT}")
    blocks: dict[str, tuple[int, bytes]] = {}
    pos = 0
    while pos < len(data):
        if len(data) - pos < _HEADER.size:
            raise _error(None, pos, f"truncated block header ({len(data) - pos} bytes left)")
        raw_name, size, external, reserved = _HEADER.unpack_from(data, pos)
        name_bytes = raw_name.rstrip(b"\0")
        try:
            name = name_bytes.decode("ascii")
        except UnicodeDecodeError:
            name = repr(name_bytes)
        if b"\0" in name_bytes or name not in BLOCK_ORDER:
            raise _error(
                None,
                pos,
                f"unknown block name {raw_name!r}; expected one of {', '.join(BLOCK_ORDER)}",
            )
        if name in blocks:
            raise _error(name, pos, "duplicate block")
        if not blocks and name != HEADER_BLOCK:
            raise _error(name, pos, f"the first block must be {HEADER_BLOCK!r}")
        if external:
            raise _error(name, pos, f"external flag {external}: external data is not supported")
        if any(reserved):
            raise _error(name, pos, "reserved header bytes are not zero")
        start = pos + _HEADER.size
        end = start + size
        padded_end = start + _padded(size)
        if padded_end > len(data):
            raise _error(
                name,
                pos,
                f"truncated: {size} data bytes (padded {_padded(size)}) "
                f"but only {len(data) - start} left",
            )
        if any(data[end:padded_end]):
            raise _error(name, end, "padding bytes are not zero")
        blocks[name] = (start, data[start:end])
        pos = padded_end
        if name == FOOTER_BLOCK:
            break
    if pos != len(data):
        raise _error(FOOTER_BLOCK, pos, f"{len(data) - pos} bytes after the end block")
    missing = [n for n in BLOCK_ORDER if n not in blocks]
    if missing:
        raise _error(None, len(data), f"missing block(s) {', '.join(missing)}")

    for name in (HEADER_BLOCK, FOOTER_BLOCK):
        start, body = blocks[name]
        if body:
            raise _error(name, start, f"must be empty, has {len(body)} bytes")
    start, cmd = blocks["cmd_data"]
    if cmd[:4] not in COMMAND_STREAM_MAGICS:
        raise _error("cmd_data", start, f"command stream starts with {cmd[:4]!r}, not b'COP1'")
    if len(cmd) % 4:
        raise _error(
            "cmd_data", start, f"command stream length {len(cmd)} is not whole 32-bit words"
        )
    start, raw = blocks["scratch_size"]
    if len(raw) != 4:
        raise _error("scratch_size", start, f"{len(raw)} bytes, expected 4 (u32)")
    (scratch_size,) = struct.unpack("<I", raw)
    ios = {}
    for name in ("inputs", "outputs"):
        start, body = blocks[name]
        ios[name] = _parse_ios(name, body, start)
        for i, t in enumerate(ios[name]):
            if t.offset + t.nbytes > scratch_size:
                raise _error(
                    name,
                    start + 4 + i * _IO.size,
                    f"tensor {i} ({t.nbytes} bytes at offset {t.offset}) ends past the scratch "
                    f"area of {scratch_size} bytes",
                )
    return VelaBlob(
        command_stream=cmd,
        weights=blocks["weight_data"][1],
        scratch_size=scratch_size,
        inputs=ios["inputs"],
        outputs=ios["outputs"],
        data_offsets={name: start for name, (start, _) in blocks.items()},
    )
