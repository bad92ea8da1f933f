"""NPU targets, Vela compilation and the EthosUBackend blob.

References: Vela's own raw output (run here directly, not through torchmcu), the byte layout as
FACTS.md and ExecuTorch's VelaBinStream reader describe it (built by hand below), ExecuTorch
1.5.1's own packer (arm_vela.py, run in its venv when that exists), and Vela's shipped ini.
"""

from __future__ import annotations

import configparser
import json
import struct
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from torchmcu.boards import get_board
from torchmcu.npu import blob as blobmod
from torchmcu.npu.blob import BlobError, VelaTensor, pack_blob, parse_blob
from torchmcu.npu.config import (
    FAMILY_DEFAULTS,
    NpuConfigError,
    read_ini,
    resolve_target,
)

ts = pytest.importorskip("tosa_serializer")
ethosu_vela = pytest.importorskip("ethosu.vela.vela")
from torchmcu.npu.vela import VelaCompileError, combine_estimates, compile_tosa

ROOT = Path(__file__).resolve().parents[1]
OUR_INI = ROOT / "boards" / "ethos_u" / "vela.ini"
TARGETS = [
    ("corstone-300", "ethos-u55-128"),
    ("corstone-300", "ethos-u65-256"),
    ("corstone-320", "ethos-u85-256"),
]


# ----------------------------------------------------------------------------- TOSA graphs
def _serializer():
    return ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)


