"""One firmware image holding several programs (QEMU mps3-an547): built from the merged
selected_operators.yaml of two MLPerf Tiny models and a CNN the float fallback runs partly in
float32 (tests/test_float_fallback.py: aten::flip and aten::_softmax between int8 convs), it
runs the programs in turn with one kernel registry, each bit-exact with the host runtime, and
links exactly the union of their kernels;
a failing program does not stop the next one, the image exits with the first failure's code;
`torchmcu build` refuses the image when any program needs an operator outside the yaml."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torchmcu
from test_float_fallback import fallback_cnn
from test_selective_firmware import kernel_symbols
from torchmcu import device, native
from torchmcu.cli import main as cli_main
from torchmcu.device.run import EXIT_MISSING_OPERATOR, EXIT_OK
from torchmcu.lower import FloatFallbackWarning
from torchmcu.selective import load_table, merge_files, read_yaml

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

BOARD = "qemu-an547"
# Two cheap MLPerf Tiny models that each need kernels the other does not (ds_cnn: pad and
# depthwise conv; resnet8: add and transpose), so the union is a real one.
MODELS = ("ds_cnn", "resnet8")
FALLBACK = "fallback_cnn"  # test_float_fallback's flip CNN, in the first image only
PROGRAMS = (*MODELS, FALLBACK)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("multi")


@pytest.fixture(scope="module")
def exported(root: Path) -> dict[str, tuple[Path, Path]]:
    """name -> (pte, its selected_operators.yaml)."""
    from torchmcu.examples import models

    out = {}
    for name in PROGRAMS:
        if name == FALLBACK:
            model, calibration, _ = fallback_cnn()
            example = calibration[0]
            with pytest.warns(FloatFallbackWarning):
                exp = torchmcu.export(model, example, calibration=calibration)
        else:
            model, example = models.build(name)
            exp = torchmcu.export(model, example, calibration=models.calibration(name, 4, seed=1))
        pte = exp.save(root / name, name=name)
        out[name] = (pte, pte.parent / "selected_operators.yaml")
    return out


@pytest.fixture(scope="module")
def merged(exported, root: Path) -> Path:
    path = root / "merged.yaml"
    merge_files([exported[n][1] for n in PROGRAMS], board=BOARD, output=path)
    return path


def _samples(name: str) -> list[list[np.ndarray]]:
    from torchmcu.examples import models

    if name == FALLBACK:
        return fallback_cnn()[2][:2]
    return [[x.numpy() for x in s] for s in models.calibration(name, 2, seed=42)]


def test_one_image_runs_every_program_bit_exact(exported, merged, root) -> None:
    ptes = [exported[n][0] for n in PROGRAMS]
    infos = [native.program_info(p.read_bytes()) for p in ptes]
    samples = [_samples(n) for n in PROGRAMS]
    blobs = [device.write_io_blob(info, s) for info, s in zip(infos, samples)]
    image = device.build(ptes, BOARD, root / "fw", inputs=blobs, ops_yaml=merged)
    assert image.programs == PROGRAMS

    # Exactly the union of the models' kernels, as the kernel table maps each model's list.
    table = load_table()
    union = {k.symbol for n in PROGRAMS for k in table.select(read_yaml(exported[n][1]))}
    own = [{k.symbol for k in table.select(read_yaml(exported[n][1]))} for n in PROGRAMS]
    assert kernel_symbols(image.elf) == union
    assert not own[0] <= own[1] and not own[1] <= own[0], "each model brings kernels of its own"
    assert {"tm_portable_flip_out", "tm_portable_softmax_out"} <= own[2] - own[0] - own[1]

    result = device.run(image.elf, BOARD, 300).check()
    assert [(p.index, p.name, p.status) for p in result.programs] == [
        (0, "ds_cnn", "OK"),
        (1, "resnet8", "OK"),
        (2, FALLBACK, "OK"),
    ]
    assert result.raw_outputs == {} and "TM_END status=OK programs=3" in result.console
    for index, (name, info, sample_set) in enumerate(zip(PROGRAMS, infos, samples)):
        run = result.program(name)
        assert sorted(run.raw_outputs) == [0, 1] and [r["sample"] for r in run.runs] == [0, 1]
        for s, sample in enumerate(sample_set):
            want = native.run_program(ptes[index].read_bytes(), sample)
            got = result.outputs(info, s, program=index)
            assert len(got) == len(want)
            assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))

    # One arena for both: reserved = the larger plan, each program uses its own.
    arenas = [int(info["arena_bytes"]) for info in infos]
    for index, arena in enumerate(arenas):
        section = result.console.split(f"TM_PROGRAM {index} ")[1]
        memory = next(ln for ln in section.splitlines() if ln.startswith("TM_MEMORY "))
        assert f" arena={arena}/{max(arenas)} " in memory


def test_a_failing_program_does_not_stop_the_next(exported, root) -> None:
    """ds_cnn in an image registering only resnet8's kernels (the host-side check bypassed)
    fails at load (no pad kernel); resnet8 still runs; the exit code is the first failure's."""
    (cnn, _), (res, res_yaml) = exported["ds_cnn"], exported["resnet8"]
    res_info = native.program_info(res.read_bytes())
    image = device.build(
        [cnn, res],
        BOARD,
        root / "fw-partial",
        defines={"TORCHMCU_OPS_YAML": str(res_yaml)},
        names=["cnn", "res-8"],
    )
    result = device.run(image.elf, BOARD, 120)
    assert result.exit_code == EXIT_MISSING_OPERATOR == 3
    first, second = result.programs
    assert (first.name, first.status, first.exit_code) == ("cnn", "FAILED", 3)
    assert len(first.errors) == 1 and "missing_operator" in first.errors[0]
    assert "op=cortex_m::pad" in first.errors[0] and first.raw_outputs == {}
    assert (second.name, second.status, second.exit_code) == ("res-8", "OK", EXIT_OK)
    want = native.run_program(res.read_bytes(), device.default_inputs(res_info))
    got = result.outputs(res_info, 0, program="res-8")
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert "TM_END status=FAILED exit=3 failed=1 programs=2" in result.console
    with pytest.raises(device.FirmwareRunError, match=r"TM_PROGRAM_END 0 status=FAILED exit=3"):
        result.check()


