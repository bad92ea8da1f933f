"""The operator registry: one definition per operator, read by every stage.

    from torchmcu import ops
    ops.get("torchmcu::slice_copy.out").schema.A.step      # 4
    [o.key for o in ops.ops("control")]

Each module of torchmcu/ops/defs/ registers its definitions when imported; they are all loaded
here, by pkgutil, so a new operator is a new module with no list to extend. This package is the
bottom layer: it imports nothing but itself, torchmcu.pte, the stdlib and numpy (no torch), and
definitions never import a stage (tests/test_import_graph.py).
"""

from __future__ import annotations

import importlib
import pkgutil

from torchmcu.ops import defs
from torchmcu.ops.core import (
    REGISTRY,
    Annotate,
    Arg,
    Kernel,
    Npu,
    OpDef,
    Pattern,
    RegistryError,
    Schema,
    SchemaError,
)
from torchmcu.pte import program as pm

__all__ = [
    "Annotate",
    "Arg",
    "Kernel",
    "Npu",
    "OpDef",
    "Pattern",
    "RegistryError",
    "Schema",
    "SchemaError",
    "get",
    "of_operator",
    "ops",
    "patterns",
]


def _load_definitions() -> None:
    for info in sorted(pkgutil.iter_modules(defs.__path__), key=lambda m: m.name):
        importlib.import_module(f"{defs.__name__}.{info.name}")


_load_definitions()


def get(key: str) -> OpDef:
    """The definition of 'namespace::name.overload' (KeyError if there is none)."""
    return REGISTRY.get(key)


def of_operator(operator: pm.Operator) -> OpDef | None:
    """The definition of a program's operator entry (None: no registry operator, e.g. an
    ExecuTorch portable kernel we do not define)."""
    key = f"{operator.name}.{operator.overload}" if operator.overload else operator.name
    try:
        return REGISTRY.get(key)
    except KeyError:
        return None


def ops(family: str | None = None) -> list[OpDef]:
    """Every definition, or those of one family ("int8", "portable", "control"), in table order."""
    return REGISTRY.ops(family)


def patterns() -> list[Pattern]:
    """The aten patterns, in registration order."""
    return REGISTRY.patterns()