def _conv(g, x, shape_w, out_shape, pad, stride, izp, seed, out=None):
    rng = np.random.default_rng(seed)
    cout = shape_w[0]
    w = g.addConst(
        shape_w, ts.DType.INT8, rng.integers(-127, 128, shape_w).astype(np.int8), name=f"w{seed}"
    )
    b = g.addConst(
        [cout], ts.DType.INT32, rng.integers(-1000, 1000, cout).astype(np.int32), name=f"b{seed}"
    )
    zi = g.addConst([1], ts.DType.INT8, np.array([izp], np.int8), name=f"izp{seed}")
    zw = g.addConst([1], ts.DType.INT8, np.array([0], np.int8), name=f"wzp{seed}")
    acc = out if out is not None else g.addIntermediate(out_shape, ts.DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute(
        pad=pad, stride=stride, dilation=[1, 1], local_bound=False, acc_type=ts.DType.INT32
    )
    g.addOperator(ts.Op.CONV2D, [x.name, w.name, b.name, zi.name, zw.name], [acc.name], attr)
    return acc


def _rescale(g, x, out, channels, seed):
    rng = np.random.default_rng(seed)
    m = g.addConst(
        [channels],
        ts.DType.INT32,
        rng.integers(1 << 30, (1 << 31) - 1, channels).astype(np.int32),
        name=f"m{seed}",
    )
    s = g.addConst([channels], ts.DType.INT8, np.full(channels, 40, np.int8), name=f"s{seed}")
    zi = g.addConst([1], ts.DType.INT32, np.array([0], np.int32), name=f"rzi{seed}")
    zo = g.addConst([1], ts.DType.INT8, np.array([-5], np.int8), name=f"rzo{seed}")
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(
        scale32=True,
        rounding_mode=ts.RoundingMode.DOUBLE_ROUND,
        per_channel=True,
        input_unsigned=False,
        output_unsigned=False,
    )
    g.addOperator(ts.Op.RESCALE, [x.name, m.name, s.name, zi.name, zo.name], [out.name], attr)


def graph_conv1x1() -> tuple[bytes, list[list[int]], list[tuple[list[int], int]]]:
    """A lone 1x1 CONV2D with its int32 accumulator as the output."""
    g = _serializer()
    x = g.addPlaceholder([1, 4, 4, 8], ts.DType.INT8)
    out = g.addOutput([1, 4, 4, 16], ts.DType.INT32)
    _conv(g, x, [16, 1, 1, 8], [1, 4, 4, 16], [0, 0, 0, 0], [1, 1], 3, seed=0, out=out)
    return g.serialize(), [[1, 4, 4, 8]], [([1, 4, 4, 16], 4)]


def graph_conv_rescale() -> tuple[bytes, list[list[int]], list[tuple[list[int], int]]]:
    """3x3/2 CONV2D + RESCALE (DOUBLE_ROUND) + CLAMP, and a MAX_POOL2D of the input as a
    second output (two outputs of different shapes check their order)."""
    g = _serializer()
    x = g.addPlaceholder([1, 9, 9, 3], ts.DType.INT8)
    acc = _conv(g, x, [8, 3, 3, 3], [1, 5, 5, 8], [1, 1, 1, 1], [2, 2], -2, seed=1)
    r = g.addIntermediate([1, 5, 5, 8], ts.DType.INT8)
    _rescale(g, acc, r, 8, seed=2)
    out = g.addOutput([1, 5, 5, 8], ts.DType.INT8)
    clamp = ts.TosaSerializerAttribute()
    clamp.ClampAttribute(
        min_val=list(np.int8(-128).tobytes()),
        max_val=list(np.int8(100).tobytes()),
        nan_mode=ts.NanPropagationMode.PROPAGATE,
    )
    g.addOperator(ts.Op.CLAMP, [r.name], [out.name], clamp)
    pooled = g.addOutput([1, 4, 4, 3], ts.DType.INT8)
    pool = ts.TosaSerializerAttribute()
    pool.MaxPool2dAttribute(
        kernel=[3, 3], stride=[2, 2], pad=[0, 0, 0, 0], nan_mode=ts.NanPropagationMode.PROPAGATE
    )
    g.addOperator(ts.Op.MAX_POOL2D, [x.name], [pooled.name], pool)
    return g.serialize(), [[1, 9, 9, 3]], [([1, 5, 5, 8], 1), ([1, 4, 4, 3], 1)]


GRAPHS = {"conv1x1": graph_conv1x1, "conv_rescale": graph_conv_rescale}


def vela_directly(tosa: bytes, board: str, npu: str, workdir: Path) -> Path:
    """Vela's raw output for the board's settings, from Vela's own entry point (no torchmcu)."""
    vela_cfg = get_board(board).config["npu"]["vela"]
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "g.tosa").write_bytes(tosa)
    ethosu_vela.main(
        [
            "--accelerator-config",
            npu,
            "--config",
            str(OUR_INI),
            "--system-config",
            vela_cfg["system_config"][npu],
            "--memory-mode",
            vela_cfg["memory_mode"][npu],
            "--output-format",
            "raw",
            "--output-dir",
            str(workdir),
            str(workdir / "g.tosa"),
        ]
    )
    return workdir / "g_vela.npz"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict]:
    """Every graph compiled for every board target, by torchmcu and by Vela directly."""
    out: dict[tuple[str, str], dict] = {}
    base = tmp_path_factory.mktemp("vela")
    for gname, build in GRAPHS.items():
        tosa, ins, outs = build()
        for board, npu in TARGETS:
            target = resolve_target(board, npu)
            npz = vela_directly(tosa, board, npu, base / gname / npu)
            out[(gname, npu)] = {
                "result": compile_tosa(tosa, target, name=gname),
                "npz": npz,
                "inputs": ins,
                "outputs": outs,
                "target": target,
            }
    return out


