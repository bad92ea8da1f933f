"""quantize(): export a model, annotate it with our quantizer, calibrate, convert."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sized
from typing import Any

import torch
import torch.fx
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from torchmcu import progress
from torchmcu.quantize.annotation import record_converted_nodes
from torchmcu.quantize.attention import decompose_attention
from torchmcu.quantize.control_flow import (
    convert_with_branches,
    detach_branch_weights,
    has_control_flow,
    quantize_branches,
)
from torchmcu.quantize.fold_bn import fold_batch_norm
from torchmcu.quantize.layout_idioms import fuse_channel_shuffle
from torchmcu.quantize.constants import fold_constants
from torchmcu.quantize.noops import remove_noops
from torchmcu.quantize.pool_values import single_output_pools
from torchmcu.quantize.quantizer import TorchmcuQuantizer
from torchmcu.quantize.recurrent import decompose_recurrent, simplify_recurrent


def check_example_inputs(example_inputs: Any) -> None:
    """TypeError unless example_inputs is a tuple (or list) of the model's inputs."""
    if not isinstance(example_inputs, (tuple, list)):
        one = isinstance(example_inputs, torch.Tensor)
        hint = " (wrap one tensor in a tuple: (x,))" if one else ""
        raise TypeError(
            f"example_inputs must be a tuple of the model's inputs, got "
            f"{type(example_inputs).__name__}{hint}"
        )


def export_model(model: torch.nn.Module, example_inputs: tuple[Any, ...]) -> torch.fx.GraphModule:
    """torch.export the model in eval mode into a GraphModule PT2E can prepare (a model in
    training mode is switched to eval mode with a warning), its constant subgraphs folded and
    its no-ops (dropout, alias, clone, contiguous, detach) removed."""
    check_example_inputs(example_inputs)
    if model.training:
        warnings.warn(
            "the model is in training mode; torchmcu exports it in eval mode (model.eval(): "
            "dropout off, BatchNorm with its running statistics)",
            stacklevel=3,
        )
    model.eval()
    with warnings.catch_warnings():
        # torch's own noise, nothing the user can act on: nn.GRU/LSTM re-assign their
        # _flat_weights while being traced, and run_decompositions uses a deprecated treespec
        # check of torch's own.
        warnings.filterwarnings("ignore", message=r"The tensor attributes .*_flat_weights")
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)`")
        exported = decompose_recurrent(torch.export.export(model, tuple(example_inputs)))
    # check_guards=False: the default inserts a _guards_fn call_module that breaks PT2E passes.
    module = simplify_recurrent(exported.module(check_guards=False))
    module = fold_constants(module)
    return single_output_pools(fuse_channel_shuffle(decompose_attention(remove_noops(module))))


def _shape(x: Any) -> tuple[int, ...] | None:
    shape = getattr(x, "shape", None)
    return None if shape is None else tuple(int(d) for d in shape)


def check_calibration_sample(
    index: int,
    sample: tuple[Any, ...] | list[Any],
    example_inputs: tuple[Any, ...],
    what: str = "quantize: calibration sample",
    *,
    values: bool = True,
) -> None:
    """Raise ValueError naming the sample and input when a calibration sample does not
    match example_inputs (count or shape), before it reaches the graph (whose error would
    name an internal node instead)."""
    if len(sample) != len(example_inputs):
        raise ValueError(
            f"{what} {index} has {len(sample)} input(s) but example_inputs "
            f"has {len(example_inputs)}; each sample must be a tuple shaped like example_inputs"
        )
    for j, (got, want) in enumerate(zip(sample, example_inputs)):
        want_shape, got_shape = _shape(want), _shape(got)
        if want_shape is None:
            continue  # a non-tensor example input: nothing to compare
        where = f"{what} {index}, input {j}"
        if got_shape != want_shape:
            got_text = (
                "no shape (not a tensor)" if got_shape is None else f"shape {list(got_shape)}"
            )
            raise ValueError(
                f"{where}: expected shape {list(want_shape)} (as example_inputs[{j}]) but got "
                f"{got_text}"
            )
        if values and isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor):
            _check_sample_values(where, j, got, want)


def _check_sample_values(where: str, j: int, got: torch.Tensor, want: torch.Tensor) -> None:
    """The sample's dtype is the example input's, and its float values are finite."""
    if got.dtype != want.dtype:
        name = str(want.dtype).removeprefix("torch.")
        raise ValueError(
            f"{where}: the arrays must be {name} (as example_inputs[{j}]), got "
            f"{str(got.dtype).removeprefix('torch.')}"
        )
    if got.is_floating_point():
        bad = int((~torch.isfinite(got)).sum())
        if bad:
            raise ValueError(
                f"{where}: {bad} of {got.numel()} values are NaN or infinite; calibration "
                "values must be finite"
            )


def quantize(
    model: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    calibration: Iterable[tuple[Any, ...]],
    *,
    per_channel: bool = True,
    observer: str = "minmax",
    quantizer: TorchmcuQuantizer | None = None,
) -> torch.fx.GraphModule:
    """Return the converted (q/dq around float ops) GraphModule of `model`.

    calibration: samples shaped like example_inputs - a list of tuples or any iterable of
    tuples (a bare tensor counts as a 1-tuple). It must yield at least one sample.
    The model is switched to eval mode (BatchNorm is folded with its running statistics).
    quantizer: a configured TorchmcuQuantizer (e.g. with parts kept in float32 by
    set_module_name/set_module_type/set_operator); it replaces per_channel/observer.
    """
    if quantizer is None:
        quantizer = TorchmcuQuantizer(per_channel=per_channel, observer=observer)
    # Our own fold first (torchao would fold too, but we want the record on the node).
    gm = fold_batch_norm(export_model(model, example_inputs))
    control_flow = has_control_flow(gm)  # torch.cond bodies are quantized separately
    if control_flow:
        detach_branch_weights(gm)
    prepared = prepare_pt2e(gm, quantizer)
    count = 0
    kept: list[tuple[Any, ...]] = []
    total = len(calibration) if isinstance(calibration, Sized) else None
    with torch.no_grad(), progress.task("calibrating", total, "samples") as shown:
        for sample in calibration:
            args = sample if isinstance(sample, (tuple, list)) else (sample,)
            check_calibration_sample(count, args, example_inputs)
            prepared(*args)
            count += 1
            shown.advance()
            if control_flow:
                kept.append(tuple(args))
    if count == 0:
        raise ValueError(
            "quantize: the calibration set is empty; pass at least one sample shaped like "
            "example_inputs (ideally a few hundred representative inputs)"
        )
    converted = convert_with_branches(prepared) if control_flow else convert_pt2e(prepared)
    if control_flow:
        quantize_branches(converted, quantizer, kept)
    record_converted_nodes(converted)
    return converted
