"""The command line answers bad input with one error line (exit 2), never a traceback, and
checks every argument before any work (issue 15, items 2.2, 2.4, 2.5, 2.7, 2.8, 2.9).

The CLI runs in-process (torchmcu.cli.main). "Before any work" is observed directly: the
model factory records each call in a file, and device.build is replaced by a function that
fails the test when it is reached.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from test_runtime_programs import add_program, serialize_unchecked
from torch import nn
from torchmcu.cli import main

MODEL = """
import torch
from pathlib import Path
from torch import nn

CALLS = Path(__file__).with_name("calls.txt")


def build():
    with CALLS.open("a") as f:
        f.write("build\\n")
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).eval(), (torch.randn(1, 8),)


def calibration_samples():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(1, 8, generator=g),) for _ in range(4)]
"""


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.py"
    path.write_text(MODEL)
    return path


def _calls(model_file: Path) -> int:
    calls = model_file.with_name("calls.txt")
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one error line of a CLI call that must fail with exit 2 (progress lines aside)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    return errors[0]


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """model.pte (float32 I/O) and int8.pte (int8_io) of one Linear(8, 4)."""
    out = tmp_path_factory.mktemp("programs")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4)).eval()
    x = (torch.randn(1, 8),)
    torchmcu.export(model, x, calibration=[x]).save(out, name="model")
    torchmcu.export(model, x, calibration=[x], int8_io=True).save(out, name="int8")
    return {"model": out / "model.pte", "int8": out / "int8.pte"}


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def build(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("device.build was reached: the arguments were not checked first")

    monkeypatch.setattr("torchmcu.device.build", build)


def _npz(path: Path, **arrays: np.ndarray) -> str:
    np.savez(path, **arrays)
    return str(path)


# -- 2.2: board runs check --inputs as strictly as the host ---------------------------------


@pytest.mark.parametrize(
    "command", [["run", "--board", "qemu-an547"], ["build"], ["run", "--host"]]
)
def test_inputs_are_checked_like_the_host(
    command: list[str], programs, tmp_path: Path, no_build, capsys
) -> None:
    def run(pte: Path, npz: str) -> str:
        argv = [command[0], str(pte), *command[1:], "--inputs", npz]
        return _error(capsys, [*argv, "--build-dir", str(tmp_path / "b")])

    f32 = np.zeros((2, 1, 8), np.float32)
    err = run(programs["int8"], _npz(tmp_path / "f.npz", x=f32))  # float data, int8 program
    assert "f.npz sample 0: input 0: expected int8[1, 8], got float32[1, 8]" in err
    err = run(programs["model"], _npz(tmp_path / "two.npz", a=f32, b=f32))
    assert "two.npz holds 2 array(s) (a, b) but the program takes 1 input(s)" in err
    err = run(programs["model"], _npz(tmp_path / "zero.npz", x=f32[:0]))
    assert "zero.npz holds 0 samples" in err
    for dtype in (np.int8, np.float64):
        err = run(programs["model"], _npz(tmp_path / "d.npz", x=f32.astype(dtype)))
        assert (
            f"d.npz sample 0: input 0: expected float32[1, 8], got {np.dtype(dtype)}[1, 8]" in err
        )
    err = run(programs["model"], _npz(tmp_path / "s.npz", x=np.zeros((2, 1, 7), np.float32)))
    assert "s.npz sample 0: input 0: expected float32[1, 8], got float32[1, 7]" in err


def test_build_of_several_programs_checks_each_inputs(programs, tmp_path, no_build, capsys) -> None:
    good = _npz(tmp_path / "good.npz", x=np.zeros((1, 1, 8), np.float32))
    bad = _npz(tmp_path / "bad.npz", x=np.zeros((1, 1, 8), np.float32))
    argv = ["build", str(programs["model"]), str(programs["int8"]), "--inputs", good]
    assert "bad.npz sample 0: input 0: expected int8[1, 8]" in _error(
        capsys, [*argv, "--inputs", bad]
    )


# -- 2.4: no tracebacks ---------------------------------------------------------------------


FACTORIES = """
import torch
from torch import nn
from helper import net  # a module beside this file

def good():
    return net().eval(), (torch.randn(1, 8),)

def raises():
    raise RuntimeError("no weights here")  # RAISES

def model_only():
    return net()

def tensor_inputs():
    return net(), torch.randn(1, 8)

def three():
    return net(), (torch.randn(1, 8),), 3

