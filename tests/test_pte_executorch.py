"""Cross-check our .pte files with ExecuTorch 1.5.1's own deserializer.

ExecuTorch lives in a separate venv (scripts/executorch_venv.sh). The script
tests/executorch/dump_pte.py runs there, reads each file with
`deserialize_pte_binary` and dumps what it sees as JSON; we compare that with
the Program we wrote and with what our reader makes of the same bytes. It
also writes each program back with ExecuTorch's serializer, which our reader
must read back to the same Program.

If the venv cannot be built the test fails (it is the interop contract);
set TORCHMCU_ALLOW_NO_EXECUTORCH=1 to skip instead (offline machines).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from _pte_programs import every_kind_program, linear_program
from conftest import executorch_export
from torchmcu.pte import load, save
from torchmcu.pte import program as pm

pytestmark = pytest.mark.executorch

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "tests" / "executorch" / "dump_pte.py"


def run_dump(et_python: Path, files: list[Path], out_dir: Path) -> dict:
    out = out_dir / "dump.json"
    proc = subprocess.run(
        [str(et_python), str(DUMP), str(out), *map(str, files), "--reserialize-dir", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"ExecuTorch deserializer failed:\n{proc.stderr[-4000:]}"
    return json.loads(out.read_text())


def expected_value(v: object) -> dict:
    """What ExecuTorch should report for one of our values (written independently of the dump)."""
    if isinstance(v, pm.Tensor):
        return {
            "kind": "Tensor",
            "scalar_type": int(v.scalar_type),
            "sizes": list(v.sizes),
            "dim_order": list(v.dim_order),
            "storage_offset": v.storage_offset,
            "data_buffer_idx": v.data_buffer_idx,
            "allocation": None
            if v.allocation is None
            else [v.allocation.memory_id, v.allocation.offset],
            "shape_dynamism": 0,
        }
    if isinstance(v, (pm.Int, pm.Bool, pm.String)):
        return {"kind": type(v).__name__, "value": v.value}
    if isinstance(v, pm.Double):
        return {"kind": "Double", "value": float(v.value).hex()}
    if isinstance(v, pm.DoubleList):
        return {"kind": "DoubleList", "items": [float(x).hex() for x in v.items]}
    if isinstance(v, (pm.IntList, pm.BoolList, pm.TensorList, pm.OptionalTensorList)):
        return {"kind": type(v).__name__, "items": list(v.items)}
    assert isinstance(v, pm.Null)
    return {"kind": "Null"}


def expected_instruction(i: object) -> list:
    if isinstance(i, pm.KernelCall):
        return ["KernelCall", i.op_index, i.args]
    if isinstance(i, pm.DelegateCall):
        return ["DelegateCall", i.delegate_index, i.args]
    if isinstance(i, pm.MoveCall):
        return ["MoveCall", i.move_from, i.move_to]
    if isinstance(i, pm.JumpFalseCall):
        return ["JumpFalseCall", i.cond_value_index, i.destination_instruction]
    assert isinstance(i, pm.FreeCall)
    return ["FreeCall", i.value_index]


def expected_dump(p: pm.Program) -> dict:
    plans = []
    for plan in p.execution_plan:
        plans.append(
            {
                "name": plan.name,
                "inputs": plan.inputs,
                "outputs": plan.outputs,
                "operators": [[o.name, o.overload] for o in plan.operators],
                "non_const_buffer_sizes": plan.non_const_buffer_sizes,
                "values": [expected_value(v) for v in plan.values],
                "chains": [
                    {
                        "inputs": c.inputs,
                        "outputs": c.outputs,
                        "instructions": [expected_instruction(i) for i in c.instructions],
                    }
                    for c in plan.chains
                ],
                "delegates": [
                    {
                        "id": d.id,
                        "location": 0,  # ExecuTorch moves segment data inline when reading
                        "compile_specs": [[c.key, c.value.hex()] for c in d.compile_specs],
                        "data_sha256": hashlib.sha256(p.segments_data[d.segment_index]).hexdigest(),
                        "data_len": len(p.segments_data[d.segment_index]),
                    }
                    for d in plan.delegates
                ],
            }
        )
    return {"version": p.version, "plans": plans}


def check_constants(p: pm.Program, seen: list[dict]) -> None:
    assert len(seen) == len(p.constants)
    for i, (c, s) in enumerate(zip(p.constants, seen)):
        assert s["len"] == len(c), f"constant {i}"
        assert s["sha256"] == hashlib.sha256(c).hexdigest(), f"constant {i}"
        assert s["padding_is_zero"], f"constant {i}"
        last = i == len(p.constants) - 1
        assert s["stored_len"] == (len(c) if last else (len(c) + 15) // 16 * 16), f"constant {i}"


PROGRAMS = {"linear": linear_program, "every_kind": every_kind_program}


def test_executorch_reads_our_files(et_python: Path, tmp_path: Path) -> None:
    files = []
    for name, make in PROGRAMS.items():
        f = tmp_path / f"{name}.pte"
        save(make(), f)
        files.append(f)
    dump = run_dump(et_python, files, tmp_path)
    for (name, make), f in zip(PROGRAMS.items(), files):
        p = make()
        seen = dump[str(f)]
        check_constants(p, seen.pop("constants"))
        header = seen.pop("extended_header")
        size = f.stat().st_size
        assert header["segment_base_offset"] % 128 == 0
        assert header["segment_base_offset"] + header["segment_data_size"] == size
        assert seen == expected_dump(p), name
        # Our reader agrees with the Program we wrote ...
        assert load(f) == p
        # ... and reads ExecuTorch's own serialization of it back to the same Program.
        assert load(tmp_path / f"{name}.et.pte") == p, name


def test_our_reader_reads_executorch_cortex_m_pte(
    et_python_cortex_m: Path, tmp_path: Path
) -> None:
    """A .pte written by ExecuTorch's own Cortex-M flow: our reader must see what
    ExecuTorch's deserializer sees (operators, values, instructions, constants)."""
    pte = tmp_path / "model.pte"
    pte.write_bytes(executorch_export(et_python_cortex_m, "small_cnn", tmp_path / "et").pte)
    seen = run_dump(et_python_cortex_m, [pte], tmp_path)[str(pte)]
    ours = load(pte)
    plan = ours.execution_plan[0]
    assert any(o.name == "cortex_m::quantized_conv2d" for o in plan.operators)
    seen_constants = seen.pop("constants")
    ours_hashes = [hashlib.sha256(c).hexdigest() for c in ours.constants]
    assert [c["sha256"] for c in seen_constants] == ours_hashes
    seen.pop("extended_header")
    assert seen == expected_dump(ours)


