"""Which parts of a model the user keeps in float32 (PT2E-style per-module/operator settings).

A node is kept in float when the module it was traced from has a given name (or is inside it),
is an instance of a given type, or when its aten operator is listed. The module is read from
``node.meta["nn_module_stack"]``, which torch.export records for every call_function node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx


def _check_config(config: Any, what: str) -> None:
    if config is not None:
        raise ValueError(
            f"{what}: only None (keep in float32) is supported as a config; int8 is the default "
            "for everything not listed"
        )


def _type_name(t: Any) -> str:
    if isinstance(t, str):
        return t
    return f"{t.__module__}.{t.__qualname__}"


@dataclass
class FloatConfig:
    """Module names, module types and aten operators left in float32."""

    module_names: list[str] = field(default_factory=list)
    module_types: list[Any] = field(default_factory=list)
    operators: list[Any] = field(default_factory=list)

    def add_module_name(self, name: str, config: Any) -> None:
        _check_config(config, f"set_module_name({name!r})")
        self.module_names.append(name)

    def add_module_type(self, module_type: Any, config: Any) -> None:
        _check_config(config, f"set_module_type({_type_name(module_type)})")
        self.module_types.append(module_type)

    def add_operator(self, op: Any, config: Any) -> None:
        _check_config(config, f"set_operator({op})")
        self.operators.append(op)

    def __bool__(self) -> bool:
        return bool(self.module_names or self.module_types or self.operators)

    def keeps_float(self, node: torch.fx.Node) -> bool:
        """True when `node` must not be quantized."""
        if node.op != "call_function":
            return False
        if node.target in self.operators or getattr(node.target, "overloadpacket", None) in self.operators:
            return True
        stack = node.meta.get("nn_module_stack") or {}
        type_names = {_type_name(t) for t in self.module_types}
        for path, module_type in stack.values():
            fqn = _normalise_path(str(path))
            for name in self.module_names:
                if fqn == name or fqn.startswith(name + "."):
                    return True
            if _type_name(module_type) in type_names:
                return True
        return False


def _normalise_path(path: str) -> str:
    """'L['self'].head.0' or 'head.0' -> 'head.0' (torch.export spells the root differently
    across versions)."""
    for prefix in ("L['self'].", "L__self__."):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path
