"""The small ViT of issue 18 (torchmcu.examples.architectures.vit: patch 8, 32x32 input, 2
pre-norm encoder layers, dim 64, 4 heads): a strict CPU-only export is int8 calls only; the C
runtime is bit-exact with the reference interpreter on the host, and QEMU with the host;
its residual stream is int16 (quantized_add16 into the layer norms) and its SQNR against the
float model is above ExecuTorch's Cortex-M flow (28.3 dB on 64 inputs, bench/README.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torchmcu
from torchmcu import device, native
from torchmcu.examples import models
from torchmcu.pte.reader import parse
from torchmcu.reference.interpreter import run_program

NAME = "vit_tiny"


@pytest.fixture(scope="module")
def vit(tmp_path_factory: pytest.TempPathFactory):
    model, example = models.build(NAME)
    exp = torchmcu.export(model, example, calibration=models.calibration(NAME, 16), strict=True)
    out = tmp_path_factory.mktemp("vit")
    exp.save(out, name=NAME)
    samples = [x.numpy() for (x,) in models.calibration(NAME, 4, seed=9)]
    floats = [model(*(t,)).detach().numpy() for (t,) in models.calibration(NAME, 4, seed=9)]
    return out / f"{NAME}.pte", samples, floats


def test_exports_as_int8_calls_only(vit):
    plan = parse(vit[0].read_bytes()).execution_plan[0]
    ops = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert all(op.startswith(("cortex_m::", "torchmcu::")) for op in ops), sorted(set(ops))
    assert (
        ops.count("cortex_m::quantize_per_tensor")
        == ops.count("cortex_m::dequantize_per_tensor")
        == 1
    )
    for op, count in (
        ("cortex_m::quantized_batch_matmul", 4),
        ("torchmcu::quantized_layer_norm", 5),
        ("cortex_m::softmax", 2),
        ("torchmcu::quantized_add16", 5),  # the residual stream: +pos_embed and 4 residual adds
        ("cortex_m::quantized_add", 0),
    ):
        assert ops.count(op) == count, op


def test_host_bit_exact_with_the_reference_and_sqnr(vit):
    pte, samples, floats = vit
    program = parse(pte.read_bytes())
    signal = noise = 0.0
    for x, f in zip(samples, floats):
        (ours,) = native.run_program(pte.read_bytes(), [x])
        (reference,) = run_program(program, [x])
        np.testing.assert_array_equal(ours, reference)
        signal += float((f.astype(np.float64) ** 2).sum())
        noise += float(((f - ours).astype(np.float64) ** 2).sum())
    assert 10 * np.log10(signal / noise) > 30.0  # int16 stream 31.4 dB, all int8 28.2


@pytest.mark.needs("arm-gcc", "newlib", "qemu")
def test_qemu_bit_exact_with_the_host(vit, tmp_path: Path):
    pte, samples, _ = vit
    info = native.program_info(pte.read_bytes())
    blob = device.write_io_blob(info, [[samples[0]]])
    image = device.build(
        [pte],
        "qemu-an547",
        tmp_path / "fw",
        inputs=[blob],
        ops_yaml=pte.parent / "selected_operators.yaml",
    )
    result = device.run(image.elf, "qemu-an547", 600).check()
    (want,) = native.run_program(pte.read_bytes(), [samples[0]])
    (got,) = result.outputs(info, 0)
    np.testing.assert_array_equal(got, want)
