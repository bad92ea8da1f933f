"""Export benchmark: torchmcu vs ExecuTorch's Cortex-M flow, time and accuracy.

For each model it measures, in one run:
  - export time (seconds from the float model to .pte bytes in memory, excluding
    imports, a warm-up export, and the calibration forward passes), wall and CPU,
  - .pte size in bytes,
  - activation arena bytes and the live-bytes lower bound of the program's own
    instruction schedule (arena / bound = planner quality; 1.000 is optimal),
  - SQNR on --test-inputs inputs (not the calibration ones) of the int8 program against
    the float model and against the flow's own fake-quantized model.
Where ExecuTorch's flow leaves compute ops in float (its program keeps them as aten ops), a
like-for-like row follows: our export with the same modules kept in float32 (the float
fallback, TorchmcuQuantizer().set_module_name(path, None)), its SQNR beside ExecuTorch's.
If the ExecuTorch venv (.venv-executorch) and its Cortex-M flow script
(tests/executorch/export_cortex_m.py) exist, the same figures are measured for
ExecuTorch 1.5.1 in a subprocess on the same model, weights, calibration and test
inputs, and printed side by side with ratios and the issue-17 thresholds.

Usage:  python bench/export_bench.py [--models ds_cnn resnet8 ...] [--architectures] [--transformers]
        [--calibration 16] [--test-inputs 8] [--threads 1]
        [--out DIR] [--json results.json] [--no-executorch] [--no-warm-up]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))  # works without an installed torchmcu too

from executorch_venv import ET_PYTHON, run_script, save_samples
from timed_samples import TimedSamples
from torchmcu.plan import BufferRequest, lower_bound
from torchmcu.pte import program as pm
from torchmcu.pte.reader import parse

# issue 17's thresholds: export time at most 0.2x ExecuTorch's; SQNR against the float model no
# worse than ExecuTorch's by more than 1 dB; against our own fake-quantized model at least 30 dB.
TIME_RATIO_TARGET = 0.2
FLOAT_SQNR_MARGIN_DB = 1.0
FAKE_QUANT_SQNR_DB = 30.0
# aten ops of ExecuTorch's lowered graph that move data rather than compute (not counted as float
# compute ops it left unquantized)
DATA_MOVEMENT = {
    "view_copy",
    "permute_copy",
    "squeeze_copy",
    "unsqueeze_copy",
    "select_copy",
    "slice_copy",
    "split_with_sizes_copy",
    "cat",
    "full",
    "expand_copy",
    "clone",
}
DEFAULT_MODELS = ("mobilenet_v2_like", "ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder")
ET_SCRIPT = ROOT / "tests" / "executorch" / "export_cortex_m.py"


@dataclass
class Figures:
    """What one flow produced for one model (None where it could not be measured)."""

    seconds: float | None = None
    cpu_seconds: float | None = None
    pte_bytes: int | None = None
    arena_bytes: int | None = None
    lower_bound: int | None = None
    reported_lower_bound: int | None = None
    int8_calls: int | None = None  # ExecuTorch: cortex_m:: compute calls in its lowered graph
    float_ops: int | None = None  # ExecuTorch: aten compute ops left in float; ours: float32 nodes
    # ExecuTorch: the innermost modules calling those ops ("" = the model's own forward)
    float_modules: list[str] | None = None
    # ours, like-for-like row: modules ExecuTorch left in float that we could not (no fp32 kernel)
    kept_int8: list[str] | None = None
    error: str | None = None

    @property
    def arena_ratio(self) -> float | None:
        if self.arena_bytes is None or not self.lower_bound:
            return None
        return self.arena_bytes / self.lower_bound


@dataclass
class Outputs:
    """One flow's outputs on the test inputs: [sample, all output elements] float64 arrays."""

    float: Any
    fake_quant: Any
    int8: Any


