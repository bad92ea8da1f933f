"""One delegate on the model: memory laid out by region as the driver maps it, inputs copied
to their scratch offsets, outputs read back as bytes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from torchmcu.npu.blob import (
    REGION_FAST_SCRATCH,
    REGION_SCRATCH,
    REGION_WEIGHTS,
    VelaBlob,
    parse_blob,
)
from torchmcu.npu.model import weights_u85 as u85
from torchmcu.npu.model.decode import payload_product
from torchmcu.npu.model.machine import TraceEntry, run_payload
from torchmcu.npu.model.memory import SHRAM, SHRAM_BYTES, Memory
from torchmcu.npu.model.registers import PRODUCT_U85


@dataclass
class Result:
    outputs: list[bytes]
    trace: list[TraceEntry] = field(default_factory=list)


def run_blob(
    blob: bytes | VelaBlob,
    inputs: Sequence[bytes],
    *,
    fast_scratch_size: int = 0,
    macs_per_cc: int = 128,
) -> Result:
    """Run an EthosUBackend blob with the delegate's input bytes (in Vela's input order)."""
    b = parse_blob(blob) if isinstance(blob, bytes | bytearray) else blob
    if len(inputs) != len(b.inputs):
        raise ValueError(f"the blob takes {len(b.inputs)} inputs, got {len(inputs)}")
    scratch = np.zeros(b.scratch_size, np.uint8)
    for i, (t, data) in enumerate(zip(b.inputs, inputs)):
        if len(data) != t.nbytes:
            raise ValueError(f"input {i}: {len(data)} bytes, Vela expects {t.nbytes}")
        scratch[t.offset : t.offset + t.nbytes] = np.frombuffer(data, np.uint8)
    regions = {
        REGION_WEIGHTS: np.frombuffer(b.weights, np.uint8).copy(),
        REGION_SCRATCH: scratch,
    }
    product = payload_product(b.command_stream)
    internal = u85.SHRAM_BYTES if product == PRODUCT_U85 else SHRAM_BYTES[macs_per_cc]
    regions[SHRAM] = np.zeros(internal, np.uint8)
    if fast_scratch_size:
        regions[REGION_FAST_SCRATCH] = np.zeros(fast_scratch_size, np.uint8)
    trace = run_payload(b.command_stream, Memory(regions), macs_per_cc, product)
    outs = [scratch[t.offset : t.offset + t.nbytes].tobytes() for t in b.outputs]
    return Result(outs, trace)