def not_a_module():
    return "net", (torch.randn(1, 8),)

not_callable = 3

def calibration_samples():
    return [(torch.randn(1, 8),)]
"""


@pytest.fixture
def factories(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "helper.py").write_text(
        "from torch import nn\n\n\ndef net():\n    return nn.Sequential(nn.Linear(8, 4))\n"
    )
    path = folder / "factories.py"
    path.write_text(FACTORIES)
    return path


def test_model_file_imports_a_module_beside_it(factories: Path, tmp_path: Path) -> None:
    assert main(["export", f"{factories}:good", "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "model.pte").is_file()


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("raises", "raises() raised RuntimeError: no weights here (at {file}:{line})"),
        (
            "model_only",
            "model_only() returned a Sequential; it must return (model, example_inputs)",
        ),
        (
            "tensor_inputs",
            (
                "tensor_inputs() returned a tuple of 2 (Sequential, Tensor): example_inputs must be "
                "a tuple of the model's inputs, got Tensor (wrap one tensor in a tuple: (x,))"
            ),
        ),
        ("three", "three() returned a tuple of 3 (Sequential, tuple, int); it must return"),
        ("not_a_module", "not_a_module() returned a tuple of 2 (str, tuple); it must return"),
        (
            "not_callable",
            "not_callable is an int, not a function returning (model, example_inputs)",
        ),
        ("missing", "factories.py has no 'missing'"),
    ],
)
def test_bad_factory_is_named(factories, tmp_path, capsys, factory: str, message: str) -> None:
    line = next(i for i, t in enumerate(FACTORIES.splitlines(), 1) if "# RAISES" in t)
    err = _error(capsys, ["export", f"{factories}:{factory}", "-o", str(tmp_path / "out")])
    assert f"torchmcu export: error: {factories}:{factory}: " in err or factory == "missing"
    assert message.format(file=factories, line=line) in err
    assert not (tmp_path / "out").exists()


def test_model_spec_not_ending_in_py(model_file: Path, tmp_path: Path, capsys) -> None:
    txt = model_file.with_suffix(".txt")
    txt.write_text(MODEL)
    err = _error(capsys, ["export", f"{txt}:build", "-o", str(tmp_path / "out")])
    assert f"{txt} is neither a .py file nor a module name" in err
    assert "a model file must end in .py" in err
    err = _error(capsys, ["export", "models/cnn.txt:build"])
    assert "models/cnn.txt is neither a .py file nor a module name" in err


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (
            {"x": np.float32(1.0)},
            "array 'x' is 0-d (a scalar); each array needs a leading sample axis",
        ),
        ({"x": np.array(["a", "b"])}, "array 'x' has dtype <U1; inputs must be numbers"),
        ({"x": np.zeros((0, 8), np.float32)}, "holds 0 samples"),
        (
            {"x": np.zeros((2, 8), np.float32), "y": np.zeros((3, 8), np.float32)},
            "all arrays need the same number of samples (leading axis); got x: 2, y: 3",
        ),
    ],
)
def test_bad_calibration_arrays(model_file, tmp_path, capsys, arrays, message: str) -> None:
    npz = _npz(tmp_path / "cal.npz", **arrays)
    err = _error(capsys, ["export", f"{model_file}:build", "--calibration", npz])
    assert f"cal.npz: {message}" in err or f"cal.npz {message}" in err
    assert _calls(model_file) == 0  # the file is checked before the model is built


def test_npy_renamed_to_npz(model_file: Path, tmp_path: Path, capsys) -> None:
    np.save(tmp_path / "cal.npy", np.zeros((2, 8), np.float32))
    (tmp_path / "cal.npy").rename(tmp_path / "cal.npz")
    err = _error(
        capsys, ["export", f"{model_file}:build", "--calibration", str(tmp_path / "cal.npz")]
    )
    assert "cal.npz is an .npy file (one bare array), not an .npz" in err
    (tmp_path / "junk.npz").write_bytes(b"not a zip at all")
    err = _error(
        capsys, ["export", f"{model_file}:build", "--calibration", str(tmp_path / "junk.npz")]
    )
    assert "junk.npz: not an .npz file of arrays" in err


def test_run_host_with_zero_samples(programs, tmp_path: Path, capsys) -> None:
    npz = _npz(tmp_path / "zero.npz", x=np.zeros((0, 1, 8), np.float32))
    err = _error(capsys, ["run", str(programs["model"]), "--host", "--inputs", npz])
    assert (
        err == f"torchmcu run: error: {npz} holds 0 samples (its arrays have an empty leading axis)"
    )


def test_run_host_prints_a_non_tensor_output(tmp_path: Path, monkeypatch, capsys) -> None:
    program = add_program(alpha=2)
    program.execution_plan[0].outputs = [3, 2]  # the sum, and the Int alpha
    pte = tmp_path / "int_out.pte"
    pte.write_bytes(serialize_unchecked(program, monkeypatch))
    assert main(["run", str(pte), "--host"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("output 0: shape [1, 3, 2, 2] int8 [")
    assert lines[1] == "output 1: int 2"


# -- 2.5: errors that name the problem ------------------------------------------------------


def test_float64_calibration_is_converted_with_a_note(model_file, tmp_path, capsys) -> None:
    x = np.random.default_rng(0).standard_normal((4, 8))  # numpy's default dtype: float64
    npz = _npz(tmp_path / "cal.npz", x=x)
    out = tmp_path / "out"
    assert main(["export", f"{model_file}:build", "--calibration", npz, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"torchmcu export: note: {npz}: array 'x' is float64; converted to float32" in err
    assert (out / "model.pte").is_file()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_calibration_names_sample_and_input(model_file, tmp_path, capsys, bad) -> None:
    x = np.zeros((3, 8), np.float32)
    x[2, 5] = bad
    npz = _npz(tmp_path / "cal.npz", x=x)
    err = _error(capsys, ["export", f"{model_file}:build", "--calibration", npz])
    assert "calibration sample 2, input 0: 1 of 8 values are NaN or infinite" in err


# -- 2.7: accepted without a word -----------------------------------------------------------


def test_unknown_float_module_lists_close_matches(tmp_path: Path, capsys) -> None:
    path = tmp_path / "net.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Linear(8, 8)
                self.classifier = nn.Linear(8, 4)

            def forward(self, x):
                return self.classifier(self.features(x))

        def build():
            return Net().eval(), (torch.randn(1, 8),)

        def calibration_samples():
            return [(torch.randn(1, 8),)]
        """)
    )
    err = _error(capsys, ["export", f"{path}:build", "--float-module", "clasifier"])
    assert "--float-module clasifier: the model of" in err
    assert "has no submodule of that name; close matches: classifier" in err
    err = _error(capsys, ["export", f"{path}:build", "--float-module", "nonsense"])
    assert "has no submodule of that name (its submodules: features, classifier)" in err