def program_memory(pte: bytes) -> tuple[int, int]:
    """(arena bytes, live-bytes lower bound) of a .pte, read from the program itself.

    The arena is the sum of the planned (non-constant) buffers. The bound comes from
    the program's instruction order: a planned tensor is live from the first
    instruction that names it to the last (plan inputs from the start, outputs to the
    end); values at one address with meeting lifetimes (views, aliases) count once.
    """
    plan = parse(pte).execution_plan[0]
    arena = sum(plan.non_const_buffer_sizes)
    spans: dict[int, list[int]] = {}  # value index -> [first, last]

    def touch(value: int, at: int) -> None:
        v = plan.values[value]
        if isinstance(v, pm.TensorList):
            for item in v.items:
                touch(item, at)
        elif isinstance(v, pm.Tensor) and v.allocation is not None and v.nbytes:
            span = spans.setdefault(value, [at, at])
            span[0], span[1] = min(span[0], at), max(span[1], at)

    steps = [ins for chain in plan.chains for ins in chain.instructions]
    end = len(steps) + 1
    for value in plan.inputs:
        touch(value, 0)
    for at, ins in enumerate(steps, start=1):
        if isinstance(ins, (pm.KernelCall, pm.DelegateCall)):
            for value in ins.args:
                touch(value, at)
        elif isinstance(ins, pm.MoveCall):
            touch(ins.move_from, at)
            touch(ins.move_to, at)
    for value in plan.outputs:
        touch(value, end)
    # Values at the same address whose lifetimes meet are one buffer seen through
    # several values (views, in-place ops); the same address reused later is not.
    by_address: dict[tuple[int, int, int], list[list[int]]] = {}
    for value, span in spans.items():
        t = plan.values[value]
        key = (t.allocation.memory_id, t.allocation.offset, t.nbytes)
        by_address.setdefault(key, []).append(list(span))
    requests = []
    for key, group in by_address.items():
        merged: list[list[int]] = []
        for first, last in sorted(group):
            if merged and first <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        requests += [BufferRequest((key, i), key[2], a, b) for i, (a, b) in enumerate(merged)]
    return arena, lower_bound(requests, alignment=16)


def _flat(outputs: Sequence[Any]) -> Any:
    """One sample's outputs as one float64 vector (all outputs, logical NCHW order)."""
    import numpy as np

    return np.concatenate([np.asarray(o, dtype=np.float64).reshape(-1) for o in outputs])


def sqnr_db(reference: Any, test: Any) -> float:
    """10 log10(signal energy / error energy) over all samples; inf where they are equal."""
    import numpy as np

    noise = float(np.sum((reference - test) ** 2))
    signal = float(np.sum(reference**2))
    return float("inf") if noise == 0.0 else 10.0 * float(np.log10(signal / noise))


def bench_torchmcu(
    name: str,
    n_cal: int,
    tests: Sequence[tuple[Any, ...]],
    out_dir: Path,
    float_modules: Sequence[str] = (),
) -> tuple[Figures, Outputs | None]:
    """Our export of one model; float_modules: submodules kept in float32 (the like-for-like
    row of a model ExecuTorch leaves partly in float)."""
    import numpy as np
    import torch
    import torchmcu
    from torchmcu.examples import build, calibration
    from torchmcu.quantize import TorchmcuQuantizer

    model, inputs = build(name)
    samples = TimedSamples(calibration(name, n_cal, seed=1))
    quantizer = None
    if float_modules:
        quantizer = TorchmcuQuantizer()
        for path in float_modules:
            quantizer.set_module_name(path, None)
    try:
        started, cpu_started = time.perf_counter(), time.process_time()
        exported = torchmcu.export(
            model, inputs, calibration=samples, board="corstone-300", quantizer=quantizer
        )
        elapsed = time.perf_counter() - started - samples.seconds
        cpu = time.process_time() - cpu_started - samples.cpu_seconds
        exported.save(out_dir / "torchmcu", name=name + ("_et_float" if float_modules else ""))
    except Exception as exc:  # noqa: BLE001  (report it, go on with the other models)
        module = _module_of(getattr(exc, "node", None))
        if module in float_modules:  # an op with no fp32 kernel: that module stays int8
            rest = [m for m in float_modules if m != module]
            figures, outs = bench_torchmcu(name, n_cal, tests, out_dir, rest)
            figures.kept_int8 = [module, *(figures.kept_int8 or [])]
            return figures, outs
        return Figures(error=f"{type(exc).__name__}: {exc}"[:200]), None
    pte = bytes(exported.pte_bytes)
    arena, bound = program_memory(pte)
    report = exported.report
    figures = Figures(
        seconds=elapsed,
        cpu_seconds=cpu,
        pte_bytes=len(pte),
        arena_bytes=arena,
        lower_bound=bound,
        reported_lower_bound=report.get("arena_lower_bound", report.get("lower_bound")),
        float_ops=len(report.get("float_ops", [])),
    )
    if not tests:
        return figures, None
    with torch.no_grad():
        outs = Outputs(
            float=np.stack([_flat(_tensors(model(*t))) for t in tests]),
            fake_quant=np.stack([_flat(_tensors(exported.quantized_model(*t))) for t in tests]),
            int8=np.stack(
                [_flat(torchmcu.run_on_host(pte, [x.numpy() for x in t])) for t in tests]
            ),
        )
    return figures, outs


