"""Inputs (and optional expected outputs) embedded in a firmware image, and the runner's default.

The blob layout is documented in firmware/runner/io_blob.h ("TMIO" version 1). Tensors are
written in memory order: a channels-last activation (dim order 0,2,3,1) is stored NHWC, as the
runtime holds it, so the runner copies bytes without knowing layouts.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

MAGIC = b"TMIO"
VERSION = 1


def _pad16(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 16)


def tensor_bytes(x: Any, meta: dict[str, Any]) -> bytes:
    """The memory bytes of a logical-shape array for a tensor described by program_info."""
    arr = np.asarray(x)
    dtype = np.dtype(meta["dtype"])
    if arr.dtype != dtype or tuple(arr.shape) != tuple(meta["sizes"]):
        raise ValueError(f"expected {dtype}{list(meta['sizes'])}, got {arr.dtype}{list(arr.shape)}")
    order = tuple(meta["dim_order"])
    physical = arr.transpose(order) if arr.ndim else arr
    return np.ascontiguousarray(physical).tobytes()


def from_tensor_bytes(data: bytes, meta: dict[str, Any]) -> np.ndarray:
    """Inverse of tensor_bytes: memory bytes -> a contiguous array in logical sizes."""
    sizes, order = list(meta["sizes"]), list(meta["dim_order"])
    physical = np.frombuffer(data, dtype=np.dtype(meta["dtype"])).reshape([sizes[d] for d in order])
    return np.ascontiguousarray(physical.transpose(np.argsort(order)) if sizes else physical)


def write_io_blob(
    info: dict[str, Any],
    samples: Sequence[Sequence[Any]],
    expected: Sequence[Sequence[Any]] | None = None,
) -> bytes:
    """Serialise input samples (each a sequence of logical arrays, one per method input) and,
    optionally, expected outputs per sample, for the method described by native.program_info."""
    if not samples:
        raise ValueError("no input samples to embed")
    if expected is not None and len(expected) != len(samples):
        raise ValueError(f"{len(expected)} expected-output sets for {len(samples)} samples")
    n_in, n_out = len(info["inputs"]), len(info["outputs"])
    parts = [
        MAGIC,
        struct.pack("<IIII", VERSION, len(samples), n_in, n_out if expected else 0),
        b"\0" * 12,
    ]
    for s, sample in enumerate(samples):
        if len(sample) != n_in:
            raise ValueError(f"sample {s}: {len(sample)} inputs given, the method takes {n_in}")
        records = [
            (x, m, f"sample {s} input {i}") for i, (x, m) in enumerate(zip(sample, info["inputs"]))
        ]
        if expected is not None:
            if len(expected[s]) != n_out:
                raise ValueError(
                    f"sample {s}: {len(expected[s])} expected outputs, the method has {n_out}"
                )
            records += [
                (y, m, f"sample {s} output {i}")
                for i, (y, m) in enumerate(zip(expected[s], info["outputs"]))
            ]
        for x, meta, where in records:
            try:
                data = tensor_bytes(x, meta)
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
            parts += [struct.pack("<I", len(data)), b"\0" * 12, _pad16(data)]
    return b"".join(parts)


def default_inputs(info: dict[str, Any]) -> list[np.ndarray]:
    """The runner's deterministic default inputs (fill_default in firmware/runner/main.c),
    in logical sizes. Floats are k/2^23 - 1 for a 24-bit k: exact in float32."""
    out = []
    for index, meta in enumerate(info["inputs"]):
        n = int(np.prod(meta["sizes"], dtype=np.int64))
        state = (0x9E3779B9 ^ ((index * 0x85EBCA6B) & 0xFFFFFFFF)) & 0xFFFFFFFF
        seq = np.empty(n, dtype=np.uint32)
        for i in range(n):  # inputs are small; a plain loop keeps the recurrence obvious
            state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
            seq[i] = state
        dtype = np.dtype(meta["dtype"])
        if dtype == np.float32:
            values = ((seq >> 8).astype(np.int64) - 0x800000).astype(np.float32) / np.float32(
                8388608.0
            )
        elif dtype in (np.dtype(np.int8), np.dtype(np.uint8)):
            values = (seq >> 24).astype(np.uint8).view(dtype)
        elif dtype == np.dtype(np.bool_):
            values = ((seq >> 24) & 1).astype(np.bool_)
        else:
            width = dtype.itemsize
            raw = np.stack([(seq >> (8 * (b & 3))).astype(np.uint8) for b in range(width)], axis=1)
            values = raw.reshape(-1).view(dtype)
        physical_shape = [meta["sizes"][d] for d in meta["dim_order"]]
        data = np.ascontiguousarray(values).reshape(physical_shape).tobytes()
        out.append(from_tensor_bytes(data, meta))
    return out
