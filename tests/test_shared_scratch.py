"""The kernels' prepare step and the method's shared scratch (issue 19).

A program planned for another runtime (ExecuTorch's plans CMSIS-NN's smaller conv buffers) gives
quantized_conv2d less `scratch` than its Helium path needs. tm_method_init runs each kernel's
prepare step, which checks the arguments once and reports what the kernel needs beyond its
scratch argument; torchmcu.device.plan sizes the arena as planned + that, and the kernel takes
the rest from the arena's tail. Checked here:

1. on the host, program_info's scratch_bytes is the Helium need of the largest such conv
   (torchmcu.reference.scratch, the host mirror of the C sizes), 0 when every conv has its own;
2. the host runtime's outputs stay the reference interpreter's.

On QEMU, test_kernels_mve_conv.py runs short-scratch convolutions bit-exact in its image (which
reports no shortage); bench/runtime_interop.py measures the speed (ExecuTorch's programs) and
the first against the steady inference.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_kernels_mve_conv import _build_program, conv_case, linear_case
from torchmcu import native
from torchmcu.device.plan import device_plan
from torchmcu.pte import program as pm
from torchmcu.pte.writer import serialize
from torchmcu.reference import interpreter
from torchmcu.reference.scratch import SCRATCH_BYTES

CONV = "cortex_m::quantized_conv2d"


def _cases():
    rng = np.random.default_rng(19)
    return [
        conv_case(rng, "conv1x1", 1, 8, 8, 16, 16, 1, 1),
        conv_case(rng, "conv3x3", 1, 8, 8, 8, 12, 3, 3, pad=(1, 1)),
        linear_case(rng, "fc", 1, 64, 12, "bias"),
    ]


def _shrink_scratch(program: pm.Program) -> pm.Program:
    """The conv calls' scratch tensors cut to 1 byte, as a foreign plan could leave them."""
    plan = program.execution_plan[0]
    for ins in plan.chains[0].instructions:
        if plan.operators[ins.op_index].name == CONV:
            scratch = plan.values[ins.args[12]]
            scratch.sizes = [1]
    return program


def _need(cases) -> int:
    return max(
        SCRATCH_BYTES[CONV](c.x.shape, tuple(c.args["weight"].shape)) for c in cases if c.op == CONV
    )


@pytest.fixture(scope="module")
def programs():
    cases = _cases()
    planned, inputs = _build_program(cases)
    short, _ = _build_program(cases)
    return (
        {"planned": serialize(planned), "short": serialize(_shrink_scratch(short))},
        inputs,
        cases,
    )


def test_program_info_reports_the_shared_scratch(programs) -> None:
    ptes, _, cases = programs
    assert native.program_info(ptes["planned"])["scratch_bytes"] == 0
    assert native.program_info(ptes["short"])["scratch_bytes"] == _need(cases) > 16
    plan = device_plan(ptes["short"])
    arena = native.program_info(ptes["short"])["arena_bytes"]
    assert plan.arena_bytes == -(-arena // 16) * 16 + _need(cases)


def test_host_runtime_unchanged_by_a_short_scratch(programs) -> None:
    ptes, inputs, _ = programs
    want = interpreter.run_program(_shrink_scratch(_build_program(_cases())[0]), inputs)
    for got, ref in zip(native.run_program(ptes["short"], inputs), want):
        assert got.tobytes() == ref.tobytes()
