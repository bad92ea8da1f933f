"""The Ethos-U delegate's C blob parser/verifier (firmware/delegates/ethos_u/blob.c).

Through native.parse_ethos_u_blob (the same object code the host backend and the firmware
use): a valid blob's parts land where the block layout of FACTS.md puts them (offsets computed
by hand below); every truncation and a set of malformed blobs (bad lengths, bad counts, missing
or duplicate blocks, bad I/O records) are rejected with an error naming the block and the byte
offset; a real Vela blob reads the same as torchmcu.npu.blob.parse_blob reads it. The same inputs
then go through the libFuzzer target under ASan + UBSan (no sanitizer report allowed).
"""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pytest
from _delegate_programs import (
    BLOB_INPUTS,
    BLOB_OUTPUTS,
    COMMAND,
    SCRATCH,
    _block,
    _ios,
    own_pack,
)
from torchmcu import doctor, native
from torchmcu.native import NativeError

WEIGHTS = bytes(range(32))
GOOD = own_pack(COMMAND, WEIGHTS, SCRATCH, BLOB_INPUTS, BLOB_OUTPUTS)
# Hand layout of GOOD: 32-byte headers, data padded to 16.
#   0 vela_bin_stream | 32 cmd_data (data 64, 16 B) | 80 weight_data (data 112, 32 B)
#   144 scratch_size (data 176) | 192 inputs (data 224, 4 + 2 x 36 B) | 304 outputs (data 336)
#   384 vela_end_stream | 416 end
INPUTS_DATA, OUTPUTS_DATA = 224, 336


def _error(blob: bytes) -> tuple[str, str, str, int]:
    """(status, message, block, offset) of a rejected blob."""
    with pytest.raises(NativeError) as e:
        native.parse_ethos_u_blob(blob)
    m = re.fullmatch(r"(.*) \(block (.*), blob offset (\d+)\)", e.value.message)
    assert m, e.value.message
    return e.value.status, m.group(1), m.group(2), int(m.group(3))


def test_valid_blob_parts_where_the_layout_puts_them() -> None:
    assert len(GOOD) == 416
    info = native.parse_ethos_u_blob(GOOD)
    assert (info["cmd_offset"], info["cmd_size"]) == (64, 16)
    assert (info["weights_offset"], info["weights_size"]) == (112, 32)
    assert info["scratch_size"] == SCRATCH
    assert [
        (i["shape"], i["elem_size"], i["offset"], i["region"], i["nbytes"]) for i in info["inputs"]
    ] == [
        ([1, 1, 1, 2, 2, 3], 1, 0, 1, 12),
        ([1, 1, 1, 1, 1, 4], 1, 16, 1, 4),
    ]
    assert [(i["offset"], i["nbytes"]) for i in info["outputs"]] == [(32, 4)]


def test_every_truncation_rejected_naming_an_offset_inside() -> None:
    for n in range(len(GOOD)):
        status, _, block, offset = _error(GOOD[:n])
        assert status == "INVALID_PROGRAM" and offset <= n and block


def _blocks(*names: str, **data: bytes) -> bytes:
    """Blocks in the given order; a missing block is reported at the end block's header, which
    sits where the removed bytes were (416 minus the removed block's header and padded data)."""
    default = {
        "vela_bin_stream": b"",
        "cmd_data": COMMAND,
        "weight_data": WEIGHTS,
        "scratch_size": struct.pack("<I", SCRATCH),
        "inputs": _ios(BLOB_INPUTS),
        "outputs": _ios(BLOB_OUTPUTS),
        "vela_end_stream": b"",
    }
    default.update(data)
    return b"".join(_block(n, default[n]) for n in names)


ALL = (
    "vela_bin_stream",
    "cmd_data",
    "weight_data",
    "scratch_size",
    "inputs",
    "outputs",
    "vela_end_stream",
)


def _with_io(record: int, field: int, value: int, inputs: bool = True) -> bytes:
    """GOOD with one int32 field of one I/O record replaced."""
    at = (INPUTS_DATA if inputs else OUTPUTS_DATA) + 4 + 36 * record + 4 * field
    return GOOD[:at] + struct.pack("<i", value) + GOOD[at + 4 :]


