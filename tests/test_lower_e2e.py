"""End to end: quantize -> lower -> serialize -> the C runtime, which must reproduce the
reference interpreter bit for bit on the example models."""

from __future__ import annotations

import numpy as np
import pytest

from torchmcu.examples import models
from torchmcu.lower import lower_to_program
from torchmcu.pte.writer import serialize
from torchmcu.quantize import quantize

interpreter = pytest.importorskip("torchmcu.reference.interpreter")
native = pytest.importorskip("torchmcu.native")


def _check(name: str, int8_io: bool = False) -> None:
    model, example = models.build(name)
    cal = models.calibration(name, 6)
    gm = quantize(model, example, cal)
    program, report = lower_to_program(gm, example, int8_io=int8_io)
    pte = serialize(program)
    for sample in cal[:2]:
        if int8_io:
            info = report.inputs[0]
            x = np.clip(np.round(sample[0].numpy() / info["scale"]) + info["zero_point"],
                        -128, 127).astype(np.int8)
        else:
            x = sample[0].numpy()
        expected = interpreter.run_program(program, [x])
        got = native.run_program(pte, [x])
        assert len(got) == len(expected) == 1
        assert got[0].dtype == expected[0].dtype and got[0].shape == expected[0].shape
        np.testing.assert_array_equal(got[0], expected[0])


@pytest.mark.parametrize("name", ["small_cnn", "ds_cnn", "deep_autoencoder"])
def test_native_matches_reference(name):
    _check(name)


def test_native_matches_reference_int8_io():
    _check("small_cnn", int8_io=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet8", "mobilenet_v2_like"])
def test_native_matches_reference_large(name):
    _check(name)