@pytest.mark.parametrize("name", ["../../x", "sub/x", ".."])
def test_name_with_a_path_is_refused_before_work(model_file, tmp_path, capsys, name) -> None:
    err = _error(
        capsys, ["export", f"{model_file}:build", "-o", str(tmp_path / "o"), "--name", name]
    )
    assert f"output name {name!r}: give a file name stem without path separators" in err
    assert _calls(model_file) == 0 and not list(tmp_path.rglob("*.pte"))


def test_training_mode_is_announced(tmp_path: Path, capsys) -> None:
    path = tmp_path / "train.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n\ndef build():\n"
        "    return nn.Sequential(nn.Linear(8, 4), nn.Dropout()), (torch.randn(1, 8),)\n\n\n"
        "def calibration_samples():\n    return [(torch.randn(1, 8),)]\n"
    )
    assert main(["export", f"{path}:build", "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert (
        f"torchmcu export: warning: {path}:build returned a model in training mode; "
        "exporting it in eval mode" in err
    )


def test_api_warns_about_training_mode() -> None:
    model = nn.Sequential(nn.Linear(4, 2))  # nn.Module starts in training mode
    x = (torch.randn(1, 4),)
    with pytest.warns(UserWarning, match="the model is in training mode; torchmcu exports it"):
        torchmcu.export(model, x, calibration=[x])
    assert not model.training


def test_api_example_inputs_tensor_instead_of_tuple() -> None:
    x = torch.randn(1, 4)
    with pytest.raises(TypeError, match=r"got Tensor \(wrap one tensor in a tuple: \(x,\)\)"):
        torchmcu.export(nn.Linear(4, 2).eval(), x, calibration=[(x,)])


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "soon"])
def test_non_positive_timeout_is_refused(programs, timeout: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(programs["model"]), "--timeout", timeout])
    assert exit_.value.code == 2
    assert "argument --timeout:" in capsys.readouterr().err