def _patched(at: int, raw: bytes) -> bytes:
    return GOOD[:at] + raw + GOOD[at + len(raw) :]


@pytest.mark.parametrize(
    "blob, status, message, block, offset",
    [
        (
            b"",
            "INVALID_PROGRAM",
            "blob shorter than one block header (empty delegate data?)",
            "blob",
            0,
        ),
        (
            _blocks(*ALL[1:]),
            "INVALID_PROGRAM",
            "first block is not vela_bin_stream (not an EthosUBackend blob)",
            "cmd_data",
            0,
        ),
        (
            _blocks(*ALL[:-1]),
            "INVALID_PROGRAM",
            "block header truncated (no vela_end_stream block)",
            "header",
            384,
        ),
        (
            _blocks("vela_bin_stream", "cmd_data", "cmd_data", *ALL[2:]),
            "INVALID_PROGRAM",
            "duplicate block",
            "cmd_data",
            80,
        ),
        (
            _blocks(*[n for n in ALL if n != "cmd_data"]),
            "INVALID_PROGRAM",
            "missing block cmd_data",
            "cmd_data",
            336,
        ),
        (
            _blocks(*[n for n in ALL if n != "weight_data"]),
            "INVALID_PROGRAM",
            "missing block weight_data",
            "weight_data",
            320,
        ),
        (
            _blocks(*[n for n in ALL if n != "scratch_size"]),
            "INVALID_PROGRAM",
            "missing block scratch_size",
            "scratch_size",
            336,
        ),
        (
            _blocks(*[n for n in ALL if n != "inputs"]),
            "INVALID_PROGRAM",
            "missing block inputs",
            "inputs",
            272,
        ),
        (
            _blocks(*[n for n in ALL if n != "outputs"]),
            "INVALID_PROGRAM",
            "missing block outputs",
            "outputs",
            304,
        ),
        (
            _blocks(*ALL, cmd_data=b"COP1xx"),
            "INVALID_PROGRAM",
            ("cmd_data block: command stream empty or not a multiple of 4 bytes"),
            "cmd_data",
            48,
        ),
        (
            _blocks(*ALL, scratch_size=b"\x30\0\0"),
            "INVALID_PROGRAM",
            "scratch_size block: length is not 4",
            "scratch_size",
            160,
        ),
        (
            _blocks(*ALL, inputs=_ios(BLOB_INPUTS)[:-4]),
            "INVALID_PROGRAM",
            "inputs block: length is not 4 + 36 x count",
            "inputs",
            INPUTS_DATA,
        ),
        (
            _patched(INPUTS_DATA, struct.pack("<i", -1)),
            "INVALID_PROGRAM",
            "inputs block: length is not 4 + 36 x count",
            "inputs",
            INPUTS_DATA,
        ),
        (
            _patched(INPUTS_DATA, struct.pack("<i", 0x7FFFFFFF)),
            "INVALID_PROGRAM",
            "inputs block: length is not 4 + 36 x count",
            "inputs",
            INPUTS_DATA,
        ),
        (
            _blocks(*ALL, outputs=b"\1\0"),
            "INVALID_PROGRAM",
            "outputs block: shorter than its 4-byte count",
            "outputs",
            OUTPUTS_DATA,
        ),
        (
            _with_io(0, 2, -1),
            "INVALID_PROGRAM",
            "inputs block: negative shape entry",
            "inputs",
            INPUTS_DATA + 4 + 8,
        ),
        (
            _with_io(1, 6, 3),
            "INVALID_PROGRAM",
            "inputs block: element size not 1, 2 or 4",
            "inputs",
            INPUTS_DATA + 4 + 36 + 24,
        ),
        (
            _with_io(1, 7, -16),
            "INVALID_PROGRAM",
            "inputs block: negative offset",
            "inputs",
            INPUTS_DATA + 4 + 36 + 28,
        ),
        (
            _with_io(0, 8, 9, inputs=False),
            "INVALID_PROGRAM",
            "outputs block: region outside 0..7",
            "outputs",
            OUTPUTS_DATA + 4 + 32,
        ),
        (
            _with_io(0, 7, SCRATCH - 3, inputs=False),
            "INVALID_PROGRAM",
            "outputs block: output lies beyond scratch_size",
            "outputs",
            OUTPUTS_DATA + 4 + 28,
        ),
        (
            _with_io(0, 7, 0x7FFFFFF8),
            "INVALID_PROGRAM",
            "inputs block: input lies beyond scratch_size",
            "inputs",
            INPUTS_DATA + 4 + 28,
        ),
        (
            GOOD[: INPUTS_DATA + 4] + struct.pack("<6i", *[65536] * 6) + GOOD[INPUTS_DATA + 28 :],
            "INVALID_PROGRAM",
            "inputs block: tensor larger than 4 GiB",
            "inputs",
            INPUTS_DATA + 4 + 4,
        ),
        (
            _patched(32 + 16, struct.pack("<I", 0xFFFFFFF0)),
            "INVALID_PROGRAM",
            ("block length runs past the end of the blob"),
            "cmd_data",
            48,
        ),
        (
            _patched(32 + 20, b"\1"),
            "UNSUPPORTED",
            "block data stored outside the blob (external flag) is not supported",
            "cmd_data",
            52,
        ),
        (
            _patched(32, b"cmd_data_xxxxxxx"),
            "INVALID_PROGRAM",
            "block name is not NUL-terminated within 16 bytes",
            "header",
            32,
        ),
        (
            _blocks(*ALL, vela_bin_stream=b"x"),
            "INVALID_PROGRAM",
            "vela_bin_stream / vela_end_stream block is not empty",
            "vela_bin_stream",
            16,
        ),
    ],
)
def test_malformed_blob_names_block_and_offset(
    blob: bytes, status: str, message: str, block: str, offset: int
) -> None:
    assert _error(blob) == (status, message, block, offset)


