"""Selective firmware images on QEMU (mps3-an547): for each MLPerf Tiny model the image built from
its selected_operators.yaml holds only the selected kernels (nm on the ELF, and only their
translation units in libtm_kernels.a) and its outputs are bit-exact with the image holding every
kernel; a program needing a kernel outside the image fails at load naming the operator, with the
runner's missing-operator exit code. One image built from a merged yaml running two programs:
tests/test_multi_program_firmware.py."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch
import torchmcu
from torchmcu import device, native
from torchmcu.device.run import EXIT_MISSING_OPERATOR
from torchmcu.selective import load_table, read_yaml

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

BOARD = "qemu-an547"
MLPERF_TINY = ["ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder"]
# Every kernel entry point the tree has (cortex_m, portable, executorch_prim, torchmcu ops).
TABLE_SYMBOLS = frozenset(k.symbol for k in load_table().kernels)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("selective")


@pytest.fixture(scope="module")
def exported(root: Path):
    """name -> (pte path, selected_operators.yaml path), each model exported once."""
    from torchmcu.examples import models

    cache: dict[str, tuple[Path, Path]] = {}

    def get(name: str) -> tuple[Path, Path]:
        if name not in cache:
            model, example = models.build(name)
            exp = torchmcu.export(model, example, calibration=models.calibration(name, 4, seed=1))
            pte = exp.save(root / name, name=name)
            cache[name] = (pte, pte.parent / "selected_operators.yaml")
        return cache[name]

    return get


def _blob(name: str, pte: Path) -> bytes:
    from torchmcu.examples import models

    samples = [[x.numpy() for x in s] for s in models.calibration(name, 2, seed=42)]
    return device.write_io_blob(native.program_info(pte.read_bytes()), samples)


def kernel_symbols(elf: Path) -> set[str]:
    """The kernel entry points linked into an image (nm)."""
    nm = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True)
    return {ln.split()[-1] for ln in nm.stdout.splitlines() if ln.split()[-1] in TABLE_SYMBOLS}


def _archive_members(image: device.FirmwareImage) -> set[str]:
    lib = image.build_dir / "firmware" / "kernels" / "libtm_kernels.a"
    ar = subprocess.run(
        ["arm-none-eabi-ar", "t", str(lib)], capture_output=True, text=True, check=True
    )
    return set(ar.stdout.split())


def _expected(yaml_path: Path) -> tuple[set[str], set[str]]:
    """(kernel symbols, object files) the yaml selects, from the table (not from the build)."""
    table = load_table()
    entries = table.select(read_yaml(yaml_path))
    objects = {Path(s).name + ".obj" for s in table.sources(entries)} | {"registry_selected.c.obj"}
    return {k.symbol for k in entries}, objects


@pytest.mark.parametrize("name", MLPERF_TINY)
def test_selective_image_holds_only_its_kernels_and_is_bit_exact(name, exported, root) -> None:
    pte, yaml_path = exported(name)
    blob = _blob(name, pte)
    full = device.build(pte, BOARD, root / "fw-full", inputs=blob)
    full_symbols = kernel_symbols(full.elf)
    full_run = device.run(full.elf, BOARD, 300).check()
    sel = device.build(pte, BOARD, root / "fw-sel", inputs=blob, ops_yaml=yaml_path)
    symbols, objects = _expected(yaml_path)
    assert kernel_symbols(sel.elf) == symbols
    assert symbols < full_symbols and len(full_symbols) == len(load_table().kernels)
    members = _archive_members(sel)
    assert members == objects, "only the selected translation units are compiled"
    sel_run = device.run(sel.elf, BOARD, 300).check()
    assert sorted(sel_run.raw_outputs) == [0, 1]
    assert sel_run.raw_outputs == full_run.raw_outputs


def test_program_outside_the_image_fails_at_load(exported, root) -> None:
    pte, _ = exported("ds_cnn")
    _, ae_yaml = exported("deep_autoencoder")  # linear + quantize/dequantize, no conv/pad/pool
    with pytest.raises(
        device.FirmwareBuildError, match=r"cortex_m::pad\.out.*cortex_m::quantized_conv2d\.out"
    ):
        device.build(pte, BOARD, root / "fw-refuse", ops_yaml=ae_yaml)
    assert not (root / "fw-refuse" / "CMakeCache.txt").exists()
    # An image made for another yaml (the host-side check bypassed) rejects the program at load.
    image = device.build(
        pte, BOARD, root / "fw-stale", defines={"TORCHMCU_OPS_YAML": str(ae_yaml)}
    )
    result = device.run(image.elf, BOARD, 120)
    assert result.exit_code == EXIT_MISSING_OPERATOR == 3
    error = [ln for ln in result.console.splitlines() if ln.startswith("TM_ERROR")]
    assert len(error) == 1 and "missing_operator" in error[0]
    ops = native.program_info(pte.read_bytes())["operators"]
    first_missing = next(n for n, _ in ops if n not in {"cortex_m::quantize_per_tensor"})
    assert f"op={first_missing}" in error[0] and "overload=out" in error[0]


NPU_BOARD = "corstone-300"  # offers the EthosUBackend delegate; CPU-only images run on QEMU
BACKEND_SYMBOLS = {"tm_ethos_u_backend", "tm_ethosu_run"}  # the backend and the NPU driver


def _symbols(elf: Path) -> set[str]:
    nm = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True)
    return {ln.split()[-1] for ln in nm.stdout.splitlines() if ln.strip()}


def _registered_backends(image: device.FirmwareImage) -> list[str]:
    """The backend ids in the generated registry's backend array (one `/* id */` per entry)."""
    text = (image.build_dir / "firmware" / "kernels" / "registry_selected.c").read_text()
    return re.findall(r"extern const tm_backend \w+; /\* (\w+) \*/", text)


