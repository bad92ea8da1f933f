"""NPU benchmark: Vela cycle estimates and NPU shares, torchmcu vs ExecuTorch's Ethos-U flow.

For each (model, accelerator) it prints, in one run:
  - torchmcu: Vela's total and NPU cycles summed over the program's delegates, the number of
    delegates, the fraction of operators and MACs on the NPU, and the export time (excluding
    the calibration forward passes), from torchmcu.export(..., npu=...) and its report;
  - ExecuTorch 1.5.1 (when .venv-executorch has its Ethos-U flow: scripts/executorch_venv.sh
    --ethos-u): the same Vela figures for its EthosUQuantizer / EthosUPartitioner /
    to_edge_transform_and_lower on the same net and calibration samples, the operators it
    leaves on the CPU, the fraction of operators and MACs in its delegates (read from its
    lowered program), and its export time;
  - the torchmcu / ExecuTorch ratios of total cycles and of export time.
Both use the same Vela (5.2.0) and the same system config and memory mode: by default
ExecuTorch's defaults (ethos-u55: Ethos_U55_High_End_Embedded + Shared_Sram; ethos-u65:
Ethos_U65_High_End + Dedicated_Sram_384KB; ethos-u85: Ethos_U85_SYS_DRAM_Mid + Sram_Only).

Usage:  python bench/npu_cycles.py [--models ds_cnn resnet8 ...] [--architectures]
        [--npus ethos-u55-128 ...]
        [--calibration 8] [--memory-mode MODE] [--json results.json] [--no-executorch]
        [--no-warm-up] [--dump-tosa DIR]   (DIR/<model>_<npu>/{torchmcu,executorch}/delegateK.tosa)
--architectures adds the 12 example architectures of issue 17 (torchmcu.examples.architectures)
to --models (or runs just them when --models is not given).
"""

from __future__ import annotations

import argparse
import csv
import inspect
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from executorch_venv import ET_PYTHON, et_env, run_script, save_samples
from timed_samples import TimedSamples

DEFAULT_MODELS = ("ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder", "mobilenet_v2_like")
DEFAULT_NPUS = ("ethos-u55-128", "ethos-u85-256")
# ExecuTorch 1.5.1's EthosUCompileSpec defaults per family (system config, memory mode).
ET_DEFAULTS = {
    "u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB"),
    "u85": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only"),
}
# The export-time target of issue 6: at most 0.2x ExecuTorch's time for this (model, NPU).
EXPORT_TIME_TARGET = ("mobilenet_v2_like", "ethos-u55-128")
BOARD_FOR_FAMILY = {"u55": "corstone-300", "u65": "corstone-300", "u85": "corstone-320"}


@dataclass
class Figures:
    """One flow's result for one (model, NPU); None where it could not be measured."""

    cycles_total: int | None = None
    cycles_npu: int | None = None
    delegates: int | None = None
    ops_fraction: float | None = None
    macs_fraction: float | None = None
    seconds: float | None = None
    cpu_ops: list[str] = field(default_factory=list)
    error: str | None = None


def family(npu: str) -> str:
    return npu.split("-")[1]


# ----------------------------------------------------------------------------- torchmcu
def torchmcu_has_npu() -> str | None:
    """None when torchmcu.export takes npu=..., else why not."""
    import torchmcu

    if "npu" not in inspect.signature(torchmcu.export).parameters:
        return "torchmcu.export has no npu= argument yet"
    return None


def bench_torchmcu(
    name: str, npu: str, n_cal: int, sys_cfg: str, mode: str, dump_tosa: Path | None = None
) -> Figures:
    import torchmcu
    from torchmcu.examples import build, calibration

    model, inputs = build(name)
    samples = TimedSamples(calibration(name, n_cal, seed=1))
    try:
        started = time.perf_counter()
        exported = torchmcu.export(
            model,
            inputs,
            calibration=samples,
            board=BOARD_FOR_FAMILY[family(npu)],
            npu=npu,
            system_config=sys_cfg,
            memory_mode=mode,
        )
        elapsed = time.perf_counter() - started - samples.seconds
    except Exception as exc:  # noqa: BLE001  (report it and go on with the other runs)
        return Figures(error=f"{type(exc).__name__}: {exc}"[:200])
    if dump_tosa is not None and exported.npu is not None:
        dump_tosa.mkdir(parents=True, exist_ok=True)
        for k, sub in enumerate(exported.npu.subgraphs):
            (dump_tosa / f"delegate{k}.tosa").write_bytes(sub.tosa.flatbuffer)
    rep = exported.report.get("npu") or {}
    est = rep.get("estimate", {})
    return Figures(
        cycles_total=est.get("cycles_total"),
        cycles_npu=est.get("cycles_npu"),
        delegates=len(rep.get("delegates", [])),
        ops_fraction=rep.get("operators", {}).get("fraction"),
        macs_fraction=rep.get("macs", {}).get("fraction"),
        seconds=elapsed,
        cpu_ops=sorted(
            {
                op
                for p in rep.get("placement", [])
                if p.get("where") != "npu"
                for op in p.get("ops", [])
            }
        ),
    )


