"""ExecuTorch's own Cortex-M programs on our runtime, and first against steady-state inference.

    python bench/runtime_interop.py [--models ds_cnn resnet8 ...] [--profile]
                                    [--build-dir build/bench-interop] [--json out.json]

Issue 19's acceptance points "their programs on our runtime at most 0.90x of their own
runtime" and "first inference within 5 % of the steady state", measured on QEMU mps3-an547
(corstone-300 runner, Cortex-M55 with MVE) with the instruction-counting plugin:

- ExecuTorch 1.5.1's Cortex-M flow exports each MLPerf Tiny model (seed 0; the ExecuTorch venv,
  tests/executorch/export_cortex_m.py, as tests/test_interop_executorch.py does);
- our runner embeds that .pte and runs two inferences (two samples, one method instance); the
  counts are the instructions between the runner's markers around tm_method_execute, the first
  inference and the second (steady state);
- our own export of the same model (torchmcu.export, corstone-300, 8 calibration samples) is
  run the same way, for its first and steady inference.

ExecuTorch's own runtime figures are the issue's (ExecuTorch core + executor + its cortex_m
kernels calling CMSIS-NN, built from its sources, same plugin, steady state); they are
constants here because that build is not part of this repository.

--profile also builds the profiled runner (TORCHMCU_PROFILE) for ExecuTorch's programs and
prints the per-kernel split of the steady inference, and the runner's TM_SCRATCH line when the
image holds less scratch than a kernel's Helium path needs (it then runs its scalar path).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "bench"))

from executorch_venv import ET_PYTHON, run_script

BOARD = "corstone-300"
ET_SCRIPT = ROOT / "tests" / "executorch" / "export_cortex_m.py"
# Issue 19: ExecuTorch's export on ExecuTorch's runtime with CMSIS-NN, steady state.
EXECUTORCH_RUNTIME = {
    "ds_cnn": 1_809_008,
    "resnet8": 4_826_787,
    "mobilenet_v1_025": 6_549_763,
    "deep_autoencoder": 155_437,
}
TARGET_RATIO = 0.90  # their programs on our runtime / their own runtime
OWN_TARGET_RATIO = 0.70  # our programs on our runtime / theirs on their runtime
FIRST_TOLERANCE = 0.05  # first inference within 5 % of the steady state


@dataclass
class Row:
    model: str
    # "executorch" (their .pte), "torchmcu" (ours) or "torchmcu-selective" (ours, in the image
    # built from its own selected_operators.yaml: only the kernels and kernel paths it takes)
    flow: str
    first: int
    steady: int
    profile: list[dict[str, Any]] = field(default_factory=list)
    scratch_lines: list[str] = field(default_factory=list)

    @property
    def first_over_steady(self) -> float:
        return self.first / self.steady


def executorch_pte(name: str, out: Path) -> Path:
    """ExecuTorch's Cortex-M program of example model `name` (exported once, then reused)."""
    pte = out / "model.pte"
    if pte.is_file():
        return pte
    out.mkdir(parents=True, exist_ok=True)
    model = f"{ROOT}/host/torchmcu/examples/models.py:{name}"
    proc = run_script(
        [str(ET_SCRIPT), "--model", model, "--seed", "0", "--out-dir", str(out)], timeout=1800
    )
    if proc is None or proc.returncode != 0 or not pte.is_file():
        detail = "timed out" if proc is None else proc.stderr[-2000:]
        raise SystemExit(f"ExecuTorch's export of {name} failed: {detail}")
    return pte


def torchmcu_pte(name: str, out: Path) -> Path:
    import torchmcu
    from torchmcu.examples import models

    model, example = models.build(name)
    exported = torchmcu.export(model, example, calibration=models.calibration(name, 8), board=BOARD)
    return Path(exported.save(out, name))


def two_samples(pte: Path) -> bytes:
    """An inputs blob of two samples, each the runner's deterministic default input."""
    from torchmcu import native
    from torchmcu.device import write_io_blob
    from torchmcu.device.io_blob import default_inputs

    info = native.program_info(pte.read_bytes())
    return write_io_blob(info, [default_inputs(info), default_inputs(info)])


