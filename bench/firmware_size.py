"""Firmware footprint of the corstone-300 runner (arm-none-eabi-size and the linker map).

    python bench/firmware_size.py [--build-dir build/bench-size] [--model ds_cnn]

Exports the model (DS-CNN by default) and builds the runner with the model's own
selected_operators.yaml (its kernels only) in four configurations: with and without console
printing (TORCHMCU_CONSOLE), with newlib-nano and with the full newlib (TORCHMCU_NEWLIB_NANO).
For each it prints the image without weights (.vectors + .text + .ARM.exidx + .data: what goes
to the code flash) by part - runtime (libtm_runtime.a, -Os), kernels, runner, cmsis (startup,
faults, console), libc (newlib, libgcc, libm) - from the linker map's input sections, and which
objects pulled printf or malloc in (the map's archive members and who referenced them). The
.pte (weights) is a separate region and not counted. Then the runtime core for the model's
CPU-only straight-line program and with each optional runtime feature added to its yaml
(control flow, String/TensorList values, delegates).

Targets (issue 19): the runtime core as linked <= 9,000 B; the image without weights, no
printing, newlib-nano <= 29,000 B; no printf/malloc in any image. Figures are measured, never
assumed; the script exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

FLASH_SECTIONS = (".vectors", ".text", ".ARM.exidx", ".data")
PARTS = ("runtime", "kernels", "runner", "cmsis", "libc")
RUNTIME_CORE_TARGET = 9_000
IMAGE_TARGET = 29_000  # no printing, newlib-nano
# libc members that are printf or the heap (what a runtime must never drag in).
_FORBIDDEN = re.compile(r"printf|malloc|free|sbrk|calloc|realloc|mallocr")


def component(path: str) -> str:
    if "libtm_runtime.a" in path:
        return "runtime"
    if "libtm_kernels.a" in path:
        return "kernels"
    if "tm_cmsis.dir" in path:
        return "cmsis"
    if "firmware.dir" in path:
        return "runner"
    return "libc"


def linked_sizes(map_file: Path) -> dict[str, int]:
    """Bytes per part in the flash output sections, from the linker map's input sections."""
    sizes: dict[str, int] = defaultdict(int)
    output = None
    for line in map_file.read_text().splitlines():
        if re.match(r"^\.\S+", line):
            output = line.split()[0]
            continue
        if output not in FLASH_SECTIONS:
            continue
        m = re.match(r"^\s*(?:\S+\s+)?0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+\.(?:obj|o)\)?)$", line)
        if m:
            sizes[component(m.group(2))] += int(m.group(1), 16)
    return dict(sizes)


def archive_members(map_file: Path) -> list[tuple[str, str, str]]:
    """(member, referencing object, symbol) of every archive member the link pulled in, from
    the map's "Archive member included to satisfy reference by file (symbol)" section."""
    lines = map_file.read_text().splitlines()
    try:
        start = lines.index("Archive member included to satisfy reference by file (symbol)")
    except ValueError:
        return []
    out = []
    member = None
    for line in lines[start + 1 :]:
        if not line.strip():
            if member is None and out:
                break
            continue
        if line.startswith(("Discarded", "Memory", "Allocating")):
            break
        if not line[0].isspace():
            member = line.strip()
            continue
        m = re.match(r"^\s+(\S+)\s+\((\S+)\)$", line)
        if m and member is not None:
            out.append((member, m.group(1), m.group(2)))
            member = None
        elif member is not None and m is None:  # "member ref (sym)" on one line
            parts = line.split()
            member = None
            if len(parts) >= 2:
                out.append((parts[0], parts[1], parts[-1].strip("()")))
    return out


def _short(path: str) -> str:
    """libc_nano.a(libc_a-printf.o) / libtm_runtime.a(method.c.obj) / main.c.obj."""
    m = re.search(r"([^/]+\.a\([^)]+\))$", path)
    return m.group(1) if m else Path(path).name


def forbidden_chains(map_file: Path) -> list[str]:
    """For each printf/malloc member pulled in: the chain of references back to our code."""
    members = archive_members(map_file)
    by_member = {member: (ref, sym) for member, ref, sym in members}
    chains = []
    for member, ref, sym in members:
        if not _FORBIDDEN.search(_short(member).split("(")[-1]):
            continue
        chain = [f"{_short(member)}"]
        seen = {member}
        cur_ref, cur_sym = ref, sym
        while True:
            chain.append(f"<- {_short(cur_ref)} ({cur_sym})")
            if cur_ref not in by_member or cur_ref in seen:
                break
            seen.add(cur_ref)
            cur_ref, cur_sym = by_member[cur_ref]
        chains.append(" ".join(chain))
    return chains