def test_unknown_blocks_of_later_versions_are_skipped() -> None:
    blob = _blocks(*ALL[:-1]) + _block("future_block", b"abc") + _block("vela_end_stream", b"")
    assert native.parse_ethos_u_blob(blob)["scratch_size"] == SCRATCH


@pytest.fixture(scope="module")
def vela_blob() -> bytes:
    return _vela_blob()


def _vela_blob() -> bytes:
    """The EthosUBackend blob of a small CNN exported for ethos-u55-128 (real Vela output)."""
    from torchmcu.api import export
    from torchmcu.examples import models
    from torchmcu.pte.reader import parse

    model, example = models.build("small_cnn")
    exported = export(
        model, example, calibration=models.calibration("small_cnn", 2), npu="ethos-u55-128"
    )
    (blob,) = parse(exported.pte_bytes).segments_data
    return blob


def test_real_vela_blob_reads_as_the_python_parser_reads_it(vela_blob: bytes) -> None:
    blob_mod = pytest.importorskip("torchmcu.npu.blob")
    blob = vela_blob
    py = blob_mod.parse_blob(blob)
    c = native.parse_ethos_u_blob(blob)
    assert blob[c["cmd_offset"] : c["cmd_offset"] + c["cmd_size"]] == py.command_stream
    assert c["cmd_size"] > 0 and blob[c["cmd_offset"] : c["cmd_offset"] + 4] == b"COP1"
    weights = (
        blob[c["weights_offset"] : c["weights_offset"] + c["weights_size"]]
        if c["weights_size"]
        else b""
    )
    assert weights == py.weights
    assert c["scratch_size"] == py.scratch_size
    for cs, ps in ((c["inputs"], py.inputs), (c["outputs"], py.outputs)):
        assert [(t["shape"], t["elem_size"], t["offset"], t["region"]) for t in cs] == [
            (list(t.shape), t.elem_size, t.offset, t.region) for t in ps
        ]


