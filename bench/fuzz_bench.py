"""Fuzz throughput: executions per second and total executions of each libFuzzer target.

    python bench/fuzz_bench.py [--seconds-per-target 60] [--jobs 2] [--targets fuzz_run ...]

Builds tools/fuzz into build/fuzz and generates the seed corpora as tests/test_fuzz.py does,
then runs every target for the given time (-max_total_time) starting from a private copy of
its seeds plus tools/fuzz/regressions/<target>/, `--jobs` targets at a time. Prints per target:
executions, executions per second, corpus units added, findings (crash/leak/timeout/oom
artifacts); exits 1 when anything was found (the artifacts stay under build/fuzz/bench/).
While the targets run, stderr shows how many are done and the seconds so far (--quiet: not).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from torchmcu import progress

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_fuzz import build_fuzzers, seed_corpus, seeds_for, targets


def _stat(log: str, key: str) -> int:
    marker = f"stat::{key}:"
    return int(log.split(marker)[1].split()[0]) if marker in log else 0


def run_one(build: Path, corpus: Path, target: str, seconds: int, work: Path) -> dict:
    """Runs one target for `seconds`; returns its figures."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "corpus").mkdir(parents=True)
    for d in seeds_for(target, corpus):
        for f in d.iterdir():
            if f.is_file():
                shutil.copy(f, work / "corpus" / f"{d.name}-{f.name}")
    env = dict(os.environ, TM_FUZZ_PROGRAMS=str(corpus / "programs"))
    started = time.perf_counter()
    r = subprocess.run(
        [
            str(build / target),
            f"-max_total_time={seconds}",
            "-print_final_stats=1",
            "-timeout=20",
            f"-artifact_prefix={work}/",
            str(work / "corpus"),
        ],
        capture_output=True,
        check=False,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - started
    log = r.stdout + r.stderr
    (work / "log.txt").write_text(log)
    findings = [
        p.name
        for p in work.iterdir()
        if p.name.split("-")[0] in ("crash", "leak", "timeout", "oom")
    ]
    return {
        "target": target,
        "executions": _stat(log, "number_of_executed_units"),
        "exec_per_sec": _stat(log, "average_exec_per_sec"),
        "new_units": _stat(log, "new_units_added"),
        "seconds": round(wall, 1),
        "exit": r.returncode,
        "findings": findings,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds-per-target", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2, help="targets run at the same time")
    ap.add_argument("--targets", nargs="*", help="default: every built target")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress line on stderr")
    args = ap.parse_args()
    progress.configure(enabled=not args.quiet)
    build, corpus = build_fuzzers(), seed_corpus()
    names = args.targets or targets(build)
    with (
        ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool,
        progress.task("fuzzing", total=len(names), unit="targets") as shown,
    ):
        futures = [
            pool.submit(run_one, build, corpus, t, args.seconds_per_target, build / "bench" / t)
            for t in names
        ]
        pending = set(futures)
        while pending:  # one line: targets done, seconds so far
            _, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            shown.update(len(futures) - len(pending))
            shown.tick()
        rows = [f.result() for f in futures]
    print(
        f"{'target':<18} {'executions':>12} {'exec/s':>8} {'new units':>10} {'seconds':>8}  findings"
    )
    for row in rows:
        found = ", ".join(row["findings"]) or (
            "none" if row["exit"] == 0 else f"exit {row['exit']}"
        )
        print(
            f"{row['target']:<18} {row['executions']:>12,} {row['exec_per_sec']:>8,} {row['new_units']:>10,} "
            f"{row['seconds']:>8}  {found}"
        )
    total = sum(r["executions"] for r in rows)
    bad = [r for r in rows if r["findings"] or r["exit"] != 0]
    print(f"{'total':<18} {total:>12,}  findings: {sum(len(r['findings']) for r in rows)}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"rows": rows, "total_executions": total}, indent=2) + "\n"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