# ----------------------------------------------------------------------------- Vela results
@pytest.mark.parametrize("gname", list(GRAPHS))
@pytest.mark.parametrize("board,npu", TARGETS)
def test_blob_matches_velas_own_output(compiled, gname: str, board: str, npu: str) -> None:
    c = compiled[(gname, npu)]
    res = c["result"]
    parsed = parse_blob(res.blob)
    with np.load(c["npz"], allow_pickle=False) as z:
        cmd = z["cmd_data"].tobytes()
        weights = z["weight_data"].tobytes()
        scratch = int(z["scratch_shape"][0])
        in_offsets = [int(v) for v in z["input_offset"]]
        out_offsets = [int(v) for v in z["output_offset"]]
        fast = int(z["scratch_fast_size"])
    assert parsed.command_stream[:4] == b"COP1"
    assert parsed.command_stream == cmd == res.command_stream
    assert parsed.weights == weights == res.weights
    assert len(weights) > 0
    assert parsed.scratch_size == scratch == res.scratch_size
    assert res.fast_scratch_size == fast
    assert [t.offset for t in parsed.inputs] == in_offsets
    assert [t.offset for t in parsed.outputs] == out_offsets
    # I/O shapes and element sizes are the graph's (Vela pads them to 6-D with leading ones).
    assert [t.shape for t in parsed.inputs] == [[1, 1, *s] for s in c["inputs"]]
    assert [(t.shape, t.elem_size) for t in parsed.outputs] == [
        ([1, 1, *s], e) for s, e in c["outputs"]
    ]
    assert all(t.region == blobmod.REGION_SCRATCH for t in parsed.inputs + parsed.outputs)
    assert parsed.inputs == res.inputs and parsed.outputs == res.outputs
    # Data blocks are 16-byte aligned so the weights and command stream are used in place.
    assert all(off % 16 == 0 for off in parsed.data_offsets.values())


def test_estimate_from_the_summary_csv(compiled) -> None:
    c = compiled[("conv_rescale", "ethos-u55-128")]
    est = c["result"].estimate
    # MACs of the graph, counted by hand: the conv (5*5 outputs x 8 channels x 3*3*3 taps)
    # plus the max pool, which Vela counts as one MAC per window element (4*4*3 x 3*3).
    assert est["nn_macs"] == 5 * 5 * 8 * 3 * 3 * 3 + 4 * 4 * 3 * 3 * 3
    assert 0 < est["cycles_npu"] <= est["cycles_total"]
    assert est["inferences_per_second"] == pytest.approx(500e6 / est["cycles_total"], rel=1e-6)
    # Shared_Sram: the arena (scratch) is in SRAM, the weights + command stream in flash.
    assert est["sram_bytes"] == c["result"].scratch_size
    assert est["off_chip_flash_bytes"] >= len(c["result"].weights)
    assert est["sram_memory_used"] == pytest.approx(est["sram_bytes"] / 1024)
    both = combine_estimates([est, compiled[("conv1x1", "ethos-u55-128")]["result"].estimate])
    assert both["delegates"] == 2
    assert (
        both["cycles_total"]
        == est["cycles_total"]
        + compiled[("conv1x1", "ethos-u55-128")]["result"].estimate["cycles_total"]
    )


def test_per_layer_table_adds_up_to_the_summary() -> None:
    tosa, _, _ = graph_conv_rescale()
    res = compile_tosa(tosa, resolve_target(None, "ethos-u55-128"), per_layer=True)
    ops = {row["Original Operator"] for row in res.per_layer}
    assert {"Conv2D", "MaxPool"} <= ops
    assert sum(row["Op Cycles"] for row in res.per_layer) == res.estimate["cycles_total"]
    assert sum(row["MAC Count"] for row in res.per_layer) == res.estimate["nn_macs"]
    assert compile_tosa(tosa, resolve_target(None, "ethos-u55-128")).per_layer == []


def test_u65_dedicated_sram_reports_fast_scratch(compiled) -> None:
    res = compiled[("conv_rescale", "ethos-u65-256")]["result"]
    assert (
        compiled[("conv_rescale", "ethos-u65-256")]["target"].memory_mode == "Dedicated_Sram_384KB"
    )
    assert 0 < res.fast_scratch_size <= 384 * 1024


