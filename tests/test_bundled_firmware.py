"""Bundled programs on the device: the runner built with a .bpte runs every test case on QEMU,
compares on the device and fails naming the case, the output index and the error when one
expected value is changed.

Expected outputs in the bundles come from the host runtime; the device outputs printed by the
runner are also compared here with a separate host run, so a runner that compared nothing (or
always passed) would be caught by the changed-value tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torchmcu
from torchmcu import device, native
from torchmcu.device.run import EXIT_INPUT_ERROR, EXIT_OUTPUT_MISMATCH
from torchmcu.pte import bundled as B

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

MLPERF_TINY = ["ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder"]
BOARD = "qemu-an547"


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bundled-fw")


def _export(name: str, int8_io: bool = False) -> torchmcu.api.ExportedModel:
    from torchmcu.examples import models

    model, example = models.build(name)
    return torchmcu.export(
        model, example, calibration=models.calibration(name, 8, seed=1), int8_io=int8_io
    )


def _samples(name: str, n: int) -> list[list[np.ndarray]]:
    from torchmcu.examples import models

    return [[x.numpy() for x in s] for s in models.calibration(name, n, seed=31)]


def _run(bp: B.BundledProgram, build_dir: Path, **tolerances: float):
    image = device.build(None, BOARD, build_dir, bundle=B.serialize_bundled(bp), **tolerances)
    return device.run(image.elf, BOARD, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("name", MLPERF_TINY)
def test_mlperf_tiny_bundle_passes_on_qemu(name: str, build_dir: Path) -> None:
    exp = _export(name)
    samples = _samples(name, 2)
    bp = exp.bundle(samples)
    result = _run(bp, build_dir)
    assert result.exit_code == 0, result.console
    info = native.program_info(exp.pte_bytes)
    n_out = len(info["outputs"])
    assert "TM_BUNDLE method=forward cases=2" in result.console
    for c in range(2):
        for i in range(n_out):
            assert re.search(
                rf"TM_CHECK case={c} output={i} max_abs_error=0 mismatches=0/\d+ status=PASS",
                result.console,
            ), result.console
    assert "TM_BUNDLE_RESULT status=PASS cases=2 failed_outputs=0" in result.console
    # What the device computed is what a separate host run of the same inputs gives.
    for c, sample in enumerate(samples):
        host = torchmcu.run_on_host(exp.pte_bytes, sample)
        on_device = result.outputs(info, c)
        assert [d.tobytes() for d in on_device] == [h.tobytes() for h in host]


def test_changed_float_expected_value_fails(build_dir: Path) -> None:
    exp = _export("ds_cnn")
    bp = exp.bundle(_samples("ds_cnn", 2))
    expected = bp.method_test_suites[0].test_cases[1].expected_outputs[0]
    values = np.frombuffer(expected.data, dtype=np.float32).copy()
    values[5] += 0.25
    expected.data = values.tobytes()
    result = _run(bp, build_dir)
    assert result.exit_code == EXIT_OUTPUT_MISMATCH, result.console
    assert re.search(
        r"TM_CHECK case=0 output=0 max_abs_error=0 mismatches=0/12 status=PASS", result.console
    )
    m = re.search(
        r"TM_MISMATCH case=1 output=0 index=5 actual=(\S+) expected=(\S+) max_abs_error=(\S+)",
        result.console,
    )
    assert m, result.console
    assert float(m[3]) == pytest.approx(0.25, rel=1e-4)
    assert float(m[2]) == pytest.approx(float(values[5]), rel=1e-5, abs=1e-6)
    assert float(m[1]) == pytest.approx(float(values[5]) - 0.25, rel=1e-5, abs=1e-6)
    assert (
        "TM_CHECK case=1 output=0 max_abs_error=2.50000e-1 mismatches=1/12 status=FAIL"
        in result.console
    )
    assert "TM_BUNDLE_RESULT status=FAIL cases=2 failed_outputs=1" in result.console
    # A tolerance above the change lets the same bundle pass.
    relaxed = _run(bp, build_dir, bundle_atol=0.3)
    assert relaxed.exit_code == 0, relaxed.console
    assert (
        "TM_CHECK case=1 output=0 max_abs_error=2.50000e-1 mismatches=0/12 status=PASS"
        in relaxed.console
    )


def test_int8_outputs_are_bit_exact_by_default(build_dir: Path) -> None:
    exp = _export("small_cnn", int8_io=True)
    bp = exp.bundle(_samples("small_cnn", 1))
    case = bp.method_test_suites[0].test_cases[0]
    assert case.inputs[0].scalar_type == 1 and case.expected_outputs[0].scalar_type == 1
    out = case.expected_outputs[0]
    values = np.frombuffer(out.data, dtype=np.int8).copy()
    values[0] = values[0] + 1 if values[0] < 127 else values[0] - 1  # one quantization step
    out.data = values.tobytes()
    result = _run(bp, build_dir)
    assert result.exit_code == EXIT_OUTPUT_MISMATCH, result.console
    assert "TM_MISMATCH case=0 output=0 index=0" in result.console
    assert "max_abs_error=1.00000e0 mismatches=1/10 status=FAIL" in result.console
    assert _run(bp, build_dir, bundle_atol_int=1).exit_code == 0


def test_test_case_that_does_not_fit_the_method(build_dir: Path) -> None:
    exp = _export("mlp")
    bp = exp.bundle(_samples("mlp", 1))
    x = bp.method_test_suites[0].test_cases[0].inputs[0]
    x.sizes = [x.sizes[-1], x.sizes[0]] if len(x.sizes) == 2 else x.sizes[::-1]
    result = _run(bp, build_dir)
    assert result.exit_code == EXIT_INPUT_ERROR, result.console
    assert "TM_ERROR input case=0 index=0 message=bundled input differs" in result.console


def test_cli_runs_a_bundle_on_qemu(build_dir: Path, tmp_path: Path, capsys) -> None:
    from torchmcu.cli import main

    exp = _export("mlp")
    exp.save(tmp_path, bundle_samples=_samples("mlp", 2))
    rc = main(
        ["run", str(tmp_path / "model.bpte"), "--board", BOARD, "--build-dir", str(build_dir)]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "TM_BUNDLE_RESULT status=PASS cases=2 failed_outputs=0" in out
    assert "sample 1 output 0" in out


@pytest.mark.executorch
def test_executorch_written_bundle_passes_on_device(
    build_dir: Path, tmp_path: Path, et_python: Path
) -> None:
    """ExecuTorch's own BundledProgram serializer wraps our program and test cases; the runner
    reads that file and checks every case; a changed value in its expected outputs fails."""
    import subprocess

    exp = _export("small_cnn")
    pte = tmp_path / "model.pte"
    pte.write_bytes(exp.pte_bytes)
    samples = _samples("small_cnn", 2)
    arrays = {}
    for c, sample in enumerate(samples):
        arrays.update({f"in{c}_{i}": x for i, x in enumerate(sample)})
        outs = torchmcu.run_on_host(exp.pte_bytes, sample)
        arrays.update({f"out{c}_{i}": y for i, y in enumerate(outs)})
    np.savez(tmp_path / "cases.npz", **arrays)
    et_bpte = tmp_path / "et.bpte"
    proc = subprocess.run(
        [
            str(et_python),
            str(Path(__file__).parent / "executorch" / "make_bpte.py"),
            str(pte),
            str(tmp_path / "cases.npz"),
            str(et_bpte),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    image = device.build(None, BOARD, build_dir, bundle=et_bpte)
    result = device.run(image.elf, BOARD, timeout=120)
    assert result.exit_code == 0, result.console
    assert "TM_BUNDLE_RESULT status=PASS cases=2 failed_outputs=0" in result.console
    # The same file with one expected float changed (found by its bytes) fails on the device.
    data = bytearray(et_bpte.read_bytes())
    y = arrays["out1_0"]
    at = bytes(data).find(y.tobytes())
    assert at > 0
    changed = y.copy()
    changed.reshape(-1)[2] += 1.0
    data[at : at + y.nbytes] = changed.tobytes()
    image = device.build(None, BOARD, build_dir, bundle=bytes(data))
    result = device.run(image.elf, BOARD, timeout=120)
    assert result.exit_code == EXIT_OUTPUT_MISMATCH, result.console
    assert "TM_MISMATCH case=1 output=0 index=2" in result.console
