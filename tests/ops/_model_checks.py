"""Shared end-to-end checks of the small nn.Module tests in tests/ops."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torchmcu import native
from torchmcu.reference.interpreter import run_program as reference_run


def fake_quant_steps(prog, shape: Sequence[int], samples: int, seed: int = 99) -> np.ndarray:
    """|int8 output - torchao's fake-quantized output in output steps| over `samples` random
    inputs of `shape` (one int8 input and output), asserting on each that the host runtime is
    bit-exact with the reference interpreter."""
    (in_q,), (out_q,) = prog.report["inputs"], prog.report["outputs"]
    rng = torch.Generator().manual_seed(seed)
    steps = []
    for _ in range(samples):
        x = torch.randn(tuple(shape), generator=rng)
        inv = np.float32(1.0) / np.float32(in_q["scale"])
        qx = np.clip(np.round(x.numpy() * inv) + in_q["zero_point"], -128, 127).astype(np.int8)
        (ours,) = native.run_program(prog.pte_bytes, [qx])
        (ref,) = reference_run(prog.program, [qx])
        np.testing.assert_array_equal(ours, ref)
        with torch.no_grad():
            fq = prog.quantized_model(x).double().numpy()
        want = np.round(fq / out_q["scale"]) + out_q["zero_point"]
        steps.append(np.abs(ours.astype(np.int64) - want.astype(np.int64)).ravel())
    return np.concatenate(steps)


def float_region(body: torch.nn.Module, shape: Sequence[int]):
    """`body` kept in float32 (set_module_name(..., None)) and exported: (the kernel names
    called, torch's output, the host runtime's, the reference interpreter's) on one input."""
    import torchmcu
    from torchmcu.quantize import TorchmcuQuantizer

    model = torch.nn.Sequential(body).eval()
    xs = [(torch.randn(tuple(shape)),) for _ in range(2)]
    quantizer = TorchmcuQuantizer().set_module_name("0", None)
    e = torchmcu.export(model, xs[0], calibration=xs, quantizer=quantizer)
    plan = e.program.execution_plan[0]
    names = {plan.operators[i.op_index].name for i in plan.chains[0].instructions}
    x = xs[1][0]
    with torch.no_grad():
        want = model(x).numpy()
    (got,) = native.run_program(e.pte_bytes, [x.numpy()])
    (ref,) = reference_run(e.program, [x.numpy()])
    return names, want, got, ref