def _module_of(node: Any) -> str | None:
    """The path of the innermost module that called an FX node (None without one)."""
    stack = list((getattr(node, "meta", None) or {}).get("nn_module_stack", {}).values())
    return str(stack[-1][0]) if stack else None


def _tensors(out: Any) -> list[Any]:
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.detach().float().contiguous().numpy() for o in items]


def warm_up() -> None:
    """Import everything and export a tiny model once, so no timed run pays first-call costs."""
    import torchmcu
    from torchmcu.examples import build, calibration

    model, inputs = build("mlp")
    try:
        torchmcu.export(model, inputs, calibration=calibration("mlp", 2), board="corstone-300")
    except Exception as exc:  # noqa: BLE001
        print(f"(warm-up export failed: {type(exc).__name__}: {str(exc)[:120]})")


def executorch_available() -> str | None:
    """None if the ExecuTorch flow can run, else why not."""
    if not ET_PYTHON.exists():
        return f"{ET_PYTHON.relative_to(ROOT)} not found (scripts/executorch_venv.sh creates it)"
    if not ET_SCRIPT.exists():
        return f"{ET_SCRIPT.relative_to(ROOT)} not found"
    return None


def bench_executorch(
    name: str, n_cal: int, tests: Sequence[tuple[Any, ...]], out_dir: Path, threads: int
) -> tuple[Figures, Outputs | None]:
    """Run ExecuTorch's Cortex-M flow (tests/executorch/export_cortex_m.py) in its own venv.

    The script builds the same model (torchmcu.examples.models:<name>, seed 0),
    calibrates with the same samples and runs the same test inputs (both passed as npz
    files). Its report's `seconds_export_excluding_calibration` (and the CPU figure) is
    the export time; the script runs in a fresh process, so that figure includes
    torch.export's first-call cost (use --no-warm-up for the same condition on our side).
    Size and memory figures are read here from its .pte; its outputs.npz gives the float,
    fake-quantized (converted PT2E graph) and cortex_m (lowered program) outputs.
    """
    import numpy as np
    from torchmcu.examples import calibration

    run_dir = out_dir / "executorch" / name
    run_dir.mkdir(parents=True, exist_ok=True)
    calib_path = run_dir / "calibration.npz"
    save_samples(calib_path, calibration(name, n_cal, seed=1))
    cmd = [
        str(ET_SCRIPT),
        "--model",
        f"torchmcu.examples.models:{name}",
        "--seed",
        "0",
        "--calibration",
        str(calib_path),
        "--out-dir",
        str(run_dir),
    ]
    if tests:
        save_samples(run_dir / "tests.npz", tests)
        cmd += ["--inputs", str(run_dir / "tests.npz")]
    done = run_script(cmd, timeout=900, threads=threads)
    if done is None:
        return Figures(error="timed out after 900 s"), None
    pte_path, report_path = run_dir / "model.pte", run_dir / "report.json"
    (run_dir / "stderr.txt").write_text(done.stderr)  # the whole traceback where it failed
    if done.returncode != 0 or not pte_path.exists():
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return Figures(
            error=f"exit {done.returncode}: {lines[-1][:120]} (--out DIR: stderr.txt)"
        ), None
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    figures = Figures(
        seconds=report.get("seconds_export_excluding_calibration"),
        cpu_seconds=report.get("cpu_seconds_export_excluding_calibration"),
    )
    ops = report.get("edge_ops", {})
    figures.int8_calls = sum(
        n for op, n in ops.items() if op.startswith("cortex_m.") and "quantize_per" not in op
    )
    figures.float_ops = sum(n for op, n in ops.items() if _computes(op))
    nodes = report.get("edge_aten_nodes")
    if nodes is not None:
        figures.float_modules = sorted({d["module"] for d in nodes if _computes(d["op"])})
    pte = pte_path.read_bytes()
    figures.pte_bytes = len(pte)
    try:
        figures.arena_bytes, figures.lower_bound = program_memory(pte)
    except Exception as exc:  # noqa: BLE001
        figures.error = f"unreadable .pte: {exc}"[:200]
    outs = None
    if tests:
        with np.load(run_dir / "outputs.npz") as z:

            def flow(key: str) -> Any:
                keys = [k for k in z.files if k.rstrip("0123456789") == key]
                arrays = [z[k] for k in sorted(keys, key=lambda k: int(k[len(key) :]))]
                return np.stack([_flat([a[i] for a in arrays]) for i in range(len(tests))])

            outs = Outputs(
                float=flow("float"), fake_quant=flow("fake_quant"), int8=flow("cortex_m")
            )
    return figures, outs


