"""The NPU's view of memory: one byte array per base-pointer region, as the driver maps them."""

from __future__ import annotations

import numpy as np


class BusError(RuntimeError):
    """An access outside the memory mapped to a region (the hardware raises a bus error).
    `offset`: the word offset of the operation that made it, once the command loop knows it."""

    offset: int | None = None


# The NPU's internal shared buffer (SHRAM) is addressed by DMA with the "internal" bit; we keep
# it under this key. Its size per MAC configuration is Vela's shram_banks (1 KB banks).
SHRAM = -1
SHRAM_BYTES = {32: 16 * 1024, 64: 16 * 1024, 128: 24 * 1024, 256: 48 * 1024, 512: 48 * 1024}


class Memory:
    def __init__(self, regions: dict[int, np.ndarray]) -> None:
        for r, a in regions.items():
            if a.dtype != np.uint8 or a.ndim != 1:
                raise TypeError(f"region {r}: expected a 1-D uint8 array, got {a.dtype} {a.shape}")
        self.regions = regions
        # The U85's chaining buffer: the last OFM an operation wrote with activation_storage
        # CHAINED, as values. Assumption: the next operation that reads a CHAINED IFM takes it
        # whole (the hardware passes it block by block; the result is the same).
        self.chain: np.ndarray | None = None

    def read_chain(self, h: int, w: int, c: int, what: str) -> np.ndarray:
        if self.chain is None or self.chain.shape[0] < h or self.chain.shape[1] < w:
            got = None if self.chain is None else self.chain.shape
            raise BusError(
                f"{what}: the chaining buffer holds {got}, the operation reads {h}x{w}x{c}"
            )
        if self.chain.shape[2] < c:
            raise BusError(
                f"{what}: the chaining buffer holds {self.chain.shape[2]} channels, not {c}"
            )
        return self.chain[:h, :w, :c]

    def region(self, index: int) -> np.ndarray:
        if index not in self.regions:
            raise BusError(f"region {index} has no memory mapped (base pointer not set)")
        return self.regions[index]

    def _check(self, index: int, offsets: np.ndarray, size: int, what: str) -> np.ndarray:
        mem = self.region(index)
        if offsets.size and (offsets.min() < 0 or offsets.max() + size > mem.size):
            raise BusError(
                f"{what}: bytes {int(offsets.min())}..{int(offsets.max()) + size - 1} of region "
                f"{index}, which maps {mem.size} bytes"
            )
        return mem

    def read(
        self, index: int, offsets: np.ndarray, size: int, signed: bool, what: str
    ) -> np.ndarray:
        """Little-endian `size`-byte integers at each offset, as int64."""
        mem = self._check(index, offsets, size, what)
        value = np.zeros(offsets.shape, np.int64)
        for k in range(size):
            value |= mem[offsets + k].astype(np.int64) << (8 * k)
        if signed:
            top = 1 << (8 * size - 1)
            value = np.where(value >= top, value - 2 * top, value)
        return value

    def write(
        self, index: int, offsets: np.ndarray, size: int, values: np.ndarray, what: str
    ) -> None:
        mem = self._check(index, offsets, size, what)
        v = values.astype(np.int64)
        for k in range(size):
            mem[offsets + k] = ((v >> (8 * k)) & 0xFF).astype(np.uint8)

    def read_bytes(self, index: int, offset: int, length: int, what: str) -> bytes:
        mem = self._check(index, np.array([offset]), length, what)
        return mem[offset : offset + length].tobytes()
