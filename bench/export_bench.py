"""Export benchmark: torchmcu vs ExecuTorch's Cortex-M flow on the MLPerf Tiny models.

For each model it measures, in one run:
  - export time (seconds from the float model to .pte bytes in memory, excluding
    imports, a warm-up export, and the calibration forward passes),
  - .pte size in bytes,
  - activation arena bytes and the live-bytes lower bound of the program's own
    instruction schedule (arena / bound = planner quality; 1.000 is optimal).
If the ExecuTorch venv (.venv-executorch) and its Cortex-M flow script
(tests/executorch/export_cortex_m.py) exist, the same figures are measured for
ExecuTorch 1.5.1 in a subprocess and printed side by side with ratios.

Usage:  python bench/export_bench.py [--models ds_cnn resnet8 ...] [--calibration 16]
        [--out DIR] [--json results.json] [--no-executorch] [--no-warm-up]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))  # works without an installed torchmcu too

from timed_samples import TimedSamples  # noqa: E402
from torchmcu.plan import BufferRequest, lower_bound  # noqa: E402
from torchmcu.pte import program as pm  # noqa: E402
from torchmcu.pte.reader import parse  # noqa: E402

DEFAULT_MODELS = ("mobilenet_v2_like", "ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder")
ET_PYTHON = ROOT / ".venv-executorch" / "bin" / "python"
ET_SCRIPT = ROOT / "tests" / "executorch" / "export_cortex_m.py"


@dataclass
class Figures:
    """What one flow produced for one model (None where it could not be measured)."""

    seconds: float | None = None
    pte_bytes: int | None = None
    arena_bytes: int | None = None
    lower_bound: int | None = None
    reported_lower_bound: int | None = None
    error: str | None = None

    @property
    def arena_ratio(self) -> float | None:
        if self.arena_bytes is None or not self.lower_bound:
            return None
        return self.arena_bytes / self.lower_bound


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


def bench_torchmcu(name: str, n_cal: int, out_dir: Path) -> Figures:
    import torchmcu
    from torchmcu.examples import build, calibration

    model, inputs = build(name)
    samples = TimedSamples(calibration(name, n_cal, seed=1))
    try:
        started = time.perf_counter()
        exported = torchmcu.export(model, inputs, calibration=samples, board="corstone-300")
        elapsed = time.perf_counter() - started - samples.seconds
        exported.save(out_dir / "torchmcu", name=name)
    except Exception as exc:  # report and keep benchmarking the other models
        return Figures(error=f"{type(exc).__name__}: {exc}"[:200])
    pte = bytes(exported.pte_bytes)
    arena, bound = program_memory(pte)
    report = exported.report
    return Figures(
        seconds=elapsed,
        pte_bytes=len(pte),
        arena_bytes=arena,
        lower_bound=bound,
        reported_lower_bound=report.get("arena_lower_bound", report.get("lower_bound")),
    )


def warm_up() -> None:
    """Import everything and export a tiny model once, so no timed run pays first-call costs."""
    import torchmcu
    from torchmcu.examples import build, calibration

    model, inputs = build("mlp")
    try:
        torchmcu.export(model, inputs, calibration=calibration("mlp", 2), board="corstone-300")
    except Exception as exc:
        print(f"(warm-up export failed: {type(exc).__name__}: {str(exc)[:120]})")


def executorch_available() -> str | None:
    """None if the ExecuTorch flow can run, else why not."""
    if not ET_PYTHON.exists():
        return f"{ET_PYTHON.relative_to(ROOT)} not found (scripts/executorch_venv.sh creates it)"
    if not ET_SCRIPT.exists():
        return f"{ET_SCRIPT.relative_to(ROOT)} not found"
    return None


def bench_executorch(name: str, n_cal: int, out_dir: Path) -> Figures:
    """Run ExecuTorch's Cortex-M flow (tests/executorch/export_cortex_m.py) in its own venv.

    The script builds the same model (torchmcu.examples.models:<name>, seed 0) and
    calibrates with the same samples (passed as an npz, `arg0` with a leading sample
    axis). Its report's `seconds_export_excluding_calibration` is the export time;
    the script runs in a fresh process, so that figure includes torch.export's
    first-call cost (use --no-warm-up for the same condition on our side).
    Size and memory figures are read here from its .pte.
    """
    import numpy as np
    from torchmcu.examples import calibration

    run_dir = out_dir / "executorch" / name
    run_dir.mkdir(parents=True, exist_ok=True)
    calib_path = run_dir / "calibration.npz"
    samples = calibration(name, n_cal, seed=1)
    np.savez(calib_path, arg0=np.stack([x.numpy() for (x,) in samples]))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"))
    cmd = [str(ET_PYTHON), str(ET_SCRIPT), "--model", f"torchmcu.examples.models:{name}",
           "--seed", "0", "--calibration", str(calib_path), "--out-dir", str(run_dir)]
    try:
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=900, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Figures(error="timed out after 900 s")
    pte_path, report_path = run_dir / "model.pte", run_dir / "report.json"
    if done.returncode != 0 or not pte_path.exists():
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return Figures(error=f"exit {done.returncode}: {lines[-1][:160]}")
    seconds = None
    if report_path.exists():
        seconds = json.loads(report_path.read_text()).get("seconds_export_excluding_calibration")
    pte = pte_path.read_bytes()
    try:
        arena, bound = program_memory(pte)
    except Exception as exc:
        return Figures(seconds=seconds, pte_bytes=len(pte), error=f"unreadable .pte: {exc}"[:200])
    return Figures(seconds=seconds, pte_bytes=len(pte), arena_bytes=arena, lower_bound=bound)


def _fmt(v: float | int | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def _ratio(a: float | int | None, b: float | int | None) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}x"


def print_table(rows: list[tuple[str, Figures, Figures | None]]) -> None:
    head = (f"{'model':<18} {'flow':<10} {'export s':>9} {'.pte bytes':>11} "
            f"{'arena B':>9} {'bound B':>9} {'arena/bound':>11}")
    print(head)
    print("-" * len(head))
    for name, tm, et in rows:
        for flow, f in (("torchmcu", tm), ("executorch", et)):
            if f is None:
                continue
            print(f"{name:<18} {flow:<10} {_fmt(f.seconds, '9.2f'):>9} "
                  f"{_fmt(f.pte_bytes, 'd'):>11} {_fmt(f.arena_bytes, 'd'):>9} "
                  f"{_fmt(f.lower_bound, 'd'):>9} {_fmt(f.arena_ratio, '.3f'):>11}"
                  + (f"  ERROR {f.error}" if f.error else ""))
        if et is not None:
            print(f"{'':<18} {'ratio':<10} {_ratio(et.seconds, tm.seconds):>9} "
                  f"{_ratio(tm.pte_bytes, et.pte_bytes):>11} {_ratio(tm.arena_bytes, et.arena_bytes):>9}"
                  "   (time: ET/torchmcu = speed-up; size, arena: torchmcu/ET)")
    print()
    print("bound = live-bytes lower bound of the program's own schedule (16-byte aligned sizes);")
    print("export s excludes imports and calibration forward passes; torchmcu runs after an")
    print("untimed warm-up export (unless --no-warm-up), ExecuTorch in a fresh process.")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    ap.add_argument("--calibration", type=int, default=16, help="calibration samples per model")
    ap.add_argument("--out", type=Path, help="keep the .pte files here (default: a temp dir)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--no-executorch", action="store_true", help="skip the ExecuTorch flow")
    ap.add_argument("--no-warm-up", action="store_true",
                    help="no untimed warm-up export (first model pays torch.export's first call)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")

    et_missing = "disabled by --no-executorch" if args.no_executorch else executorch_available()
    with tempfile.TemporaryDirectory(prefix="torchmcu-bench-") as tmp:
        out_dir = args.out or Path(tmp)
        if not args.no_warm_up:
            warm_up()
        rows: list[tuple[str, Figures, Figures | None]] = []
        for name in args.models:
            tm = bench_torchmcu(name, args.calibration, out_dir)
            et = None if et_missing else bench_executorch(name, args.calibration, out_dir)
            rows.append((name, tm, et))
            print(f"[{name}] torchmcu done" + ("" if et is None else ", executorch done"),
                  file=sys.stderr)
    print()
    if et_missing:
        print(f"ExecuTorch comparison skipped: {et_missing}\n")
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(
            {name: {"torchmcu": asdict(tm), "executorch": asdict(et) if et else None}
             for name, tm, et in rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
