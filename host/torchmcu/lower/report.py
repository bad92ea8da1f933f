"""What the lowering did, for the export report and for humans."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class NodeReport:
    """One kernel call: the op chosen and where in the user's model it came from."""

    instruction: int
    op: str
    node: str
    target: str
    module: str
    source: str


@dataclass
class LoweringReport:
    nodes: list[NodeReport] = field(default_factory=list)
    arena_bytes: int = 0
    arena_lower_bound: int = 0
    constant_bytes: int = 0
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    # every node run in float32: {"node", "target", "reason", "module", "source"}; reason is
    # torchmcu.lower.float_nodes' REQUESTED, NO_INT8_KERNEL (the float fallback) or
    # IN_FLOAT_REGION
    float_ops: list[dict[str, str]] = field(default_factory=list)

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "arena_bytes": self.arena_bytes,
            "arena_lower_bound": self.arena_lower_bound,
            "constant_bytes": self.constant_bytes,
            "instructions": len(self.nodes),
            "op_counts": self.op_counts(),
            "inputs": self.inputs,
            "outputs": self.outputs,
            "nodes": [asdict(n) for n in self.nodes],
            "float_ops": self.float_ops,
        }

    def summary(self) -> str:
        head = (
            f"{len(self.nodes)} kernel calls, arena {self.arena_bytes} B "
            f"(lower bound {self.arena_lower_bound} B), constants {self.constant_bytes} B"
        )
        lines = [head]
        for n in self.nodes:
            where = n.module or n.source
            lines.append(f"  [{n.instruction:3d}] {n.op:<40s} {n.node:<28s} {where}")
        lines += float_op_lines(self.float_ops)
        return "\n".join(lines)


def float_op_lines(float_ops: list[dict[str, str]]) -> list[str]:
    """The float32 nodes of a report, one line each (none: no line)."""
    if not float_ops:
        return []
    lines = [f"{len(float_ops)} node(s) run in float32:"]
    for f in float_ops:
        where = f["module"] or f["source"]
        lines.append(f"  {f['node']:<28s} {f['target']:<28s} {f['reason']}" + (f"; {where}" if where else ""))
    return lines