def test_vela_is_quiet_and_errors_name_the_subgraph(capsys: pytest.CaptureFixture[str]) -> None:
    tosa, _, _ = graph_conv1x1()
    res = compile_tosa(tosa, resolve_target(None, "ethos-u55-128"), name="quiet")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert "Network summary" in res.log
    # A float CLAMP is no PRO-INT op: Vela refuses it; the error names subgraph and Vela's reason.
    g = _serializer()
    x = g.addPlaceholder([1, 2, 2, 4], ts.DType.FP32)
    out = g.addOutput([1, 2, 2, 4], ts.DType.FP32)
    attr = ts.TosaSerializerAttribute()
    attr.ClampAttribute(
        min_val=list(np.float32(0).tobytes()),
        max_val=list(np.float32(6).tobytes()),
        nan_mode=ts.NanPropagationMode.PROPAGATE,
    )
    g.addOperator(ts.Op.CLAMP, [x.name], [out.name], attr)
    with pytest.raises(VelaCompileError, match=r"subgraph 'float_clamp' for ethos-u55-128 .*Clamp"):
        compile_tosa(g.serialize(), resolve_target(None, "ethos-u55-128"), name="float_clamp")
    with pytest.raises(VelaCompileError, match="subgraph 'junk'"):
        compile_tosa(b"\0" * 64, resolve_target(None, "ethos-u85-256"), name="junk")
    with pytest.raises(ValueError, match="subgraph name"):
        compile_tosa(tosa, resolve_target(None, "ethos-u85-256"), name="../x")


# ----------------------------------------------------------------------------- ExecuTorch's packer
# Runs in ExecuTorch's venv: its arm_vela.vela_compile packs the npz that Vela wrote here
# (Vela is replaced by a stand-in that puts that npz where vela_compile reads it).
_ET_PACK = textwrap.dedent("""
    import importlib.util, json, shutil, sys, types
    from pathlib import Path
    pkg = Path(importlib.util.find_spec("executorch").submodule_search_locations[0])
    spec = importlib.util.spec_from_file_location("et_arm_vela", pkg / "backends/arm/arm_vela.py")
    arm_vela = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(arm_vela)
    jobs = json.loads(sys.argv[1])
    for npz, out in jobs:
        def fake_main(argv, npz=npz):
            outdir = next(a.split("=", 1)[1] for a in argv if a.startswith("--output-dir="))
            Path(outdir).mkdir(parents=True, exist_ok=True)
            shutil.copy(npz, Path(outdir) / "out_vela.npz")
            return 0
        arm_vela.has_vela = True
        arm_vela.vela = types.SimpleNamespace(main=fake_main)
        res = arm_vela.vela_compile(b"unused", ["--accelerator-config=unused"])
        assert not res.external_blocks
        Path(out).write_bytes(res.processed_bytes)
""")


