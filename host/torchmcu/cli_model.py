"""The model a `torchmcu export MODEL` names: load FILE.py:FACTORY or MODULE:FACTORY, call the
factory and check what it returned, find its calibration samples.

Every failure is a CliError naming the spec, the factory and (for an exception in the user's
code) the file and line it came from, never a traceback.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from torchmcu.cli_errors import CliError

_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@dataclass
class LoadedModel:
    spec: str
    module: ModuleType
    factory_name: str
    model: Any  # a torch.nn.Module
    example_inputs: tuple[Any, ...]


def _where(exc: BaseException) -> str:
    """' (at FILE:LINE)' of the innermost frame of the traceback, or ''."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _raised(what: str, exc: Exception) -> CliError:
    return CliError(f"{what} raised {type(exc).__name__}: {exc}{_where(exc)}")


def _describe(value: Any) -> str:
    """A short description of a returned value for error messages."""
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} ({', '.join(type(v).__name__ for v in value)})"
    name = type(value).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def _import_file(target: str) -> ModuleType:
    path = Path(target)
    if not path.is_file():
        raise CliError(f"model file {target} does not exist")
    # As Python does for a script: the file's folder is on sys.path, so the model file can
    # import the modules beside it.
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    if module_spec is None or module_spec.loader is None:
        raise CliError(f"model file {target} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[path.stem] = module
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(path.stem, None)
        raise CliError(f"model file {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        sys.modules.pop(path.stem, None)
        raise _raised(f"loading model file {target}", e) from None
    return module


def _import_module(target: str, spec: str) -> ModuleType:
    if Path(target).is_file() or not _MODULE_NAME.fullmatch(target):
        raise CliError(
            f"model spec {spec!r}: {target} is neither a .py file nor a module name (MODEL is "
            "FILE.py:FUNCTION or MODULE:FUNCTION; a model file must end in .py)"
        )
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        raise CliError(f"model spec {spec!r}: no module named {e.name!r}") from None
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        raise _raised(f"importing {target}", e) from None


def load_factory(spec: str) -> tuple[ModuleType, str, Callable[..., Any]]:
    """(module, factory name, factory) of 'path/to/file.py:name' or 'package.module:name'."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise CliError(f"model spec {spec!r} must look like FILE.py:FUNCTION or MODULE:FUNCTION")
    module = _import_file(target) if target.endswith(".py") else _import_module(target, spec)
    if not hasattr(module, attr):
        public = [n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n])]
        close = difflib.get_close_matches(attr, public, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise CliError(f"{target} has no {attr!r}{hint}")
    factory = getattr(module, attr)
    if not callable(factory):
        raise CliError(
            f"{spec}: {attr} is {_describe(factory)}, not a function returning "
            "(model, example_inputs)"
        )
    return module, attr, factory


def load_model(spec: str) -> LoadedModel:
    """Call the factory of `spec` and check it returned (nn.Module, tuple of inputs)."""
    import torch

    from torchmcu.quantize.api import check_example_inputs

    module, name, factory = load_factory(spec)
    try:
        made = factory()
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        raise _raised(f"{spec}: {name}()", e) from None
    wanted = "it must return (model, example_inputs): a torch.nn.Module and a tuple of inputs"
    if not (isinstance(made, tuple) and len(made) == 2):
        raise CliError(f"{spec}: {name}() returned {_describe(made)}; {wanted}")
    model, example_inputs = made
    if not isinstance(model, torch.nn.Module):
        raise CliError(f"{spec}: {name}() returned {_describe(made)}; {wanted}")
    try:
        check_example_inputs(example_inputs)
    except TypeError as e:
        raise CliError(f"{spec}: {name}() returned {_describe(made)}: {e}") from None
    return LoadedModel(spec, module, name, model, tuple(example_inputs))


def calibration_samples(loaded: LoadedModel) -> list[tuple[Any, ...]] | None:
    """The samples of a `calibration_samples()` beside the factory, or None without one.

    A module with several factories may define `calibration_samples(name)`: it then gets the
    factory's name (torchmcu.examples.models does this for every example model)."""
    fn = getattr(loaded.module, "calibration_samples", None)
    if fn is None:
        return None
    where = f"{loaded.spec}: calibration_samples()"
    try:
        takes_name = bool(inspect.signature(fn).parameters)
        samples = fn(loaded.factory_name) if takes_name else fn()
        samples = [tuple(s) if isinstance(s, (tuple, list)) else (s,) for s in samples]
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        raise _raised(where, e) from None
    return samples
