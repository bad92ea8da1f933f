"""What the NPU partitioner decided, as report data and as text for `torchmcu export --explain`."""

from __future__ import annotations

from typing import Any

from torchmcu.npu.partition import NpuPartition, Placement


def _where(p: Placement) -> str:
    if p.where == "npu":
        return f"NPU subgraph {p.subgraph}"
    if p.where == "float":
        return "float (CPU)"
    return "CPU kernel"


def npu_report(part: NpuPartition) -> dict[str, Any]:
    """Placement per node, NPU share of operators and MACs, Vela's estimates and the target."""
    from torchmcu.npu.vela import combine_estimates

    t = part.target
    ops_total = sum(len(p.instructions) for p in part.placements)
    ops_npu = sum(len(p.instructions) for p in part.placements if p.where == "npu")
    macs_total = sum(p.macs for p in part.placements)
    macs_npu = sum(p.macs for p in part.placements if p.where == "npu")
    delegates = []
    for s in part.subgraphs:
        delegates.append(
            {
                "index": s.index,
                "kernel_calls": len(s.instructions),
                "inputs": len(s.inputs),
                "outputs": len(s.outputs),
                "scratch_bytes": int(s.vela.scratch_size),  # planned in the arena
                # U65 Dedicated_Sram: the NPU's own SRAM the platform binds (not in the arena)
                "fast_scratch_bytes": int(getattr(s.vela, "fast_scratch_size", 0)),
                "blob_bytes": len(s.vela.blob),
                "command_stream_bytes": len(s.vela.command_stream),
                "weight_bytes": len(s.vela.weights),
                "estimate": dict(s.vela.estimate),
            }
        )
    return {
        "target": {
            "accelerator": t.accelerator,
            "family": t.family,
            "macs": t.macs,
            "system_config": t.system_config,
            "memory_mode": t.memory_mode,
            "config_ini": str(t.config_ini),
            "board": t.board,
        },
        "placement": [p.to_dict() for p in part.placements],
        "operators": {
            "total": ops_total,
            "npu": ops_npu,
            "fraction": ops_npu / ops_total if ops_total else 0.0,
        },
        "macs": {
            "total": macs_total,
            "npu": macs_npu,
            "fraction": macs_npu / macs_total if macs_total else 0.0,
        },
        "delegates": delegates,
        "estimate": combine_estimates(s.vela.estimate for s in part.subgraphs),
    }


def explain(part: NpuPartition) -> str:
    """One line per node: where it runs and why, then the totals."""
    rep = npu_report(part)
    t = rep["target"]
    lines = [f"NPU target {t['accelerator']} ({t['system_config']}, {t['memory_mode']})"]
    width = max([len(p.node) for p in part.placements] + [4])
    for p in part.placements:
        ops = ", ".join(o.removeprefix("cortex_m::") for o in p.ops) or "-"
        lines.append(f"  {p.node:<{width}}  {_where(p):<16}  {ops}: {p.reason}")
    o, m = rep["operators"], rep["macs"]
    lines.append(
        f"NPU: {o['npu']}/{o['total']} operators ({o['fraction']:.1%}), "
        f"{m['npu']:,}/{m['total']:,} MACs ({m['fraction']:.1%}), {len(part.subgraphs)} delegate(s)"
    )
    est = rep["estimate"]
    if "cycles_total" in est:
        ips = est.get("inferences_per_second")
        lines.append(
            f"Vela estimate: {int(est['cycles_total']):,} cycles"
            + (f" (NPU {int(est['cycles_npu']):,})" if "cycles_npu" in est else "")
            + (f", {float(ips):,.1f} inferences/s" if ips else "")
            + (f", SRAM {int(est['sram_bytes']):,} B" if "sram_bytes" in est else "")
            + (
                f", off-chip flash {int(est['off_chip_flash_bytes']):,} B"
                if "off_chip_flash_bytes" in est
                else ""
            )
        )
    return "\n".join(lines)
