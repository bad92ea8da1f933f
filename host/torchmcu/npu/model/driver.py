"""The model behind our real driver (issue 20, item 2): the host extension's register block
calls `run_job` on the driver's RUN command (firmware/host_ext/host_npu.c).

It gets what the NPU would see: the command stream at QBASE (QSIZE bytes), the memory at each
base pointer the driver set (as far as the driver handed it to the NPU) and the CONFIG register,
and answers with the STATUS fault bits and QREAD the hardware would leave. Faults the hardware
reports are returned, never raised; anything else (a feature the model lacks) propagates and
becomes the run's NativeError cause.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from torchmcu.npu.model import weights_u85 as u85
from torchmcu.npu.model.decode import CommandStreamError
from torchmcu.npu.model.machine import TraceEntry, execute
from torchmcu.npu.model.memory import SHRAM, SHRAM_BYTES, BusError, Memory
from torchmcu.npu.model.registers import PRODUCT_U85, product

# STATUS bits (firmware/drivers/ethos_u/ethos_u_regs.h)
STATUS_BUS_ERROR = 1 << 2
STATUS_PARSE_ERROR = 1 << 4


@dataclass(frozen=True)
class Job:
    """One run of a delegate's command stream: its operations (up to a fault, if any)."""

    delegate: int  # the program's delegate index
    operations: list[TraceEntry]
    fault: str = ""  # what went wrong, as the error path reports it


def run_job(
    stream: memoryview,
    regions: dict[int, memoryview],
    config: int,
    delegate: int = 0,
    trace: list[Job] | None = None,
) -> tuple[int, int, str]:
    """(STATUS fault bits, QREAD in bytes, what went wrong) for one run of the command stream.
    `trace` (if given) gets a Job per run: `torchmcu run --npu-trace`."""
    npu = product(config)  # CONFIG.product: 0 U55, 1 U65, 2 U85
    if npu not in (0, 1, PRODUCT_U85):
        raise NotImplementedError(f"the functional model has no NPU of product {npu}")
    macs = 1 << (config & 0xF)  # CONFIG.macs_per_cc is log2
    internal = u85.SHRAM_BYTES if npu == PRODUCT_U85 else SHRAM_BYTES.get(macs)
    if internal is None or (npu == PRODUCT_U85 and macs not in u85.CORES):
        raise NotImplementedError(f"the functional model has no {macs}-MAC configuration")
    mem = {r: np.frombuffer(view, np.uint8) for r, view in regions.items()}
    mem[SHRAM] = np.zeros(internal, np.uint8)  # internal, cleared per job
    ops: list[TraceEntry] = []
    try:
        execute(bytes(stream), Memory(mem), macs, ops, npu)
    except CommandStreamError as e:
        result = STATUS_PARSE_ERROR, 4 * e.offset, str(e)
    except BusError as e:
        # The NPU has read the stream up to and including the operation that faulted.
        result = STATUS_BUS_ERROR, 0 if e.offset is None else 4 * (e.offset + 1), str(e)
    else:
        result = 0, len(stream), ""
    if trace is not None:
        trace.append(Job(delegate, ops, result[2]))
    return result


TRACE_HEADER = (
    f"{'word':>6}  {'operation':<20} {'IFM (+ IFM2) HxWxC@region+address':>24} -> "
    f"{'OFM HxWxC@region+address':<24} {'MACs':>10}"
)


def trace_lines(jobs: list[Job], nn_macs: dict[int, int] | None = None) -> list[str]:
    """`torchmcu run --npu-trace`: per job its operations (TraceEntry lines) and MAC total,
    beside Vela's nn_macs for that delegate when known (the export's report)."""
    lines = [TRACE_HEADER]
    for n, job in enumerate(jobs):
        lines.append(f"delegate {job.delegate}, NPU job {n}: {len(job.operations)} operations")
        lines.extend(str(op) for op in job.operations)
        total = sum(op.macs for op in job.operations)
        vela = (nn_macs or {}).get(job.delegate)
        if job.fault:
            lines.append(f"  fault: {job.fault}")
        versus = (
            "" if vela is None else f" (Vela's nn_macs {vela}{'' if vela == total else ', differ'})"
        )
        lines.append(f"  {total} MACs{versus}")
    return lines