ROUND_TRIP_MODELS = ["mlp", "small_cnn", "ds_cnn", "resnet8", "mobilenet_v1_025", "mobilenet_v2_like"]


@pytest.fixture(scope="module")
def exported_and_dumped(et_python: Path, tmp_path_factory: pytest.TempPathFactory):
    """Our programs of the six example models, written once and read by ExecuTorch in one run."""
    import torchmcu
    from torchmcu.examples import models

    out = tmp_path_factory.mktemp("roundtrip")
    programs: dict[str, tuple[pm.Program, Path]] = {}
    for name in ROUND_TRIP_MODELS:
        model, example = models.build(name, seed=2)
        exported = torchmcu.export(model, example, calibration=models.calibration(name, 4))
        f = out / f"{name}.pte"
        f.write_bytes(exported.pte_bytes)
        programs[name] = (exported.program, f)
    dump = run_dump(et_python, [f for _, f in programs.values()], out)
    return programs, dump, out


@pytest.mark.parametrize("name", ROUND_TRIP_MODELS)
def test_executorch_reads_an_exported_model(name: str, exported_and_dumped) -> None:
    """A real model through torchmcu.export: ExecuTorch's deserializer sees the Program we built
    (same operator list, values, instructions, constant bytes), and its serializer writes it
    back to bytes our reader turns into the same Program."""
    programs, dump, out = exported_and_dumped
    p, f = programs[name]
    op_names = [o.name for o in p.execution_plan[0].operators]
    assert all(n.startswith("cortex_m::") for n in op_names), op_names
    seen = dict(dump[str(f)])
    check_constants(p, seen.pop("constants"))
    seen.pop("extended_header")
    assert [tuple(o) for o in seen["plans"][0]["operators"]] == [(o.name, o.overload)
                                                               for o in p.execution_plan[0].operators]
    assert seen == expected_dump(p)
    assert load(out / f"{name}.et.pte") == p
