"""Where a graph node came from: the user's source line, the nn.Module, the op's name.

Below both the quantizer and the lowering (it imports only torch.fx), so either can name the
node a message is about."""

from __future__ import annotations

import re

import torch.fx

# Frames from these packages are library internals, not the user's model.
_LIBRARY_MARKERS = ("/torch/", "/torchao/", "<eval_with_key>", "/site-packages/")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n?(.*)')


def user_source_line(node: torch.fx.Node) -> str:
    """'file:line (function): code' of the innermost user frame that produced `node`, or ''."""
    trace = node.meta.get("stack_trace") or ""
    frames = []
    lines = trace.splitlines()
    for i, line in enumerate(lines):
        m = _FRAME.search(line.strip())
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            frames.append((m.group(1), int(m.group(2)), m.group(3), code))
    user = [f for f in frames if not any(k in f[0] for k in _LIBRARY_MARKERS)]
    chosen = user[-1] if user else (frames[-1] if frames else None)
    if chosen is None:
        return ""
    path, line_no, func, code = chosen
    return f"{path}:{line_no} ({func}): {code}"


def module_of(node: torch.fx.Node) -> str:
    """The nn.Module path and class that produced `node` ('' when unknown)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, cls = list(stack.values())[-1]
    if not path:
        return ""  # the root module: the source line says more
    cls_name = cls if isinstance(cls, str) else getattr(cls, "__name__", str(cls))
    return f"{path} ({cls_name.rsplit('.', 1)[-1]})" if path else cls_name.rsplit(".", 1)[-1]


def describe_node(node: torch.fx.Node) -> str:
    """Node name, op and source location for error messages."""
    where = user_source_line(node)
    mod = module_of(node)
    parts = [f"node '{node.name}' ({op_name(node)})"]
    if mod:
        parts.append(f"in module {mod}")
    if where:
        parts.append(f"at {where}")
    return " ".join(parts)


def op_name(node: torch.fx.Node) -> str:
    """'aten.cumsum' style name of a node's target."""
    name = (
        str(node.target)
        if isinstance(node.target, torch._ops.OpOverload)
        else getattr(node.target, "__name__", str(node.target))
    )
    return name.removesuffix(".default")