def section_sizes(elf: Path) -> dict[str, int]:
    out = subprocess.run(
        ["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True, check=True
    )
    sizes = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def archive_text(archive: Path) -> int:
    out = subprocess.run(
        ["arm-none-eabi-size", "-t", str(archive)], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip().splitlines()[-1].split()[0])


@dataclass(frozen=True)
class Variant:
    name: str
    console: bool
    nano: bool


VARIANTS = (
    Variant("no printing, newlib-nano", console=False, nano=True),
    Variant("printing, newlib-nano", console=True, nano=True),
    Variant("no printing, full newlib", console=False, nano=False),
    Variant("printing, full newlib", console=True, nano=False),
)


@dataclass(frozen=True)
class Measured:
    flash: int
    parts: dict[str, int]
    forbidden: list[str]
    runtime_archive: int


# The runtime core with each optional feature (firmware/runtime/src/loader.h) added to the
# model's own yaml: its build_features entry (a delegate: its id).
FEATURES = (
    ("+ control flow", ["runtime:control_flow"]),
    ("+ String/TensorList values", ["runtime:string_list_values"]),
    ("+ delegates (EthosUBackend)", ["delegate:EthosUBackend"]),
    (
        "+ all three",
        ["runtime:control_flow", "runtime:string_list_values", "delegate:EthosUBackend"],
    ),
)


def measure(pte: Path, yaml: Path, board: str, build_dir: Path, variant: Variant) -> Measured:
    from torchmcu import device

    defines = {
        "TORCHMCU_CONSOLE": "ON" if variant.console else "OFF",
        "TORCHMCU_NEWLIB_NANO": "ON" if variant.nano else "OFF",
    }
    image = device.build(pte, board, build_dir, ops_yaml=yaml, defines=defines)
    sections = section_sizes(image.elf)
    map_file = image.build_dir / "firmware" / "runner" / "firmware.map"
    return Measured(
        flash=sum(sections.get(s, 0) for s in FLASH_SECTIONS),
        parts=linked_sizes(map_file),
        forbidden=forbidden_chains(map_file),
        runtime_archive=archive_text(image.build_dir / "firmware" / "runtime" / "libtm_runtime.a"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build/bench-size")
    parser.add_argument("--model", default="ds_cnn")
    parser.add_argument("--board", default="corstone-300")
    args = parser.parse_args(argv)

    import torchmcu
    from torchmcu.examples import models
    from torchmcu.selective import read_yaml, write_yaml

    model, example = models.build(args.model)
    exported = torchmcu.export(
        model, example, calibration=models.calibration(args.model, 8), board=args.board
    )
    results: dict[str, Measured] = {}
    with tempfile.TemporaryDirectory() as tmp:
        pte = exported.save(tmp)
        yaml = Path(tmp) / "selected_operators.yaml"
        for v in VARIANTS:
            slug = ("print" if v.console else "noprint") + ("-nano" if v.nano else "-full")
            results[v.name] = measure(pte, yaml, args.board, Path(args.build_dir) / slug, v)
        features: dict[str, Measured] = {}
        doc = read_yaml(yaml)
        for name, entries in FEATURES:
            with_feature = write_yaml(
                {**doc, "build_features": sorted(doc["build_features"] + entries)},
                Path(tmp) / f"features-{len(features)}.yaml",
            )
            features[name] = measure(
                pte, with_feature, args.board, Path(args.build_dir) / "features", VARIANTS[0]
            )

    print(f"{args.model} runner for {args.board}, its own kernels (selected_operators.yaml)")
    print("image without weights (.vectors + .text + .ARM.exidx + .data), bytes by part:")
    print(f"  {'configuration':<28}" + "".join(f"{p:>9}" for p in PARTS) + f"{'total':>9}")
    for name, r in results.items():
        row = "".join(f"{r.parts.get(p, 0):>9,}" for p in PARTS)
        print(f"  {name:<28}{row}{r.flash:>9,}")
    first = results[VARIANTS[0].name]
    print(f"  runtime core, whole archive (-Os): {first.runtime_archive:,} bytes")
    print(f"runtime core as linked ({VARIANTS[0].name}), by runtime feature:")
    core = first.parts.get("runtime", 0)
    print(f"  {'CPU-only straight-line program':<34}{core:>8,}")
    for name, r in features.items():
        size = r.parts.get("runtime", 0)
        print(f"  {name:<34}{size:>8,}  ({size - core:+,})")

    ok = True
    for name, r in results.items():
        for chain in r.forbidden:
            ok = False
            print(f"  printf/malloc pulled in ({name}): {chain}")
    if ok:
        print("  printf/malloc: pulled in by nothing, in every configuration")
    for what, measured, limit in (
        ("runtime core (linked)", first.parts.get("runtime", 0), RUNTIME_CORE_TARGET),
        (f"image without weights ({VARIANTS[0].name})", first.flash, IMAGE_TARGET),
    ):
        verdict = "within" if measured <= limit else "OVER"
        ok &= measured <= limit
        print(f"  target {what}: {measured:,} <= {limit:,} bytes: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