def measure(
    name: str, flow: str, pte: Path, build_dir: Path, profile: bool, ops_yaml: Path | None = None
) -> Row:
    from torchmcu import device
    from torchmcu.device.icount import count_instructions, profile_instructions

    blob = two_samples(pte)
    image = device.build(pte, BOARD, build_dir / f"{flow}-{name}", inputs=blob, ops_yaml=ops_yaml)
    counts = count_instructions(image.elf, BOARD, timeout=900)
    first, steady = counts["regions"]["inference"]
    row = Row(model=name, flow=flow, first=first, steady=steady)
    row.scratch_lines = [ln for ln in counts["console"].splitlines() if ln.startswith("TM_SCRATCH")]
    if profile:
        image = device.build(
            pte, BOARD, build_dir / f"{flow}-{name}-profile", inputs=blob, profile=True
        )
        prof = profile_instructions(image.elf, BOARD, pte, timeout=900)
        row.profile = [dict(k) for k in prof["kernels"][-1]]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(EXECUTORCH_RUNTIME))
    parser.add_argument("--build-dir", default=str(ROOT / "build" / "bench-interop"))
    parser.add_argument("--profile", action="store_true", help="per-kernel split of their programs")
    parser.add_argument("--no-torchmcu", action="store_true", help="only ExecuTorch's programs")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    if not ET_PYTHON.is_file():
        print(f"{ET_PYTHON} not found (scripts/executorch_venv.sh --cortex-m creates it)")
        return 1
    build = Path(args.build_dir)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            et = measure(
                name, "executorch", executorch_pte(name, build / "et" / name), build, args.profile
            )
            rows.append(et)
            if not args.no_torchmcu:
                ours = torchmcu_pte(name, Path(tmp))
                rows.append(measure(name, "torchmcu", ours, build, False))
                own_yaml = ours.parent / "selected_operators.yaml"
                rows.append(measure(name, "torchmcu-selective", ours, build, False, own_yaml))
            print(f"measured {name}", file=sys.stderr, flush=True)

    print("ExecuTorch's programs on the torchmcu runtime (QEMU mps3-an547, instructions)")
    head = (
        f"{'model':<18} {'ET runtime':>11} {'ours, 1st':>12} {'ours, steady':>13} "
        f"{'ratio':>7} {'target':>7} {'1st/steady':>10}"
    )
    print(head)
    for r in rows:
        if r.flow != "executorch":
            continue
        theirs = EXECUTORCH_RUNTIME.get(r.model)
        ratio = r.steady / theirs if theirs else float("nan")
        verdict = "ok" if ratio <= TARGET_RATIO else "MISS"
        print(
            f"{r.model:<18} {theirs or 0:>11,} {r.first:>12,} {r.steady:>13,} {ratio:>6.2f}x "
            f"{verdict:>7} {r.first_over_steady:>10.3f}"
        )
        for line in r.scratch_lines:
            print(f"    {line}")
    ours = [r for r in rows if r.flow == "torchmcu"]
    selective = {r.model: r for r in rows if r.flow == "torchmcu-selective"}
    if ours:
        print(
            "\ntorchmcu's own programs on the torchmcu runtime, steady state: the image with every"
        )
        print("kernel, and the image built from the program's own selected_operators.yaml")
        print(
            f"{'model':<18} {'ET on ET':>11} {'every kernel':>13} {'ratio':>7} {'own yaml':>11} "
            f"{'ratio':>7} {'target':>7}"
        )
        for r in ours:
            theirs = EXECUTORCH_RUNTIME[r.model]
            sel = selective[r.model].steady
            worst = max(r.steady, sel) / theirs
            verdict = "ok" if worst <= OWN_TARGET_RATIO else "MISS"
            print(
                f"{r.model:<18} {theirs:>11,} {r.steady:>13,} {r.steady / theirs:>6.3f}x "
                f"{sel:>11,} {sel / theirs:>6.3f}x {verdict:>7}"
            )
        print("\ntorchmcu's own programs: first against steady-state inference")
        print(
            f"{'model (image)':<32} {'first':>12} {'steady':>12} {'1st/steady':>10} {'within 5 %':>10}"
        )
        for r in ours + list(selective.values()):
            ok = "ok" if r.first_over_steady - 1 <= FIRST_TOLERANCE else "MISS"
            label = (
                f"{r.model} ({'own yaml' if r.flow == 'torchmcu-selective' else 'every kernel'})"
            )
            print(
                f"{label:<32} {r.first:>12,} {r.steady:>12,} {r.first_over_steady:>10.3f} {ok:>10}"
            )
    for r in rows:
        if not r.profile:
            continue
        total = sum(k["instructions"] for k in r.profile) or 1
        print(f"\n{r.model} (ExecuTorch's program), steady inference per kernel call:")
        for k in r.profile:
            share = 100 * k["instructions"] / total
            print(f"  {k['instruction']:>4} {k['op']:<48} {k['instructions']:>12,} {share:>5.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
