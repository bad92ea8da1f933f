"""torchmcu: PyTorch models to int8 programs for Arm Cortex-M and Ethos-U microcontrollers.

    prog = torchmcu.export(model, example_inputs, calibration=samples, board="corstone-300")
    prog.save("out/")                       # out/model.pte, out/report.json
    outputs = torchmcu.run_on_host("out/model.pte", inputs)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["export", "run_on_host", "ExportedModel", "__version__"]

if TYPE_CHECKING:
    from torchmcu.api import ExportedModel, export, run_on_host


def __getattr__(name: str) -> Any:
    # Lazy: importing torchmcu must not import torch (the CLI's `info`/`run` paths do not need it).
    if name in ("export", "run_on_host", "ExportedModel"):
        from torchmcu import api

        return getattr(api, name)
    raise AttributeError(name)
