"""The Ethos-U55 functional model (torchmcu.npu.model) against the TOSA reference model.

An NPU program runs on the C host runtime with every delegate going through the TOSA reference
model on its saved TOSA graph; each delegate call's input and output bytes are recorded. The
functional model then runs that delegate's Vela output (command stream, weights, scratch
layout) on the same input bytes. The model never sees the TOSA graph: the two are independent,
and this module (not the model package) is where they meet.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class DelegateCall:
    index: int  # which delegate (subgraph)
    inputs: list[np.ndarray]  # physical layout, as the runtime handed them
    outputs: list[np.ndarray]  # the TOSA reference model's


@dataclass
class Comparison:
    calls: int = 0
    tosa_seconds: float = 0.0
    model_seconds: float = 0.0
    ops: int = 0  # NPU operations the model executed, over all calls
    macs: int = 0  # per delegate (last call), summed over delegates
    vela_macs: int = 0  # Vela's nn_macs, summed over delegates
    mismatches: list[str] = field(default_factory=list)  # empty: bit-exact
    never_ran: list[int] = field(default_factory=list)  # delegates no sample reached


def record_calls(
    exported: Any, samples: Sequence[Sequence[np.ndarray]]
) -> tuple[list[DelegateCall], float]:
    """Every delegate call of the program over the samples, with the TOSA reference's outputs,
    and the seconds the TOSA reference took."""
    from torchmcu import native
    from torchmcu.npu.hostrun import SavedDelegate, delegate_io, tosa_native_fn

    subs = exported.npu.subgraphs
    tosa = tosa_native_fn([SavedDelegate(s.tosa, *delegate_io(s.subprogram)) for s in subs])
    calls: list[DelegateCall] = []
    seconds = 0.0

    def record(index: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
        nonlocal seconds
        start = time.perf_counter()
        outs = tosa(index, inputs)
        seconds += time.perf_counter() - start
        calls.append(
            DelegateCall(index, [np.array(a) for a in inputs], [np.array(o) for o in outs])
        )
        return outs

    for x in samples:
        native.run_program(exported.pte_bytes, list(x), delegate_fn=record)
    return calls, seconds


def compare(
    exported: Any, samples: Sequence[Sequence[np.ndarray]], macs_per_cc: int = 128
) -> Comparison:
    """Run every recorded delegate call through the functional model; the mismatches named."""
    from torchmcu.npu.model.run import run_blob

    subs = exported.npu.subgraphs
    calls, tosa_seconds = record_calls(exported, samples)
    ran = {c.index for c in calls}
    result = Comparison(
        calls=len(calls),
        tosa_seconds=tosa_seconds,
        never_ran=[i for i in range(len(subs)) if i not in ran],
    )
    macs = dict.fromkeys(range(len(subs)), 0)
    for call in calls:
        vela = subs[call.index].vela
        start = time.perf_counter()
        got = run_blob(
            vela.blob,
            [np.ascontiguousarray(a).tobytes() for a in call.inputs],
            fast_scratch_size=vela.fast_scratch_size,
            macs_per_cc=macs_per_cc,
        )
        result.model_seconds += time.perf_counter() - start
        macs[call.index] = sum(t.macs for t in got.trace)
        result.ops += len(got.trace)
        for k, (g, want) in enumerate(zip(got.outputs, call.outputs)):
            w = np.ascontiguousarray(want)
            bad = int(np.count_nonzero(np.frombuffer(g, w.dtype) != w.ravel()))
            if bad:
                result.mismatches.append(
                    f"delegate {call.index} output {k}: {bad} of {w.size} elements differ"
                )
    result.macs = sum(macs.values())
    result.vela_macs = sum(int(s.vela.estimate.get("nn_macs", 0)) for s in subs)
    return result