def warm_up(npu: str) -> None:
    """Import everything and export a tiny model once, so no timed run pays first-call costs."""
    import torchmcu
    from torchmcu.examples import build, calibration

    model, inputs = build("mlp")
    try:
        torchmcu.export(
            model,
            inputs,
            calibration=calibration("mlp", 2),
            board=BOARD_FOR_FAMILY[family(npu)],
            npu=npu,
        )
    except Exception as exc:  # noqa: BLE001
        print(f"(warm-up export failed: {type(exc).__name__}: {str(exc)[:120]})")


# ----------------------------------------------------------------------------- ExecuTorch
def executorch_available() -> str | None:
    """None if ExecuTorch's Ethos-U flow can run, else why not."""
    if not ET_PYTHON.exists():
        return f"{ET_PYTHON} not found (scripts/executorch_venv.sh --ethos-u creates it)"
    if (ET_PYTHON.parent.parent / ".torchmcu-ethos-u-ok").exists():
        return None
    # Without the stamp the flow may still import: Vela from PYTHONPATH (a venv shared
    # read-only, say, with Vela 5.2.0 of the same Python beside it).
    probe = "from executorch.backends.arm.ethosu import EthosUPartitioner; import ethosu.vela"
    done = subprocess.run(
        [str(ET_PYTHON), "-c", probe], env=et_env(), capture_output=True, check=False
    )
    if done.returncode != 0:
        return "the ExecuTorch venv lacks its Ethos-U flow (scripts/executorch_venv.sh --ethos-u)"
    return None


def bench_executorch(jobs: list[dict[str, Any]], work: Path, with_warm_up: bool) -> list[Figures]:
    """Run all ExecuTorch jobs in one worker process (its imports take several seconds);
    with_warm_up: export a tiny model first, untimed, as on our side."""
    from torchmcu.examples import calibration

    n = len(jobs)
    warm = {k: v for k, v in jobs[0].items() if k != "dump_tosa"}
    jobs = [{**warm, "warm_up": True, "model": "mlp"}, *jobs] if with_warm_up else list(jobs)
    for job in jobs:
        path = work / f"calib_{job['model']}.npz"
        if not path.exists():
            save_samples(path, calibration(job["model"], job["n_cal"], seed=1))
        job["calibration"] = str(path)
    out = work / "executorch.json"
    args = [
        str(Path(__file__).resolve()),
        "--executorch-worker",
        json.dumps(jobs),
        "--json",
        str(out),
    ]
    done = run_script(args, timeout=3600)
    if done is None:
        return [Figures(error="timed out") for _ in range(n)]
    if done.returncode != 0 or not out.exists():
        last = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return [Figures(error=f"worker exit {done.returncode}: {last[-1][:160]}") for _ in range(n)]
    return [Figures(**f) for f in json.loads(out.read_text())]


def _et_name(node: Any) -> str:
    return str(getattr(node.target, "__name__", node.target))


_ET_NOT_OPERATORS = ("getitem", "call_delegate", "alloc")
_ET_QDQ = (
    "quantize_per_tensor",
    "dequantize_per_tensor",
    "quantize_per_channel",
    "dequantize_per_channel",
)


def _et_counts(node: Any, inside: bool) -> bool:
    """Whether an edge-graph call counts as an operator: not bookkeeping, and inside a
    delegate not a quantize/dequantize (the NPU's int ops absorb them, as our kernel calls
    absorb theirs); on the CPU the program's input quantize / output dequantize count, as in
    our report."""
    name = _et_name(node)
    if any(k in name for k in _ET_NOT_OPERATORS):
        return False
    return not (inside and any(k in name for k in _ET_QDQ))


def _et_macs(node: Any) -> int:
    """Multiply-accumulates of an edge convolution / linear / matmul node (0 otherwise)."""
    name = _et_name(node)
    out = node.meta.get("val")
    if out is None or not hasattr(out, "shape"):
        return 0
    numel = int(out.numel())
    if "convolution" in name or "conv2d" in name:
        weight = node.args[1].meta["val"]
        return numel * int(weight.numel()) // int(weight.shape[0])
    if "linear" in name or "addmm" in name or name.startswith("mm") or "bmm" in name:
        operand = node.args[0] if "addmm" not in name else node.args[1]
        return numel * int(operand.meta["val"].shape[-1])
    return 0