def test_build_checks_every_program_against_the_yaml(exported, root, capsys) -> None:
    (cnn, _), (res, res_yaml) = exported["ds_cnn"], exported["resnet8"]
    with pytest.raises(device.FirmwareBuildError) as err:
        device.build([res, cnn], BOARD, root / "fw-refuse", ops_yaml=res_yaml)
    message = str(err.value)
    assert message.startswith(f"{cnn} needs operators that {res_yaml.resolve()} does not select: ")
    assert "cortex_m::pad.out, cortex_m::quantized_depthwise_conv2d.out; " in message
    # and the path its pointwise convolutions take, which ResNet8 (3x3 and strided 1x1) never does
    assert f"{cnn} takes kernel paths that {res_yaml.resolve()} leaves out: " in message
    assert "kernel:cortex_m::quantized_conv2d/pointwise" in message and message.endswith(
        "(merge the programs' selected_operators.yaml into it: torchmcu ops merge)"
    )
    assert str(res) not in message
    assert not (root / "fw-refuse" / "CMakeCache.txt").exists()
    code = cli_main(
        ["build", str(res), str(cnn), "--ops", str(res_yaml), "--board", BOARD,
         "--build-dir", str(root / "fw-refuse")]
    )  # fmt: skip
    assert code != 0 and "cortex_m::pad.out" in capsys.readouterr().err
    assert not (root / "fw-refuse" / "CMakeCache.txt").exists()


def test_cli_builds_the_two_program_image(exported, merged, root, capsys) -> None:
    ptes = [exported[n][0] for n in MODELS]
    npz = []
    for name in MODELS:
        path = root / f"{name}-inputs.npz"
        sample = _samples(name)[1]
        np.savez(path, *[x[None] for x in sample])  # one sample, leading axis = samples
        npz.append((path, sample))
    argv = ["build", *map(str, ptes), "--ops", str(merged), "--board", BOARD]
    argv += ["--build-dir", str(root / "fw-cli")]
    for path, _ in npz:
        argv += ["--inputs", str(path)]
    assert cli_main(argv) == 0, capsys.readouterr().err
    result = device.run(root / "fw-cli" / "firmware.elf", BOARD, 300).check()
    assert [p.name for p in result.programs] == list(MODELS)
    for index, (pte, (_, sample)) in enumerate(zip(ptes, npz)):
        info = native.program_info(pte.read_bytes())
        want = native.run_program(pte.read_bytes(), sample)
        got = result.outputs(info, 0, program=index)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
