"""quantize(): export a model, annotate it with our quantizer, calibrate, convert."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.fx
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from torchmcu.quantize.fold_bn import fold_batch_norm
from torchmcu.quantize.quantizer import TorchmcuQuantizer


def export_model(model: torch.nn.Module, example_inputs: tuple[Any, ...]) -> torch.fx.GraphModule:
    """torch.export the model in eval mode into a GraphModule PT2E can prepare."""
    model.eval()
    exported = torch.export.export(model, tuple(example_inputs))
    # check_guards=False: the default inserts a _guards_fn call_module that breaks PT2E passes.
    return exported.module(check_guards=False)


def quantize(
    model: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    calibration: Iterable[tuple[Any, ...]],
    *,
    per_channel: bool = True,
    observer: str = "minmax",
) -> torch.fx.GraphModule:
    """Return the converted (q/dq around float ops) GraphModule of `model`.

    calibration: samples shaped like example_inputs - a list of tuples or any iterable of
    tuples (a bare tensor counts as a 1-tuple). It must yield at least one sample.
    The model is switched to eval mode (BatchNorm is folded with its running statistics).
    """
    quantizer = TorchmcuQuantizer(per_channel=per_channel, observer=observer)
    # Our own fold first (torchao would fold too, but we want the record on the node).
    gm = fold_batch_norm(export_model(model, example_inputs))
    prepared = prepare_pt2e(gm, quantizer)
    count = 0
    with torch.no_grad():
        for sample in calibration:
            args = sample if isinstance(sample, (tuple, list)) else (sample,)
            prepared(*args)
            count += 1
    if count == 0:
        raise ValueError(
            "quantize: the calibration set is empty; pass at least one sample shaped like "
            "example_inputs (ideally a few hundred representative inputs)"
        )
    return convert_pt2e(prepared)
