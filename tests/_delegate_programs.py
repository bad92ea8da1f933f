"""Hand-built programs with an EthosUBackend DelegateCall, shared by the delegate tests.

The blob comes from torchmcu.npu.blob.pack_blob (the Vela helper's packer) when it is in the
tree, else from the small packer here (same block layout, FACTS.md). Layouts and offsets are
chosen by hand.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from torchmcu.pte import program as pm

COMMAND = b"COP1" + bytes(12)  # a payload the host backend never runs (no NPU on the host)


@dataclass(frozen=True)
class IO:
    shape: list[int]  # 6-D
    elem_size: int
    offset: int
    region: int = 1


def _block(name: str, data: bytes) -> bytes:
    head = struct.pack("<16sIB11s", name.encode(), len(data), 0, bytes(11))
    return head + data + bytes(-len(data) % 16)


def _ios(ios: list[IO]) -> bytes:
    return struct.pack("<i", len(ios)) + b"".join(
        struct.pack("<9i", *t.shape, t.elem_size, t.offset, t.region) for t in ios
    )


def own_pack(cmd: bytes, weights: bytes, scratch: int, ins: list[IO], outs: list[IO]) -> bytes:
    """The block layout of FACTS.md, independent of the code under test."""
    return b"".join(
        [
            _block("vela_bin_stream", b""),
            _block("cmd_data", cmd),
            _block("weight_data", weights),
            _block("scratch_size", struct.pack("<I", scratch)),
            _block("inputs", _ios(ins)),
            _block("outputs", _ios(outs)),
            _block("vela_end_stream", b""),
        ]
    )


def pack(cmd: bytes, weights: bytes, scratch: int, ins: list[IO], outs: list[IO]) -> bytes:
    try:
        from torchmcu.npu.blob import VelaTensor, pack_blob
    except ImportError:
        return own_pack(cmd, weights, scratch, ins, outs)

    def conv(ts: list[IO]) -> list:
        return [VelaTensor(list(t.shape), t.elem_size, t.offset, t.region) for t in ts]

    blob = pack_blob(cmd, weights, scratch, conv(ins), conv(outs))
    assert blob == own_pack(cmd, weights, scratch, ins, outs)  # both packers agree on the layout
    return blob


# The subgraph's I/O as Vela would place it in the 48-byte scratch: a (NHWC 1x2x2x3) at 0,
# b (1x4) at 16, the output (1x4) at 32.
BLOB_INPUTS = [IO([1, 1, 1, 2, 2, 3], 1, 0), IO([1, 1, 1, 1, 1, 4], 1, 16)]
BLOB_OUTPUTS = [IO([1, 1, 1, 1, 1, 4], 1, 32)]
SCRATCH = 48


def default_blob() -> bytes:
    return pack(COMMAND, bytes(range(32)), SCRATCH, BLOB_INPUTS, BLOB_OUTPUTS)


def delegate_program(
    blob: bytes | None = None,
    delegate_id: str = "EthosUBackend",
    scratch_bytes: int = SCRATCH,
    drop_scratch_arg: bool = False,
    b_type: pm.ScalarType = pm.ScalarType.CHAR,
    b_size: int = 4,
    extra_delegates: int = 0,
) -> pm.Program:
    """forward(a: int8 [1,3,2,2] NHWC, b: int8 [1,b_size]) -> (d, y):
    d = EthosUBackend(a, b) [1,4] int8, then y = cortex_m::transpose(d, [1, 0]) [4,1] on the CPU
    (so the delegate's output must really be in d's memory when the next kernel runs)."""
    after = 48 + 16 * ((scratch_bytes + 15) // 16)
    values = [
        pm.Tensor(
            pm.ScalarType.CHAR, [1, 3, 2, 2], [0, 2, 3, 1], allocation=pm.Allocation(1, 0)
        ),  # 0 a
        pm.Tensor(b_type, [1, b_size], [0, 1], allocation=pm.Allocation(1, 16)),  # 1 b
        pm.Tensor(pm.ScalarType.CHAR, [1, 4], [0, 1], allocation=pm.Allocation(1, 32)),  # 2 d
        pm.Tensor(
            pm.ScalarType.BYTE, [scratch_bytes], [0], allocation=pm.Allocation(1, 48)
        ),  # 3 scratch
        pm.Int(1),  # 4
        pm.Int(0),  # 5
        pm.IntList([4, 5]),  # 6 perm
        pm.Tensor(pm.ScalarType.CHAR, [4, 1], [0, 1], allocation=pm.Allocation(1, after)),  # 7 y
    ]
    dargs = [0, 1, 2] if drop_scratch_arg else [0, 1, 2, 3]
    blob = default_blob() if blob is None else blob
    delegates = [
        pm.BackendDelegate(
            delegate_id,
            0,
            [pm.CompileSpec("output_format", b"vela"), pm.CompileSpec("npu", b"u55-128")],
        )
    ] + [pm.BackendDelegate(delegate_id, 0) for _ in range(extra_delegates)]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0, 1],
        outputs=[2, 7],
        chains=[
            pm.Chain(
                inputs=[0, 1],
                outputs=[2, 7],
                instructions=[pm.DelegateCall(0, dargs), pm.KernelCall(0, [2, 6, 7, 7])],
            )
        ],
        operators=[pm.Operator("cortex_m::transpose", "out")],
        delegates=delegates,
        non_const_buffer_sizes=[0, after + 16],
    )
    return pm.Program(execution_plan=[plan], segments_data=[blob])