@pytest.mark.needs("clang", "cmake", "clang-sanitizers", "libfuzzer")
def test_malformed_blobs_clean_under_sanitizers(tmp_path: Path) -> None:
    """Every truncation, every single-byte change of the header/I-O bytes and the crafted cases
    above, through fuzz_ethos_u_blob (ASan + UBSan, no recovery)."""
    from test_fuzz import build_fuzzers

    build = build_fuzzers()
    cases = tmp_path / "cases"
    cases.mkdir()
    inputs = [GOOD[:n] for n in range(len(GOOD) + 1)]
    for at in list(range(64)) + list(range(144, len(GOOD))):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            inputs.append(GOOD[:at] + bytes([value]) + GOOD[at + 1 :])
    for k, blob in enumerate(inputs):
        (cases / f"case{k}").write_bytes(blob)
    r = subprocess.run(
        [str(build / "fuzz_ethos_u_blob"), *map(str, sorted(cases.iterdir()))],
        capture_output=True,
        check=False,
        text=True,
        timeout=600,
    )
    log = r.stdout + r.stderr
    assert r.returncode == 0 and "ERROR" not in log and "runtime error" not in log, log[-4000:]


# ---- the firmware backend (delegate.c) on our driver and the NPU register model -------------

ROOT = Path(__file__).resolve().parents[1]
HARNESS = [
    ROOT / "firmware" / "delegates" / "ethos_u" / "test" / "delegate_model_test.c",
    ROOT / "firmware" / "delegates" / "ethos_u" / "delegate.c",
    ROOT / "firmware" / "delegates" / "ethos_u" / "blob.c",
    ROOT / "firmware" / "drivers" / "ethos_u" / "ethos_u_driver.c",
    ROOT / "tests" / "c" / "ethos_u_model.c",
    *sorted((ROOT / "firmware" / "runtime" / "src").glob("*.c")),
]
HARNESS_INCLUDES = [
    ROOT / "firmware" / "runtime" / "include",
    ROOT / "firmware" / "runtime" / "src",
    ROOT / "firmware" / "delegates" / "ethos_u" / "include",
    ROOT / "firmware" / "drivers" / "ethos_u" / "include",
    ROOT / "firmware" / "drivers" / "ethos_u",
    ROOT / "tests" / "c",
]


