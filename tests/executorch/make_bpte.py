"""Write a .bpte with ExecuTorch's own BundledProgram flow (runs in the ExecuTorch venv).

    python make_bpte.py PROGRAM.pte CASES.npz OUT.bpte

CASES.npz holds arrays named in{case}_{i} and out{case}_{i} (logical sizes, contiguous); the
bundle is made from the .pte file path (ExecuTorch then skips its own program checks) and
serialized with serialize_from_bundled_program_to_flatbuffer, so the caller can check that our
reader and the device runner accept what ExecuTorch writes.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import executorch
import numpy as np
import torch

# executorch.devtools/__init__ imports the inspector (pandas, not in the venv); register the
# package without running its __init__, as dump_bpte.py does.
_devtools = types.ModuleType("executorch.devtools")
_devtools.__path__ = [str(Path(next(iter(executorch.__path__))) / "devtools")]
sys.modules.setdefault("executorch.devtools", _devtools)

from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)


def main(pte: str, cases_npz: str, out: str) -> int:
    with np.load(cases_npz) as data:
        arrays = {k: data[k] for k in data.files}
    n = 1 + max(int(k[2:].split("_")[0]) for k in arrays if k.startswith("in"))

    def tensors(prefix: str, case: int) -> list[torch.Tensor]:
        keys = sorted(
            (k for k in arrays if k.startswith(f"{prefix}{case}_")),
            key=lambda k: int(k.split("_")[1]),
        )
        return [torch.from_numpy(np.ascontiguousarray(arrays[k])) for k in keys]

    cases = [
        MethodTestCase(inputs=tensors("in", c), expected_outputs=tensors("out", c))
        for c in range(n)
    ]
    bundle = BundledProgram(None, [MethodTestSuite("forward", cases)], pte_file_path=pte)
    Path(out).write_bytes(serialize_from_bundled_program_to_flatbuffer(bundle))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
