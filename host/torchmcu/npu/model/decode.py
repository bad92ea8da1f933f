"""Decoding Vela's driver payload and the register command stream inside it."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from torchmcu.npu.model.registers import (
    CMD0_MUST_BE_ZERO,
    CMD1_FLAG,
    CMD1_MUST_BE_ZERO,
    OPCODE_MASK,
    SIGNED_PARAMS,
    product,
    tables,
)

PAYLOAD_MAGIC = 0x31504F43  # "COP1"
# Driver-payload actions (bits 7:0 of an action word), as Vela's driver_actions.py writes them.
_OPTIMIZER_CONFIG = 1
_COMMAND_STREAM = 2
_DEBUG_ACTIONS = (3, 4, 5)  # READ_APB_REG, DUMP_SHRAM, NOP


class CommandStreamError(ValueError):
    """A malformed payload or command stream; `offset` is the word offset in the stream."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"command stream word {offset}: {message}")
        self.offset = offset


@dataclass(frozen=True)
class Command:
    offset: int  # word offset in the register command stream
    name: str
    param: int  # the 16-bit parameter (sign-extended for signed registers)
    data: int | None = None  # the 32-bit payload of a cmd1

    @property
    def address(self) -> int:
        """A cmd1 address register: bits 39:32 of the address travel in the parameter."""
        assert self.data is not None
        return ((self.param & 0xFF) << 32) | self.data

    def __str__(self) -> str:
        if self.data is None:
            return f"{self.offset:6d}  {self.name:<28} {self.param}"
        return f"{self.offset:6d}  {self.name:<28} {self.param} 0x{self.data:08x} ({self.data})"


def _words(data: bytes) -> tuple[int, ...]:
    if len(data) % 4:
        raise CommandStreamError(len(data) // 4, f"length {len(data)} is not whole 32-bit words")
    return struct.unpack(f"<{len(data) // 4}I", data)


def payload_config(payload: bytes) -> int | None:
    """The CONFIG register value of the payload's OPTIMIZER_CONFIG action (the word after the
    action's header, as our driver reads it), or None without one."""
    words = _words(payload)
    i = 1
    while i < len(words):
        action = words[i] & 0xFF
        if action == _OPTIMIZER_CONFIG:
            return words[i + 1] if i + 1 < len(words) else None
        if action == _COMMAND_STREAM:
            i += 1 + (((words[i] >> 8) & 0xFF) << 16 | words[i] >> 16)
        else:
            i += 1
    return None


def payload_product(payload: bytes) -> int:
    """CONFIG.product of the NPU the payload was compiled for (0 U55 without a config)."""
    config = payload_config(payload)
    return 0 if config is None else product(config)


def command_stream(payload: bytes) -> bytes:
    """The register command stream inside Vela's driver payload ("COP1" + actions)."""
    words = _words(payload)
    if not words or words[0] != PAYLOAD_MAGIC:
        raise CommandStreamError(0, "driver payload does not start with COP1")
    found: bytes | None = None
    i = 1
    while i < len(words):
        action = words[i] & 0xFF
        if action == _OPTIMIZER_CONFIG:
            i += 3
        elif action == _COMMAND_STREAM:
            length = ((words[i] >> 8) & 0xFF) << 16 | words[i] >> 16
            if found is not None or length == 0 or i + 1 + length > len(words):
                raise CommandStreamError(i, f"bad COMMAND_STREAM action (length {length})")
            found = payload[4 * (i + 1) : 4 * (i + 1 + length)]
            i += 1 + length
        elif action in _DEBUG_ACTIONS:
            i += 1
        else:
            raise CommandStreamError(i, f"unknown driver action {action}")
    if found is None:
        raise CommandStreamError(len(words), "driver payload has no command stream")
    return found


def decode(stream: bytes, product: int = 0) -> list[Command]:
    """Every command of a register command stream, in order; CommandStreamError on a bad
    opcode, a set must-be-zero bit or a cmd1 cut off at the end. `product` is CONFIG.product
    (0 U55, 1 U65, 2 U85: its own opcode table)."""
    cmd0, cmd1 = tables(product)
    words = _words(stream)
    out: list[Command] = []
    i = 0
    while i < len(words):
        word = words[i]
        code = word & OPCODE_MASK
        param = word >> 16
        if word & CMD1_FLAG:
            name = cmd1.get(code)
            if name is None or word & CMD1_MUST_BE_ZERO:
                raise CommandStreamError(i, f"invalid cmd1 opcode 0x{code:03x} (word 0x{word:08x})")
            if i + 1 >= len(words):
                raise CommandStreamError(i, f"{name} lacks its payload word")
            out.append(Command(i, name, param, words[i + 1]))
            i += 2
        else:
            name = cmd0.get(code)
            if name is None or word & CMD0_MUST_BE_ZERO:
                raise CommandStreamError(i, f"invalid cmd0 opcode 0x{code:03x} (word 0x{word:08x})")
            if name in SIGNED_PARAMS and param >= 0x8000:
                param -= 0x10000
            out.append(Command(i, name, param))
            i += 1
    return out
