"""quantized_linear's verified-arguments path on QEMU (Cortex-M55, Helium build).

The runner initialises the method once and executes it for each embedded sample, as an
inference loop does: the first execution checks every argument, later ones take the kernel's
short path (ctx->arguments_verified). Every sample's outputs must equal the reference
interpreter's for that sample, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_kernels_mve_conv import BOARD, CASES, _build_program
from torchmcu import device
from torchmcu.pte.writer import serialize
from torchmcu.reference import interpreter

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

SAMPLES = 3


def test_linear_samples_bit_exact_after_first_call(tmp_path) -> None:
    cases = [c for c in CASES if c.op == "cortex_m::quantized_linear"]
    program, first = _build_program(cases)
    rng = np.random.default_rng(99)
    samples = [first] + [
        [rng.integers(-128, 128, size=x.shape, dtype=np.int16).astype(np.int8) for x in first]
        for _ in range(SAMPLES - 1)
    ]
    on_device, _ = device.run_samples(serialize(program), BOARD, samples, tmp_path, timeout=120)
    assert len(on_device) == SAMPLES
    for s, inputs in enumerate(samples):
        expected = interpreter.run_program(program, inputs)
        for case, got, want in zip(cases, on_device[s], expected):
            assert got.tobytes() == want.tobytes(), f"sample {s}, {case.name}: differs from the reference on QEMU"
    # The samples differ, so a path that reused the first call's outputs would fail above.
    assert any(a.tobytes() != b.tobytes() for a, b in zip(on_device[0], on_device[1]))
