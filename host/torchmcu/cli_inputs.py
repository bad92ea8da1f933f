"""The .npz files of the command line: --inputs (run, build), --calibration and --bundle-inputs
(export). Each array is one model input with a leading sample axis; the arrays are taken in
the order of their names.

Every file is checked before any work: an .npz (not an .npy renamed), numeric arrays with a
sample axis, the same number of samples (at least one) in each. Inputs for a program are then
checked as strictly on the way to a board as the host runtime checks them (native.check_inputs):
count, dtype and shape, never cast or cut.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from torchmcu.cli_errors import CliError

Sample = tuple[np.ndarray, ...]


def load_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz by name (sorted), each checked to be numeric with a sample axis,
    all with the same number of samples, at least one."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        if isinstance(e, FileNotFoundError):
            raise CliError(f"{path} does not exist") from None
        raise CliError(f"{path}: not an .npz file of arrays ({e})") from None
    if isinstance(loaded, np.ndarray):
        raise CliError(
            f"{path} is an .npy file (one bare array), not an .npz: save the inputs with "
            "np.savez(path, x=array), one array per model input, samples on the leading axis"
        )
    try:
        with loaded as data:
            arrays = {k: data[k] for k in sorted(data.files)}
    except (ValueError, OSError, zipfile.BadZipFile) as e:
        raise CliError(f"{path}: cannot read its arrays ({e})") from None
    if not arrays:
        raise CliError(f"{path} holds no arrays")
    for name, a in arrays.items():
        if a.dtype.kind not in "biuf":
            raise CliError(f"{path}: array {name!r} has dtype {a.dtype}; inputs must be numbers")
        if a.ndim == 0:
            raise CliError(
                f"{path}: array {name!r} is 0-d (a scalar); each array needs a leading sample axis"
            )
    counts = {name: a.shape[0] for name, a in arrays.items()}
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"{k}: {n}" for k, n in counts.items())
        raise CliError(
            f"{path}: all arrays need the same number of samples (leading axis); got {shown}"
        )
    if next(iter(counts.values())) == 0:
        raise CliError(f"{path} holds 0 samples (its arrays have an empty leading axis)")
    return arrays


def samples_of(arrays: dict[str, np.ndarray]) -> list[Sample]:
    """One tuple per sample (index on the leading axis), one array per input."""
    values = list(arrays.values())
    return [tuple(a[i] for a in values) for i in range(values[0].shape[0])]


def program_samples(path: str, info: dict[str, Any]) -> list[list[np.ndarray]]:
    """Every sample of an --inputs .npz, checked against the program's inputs (info:
    native.program_info) exactly as the host runtime checks them."""
    from torchmcu.native import NativeError, check_inputs

    arrays = load_npz(path)
    metas = info["inputs"]
    if len(arrays) != len(metas):
        raise CliError(
            f"{path} holds {len(arrays)} array(s) ({', '.join(arrays)}) but the program takes "
            f"{len(metas)} input(s): give one array per input"
        )
    samples = [list(s) for s in samples_of(arrays)]
    for k, sample in enumerate(samples):
        try:
            check_inputs(metas, sample)
        except NativeError as e:
            raise CliError(
                f"{path} sample {k}: {e.message} (arrays are not converted: save them with the "
                "program's dtype and shape, samples on the leading axis)"
            ) from None
    return samples


def check_against_examples(path: str, samples: Sequence[Sample], example_inputs: Any) -> None:
    """Count and shape of --bundle-inputs samples against the model's example inputs."""
    import torch

    from torchmcu.quantize.api import check_calibration_sample

    for k, sample in enumerate(samples):
        try:
            check_calibration_sample(
                k,
                [torch.from_numpy(np.ascontiguousarray(x)) for x in sample],
                example_inputs,
                what=f"{path} sample",
                values=False,  # dtypes: the bundle converts float samples of an int8_io program
            )
        except ValueError as e:
            raise CliError(str(e)) from None


def calibration_samples(
    path: str, arrays: dict[str, np.ndarray], example_inputs: Sequence[Any]
) -> tuple[list[Any], list[str]]:
    """(calibration samples as tensor tuples, notes) from the arrays of a --calibration .npz
    (load_npz), samples on the leading axis without the batch axis (sample i is a[i][None]).

    float64 arrays (numpy's default) for float32 example inputs are converted, with a note."""
    import torch

    arrays = dict(arrays)
    notes = []
    for j, (name, a) in enumerate(arrays.items()):
        want = example_inputs[j] if j < len(example_inputs) else None
        if a.dtype == np.float64 and getattr(want, "dtype", None) == torch.float32:
            arrays[name] = a.astype(np.float32)
            notes.append(f"{path}: array {name!r} is float64; converted to float32 (as the input)")
    samples = [
        tuple(torch.from_numpy(np.ascontiguousarray(x)).unsqueeze(0) for x in s)
        for s in samples_of(arrays)
    ]
    return samples, notes