def test_delegates_follow_the_yaml(tmp_path: Path) -> None:
    """The image registers (and links) exactly the selected backends: the delegate of a program's
    yaml, all with include_all_non_op_selectives or without a yaml, none otherwise; a program
    whose delegate is not in the image fails at load naming the delegate id."""
    import yaml
    from _delegate_programs import delegate_program
    from torchmcu.pte.writer import serialize
    from torchmcu.selective import from_program, write_yaml

    program = delegate_program()
    pte = tmp_path / "npu.pte"
    pte.write_bytes(serialize(program))
    with_npu = write_yaml(from_program(program, "npu"), tmp_path / "npu.yaml")
    assert yaml.safe_load(with_npu.read_text())["build_features"] == ["delegate:EthosUBackend"]
    cpu_only = write_yaml(
        {**from_program(program, "npu"), "build_features": []}, tmp_path / "cpu.yaml"
    )
    all_doc = {**from_program(program, "npu"), "build_features": []}
    all_doc["include_all_non_op_selectives"] = True
    everything = write_yaml(all_doc, tmp_path / "all.yaml")
    out = tmp_path / "fw"

    image = device.build(pte, NPU_BOARD, out, ops_yaml=with_npu)
    assert _registered_backends(image) == ["EthosUBackend"]
    assert BACKEND_SYMBOLS <= _symbols(image.elf)
    image = device.build(pte, NPU_BOARD, out, ops_yaml=everything)
    assert _registered_backends(image) == ["EthosUBackend"]
    image = device.build(pte, NPU_BOARD, out)
    assert _registered_backends(image) == ["EthosUBackend"]
    assert BACKEND_SYMBOLS <= _symbols(image.elf)

    with pytest.raises(
        device.FirmwareBuildError, match=r"npu\.pte needs delegates .*EthosUBackend"
    ):
        device.build(pte, NPU_BOARD, out, ops_yaml=cpu_only)
    # Built anyway (the host-side check bypassed): no backend in the image, none of its code,
    # and the program is refused at load naming the delegate, with the missing-operator code.
    image = device.build(pte, NPU_BOARD, out, defines={"TORCHMCU_OPS_YAML": str(cpu_only)})
    assert _registered_backends(image) == []
    assert not BACKEND_SYMBOLS & _symbols(image.elf)
    assert "tm_cortex_m_transpose_out" in _symbols(image.elf)
    result = device.run(image.elf, NPU_BOARD, 60)
    assert result.exit_code == EXIT_MISSING_OPERATOR, result.console
    (line,) = [ln for ln in result.console.splitlines() if ln.startswith("TM_ERROR")]
    assert line.startswith("TM_ERROR missing_operator") and "EthosUBackend" in line


def test_selected_delegate_the_board_lacks_stops_the_configure(tmp_path: Path) -> None:
    """qemu-an547 has no NPU, so no EthosUBackend to register: a yaml selecting it is refused."""
    from _delegate_programs import delegate_program
    from torchmcu.pte.writer import serialize
    from torchmcu.selective import from_program, write_yaml

    program = delegate_program()
    pte = tmp_path / "npu.pte"
    pte.write_bytes(serialize(program))
    with_npu = write_yaml(from_program(program, "npu"), tmp_path / "npu.yaml")
    with pytest.raises(device.FirmwareBuildError) as err:
        device.build(pte, BOARD, tmp_path / "fw", ops_yaml=with_npu)
    message = " ".join(str(err.value).split())  # CMake wraps its messages
    assert f"resolving the delegates selected by {with_npu} for {BOARD} failed" in message
    assert "no backend offered for this image: EthosUBackend (offered: none)" in message