def _computes(op: str) -> bool:
    """An aten op of ExecuTorch's lowered graph that computes (a float op it left)."""
    return op.startswith("aten.") and op.split(".")[1] not in DATA_MOVEMENT


def _fmt(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}x"


Row = tuple[str, Figures, Figures | None, Outputs | None, Outputs | None]
# model -> (the modules kept in float32, our figures and outputs with them in float)
LikeRows = dict[str, tuple[list[str], Figures, Outputs | None]]


def _too_slow(ours: float | None, theirs: float | None) -> bool:
    """Our export time above TIME_RATIO_TARGET x ExecuTorch's (False where one is missing)."""
    return ours is not None and bool(theirs) and ours / theirs > TIME_RATIO_TARGET


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'model':<18} {'flow':<10} {'export s':>9} {'cpu s':>8} {'.pte bytes':>11} "
        f"{'arena B':>9} {'bound B':>9} {'arena/bound':>11}"
    )
    print(head)
    print("-" * len(head))
    for name, tm, et, _, _ in rows:
        for flow, f in (("torchmcu", tm), ("executorch", et)):
            if f is None:
                continue
            print(
                f"{name:<18} {flow:<10} {_fmt(f.seconds, '9.2f'):>9} "
                f"{_fmt(f.cpu_seconds, '8.2f'):>8} "
                f"{_fmt(f.pte_bytes, 'd'):>11} {_fmt(f.arena_bytes, 'd'):>9} "
                f"{_fmt(f.lower_bound, 'd'):>9} {_fmt(f.arena_ratio, '.3f'):>11}"
                + (f"  ERROR {f.error}" if f.error else "")
            )
        if et is not None:
            slow = [
                what
                for what, a, b in (
                    ("wall", tm.seconds, et.seconds),
                    ("cpu", tm.cpu_seconds, et.cpu_seconds),
                )
                if _too_slow(a, b)
            ]
            print(
                f"{'':<18} {'ratio':<10} {_ratio(tm.seconds, et.seconds):>9} "
                f"{_ratio(tm.cpu_seconds, et.cpu_seconds):>8} "
                f"{_ratio(tm.pte_bytes, et.pte_bytes):>11} {_ratio(tm.arena_bytes, et.arena_bytes):>9}"
                + (f"  TIME >{TIME_RATIO_TARGET}x ({', '.join(slow)})" if slow else "")
            )
    print()
    print("ratio row: torchmcu / ExecuTorch (time, size, arena; below 1 = faster, smaller);")
    print(f"TIME marks an export time above {TIME_RATIO_TARGET}x ExecuTorch's (issue 17).")
    print("bound = live-bytes lower bound of the program's own schedule (16-byte aligned sizes);")
    print("export s (wall) and cpu s (this process's CPU time, comparable on a busy machine)")
    print("exclude imports and calibration forward passes; torchmcu runs after an untimed")
    print("warm-up export (unless --no-warm-up), ExecuTorch in a fresh process.")
    marks = [
        (_too_slow(tm.seconds, et.seconds), _too_slow(tm.cpu_seconds, et.cpu_seconds))
        for _, tm, et, _, _ in rows
        if et is not None and tm.seconds and et.seconds
    ]
    if marks:
        print(
            f"export time <= {TIME_RATIO_TARGET}x ExecuTorch's: "
            f"{sum(not w for w, _ in marks)} of {len(marks)} models (wall), "
            f"{sum(not c for _, c in marks)} of {len(marks)} (cpu)"
        )


def _db(v: float | None) -> str:
    return "n/a" if v is None else ("exact" if v == float("inf") else f"{v:.1f}")


