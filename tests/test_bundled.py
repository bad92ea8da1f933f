"""Bundled programs (.bpte): our writer and reader, ExecuTorch's deserializer on our files,
and ours on ExecuTorch's re-serialization; export/CLI entry points.

Expected outputs in a bundle come from the host runtime; the tests compare them with a separate
run of the runtime on the decoded inputs, and check tensor byte layouts against hand-made bytes.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torchmcu
from torchmcu.pte import bundled as B
from torchmcu.pte.program import Double, Int, ScalarType
from torchmcu.pte.validate import ProgramError

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "tests" / "executorch" / "dump_bpte.py"


@pytest.fixture(scope="module")
def small_cnn():
    from torchmcu.examples import models

    model, example = models.build("small_cnn")
    exp = torchmcu.export(model, example, calibration=models.calibration("small_cnn", 4, seed=1))
    samples = [[x.numpy() for x in s] for s in models.calibration("small_cnn", 3, seed=5)]
    return exp, samples


def test_tensor_bytes_follow_dim_order() -> None:
    x = np.arange(12, dtype=np.int8).reshape(1, 3, 2, 2)  # logical NCHW
    meta = {"dtype": "int8", "sizes": [1, 3, 2, 2], "dim_order": [0, 2, 3, 1], "scalar_type": 1}
    t = B.tensor_value(x, meta)
    # NHWC by hand: for each pixel (h, w) the three channels.
    by_hand = bytes(int(x[0, c, h, w]) for h in range(2) for w in range(2) for c in range(3))
    assert t.data == by_hand
    assert t.sizes == [1, 3, 2, 2] and t.dim_order == [0, 2, 3, 1]
    assert np.array_equal(t.to_numpy(), x)


def _hand_bundle() -> B.BundledProgram:
    pte = b"\x10\0\0\0ET12" + bytes(40)  # only the identifier is looked at by the writer
    t = B.BundledTensor(ScalarType.FLOAT, [2], [0], struct.pack("<2f", 1.5, -2.0))
    case = B.BundledTestCase(
        [t, Int(-7), Double(0.25)], [B.BundledTensor(ScalarType.CHAR, [3], [0], b"\x01\xff\x7f")]
    )
    return B.BundledProgram(pte, [B.BundledMethodTestSuite("forward", [case, case])])


def test_round_trip_and_alignment() -> None:
    bp = _hand_bundle()
    data = B.serialize_bundled(bp)
    assert data[4:8] == b"BP08"
    back = B.parse_bundled(data)
    assert back == bp and back.version == 2
    # The program and tensor payloads sit at aligned offsets of the file.
    p = data.find(bp.program)
    assert p > 0 and p % 32 == 0
    f = data.find(struct.pack("<2f", 1.5, -2.0))
    assert f > 0 and f % 16 == 0
    assert B.serialize_bundled(bp) == data  # deterministic


def test_reader_rejects_bad_files() -> None:
    data = B.serialize_bundled(_hand_bundle())
    with pytest.raises(ProgramError, match="file identifier"):
        B.parse_bundled(data[:4] + b"ET12" + data[8:])
    with pytest.raises(ProgramError, match="outside the flatbuffer"):
        B.parse_bundled(data[: len(data) // 2])
    with pytest.raises(ProgramError, match="data bytes"):
        bad = _hand_bundle()
        bad.method_test_suites[0].test_cases[0].inputs[0].data = b"\0" * 7
        B.serialize_bundled(bad)
    with pytest.raises(ProgramError, match="not a .pte"):
        B.serialize_bundled(B.BundledProgram(b"\0" * 16))


def test_bundle_of_export(small_cnn, tmp_path: Path) -> None:
    exp, samples = small_cnn
    path = exp.save(tmp_path, bundle_samples=samples)
    bp = B.load_bundled(path.with_suffix(".bpte"))
    assert bp.program == exp.pte_bytes
    (suite,) = bp.method_test_suites
    assert suite.method_name == "forward" and len(suite.test_cases) == len(samples)
    for sample, case in zip(samples, suite.test_cases):
        x = case.inputs[0].to_numpy()
        assert x.tobytes() == sample[0].tobytes()
        host = torchmcu.run_on_host(exp.pte_bytes, [x])
        assert [o.to_numpy().tobytes() for o in case.expected_outputs] == [
            h.tobytes() for h in host
        ]


@pytest.mark.executorch
def test_executorch_reads_our_bundle(small_cnn, et_python: Path, tmp_path: Path) -> None:
    exp, samples = small_cnn
    ours = tmp_path / "ours.bpte"
    B.save_bundled(exp.bundle(samples), ours)
    out = tmp_path / "dump.json"
    proc = subprocess.run(
        [str(et_python), str(DUMP), str(out), str(ours), "--reserialize-dir", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(out.read_text())[str(ours)]
    bp = B.load_bundled(ours)
    import hashlib

    assert seen["version"] == 2
    assert seen["program_sha256"] == hashlib.sha256(exp.pte_bytes).hexdigest()
    (suite,) = seen["suites"]
    assert suite["method_name"] == "forward"
    assert len(suite["test_cases"]) == len(samples)
    for case_et, case in zip(suite["test_cases"], bp.method_test_suites[0].test_cases):
        for kind in ("inputs", "expected_outputs"):
            ours_values = getattr(case, kind)
            assert len(case_et[kind]) == len(ours_values)
            for v_et, v in zip(case_et[kind], ours_values):
                assert v_et == {
                    "kind": "Tensor",
                    "scalar_type": int(v.scalar_type),
                    "sizes": list(v.sizes),
                    "dim_order": list(v.dim_order),
                    "data": v.data.hex(),
                }
    # ExecuTorch's own serializer, fed what it read, gives a file our reader maps to the same.
    assert B.load_bundled(seen["reserialized"]) == bp


def test_cli_export_bundle(tmp_path: Path) -> None:
    factory = tmp_path / "tiny.py"
    factory.write_text(
        "import torch\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()\n"
        "    return m, (torch.randn(1, 8),)\n"
        "def calibration_samples():\n"
        "    g = torch.Generator().manual_seed(3)\n"
        "    return [(torch.randn(1, 8, generator=g),) for _ in range(5)]\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchmcu",
            "export",
            f"{factory}:make",
            "-o",
            str(tmp_path / "out"),
            "--bundle",
            "3",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 test cases" in proc.stdout
    bp = B.load_bundled(tmp_path / "out" / "model.bpte")
    assert bp.program == (tmp_path / "out" / "model.pte").read_bytes()
    cases = bp.method_test_suites[0].test_cases
    assert len(cases) == 3
    import torch

    g = torch.Generator().manual_seed(3)
    first = torch.randn(1, 8, generator=g).numpy()
    assert cases[0].inputs[0].to_numpy().tobytes() == first.tobytes()
