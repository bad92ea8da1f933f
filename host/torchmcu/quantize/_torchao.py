"""Import torchao without its start-up noise.

torchao logs a warning for every CUDA/Triton extension it cannot load on a CPU-only
machine, and torch warns about an enum torchao registers. Both are harmless here and
would bury the exporter's own messages, so they are silenced for the import only.
"""

from __future__ import annotations

import logging


def import_quietly() -> None:
    names = ("torchao", "torchao.kernel.intmm", "torch.utils._pytree")
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        import torchao.quantization.pt2e  # noqa: F401
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


import_quietly()