def accuracy(ours: Outputs | None, theirs: Outputs | None) -> dict[str, float | None]:
    """The SQNR figures (dB) of one model; None where a flow gave no outputs."""
    import numpy as np

    got: dict[str, float | None] = dict.fromkeys(
        ("ours_float", "et_float", "ours_fq", "et_fq", "ours_fq_float", "et_fq_float", "float_diff")
    )
    if ours is not None:
        got["ours_float"] = sqnr_db(ours.float, ours.int8)
        got["ours_fq"] = sqnr_db(ours.fake_quant, ours.int8)
        got["ours_fq_float"] = sqnr_db(ours.float, ours.fake_quant)
    if theirs is not None:
        got["et_float"] = sqnr_db(theirs.float, theirs.int8)
        got["et_fq"] = sqnr_db(theirs.fake_quant, theirs.int8)
        got["et_fq_float"] = sqnr_db(theirs.float, theirs.fake_quant)
    if ours is not None and theirs is not None:  # same model and inputs in both venvs?
        got["float_diff"] = float(np.max(np.abs(ours.float - theirs.float)))
    return got


def _verdict(got: dict[str, float | None]) -> tuple[float | None, list[str]]:
    """(ours - ET against float, the issue-17 failures) of one row's SQNR figures."""
    fails = []
    diff = None
    if got["ours_float"] is not None and got["et_float"] is not None:
        diff = got["ours_float"] - got["et_float"]
        if diff < -FLOAT_SQNR_MARGIN_DB:
            fails.append(f"vs float {-diff:.1f} dB below ET")
    if got["ours_fq"] is not None and got["ours_fq"] < FAKE_QUANT_SQNR_DB:
        fails.append(f"vs fake-quant < {FAKE_QUANT_SQNR_DB:.0f} dB")
    return diff, fails


def _accuracy_row(label: str, got: dict[str, float | None], ops: str, note: str = "") -> None:
    diff, fails = _verdict(got)
    print(
        f"{label:<18} {_db(got['ours_float']):>10} {_db(got['et_float']):>9} "
        f"{_db(diff):>8} {_db(got['ours_fq']):>8} {_db(got['et_fq']):>8} "
        f"{_db(got['ours_fq_float']):>9} {_db(got['et_fq_float']):>9} "
        f"{_fmt(got['float_diff'], '9.1e'):>9} {ops:>10}  "
        + ("FAIL: " + "; ".join(fails) if fails else "ok")
        + note
    )


def _modules(paths: list[str]) -> str:
    """Module paths, runs of one parent's numbered children shortened ("features.*")."""
    parents = sorted({p.rsplit(".", 1)[0] for p in paths if "." in p and p[-1].isdigit()})
    rest = [p for p in paths if not ("." in p and p[-1].isdigit())]
    names = [f"{p}.* ({sum(q.startswith(p + '.') for q in paths)})" for p in parents] + rest
    if len(names) > 4:  # many branches (ShuffleNet): a count and the first few
        return f"{len(paths)} modules: {', '.join(names[:3])}, ..."
    return ", ".join(names)