def test_runtime_features_follow_the_yaml(tmp_path: Path) -> None:
    """The runtime's optional features are linked only when the yaml selects them: a program using
    control flow and a String value runs in the image built from its own yaml; built (host check
    bypassed) from a yaml without a feature, the image has none of that feature's code and
    refuses the program at load naming the feature, never running it."""
    import copy

    from test_control_flow import CondNet, _inputs
    from torchmcu.device.run import EXIT_LOAD_ERROR
    from torchmcu.pte import program as pm
    from torchmcu.pte.writer import serialize
    from torchmcu.selective import from_program, write_yaml

    cal = [(x,) for x in _inputs(5)]
    exported = torchmcu.export(CondNet().eval(), cal[0], calibration=cal)
    program = copy.deepcopy(exported.program)
    program.execution_plan[0].values.append(pm.String("unused"))  # a String value, never read
    pte = tmp_path / "cf.pte"
    pte.write_bytes(serialize(program))
    doc = from_program(program, "cf")
    own = write_yaml(doc, tmp_path / "cf.yaml")
    out = tmp_path / "fw"
    image = device.build(pte, BOARD, out, ops_yaml=own)
    assert "LOOP_OPS" in _symbols(image.elf)  # the loop-kernel table of the control-flow checks
    result = device.run(image.elf, BOARD, 60)
    assert result.exit_code == 0, result.console
    for kept, missing in (
        (["runtime:control_flow"], "string_list_values"),
        (["runtime:string_list_values"], "control_flow"),
    ):
        lacking = write_yaml({**doc, "build_features": kept}, tmp_path / f"no-{missing}.yaml")
        image = device.build(pte, BOARD, out, defines={"TORCHMCU_OPS_YAML": str(lacking)})
        assert ("LOOP_OPS" in _symbols(image.elf)) == (missing != "control_flow")
        result = device.run(image.elf, BOARD, 60)
        assert result.exit_code == EXIT_LOAD_ERROR, result.console
        (line,) = [ln for ln in result.console.splitlines() if ln.startswith("TM_ERROR")]
        assert line.startswith("TM_ERROR load status=UNSUPPORTED")
        assert f"message=runtime feature '{missing}' not in this image" in line
        assert "TM_RUN" not in result.console


class _VariantNet(torch.nn.Module):
    """Depthwise layers on 24 channels (not a multiple of the 16-channel block: the tail) down
    to a 1x1 image, where a 3x3 window's centre row is the only one inside (the per-pixel form)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 24, 3, stride=2, padding=1)
        self.dw = torch.nn.Sequential(
            *(torch.nn.Conv2d(24, 24, 3, stride=s, padding=1, groups=24) for s in (2, 2, 1))
        )
        self.head = torch.nn.Linear(24, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.dw(torch.relu(self.stem(x)))).flatten(1))


def test_kernel_variants_follow_the_yaml(tmp_path: Path) -> None:
    """An image holds only the kernel paths its yaml records (selective.variants): the program's
    own image runs bit-exact with the full image; built (host check bypassed) from a yaml that
    leaves out the depthwise channel tail, the tail's code is absent and the program is refused
    at method init (the depthwise call, TM_ERR_UNSUPPORTED), never run; the host check names
    the missing path before any build."""
    from torchmcu.device.run import EXIT_KERNEL_ERROR, EXIT_LOAD_ERROR
    from torchmcu.selective import write_yaml

    torch.manual_seed(0)
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    exp = torchmcu.export(_VariantNet().eval(), cal[0], calibration=cal)
    pte = exp.save(tmp_path / "net", name="net")
    own = pte.parent / "selected_operators.yaml"
    doc = read_yaml(own)
    tail = "kernel:cortex_m::quantized_depthwise_conv2d/tail"
    dw = [f for f in doc["build_features"] if "depthwise" in f]
    assert dw == [
        "kernel:cortex_m::quantized_depthwise_conv2d/3x3",
        "kernel:cortex_m::quantized_depthwise_conv2d/3x3_pixel",
        tail,
    ]
    info = native.program_info(pte.read_bytes())
    blob = device.write_io_blob(info, [[x.numpy() for x in cal[1]]])
    full = device.build(pte, BOARD, tmp_path / "fw-full", inputs=blob)
    assert {"dw_row3x3_tail", "dw_pixel3x3_full"} <= _symbols(full.elf)
    sel = device.build(pte, BOARD, tmp_path / "fw-sel", inputs=blob, ops_yaml=own)
    assert {"dw_row3x3_tail", "dw_pixel3x3_full"} <= _symbols(sel.elf)
    assert device.run(sel.elf, BOARD, 120).check().raw_outputs == (
        device.run(full.elf, BOARD, 120).check().raw_outputs
    )
    lacking = write_yaml(
        {**doc, "build_features": [f for f in doc["build_features"] if f != tail]},
        tmp_path / "no-tail.yaml",
    )
    with pytest.raises(device.FirmwareBuildError, match=f"leaves out: {tail} "):
        device.build(pte, BOARD, tmp_path / "fw-refuse", ops_yaml=lacking)
    assert not (tmp_path / "fw-refuse" / "CMakeCache.txt").exists()
    image = device.build(
        pte, BOARD, tmp_path / "fw-stale", inputs=blob, defines={"TORCHMCU_OPS_YAML": str(lacking)}
    )
    symbols = _symbols(image.elf)
    assert "dw_row3x3_tail" not in symbols and "dw_pixel3x3_tail" not in symbols
    result = device.run(image.elf, BOARD, 120)
    assert result.exit_code in (EXIT_LOAD_ERROR, EXIT_KERNEL_ERROR), result.console
    (line,) = [ln for ln in result.console.splitlines() if ln.startswith("TM_ERROR")]
    assert "status=UNSUPPORTED" in line and "op=cortex_m::quantized_depthwise_conv2d" in line
    assert "TM_RUN" not in result.console
