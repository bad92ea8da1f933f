"""Selective build: .text of the corstone-300 runner image with only the kernels a model needs,
against the image with every kernel of the tree.

    python bench/selective_size.py [--build-dir build/bench-selective] [--board corstone-300]

Exports the four MLPerf Tiny models (their selected_operators.yaml), builds the DS-CNN runner
three times - every kernel, DS-CNN's kernels, the merged list of all four models - and prints
.text, the image without weights (.vectors + .text + .ARM.exidx + .data, as
bench/firmware_size.py counts it) and the kernels' share from the linker map, with the bytes and
percent each selective image saves. The embedded program does not change the code: only the
kernel set differs between the three builds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from firmware_size import FLASH_SECTIONS, linked_sizes, section_sizes

MLPERF_TINY = ("ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder")


def measure(image) -> dict[str, int]:
    sections = section_sizes(image.elf)
    linked = linked_sizes(image.build_dir / "firmware" / "runner" / "firmware.map")
    return {
        "text": sections.get(".text", 0),
        "flash": sum(sections.get(s, 0) for s in FLASH_SECTIONS),
        "kernels": linked.get("kernels", 0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build/bench-selective")
    parser.add_argument("--board", default="corstone-300")
    args = parser.parse_args(argv)

    import torchmcu
    from torchmcu import device
    from torchmcu.examples import models
    from torchmcu.selective import load_table, merge_files, operator_names, read_yaml

    with tempfile.TemporaryDirectory() as tmp:
        yamls, ptes = {}, {}
        for name in MLPERF_TINY:
            model, example = models.build(name)
            exported = torchmcu.export(
                model, example, calibration=models.calibration(name, 8), board=args.board
            )
            ptes[name] = exported.save(Path(tmp) / name, name=name)
            yamls[name] = ptes[name].parent / "selected_operators.yaml"
        union = Path(tmp) / "mlperf_tiny.yaml"
        merge_files(list(yamls.values()), board=args.board, output=union)
        out = Path(args.build_dir)
        pte = ptes["ds_cnn"]
        rows = {
            "every kernel": measure(device.build(pte, args.board, out / "full")),
            "DS-CNN's kernels": measure(
                device.build(pte, args.board, out / "dscnn", ops_yaml=yamls["ds_cnn"])
            ),
            "union of the 4 MLPerf Tiny models": measure(
                device.build(pte, args.board, out / "union", ops_yaml=union)
            ),
        }
        counts = {
            "every kernel": len(load_table().kernels),
            "DS-CNN's kernels": len(operator_names(read_yaml(yamls["ds_cnn"]))),
            "union of the 4 MLPerf Tiny models": len(operator_names(read_yaml(union))),
        }

        for name, path in [*yamls.items(), ("union", union)]:
            ops = ", ".join(n.split("::")[1] for n in operator_names(read_yaml(path)))
            print(f"  {name}: {ops}")

    full = rows["every kernel"]
    print(f"DS-CNN runner for {args.board}, bytes (saving vs every kernel)")
    print(f"  {'kernel set':<36} {'ops':>4} {'.text':>8} {'image w/o weights':>18} {'kernels':>8}")
    for label, m in rows.items():
        line = (
            f"  {label:<36} {counts[label]:>4} {m['text']:>8,} {m['flash']:>18,} {m['kernels']:>8,}"
        )
        if m is not full:
            saved = full["text"] - m["text"]
            flash_saved = full["flash"] - m["flash"]
            line += (
                f"   .text -{saved:,} B ({100 * saved / full['text']:.1f}%),"
                f" image -{flash_saved:,} B ({100 * flash_saved / full['flash']:.1f}%)"
            )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