def test_executorch_packs_the_same_bytes(compiled, tmp_path: Path, et_python: Path) -> None:
    """et_python (conftest) builds the venv when no earlier test did: with the suite spread
    over xdist workers, no test file can count on another having run first."""
    jobs = [(str(c["npz"]), str(tmp_path / f"{g}_{n}.bin")) for (g, n), c in compiled.items()]
    proc = subprocess.run(
        [str(et_python), "-c", _ET_PACK, json.dumps(jobs)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for ((g, n), c), (_, out) in zip(compiled.items(), jobs, strict=True):
        assert Path(out).read_bytes() == c["result"].blob, f"{g} for {n}"


# ----------------------------------------------------------------------------- blob layout
def _hand_blob() -> tuple[bytes, dict]:
    """A blob built field by field from the documented layout (not with pack_blob).

    Block headers (32 bytes) at 0, 32, 80, 144, 192, 272, 352; data at header + 32; 384 bytes."""
    cmd = b"COP1" + bytes([1, 0, 16, 0]) + b"\xff" * 8  # 16 bytes
    weights = bytes(range(1, 20))  # 19 bytes -> padded to 32
    inp = VelaTensor([1, 1, 1, 2, 2, 4], 1, 32, 1)
    outp = VelaTensor([1, 1, 1, 1, 1, 3], 4, 0, 1)

    def block(name: bytes, data: bytes) -> bytes:
        head = name.ljust(16, b"\0") + struct.pack("<I", len(data)) + b"\0" + b"\0" * 11
        return head + data + b"\0" * (-len(data) % 16)

    def ios(t: VelaTensor) -> bytes:
        return struct.pack("<i", 1) + struct.pack("<9i", *t.shape, t.elem_size, t.offset, t.region)

    raw = b"".join(
        [
            block(b"vela_bin_stream", b""),
            block(b"cmd_data", cmd),
            block(b"weight_data", weights),
            block(b"scratch_size", struct.pack("<I", 48)),
            block(b"inputs", ios(inp)),
            block(b"outputs", ios(outp)),
            block(b"vela_end_stream", b""),
        ]
    )
    return raw, {"cmd": cmd, "weights": weights, "scratch": 48, "inputs": [inp], "outputs": [outp]}


def test_pack_and_parse_match_the_documented_layout() -> None:
    raw, v = _hand_blob()
    assert pack_blob(v["cmd"], v["weights"], v["scratch"], v["inputs"], v["outputs"]) == raw
    parsed = parse_blob(raw)
    assert (parsed.command_stream, parsed.weights, parsed.scratch_size) == (
        v["cmd"],
        v["weights"],
        48,
    )
    assert parsed.inputs == v["inputs"] and parsed.outputs == v["outputs"]
    # Block headers are 32 bytes: data offsets of the layout above.
    assert parsed.data_offsets == {
        "vela_bin_stream": 32,
        "cmd_data": 64,
        "weight_data": 112,
        "scratch_size": 176,
        "inputs": 224,
        "outputs": 304,
        "vela_end_stream": 384,
    }
    assert len(raw) == 384
    assert (blobmod.REGION_WEIGHTS, blobmod.REGION_SCRATCH, blobmod.REGION_FAST_SCRATCH) == (
        0,
        1,
        2,
    )


def _edit(raw: bytes, at: int, new: bytes) -> bytes:
    return raw[:at] + new + raw[at + len(new) :]


def _header(name: bytes, size: int) -> bytes:
    return name.ljust(16, b"\0") + struct.pack("<I", size) + bytes(12)


@pytest.mark.parametrize(
    "case,make,pattern",
    [
        ("misaligned", lambda r: r + b"\0", r"byte 385: blob length 385 is not a multiple of 16"),
        ("truncated", lambda r: r[:128], r"block 'weight_data' at byte 80: truncated"),
        (
            "unknown block",
            lambda r: _edit(r, 192, b"inputz"),
            r"byte 192: unknown block name b'inputz",
        ),
        (
            "prefix is not enough",
            lambda r: _edit(r, 32, b"cmd_data_x"),
            r"byte 32: unknown block name",
        ),
        ("missing block", lambda r: r[:80] + r[144:], r"missing block\(s\) weight_data"),
        (
            "duplicate block",
            lambda r: r[:192] + r[144:192] + r[192:],
            r"block 'scratch_size' at byte 192: duplicate block",
        ),
        (
            "header not first",
            lambda r: r[32:64] + r[:32] + r[64:],
            r"block 'cmd_data' at byte 0: the first block",
        ),
        (
            "bad input count",
            lambda r: _edit(r, 224, struct.pack("<i", 2)),
            r"block 'inputs' at byte 224: count 2 does not match the block length 40",
        ),
        (
            "negative count",
            lambda r: _edit(r, 304, struct.pack("<i", -1)),
            r"block 'outputs' at byte 304: count -1",
        ),
        (
            "bad magic",
            lambda r: _edit(r, 64, b"XOP1"),
            r"block 'cmd_data' at byte 64: command stream starts",
        ),
        (
            "scratch too small",
            lambda r: _edit(r, 176, struct.pack("<I", 40)),
            r"block 'inputs' at byte 228: tensor 0 \(16 bytes at offset 32\) ends past the scratch area of 40",
        ),
        (
            "wrong region",
            lambda r: _edit(r, 228 + 32, struct.pack("<i", 2)),
            r"block 'inputs' at byte 228: tensor 0 is in region 2",
        ),
        (
            "element size",
            lambda r: _edit(r, 308 + 24, struct.pack("<i", 3)),
            r"block 'outputs' at byte 308: tensor 0 has element size 3",
        ),
        (
            "zero dimension",
            lambda r: _edit(r, 308, struct.pack("<i", 0)),
            r"block 'outputs' at byte 308: tensor 0 has shape",
        ),
        (
            "external",
            lambda r: _edit(r, 80 + 20, b"\x01"),
            r"block 'weight_data' at byte 80: external flag 1",
        ),
        (
            "reserved",
            lambda r: _edit(r, 80 + 31, b"\x01"),
            r"block 'weight_data' at byte 80: reserved header",
        ),
        (
            "padding",
            lambda r: _edit(r, 112 + 19, b"\x01"),
            r"block 'weight_data' at byte 131: padding bytes",
        ),
        (
            "scratch_size length",
            lambda r: (
                r[:144]
                + _header(b"scratch_size", 8)
                + struct.pack("<II", 48, 0)
                + bytes(8)
                + r[192:]
            ),
            r"block 'scratch_size' at byte 176: 8 bytes, expected 4",
        ),
        (
            "end block not empty",
            lambda r: r[:352] + _header(b"vela_end_stream", 1) + bytes(16),
            r"block 'vela_end_stream' at byte 384: must be empty",
        ),
        ("bytes after the end", lambda r: r + bytes(16), r"byte 384: 16 bytes after the end block"),
        ("no end block", lambda r: r[:352], r"missing block\(s\) vela_end_stream"),
    ],
)
def test_parse_blob_rejects_malformed(case: str, make, pattern: str) -> None:
    raw, _ = _hand_blob()
    bad = make(raw)
    with pytest.raises(BlobError, match=pattern):
        parse_blob(bad)


def test_pack_blob_rejects_what_cannot_be_stored() -> None:
    _, v = _hand_blob()
    with pytest.raises(BlobError, match="not b'COP1'"):
        pack_blob(b"NOPE", b"", 0, [], [])
    with pytest.raises(BlobError, match=r"inputs\[0\]: shape \[1, 2\] is not 6-D"):
        pack_blob(v["cmd"], b"", 48, [VelaTensor([1, 2], 1, 0, 1)], [])
    with pytest.raises(BlobError, match="does not fit u32"):
        pack_blob(v["cmd"], b"", 2**32, [], [])


# ----------------------------------------------------------------------------- configuration
def test_board_targets_and_defaults() -> None:
    t = resolve_target("corstone-300", None)
    assert (t.accelerator, t.family, t.macs) == ("ethos-u55-128", "u55", 128)
    assert (t.system_config, t.memory_mode) == ("Ethos_U55_High_End_Embedded", "Shared_Sram")
    assert t.config_ini.is_absolute() and t.config_ini == OUR_INI.resolve()
    t = resolve_target("corstone-300", "ethos-u65-256")
    assert (t.family, t.macs, t.memory_mode) == ("u65", 256, "Dedicated_Sram_384KB")
    assert resolve_target("corstone-320", "ethos-u85-256").system_config == "Ethos_U85_SYS_DRAM_Mid"
    # Without a board, each family gets what our boards use for it.
    for board, npu in TARGETS:
        b = resolve_target(board, npu)
        n = resolve_target(None, npu)
        assert (
            (n.system_config, n.memory_mode)
            == (b.system_config, b.memory_mode)
            == FAMILY_DEFAULTS[b.family]
        )
    # Overrides are taken when they fit.
    t = resolve_target("corstone-320", "ethos-u85-256", memory_mode="Sram_Only")
    assert t.memory_mode == "Sram_Only"
    assert "--config" in t.vela_args() and str(OUR_INI.resolve()) in t.vela_args()


@pytest.mark.parametrize(
    "args,pattern",
    [
        (
            ("corstone-320", "ethos-u55-128"),
            r"board 'corstone-320' does not offer NPU 'ethos-u55-128'; valid choices: ethos-u85-256$",
        ),
        (
            ("qemu-an547", "ethos-u55-128"),
            r"has no NPU; valid choices: corstone-300, corstone-320$",
        ),
        (("nope", "ethos-u55-128"), r"unknown board 'nope'"),
        (
            (None, "ethos-u99-64"),
            r"unknown NPU 'ethos-u99-64'; valid choices: ethos-u55-32, .*ethos-u85-2048$",
        ),
        (
            (None, "ethos-u55-128", "Ethos_U85_SYS_DRAM_Mid"),
            (
                r"'Ethos_U85_SYS_DRAM_Mid' is written for Ethos-U85, not for ethos-u55-128; "
                r"valid choices: Ethos_U55_High_End_Embedded$"
            ),
        ),
        (
            ("corstone-300", "ethos-u65-256", "Ethos_U85_SYS_DRAM_Mid"),
            r"not for ethos-u65-256; valid choices: Ethos_U65_High_End$",
        ),
        (
            (None, "ethos-u85-256", "Ethos_U55_High_End_Embedded"),
            r"written for Ethos-U55, not for ethos-u85-256; valid choices: Ethos_U85_SYS_DRAM_Mid$",
        ),
        (
            (None, "ethos-u55-128", None, "Dedicated_Sram_384KB"),
            r"dedicated SRAM cache, which the Ethos-U55 does not support .*valid choices: Shared_Sram, Sram_Only$",
        ),
        (
            (None, "ethos-u85-256", "Ethos_U85_SYS_Flash_High"),
            r"unknown Vela system config 'Ethos_U85_SYS_Flash_High' .*valid choices: Ethos_U85_SYS_DRAM_Mid$",
        ),
        (
            (None, "ethos-u65-256", None, "Dedicated_Sram_512KB"),
            r"unknown Vela memory mode 'Dedicated_Sram_512KB' .*valid choices: Dedicated_Sram_384KB, Shared_Sram, Sram_Only$",
        ),
    ],
)
def test_invalid_configurations(args: tuple, pattern: str) -> None:
    with pytest.raises(NpuConfigError, match=pattern) as info:
        resolve_target(*args)
    assert isinstance(info.value, ValueError)


def test_our_ini_equals_velas_numbers() -> None:
    """Our ini is written by us; its numbers must be Vela's for the same names."""
    shipped_path = Path(ethosu_vela.__file__).parent.parent / "config_files" / "Arm" / "vela.ini"

    def sections(path: Path) -> dict[str, dict[str, str]]:
        p = configparser.ConfigParser(interpolation=None)
        p.optionxform = str  # type: ignore[assignment,method-assign]
        p.read(path)
        out = {}
        for s in p.sections():
            values = dict(p[s])
            parent = values.pop("inherit", None)
            if parent:
                values = {**dict(p[parent]), **values}
            out[s] = values
        return out

    ours, shipped = sections(OUR_INI), sections(shipped_path)
    assert set(ours) == {
        "System_Config.Ethos_U55_High_End_Embedded",
        "System_Config.Ethos_U65_High_End",
        "System_Config.Ethos_U85_SYS_DRAM_Mid",
        "Memory_Mode.Shared_Sram",
        "Memory_Mode.Sram_Only",
        "Memory_Mode.Dedicated_Sram_384KB",
    }
    for name, values in ours.items():
        assert values == shipped[name], name
    ini = read_ini(OUR_INI.resolve())
    assert all(fam is not None for fam in ini.system_configs.values())
    # Every board setting names a section of the board's ini.
    for board in ("corstone-300", "corstone-320"):
        for npu in get_board(board).config["npu"]["choices"]:
            resolve_target(board, npu)


def test_parse_blob_never_fails_other_than_blob_error() -> None:
    """Every truncation and every single-byte change of a valid blob either parses or raises
    BlobError (no struct/index/unicode error escapes)."""
    raw, _ = _hand_blob()
    variants = [raw[:n] for n in range(len(raw))]
    variants += [_edit(raw, i, bytes([v])) for i in range(len(raw)) for v in (0x00, 0x80, 0xFF)]
    rejected = 0
    for bad in variants:
        try:
            parse_blob(bad)
        except BlobError:
            rejected += 1
    # All truncations are rejected; some byte changes (data bytes) are still valid blobs.
    assert rejected >= len(raw)