# -- 2.8: every argument before any work ----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--npu", "ethos-u85-256"], "board 'corstone-300' does not offer NPU 'ethos-u85-256'"),
        (["--board", "qemu-an547", "--npu", "default"], "board 'qemu-an547' has no NPU"),
        (["--bundle", "0"], "--bundle 0: need at least one test case"),
        (["--system-config", "X"], "system_config and memory_mode need npu=..."),
        (["--float-op", "nonsense_op"], "--float-op nonsense_op: no aten operator of that name"),
    ],
)
def test_export_arguments_checked_before_the_model(model_file, capsys, args, message) -> None:
    assert message in _error(capsys, ["export", f"{model_file}:build", *args])
    assert _calls(model_file) == 0


def test_unknown_board_is_refused_by_argparse(model_file: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["export", f"{model_file}:build", "--board", "nope"])
    assert "invalid choice: 'nope' (choose from" in capsys.readouterr().err
    assert _calls(model_file) == 0


def test_bundle_inputs_of_a_bad_shape_before_calibration(model_file, tmp_path, capsys) -> None:
    npz = _npz(tmp_path / "cases.npz", x=np.zeros((2, 1, 9), np.float32))
    out = tmp_path / "out"
    err = _error(capsys, ["export", f"{model_file}:build", "--bundle-inputs", npz, "-o", str(out)])
    assert "cases.npz sample 0, input 0: expected shape [1, 8] (as example_inputs[0])" in err
    assert not out.exists()


def test_run_with_fvp_missing_fails_before_building(
    programs, monkeypatch, no_build, capsys
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)  # no FVP (nor anything) on PATH
    pte = str(programs["model"])
    err = _error(capsys, ["run", pte, "--board", "qemu-an547", "--emulator", "fvp"])
    assert err == "torchmcu run: error: qemu-an547 has no FVP configured"
    err = _error(capsys, ["run", pte, "--board", "corstone-300", "--emulator", "fvp"])
    assert "cannot run on corstone-300: the Arm FVP FVP_Corstone_SSE-300" in err
    assert "is not on PATH" in err


# -- 2.9: help ------------------------------------------------------------------------------


def _help(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_help_lists_boards_and_npus(capsys) -> None:
    from torchmcu.boards import available_boards, get_board

    boards = available_boards()
    assert {"corstone-300", "corstone-320", "qemu-an547"} <= set(boards)
    for argv in (["export"], ["build"], ["run"], ["report"], ["ops", "merge"]):
        assert "--board {" + ",".join(boards) + "}" in _help(capsys, argv)
    text = _help(capsys, ["export"])
    assert "corstone-300: ethos-u55-128 (default), ethos-u55-256, ethos-u65-256" in text
    assert "corstone-320: ethos-u85-256 (default)" in text
    assert get_board("corstone-300").config["npu"]["default"] == "ethos-u55-128"


def test_every_positional_argument_has_a_description() -> None:
    from torchmcu.cli import build_parser

    def walk(parser):
        for action in parser._actions:
            if action.choices and hasattr(action, "_name_parser_map"):
                for sub in action._name_parser_map.values():
                    yield from walk(sub)
            elif not action.option_strings:
                yield parser.prog, action

    positionals = list(walk(build_parser()))
    assert len(positionals) == 6  # export, build, run, ops merge, report, info
    missing = [f"{prog} {a.dest}" for prog, a in positionals if not a.help]
    assert not missing


# -- 2.8: Ctrl-C ----------------------------------------------------------------------------

SIGINT_DURING_SAVE = """
import os, signal, sys
import torchmcu.filesets
from torchmcu.cli import main

real_fsync = os.fsync
def fsync(fd):  # a real SIGINT while the second file is being written
    fsync.calls += 1
    real_fsync(fd)
    if fsync.calls == 2:
        os.kill(os.getpid(), signal.SIGINT)
fsync.calls = 0
torchmcu.filesets.os.fsync = fsync
sys.exit(main(sys.argv[1:]))
"""


def test_sigint_during_save_leaves_nothing(model_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-c", SIGINT_DURING_SAVE, "export", f"{model_file}:build", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr and "KeyboardInterrupt" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == "torchmcu export: interrupted"
    assert _calls(model_file) == 1  # it did get as far as the save
    assert [p.name for p in out.iterdir()] == []  # no .model.pte.partial, no model.pte
