"""Firmware footprint of the corstone-300 runner (arm-none-eabi-size and the linker map).

    python bench/firmware_size.py [--build-dir build/bench-size] [--model ds_cnn]

Builds the runner with an example model (DS-CNN by default) and prints:
  - the runtime core alone (loader + verifier + executor, libtm_runtime.a, -Os) as linked,
    and as the whole archive;
  - the whole image without weights (.vectors + .text + .ARM.exidx + .data: what goes to the
    code flash), split by component, against the issue's targets (runtime core <= 12 KB of
    .text, DS-CNN image <= 48 KB). The .pte (weights) is a separate region and not counted.
Figures are measured, never assumed; the script exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

FLASH_SECTIONS = (".vectors", ".text", ".ARM.exidx", ".data")
TARGETS = {"runtime core": 12 * 1024, "image without weights": 48 * 1024}


def component(path: str) -> str:
    if "libtm_runtime.a" in path:
        return "runtime core"
    if "libtm_kernels.a" in path:
        return "kernels"
    if "tm_cmsis.dir" in path:
        return "cmsis (startup, faults, console)"
    if "firmware.dir" in path:
        return "runner"
    return "libc/libgcc"


def linked_sizes(map_file: Path) -> dict[str, int]:
    """Bytes per component in the flash output sections, from the linker map's input sections."""
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build/bench-size")
    parser.add_argument("--model", default="ds_cnn")
    parser.add_argument("--board", default="corstone-300")
    args = parser.parse_args(argv)

    import torchmcu
    from torchmcu import device
    from torchmcu.examples import models

    model, example = models.build(args.model)
    exported = torchmcu.export(
        model, example, calibration=models.calibration(args.model, 8), board=args.board
    )
    with tempfile.TemporaryDirectory() as tmp:
        pte = exported.save(tmp)
        image = device.build(pte, args.board, args.build_dir)
    sections = section_sizes(image.elf)
    linked = linked_sizes(image.build_dir / "firmware" / "runner" / "firmware.map")
    flash = sum(sections.get(s, 0) for s in FLASH_SECTIONS)
    runtime_archive = archive_text(image.build_dir / "firmware" / "runtime" / "libtm_runtime.a")

    print(f"{args.model} runner for {args.board} ({image.elf})")
    print(
        f"  weights/program (.tm_program, not counted): {sections.get('.tm_program', 0):>8,} bytes"
    )
    print(f"  image without weights (code flash):        {flash:>8,} bytes")
    for name, size in sorted(linked.items(), key=lambda kv: -kv[1]):
        print(f"    {name:<38} {size:>8,}")
    print(f"  runtime core, whole archive (-Os):         {runtime_archive:>8,} bytes")
    print(
        f"  RAM: metadata {sections.get('.tm_meta', 0):,}, stack {sections.get('.stack', 0):,}, "
        f"arena {sections.get('.tm_arena', 0):,}, .bss {sections.get('.bss', 0):,} bytes"
    )
    ok = True
    for name, measured in (
        ("runtime core", linked.get("runtime core", 0)),
        ("image without weights", flash),
    ):
        limit = TARGETS[name]
        verdict = "within" if measured <= limit else "OVER"
        ok &= measured <= limit
        print(f"  target {name}: {measured:,} <= {limit:,} bytes: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