def delegate_only_program(blob: bytes) -> bytes:
    """forward(inputs...) -> outputs: one EthosUBackend DelegateCall [inputs, outputs, scratch],
    int8 tensors of the blob's I/O byte sizes, planned one after another (16-byte aligned)."""
    from torchmcu.pte.program import (
        Allocation,
        BackendDelegate,
        Chain,
        DelegateCall,
        ExecutionPlan,
        Program,
        ScalarType,
        Tensor,
    )
    from torchmcu.pte.writer import serialize

    info = native.parse_ethos_u_blob(blob)
    values, at = [], 0
    for io in info["inputs"] + info["outputs"]:
        values.append(Tensor(ScalarType.CHAR, [io["nbytes"]], [0], allocation=Allocation(1, at)))
        at += -(-io["nbytes"] // 16) * 16
    values.append(
        Tensor(ScalarType.BYTE, [info["scratch_size"]], [0], allocation=Allocation(1, at))
    )
    at += -(-info["scratch_size"] // 16) * 16
    n_in = len(info["inputs"])
    ins, outs = list(range(n_in)), list(range(n_in, len(values) - 1))
    plan = ExecutionPlan(
        name="forward",
        values=values,
        inputs=ins,
        outputs=outs,
        chains=[Chain(ins, outs, [DelegateCall(0, list(range(len(values))))])],
        operators=[],
        delegates=[BackendDelegate("EthosUBackend", 0)],
        non_const_buffer_sizes=[0, at],
    )
    return serialize(Program(execution_plan=[plan], segments_data=[blob]))


@pytest.fixture(scope="module")
def model_harness(tmp_path_factory: pytest.TempPathFactory, op_tables: Path) -> Path:
    if not (ROOT / "firmware" / "drivers" / "ethos_u" / "ethos_u_driver.c").exists():
        pytest.skip("the NPU driver is not in the tree")
    doctor.require("clang-sanitizers")
    out = tmp_path_factory.mktemp("harness") / "delegate_model_test"
    cc = "clang"
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    r = subprocess.run(
        [
            cc,
            "-std=c11",
            "-D_GNU_SOURCE",
            "-O1",
            "-g",
            "-Wall",
            "-Wextra",
            "-Werror",
            *flags,
            *(f"-I{i}" for i in HARNESS_INCLUDES),
            f"-I{op_tables}",  # method.c includes the registry's control_ops.inc
            *map(str, HARNESS),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def _run_harness(harness: Path, tmp_path: Path, blob: bytes, scenario: str) -> dict[str, str]:
    pte = delegate_only_program(blob)
    (path := tmp_path / "prog.pte").write_bytes(pte)
    offset = pte.find(blob)
    r = subprocess.run(
        [str(harness), str(path), str(offset), scenario],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert r.returncode == 0 and "ERROR" not in r.stderr, r.stdout + r.stderr
    return dict(line.split("=", 1) for line in r.stdout.splitlines())


def test_firmware_delegate_programs_the_npu_and_moves_io_through_scratch(
    model_harness: Path, tmp_path: Path, vela_blob: bytes
) -> None:
    out = _run_harness(model_harness, tmp_path, vela_blob, "ok")
    assert out["npu_init"] == "OK" and out["init"] == "OK" and out["execute"] == "OK", out
    assert out["npu_starts"] == "1"
    # region 0 = weights in place in the .pte, region 1 = the scratch tensor (ExecuTorch's mapping)
    assert out["basep0_is_weights"] == "1" and out["basep1_is_scratch"] == "1"
    assert out["qbase_is_command_stream"] == "1" and out["qsize_is_command_stream"] == "1"
    assert out["inputs_in_scratch"] == "1"  # copied in at Vela's input offsets
    assert out["outputs_from_scratch"] == "1" and out["outputs_written"] == "1"  # and back out


@pytest.mark.parametrize(
    "scenario, stage, status, message",
    [
        ("fault", "execute", "DELEGATE", "NPU reported an error"),
        ("hang", "execute", "TIMEOUT", "NPU did not finish (timeout)"),
        (
            "u85",
            "init",
            "UNSUPPORTED",
            "cmd_data block: compiled for another NPU configuration than the bound one",
        ),
        (
            "unbound",
            "init",
            "INVALID_STATE",
            "no NPU bound (tm_ethos_u_delegate_bind) in this image",
        ),
    ],
)
def test_firmware_delegate_errors_name_the_delegate(
    model_harness: Path,
    tmp_path: Path,
    vela_blob: bytes,
    scenario: str,
    stage: str,
    status: str,
    message: str,
) -> None:
    out = _run_harness(model_harness, tmp_path, vela_blob, scenario)
    assert out[stage] == status and out[f"{stage}_message"] == message, out
    assert out[f"{stage}_delegate"] == "0" and out[f"{stage}_op"] == "EthosUBackend"
    if stage == "execute":
        assert out["execute_instruction"] == "0"


@pytest.mark.parametrize("board", ["corstone-300", "corstone-320"])
def test_npu_board_firmware_links_the_delegate(
    board: str, tmp_path: Path, vela_blob: bytes
) -> None:
    """A DelegateCall program builds and links for the NPU boards, with the EthosUBackend
    registered, the driver linked and the board's NPU base compiled in."""
    from torchmcu.device.build import build

    (pte := tmp_path / "npu.pte").write_bytes(delegate_only_program(vela_blob))
    image = build(pte, board, tmp_path / "build")
    nm = subprocess.run(
        ["arm-none-eabi-nm", str(image.elf)], capture_output=True, text=True, check=True
    )
    symbols = {line.split()[-1] for line in nm.stdout.splitlines()}
    assert {"tm_ethos_u_backend", "tm_ethosu_run", "tm_ethos_u_blob_parse"} <= symbols


def test_cpu_only_board_refuses_the_delegate_with_the_missing_operator_code(
    tmp_path: Path, vela_blob: bytes
) -> None:
    """qemu-an547 has no NPU: its image registers no backend, so the runner rejects the program
    at method init with the missing-operator exit code, naming the delegate id."""
    from torchmcu.device.build import build
    from torchmcu.device.run import run

    (pte := tmp_path / "npu.pte").write_bytes(delegate_only_program(vela_blob))
    result = run(build(pte, "qemu-an547", tmp_path / "build").elf, "qemu-an547", timeout=30)
    assert result.exit_code == 3, result.console  # TM_EXIT_MISSING_OPERATOR
    (line,) = [ln for ln in result.console.splitlines() if ln.startswith("TM_ERROR")]
    assert "missing_operator" in line and "EthosUBackend" in line
    assert "delegate backend not registered in this image" in line