def print_accuracy(
    rows: list[Row], n_tests: int, like: LikeRows | None = None
) -> dict[str, dict[str, float | None]]:
    like = like or {}
    figures = {name: accuracy(ours, theirs) for name, _, _, ours, theirs in rows}
    head = (
        f"{'model':<18} {'ours/float':>10} {'ET/float':>9} {'ours-ET':>8} {'ours/fq':>8} "
        f"{'ET cm/fq':>8} {'fq/float':>9} {'ET fq/fl':>9} {'|float Δ|':>9} {'ET int8/fp':>10}"
        "  verdict"
    )
    print(
        f"SQNR in dB over {n_tests} test inputs (not the calibration ones), all samples together:"
    )
    print(head)
    print("-" * len(head))
    for name, _, et, _, theirs in rows:
        ops = "n/a" if et is None or et.int8_calls is None else f"{et.int8_calls}/{et.float_ops}"
        _accuracy_row(name, figures[name], ops)
        if name in like:
            modules, tm, outs = like[name]
            got = accuracy(outs, theirs)
            figures[f"{name}:et_float"] = got
            floated = [m for m in modules if m not in (tm.kept_int8 or [])]
            note = f"  (ours: {_fmt(tm.float_ops, 'd')} float32 nodes in {_modules(floated)}"
            if tm.kept_int8:
                note += f"; int8, no fp32 kernel: {_modules(tm.kept_int8)}"
            note += ")"
            _accuracy_row(
                f" {name[:12]}:ET-fp", got, ops, note + (f" {tm.error}" if tm.error else "")
            )
    print()
    print("ours = torchmcu.run_on_host (bit-exact with the C runtime); ET = ExecuTorch's cortex_m")
    print("program run with its Python reference ops; fq = each flow's own fake-quantized model")
    print("(prog.quantized_model; ET: the converted PT2E graph); fq/float = that model vs float.")
    print("|float Δ| = max difference of the two venvs' float outputs (same weights and inputs).")
    print("ET int8/fp = ExecuTorch's cortex_m:: compute calls / aten compute ops it left in float")
    print("(views, copies and cat not counted): where it left most in float, its SQNR is float's.")
    if like:
        print(":ET-fp rows (like for like): our export with the modules ExecuTorch left in float")
        print("kept in float32 too (the float fallback: set_module_name(path, None)), found from")
        print("the aten ops of its lowered program; ET columns as in the row above. A module")
        print("with an op we have no fp32 kernel for stays int8 (named in the row).")
    print(
        f"FAIL: ours/float more than {FLOAT_SQNR_MARGIN_DB:.0f} dB below ET/float, or ours/fq "
        f"below {FAKE_QUANT_SQNR_DB:.0f} dB (issue 17)."
    )
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    from torchmcu.examples.architectures import ARCHITECTURES, TRANSFORMERS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--models", nargs="+", help=f"default: {' '.join(DEFAULT_MODELS)}")
    ap.add_argument(
        "--architectures",
        action="store_true",
        help="add the 12 example architectures of issue 17: " + " ".join(ARCHITECTURES),
    )
    ap.add_argument(
        "--transformers",
        action="store_true",
        help="add the transformers of issue 18: " + " ".join(TRANSFORMERS),
    )
    ap.add_argument("--calibration", type=int, default=16, help="calibration samples per model")
    ap.add_argument(
        "--test-inputs",
        type=int,
        default=8,
        help="inputs for the SQNR table (seed 2, not the calibration ones); 0: none",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads in both flows (default 1: a shared machine)",
    )
    ap.add_argument("--out", type=Path, help="keep the .pte files here (default: a temp dir)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--no-executorch", action="store_true", help="skip the ExecuTorch flow")
    ap.add_argument(
        "--no-warm-up",
        action="store_true",
        help="no untimed warm-up export (first model pays torch.export's first call)",
    )
    args = ap.parse_args(argv)
    extra = [
        *(ARCHITECTURES if args.architectures else ()),
        *(TRANSFORMERS if args.transformers else ()),
    ]
    models = list(args.models or ([] if extra else DEFAULT_MODELS))
    models += [name for name in extra if name not in models]
    warnings.filterwarnings("ignore")

    import torch
    from torchmcu.examples import calibration

    torch.set_num_threads(args.threads)
    et_missing = "disabled by --no-executorch" if args.no_executorch else executorch_available()
    with tempfile.TemporaryDirectory(prefix="torchmcu-bench-") as tmp:
        out_dir = args.out or Path(tmp)
        if not args.no_warm_up:
            warm_up()
        rows: list[Row] = []
        like: LikeRows = {}
        for name in models:
            tests = calibration(name, args.test_inputs, seed=2) if args.test_inputs else []
            tm, ours = bench_torchmcu(name, args.calibration, tests, out_dir)
            et, theirs = (
                (None, None)
                if et_missing
                else bench_executorch(name, args.calibration, tests, out_dir, args.threads)
            )
            rows.append((name, tm, et, ours, theirs))
            # ExecuTorch left compute ops in float: ours with the same modules in float too
            # (ops of the model's own forward, module "", would need the whole model in float)
            modules = [m for m in (et.float_modules or []) if m] if et else []
            if modules and tests:
                fig, outs = bench_torchmcu(name, args.calibration, tests, out_dir, modules)
                like[name] = (modules, fig, outs)
            print(
                f"[{name}] torchmcu {_fmt(tm.seconds, '.1f')} s"
                + ("" if et is None else f", executorch {_fmt(et.seconds, '.1f')} s"),
                file=sys.stderr,
                flush=True,
            )
    print()
    if et_missing:
        print(f"ExecuTorch comparison skipped: {et_missing}\n")
    print_table(rows)
    sqnr = {}
    if args.test_inputs:
        print()
        sqnr = print_accuracy(rows, args.test_inputs, like)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    name: {
                        "torchmcu": asdict(tm),
                        "executorch": asdict(et) if et else None,
                        "sqnr_db": sqnr.get(name),
                        "like_for_like": {
                            "float_modules": like[name][0],
                            "torchmcu": asdict(like[name][1]),
                            "sqnr_db": sqnr.get(f"{name}:et_float"),
                        }
                        if name in like
                        else None,
                    }
                    for name, tm, et, _, _ in rows
                },
                indent=2,
                allow_nan=True,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
