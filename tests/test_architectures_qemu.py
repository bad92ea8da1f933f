"""The twelve example architectures on the Cortex-M55 (QEMU mps3-an547, issue 17): one
firmware image built from their merged selected_operators.yaml runs every program on one
test input, each bit-exact with the host runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _architectures import NAMES, exported_architectures
from torchmcu import device, native
from torchmcu.selective import merge_files

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

BOARD = "qemu-an547"


def test_one_image_runs_all_twelve_bit_exact(tmp_path: Path) -> None:
    exported = exported_architectures()
    ptes = [exported[n].pte for n in NAMES]
    merged = tmp_path / "merged.yaml"
    merge_files([p.parent / "selected_operators.yaml" for p in ptes], board=BOARD, output=merged)
    infos = [native.program_info(p.read_bytes()) for p in ptes]
    samples = [exported[n].inputs[:1] for n in NAMES]
    blobs = [device.write_io_blob(info, s) for info, s in zip(infos, samples)]
    image = device.build(ptes, BOARD, tmp_path / "fw", inputs=blobs, ops_yaml=merged)
    result = device.run(image.elf, BOARD, 1200).check()
    assert [(p.name, p.status) for p in result.programs] == [(n, "OK") for n in NAMES]
    for index, (name, info) in enumerate(zip(NAMES, infos)):
        want = native.run_program(ptes[index].read_bytes(), samples[index][0])
        got = result.outputs(info, 0, program=index)
        assert len(got) == len(want) == 1, name
        np.testing.assert_array_equal(got[0], want[0], err_msg=name)
