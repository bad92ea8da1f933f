"""CI pass over the libFuzzer targets of tools/fuzz (clang, ASan + UBSan).

The targets are built once into build/fuzz (cached, serialised with a lock); seed corpora are
generated from real exported programs (tools/fuzz/make_corpus.py: every MLPerf Tiny example and
small programs run with the real kernels). Each target runs a fixed number of seeded mutations
(-runs, -seed=1) over its seeds plus tools/fuzz/regressions/<target>/ (every crash ever found);
any sanitizer report, trap or libFuzzer finding fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _cmake import locked_build
from conftest import once_per_run

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "fuzz"
REGRESSIONS = ROOT / "tools" / "fuzz" / "regressions"
TARGETS = ("fuzz_pte_load", "fuzz_method_init", "fuzz_run", "fuzz_plan", "fuzz_ethos_u_blob")
# Mutations per target in CI (seeded): about 10 s each on one core.
RUNS = {
    "fuzz_pte_load": 30000,
    "fuzz_method_init": 20000,
    "fuzz_run": 4000,
    "fuzz_plan": 10000,
    "fuzz_bundled": 20000,
    "fuzz_ethos_u_blob": 50000,
}

pytestmark = pytest.mark.needs("clang", "cmake", "clang-sanitizers", "libfuzzer")

_built: dict[str, Path] = {}


def build_fuzzers() -> Path:
    """Configure and build tools/fuzz into build/fuzz (once per process; locked)."""
    if "dir" in _built:
        return _built["dir"]
    locked_build(ROOT / "tools" / "fuzz", BUILD, [])
    _built["dir"] = BUILD
    return BUILD


def seed_corpus() -> Path:
    """Seeds from this checkout's exporter, generated once per test run into build/fuzz/corpus
    (shared by the xdist workers of the run: regenerating it per worker would delete the
    files another worker's targets are reading)."""
    if "corpus" in _built:
        return _built["corpus"]
    out = BUILD / "corpus"
    with once_per_run(out) as stale:
        if stale:
            shutil.rmtree(out, ignore_errors=True)
            r = subprocess.run(
                [sys.executable, str(ROOT / "tools" / "fuzz" / "make_corpus.py"), str(out)],
                capture_output=True,
                check=False,
                text=True,
            )
            assert r.returncode == 0, r.stderr[-4000:]
    _built["corpus"] = out
    return out


def targets(build: Path) -> list[str]:
    """Every fuzz target that was built (fuzz_bundled only once the .bpte reader exists)."""
    return [t for t in (*TARGETS, "fuzz_bundled") if (build / t).exists()]


def seeds_for(target: str, corpus: Path) -> list[Path]:
    dirs = {
        "fuzz_run": [corpus / "run"],
        "fuzz_plan": [corpus / "plan"],
        "fuzz_bundled": [corpus / "bpte"],
        "fuzz_ethos_u_blob": [corpus / "blob"],
    }.get(target, [corpus / "pte"])
    regress = REGRESSIONS / target
    return [d for d in (*dirs, regress) if d.is_dir()]


def run_target(
    build: Path, corpus: Path, target: str, work: Path, *flags: str
) -> subprocess.CompletedProcess:
    """Runs one target on fresh output dir + seeds + regressions; returns the process."""
    out = work / f"{target}-new"
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TM_FUZZ_PROGRAMS=str(corpus / "programs"))
    return subprocess.run(
        [
            str(build / target),
            *flags,
            f"-artifact_prefix={work}/{target}-",
            "-timeout=20",
            "-print_final_stats=1",
            str(out),
            *map(str, seeds_for(target, corpus)),
        ],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def fuzz_env() -> tuple[Path, Path]:
    return build_fuzzers(), seed_corpus()


def test_every_target_built(fuzz_env: tuple[Path, Path]) -> None:
    build, _ = fuzz_env
    expected = set(TARGETS)
    if (ROOT / "firmware" / "runtime" / "src" / "bundled.c").exists():
        expected.add("fuzz_bundled")  # the .bpte reader is in the runtime: it must be fuzzed
    assert expected <= set(targets(build))


@pytest.mark.parametrize("target", [*TARGETS, "fuzz_bundled"])
def test_target_short_run_finds_nothing(
    fuzz_env: tuple[Path, Path], target: str, tmp_path: Path
) -> None:
    build, corpus = fuzz_env
    if not (build / target).exists():
        pytest.skip(f"{target} not built (its source is not in the tree yet)")
    r = run_target(build, corpus, target, tmp_path, f"-runs={RUNS[target]}", "-seed=1")
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-6000:]
    assert "ERROR" not in log and "runtime error" not in log, log[-6000:]
    assert not list(tmp_path.glob(f"{target}-crash-*")) and not list(
        tmp_path.glob(f"{target}-leak-*")
    )
    executed = int(log.split("stat::number_of_executed_units:")[1].split()[0])
    assert executed >= RUNS[target]  # the seeds loaded and the mutations really ran


@pytest.mark.parametrize("target", [*TARGETS, "fuzz_bundled"])
def test_regressions_replay_clean(fuzz_env: tuple[Path, Path], target: str) -> None:
    """Each committed crash input, run alone: the bug it found stays fixed."""
    build, corpus = fuzz_env
    files = sorted(
        p for p in (REGRESSIONS / target).glob("*") if p.is_file() and not p.name.startswith(".")
    )
    if not files:
        pytest.skip(f"no regression inputs for {target}")
    env = dict(os.environ, TM_FUZZ_PROGRAMS=str(corpus / "programs"))
    r = subprocess.run(
        [str(build / target), *map(str, files)],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]


PENDING = ROOT / "tools" / "fuzz" / "pending"


@pytest.mark.parametrize(
    "case",
    sorted(str(p.relative_to(PENDING)) for p in PENDING.glob("fuzz_*/*") if p.is_file()),
)
def test_pending_findings(fuzz_env: tuple[Path, Path], case: str) -> None:
    """Known crashes in code owned elsewhere (tools/fuzz/pending/README.md): xfail until fixed."""
    build, corpus = fuzz_env
    target, _ = case.split("/", 1)
    env = dict(os.environ, TM_FUZZ_PROGRAMS=str(corpus / "programs"))
    r = subprocess.run(
        [str(build / target), str(PENDING / case)],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=300,
    )
    if r.returncode != 0:
        pytest.xfail(f"still crashes (reported, see tools/fuzz/pending/README.md): {case}")