def _et_shares(top: Any) -> tuple[float | None, float | None]:
    """(operator fraction, MAC fraction) on the NPU, read from ExecuTorch's lowered program:
    the calls left in the top-level graph run on the CPU, those in each delegate's original
    (edge) module on the NPU."""
    ops = {"npu": 0, "cpu": 0}
    macs = {"npu": 0, "cpu": 0}
    for node in top.graph.nodes:
        if node.op != "call_function":
            continue
        if "call_delegate" in str(node.target):
            lowered = getattr(top, node.args[0].target)
            for inner in lowered.original_module.graph_module.graph.nodes:
                if inner.op == "call_function" and _et_counts(inner, inside=True):
                    ops["npu"] += 1
                    macs["npu"] += _et_macs(inner)
        elif _et_counts(node, inside=False):
            ops["cpu"] += 1
            macs["cpu"] += _et_macs(node)
    n_ops, n_macs = ops["npu"] + ops["cpu"], macs["npu"] + macs["cpu"]
    return (ops["npu"] / n_ops if n_ops else None, macs["npu"] / n_macs if n_macs else None)


def executorch_worker(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Inside the ExecuTorch venv: its Ethos-U flow per job, Vela's summary per delegate."""
    import numpy as np
    import torch
    from executorch.backends.arm import arm_vela
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.quantizer import (
        EthosUQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchmcu.examples.models import build

    summaries: list[dict[str, str]] = []
    tosa_dump: list[Path] = []  # where the current job's TOSA graphs go (--dump-tosa)
    real_main = arm_vela.vela.main

    def main_with_summary(argv: list[str]) -> Any:
        status = real_main(argv)
        out_dir = next(a.split("=", 1)[1] for a in argv if a.startswith("--output-dir="))
        if tosa_dump:
            tosa_dump[0].mkdir(parents=True, exist_ok=True)
            k = len(list(tosa_dump[0].glob("delegate*.tosa")))
            source = next(Path(a) for a in argv if a.endswith(".tosa"))
            shutil.copyfile(source, tosa_dump[0] / f"delegate{k}.tosa")
        for path in sorted(Path(out_dir).glob("*_summary_*.csv")):
            with open(path, newline="") as f:
                summaries.extend(csv.DictReader(f))
        return status

    arm_vela.vela.main = main_with_summary
    results = []
    for job in jobs:
        summaries.clear()
        tosa_dump[:] = [Path(job["dump_tosa"])] if job.get("dump_tosa") else []
        try:
            model, example = build(job["model"])
            with np.load(job["calibration"]) as z:
                arrays = [z[f"arg{i}"] for i in range(len(z.files))]
            calib = [tuple(torch.from_numpy(a[s]) for a in arrays) for s in range(len(arrays[0]))]
            spec = EthosUCompileSpec(
                job["npu"], system_config=job["system_config"], memory_mode=job["memory_mode"]
            )
            with torch.no_grad():
                t0 = time.perf_counter()
                captured = torch.export.export(model, tuple(example)).module()
                quantizer = EthosUQuantizer(spec)
                quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
                prepared = prepare_pt2e(captured, quantizer)
                t1 = time.perf_counter()
                for sample in calib:
                    prepared(*sample)
                t2 = time.perf_counter()
                converted = convert_pt2e(prepared)
                exported = torch.export.export(converted, tuple(example))
                edge = to_edge_transform_and_lower(
                    exported,
                    partitioner=[EthosUPartitioner(spec)],
                    compile_config=EdgeCompileConfig(_check_ir_validity=False),
                )
                program = edge.to_executorch()
                bytes(program.buffer)
                t3 = time.perf_counter()
            top = edge.exported_program().graph_module
            cpu_ops = sorted(
                {
                    _et_name(n)
                    for n in top.graph.nodes
                    if n.op == "call_function" and _et_counts(n, inside=False)
                }
            )
            delegates = sum(1 for n in top.graph.nodes if "call_delegate" in str(n.target))
            shares = _et_shares(top)
            results.append(
                asdict(
                    Figures(
                        cycles_total=sum(int(float(s["cycles_total"])) for s in summaries),
                        cycles_npu=sum(int(float(s["cycles_npu"])) for s in summaries),
                        delegates=delegates,
                        ops_fraction=shares[0],
                        macs_fraction=shares[1],
                        seconds=(t1 - t0) + (t3 - t2),
                        cpu_ops=cpu_ops,
                    )
                )
            )
        except Exception as exc:  # noqa: BLE001  (report it, go on)
            results.append(asdict(Figures(error=f"{type(exc).__name__}: {exc}"[:200])))
    return [r for r, job in zip(results, jobs, strict=True) if not job.get("warm_up")]


# ----------------------------------------------------------------------------- output
def _fmt(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def print_table(rows: list[tuple[str, str, Figures, Figures | None]]) -> None:
    print(
        f"{'model':<20} {'npu':<14} {'flow':<10} {'cycles':>10} {'npu cyc':>10} {'deleg':>5} "
        f"{'ops%':>6} {'MACs%':>6} {'export s':>8}  notes"
    )
    for model, npu, ours, theirs in rows:
        for flow, f in (("torchmcu", ours), ("executorch", theirs)):
            if f is None:
                continue
            notes = f.error or (("CPU: " + ", ".join(f.cpu_ops)) if f.cpu_ops else "")
            pct = lambda x: None if x is None else 100 * x
            print(
                f"{model:<20} {npu:<14} {flow:<10} {_fmt(f.cycles_total, ',d'):>10} "
                f"{_fmt(f.cycles_npu, ',d'):>10} {_fmt(f.delegates, 'd'):>5} "
                f"{_fmt(pct(f.ops_fraction), '.1f'):>6} {_fmt(pct(f.macs_fraction), '.1f'):>6} "
                f"{_fmt(f.seconds, '.2f'):>8}  {notes[:90]}"
            )
        if theirs is None:
            continue
        if ours.cycles_total and theirs.cycles_total:
            print(
                f"{'':<20} {'':<14} {'ratio':<10} {ours.cycles_total / theirs.cycles_total:>10.3f}"
                "  (torchmcu / ExecuTorch total cycles; target <= 1)"
            )
        if ours.seconds and theirs.seconds:
            print(
                f"{'':<20} {'':<14} {'ratio':<10} {'':>10} {'':>10} {'':>5} {'':>6} {'':>6} "
                f"{ours.seconds / theirs.seconds:>8.3f}  (torchmcu / ExecuTorch export time"
                + ("; target <= 0.2)" if (model, npu) == EXPORT_TIME_TARGET else ")")
            )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+")
    ap.add_argument(
        "--architectures", action="store_true", help="the 12 example architectures (issue 17)"
    )
    ap.add_argument("--npus", nargs="+", default=list(DEFAULT_NPUS))
    ap.add_argument("--calibration", type=int, default=8, help="calibration samples")
    ap.add_argument("--memory-mode", help="override the memory mode for every NPU")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--no-executorch", action="store_true")
    ap.add_argument("--no-warm-up", action="store_true", help="time first-call costs too")
    ap.add_argument(
        "--dump-tosa",
        type=Path,
        help="write each delegate's TOSA graph to DIR/<model>_<npu>/{torchmcu,executorch}/",
    )
    ap.add_argument("--executorch-worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.executorch_worker:  # running inside the ExecuTorch venv
        results = executorch_worker(json.loads(args.executorch_worker))
        args.json.write_text(json.dumps(results))
        return 0

    sys.path.insert(0, str(ROOT / "host"))  # works without an installed torchmcu too
    if args.architectures:
        from torchmcu.examples.architectures import ARCHITECTURES

        args.models = [*(args.models or []), *ARCHITECTURES]
    args.models = args.models or list(DEFAULT_MODELS)
    runs = []
    for model in args.models:
        for npu in args.npus:
            sys_cfg, mode = ET_DEFAULTS[family(npu)]
            runs.append(
                {
                    "model": model,
                    "npu": npu,
                    "system_config": sys_cfg,
                    "memory_mode": args.memory_mode or mode,
                    "n_cal": args.calibration,
                    **(
                        {"dump_tosa": str(args.dump_tosa / f"{model}_{npu}" / "executorch")}
                        if args.dump_tosa
                        else {}
                    ),
                }
            )
    why_not = torchmcu_has_npu()
    if why_not is None and not args.no_warm_up:
        warm_up(args.npus[0])
    ours = [
        Figures(error=why_not)
        if why_not
        else bench_torchmcu(
            r["model"],
            r["npu"],
            r["n_cal"],
            r["system_config"],
            r["memory_mode"],
            args.dump_tosa / f"{r['model']}_{r['npu']}" / "torchmcu" if args.dump_tosa else None,
        )
        for r in runs
    ]
    theirs: list[Figures | None] = [None] * len(runs)
    et_missing = None if not args.no_executorch else "--no-executorch"
    et_missing = et_missing or executorch_available()
    if et_missing is None:
        with tempfile.TemporaryDirectory(prefix="npu-bench-") as tmp:
            theirs = list(bench_executorch(runs, Path(tmp), not args.no_warm_up))
    for r in runs:
        print(f"# {r['model']} {r['npu']}: {r['system_config']} + {r['memory_mode']}")
    print_table([(r["model"], r["npu"], o, t) for r, o, t in zip(runs, ours, theirs, strict=True)])
    if et_missing:
        print(f"(ExecuTorch not run: {et_missing})")
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {**r, "torchmcu": asdict(o), "executorch": None if t is None else asdict(t)}
                    for r, o, t in zip(runs, ours, theirs, strict=True)
                ],
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
