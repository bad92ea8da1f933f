"""`torchmcu report`: one self-contained HTML page (no scripts, no network) and a terminal
summary of an exported program: a per-operator table (what export recorded, plus the
instructions or cycles each kernel call took and the arena bytes it touched when a profile is
given), a bar chart of where the time goes, and the memory plan drawn as a lifetime chart
(arena offset against instruction).

The profile is the runner's (torchmcu.device.profile: `torchmcu run --profile` writes it as
profile.json), or the older per-kernel form of torchmcu.device.icount.profile_instructions.

Everything about memory is read from the .pte itself (planned tensors, their offsets and the
instructions that use them), so the page shows what the device will do, not what the planner
meant to do.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from torchmcu.pte.program import KernelCall, Program, Tensor, TensorList

_PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
]


@dataclass
class OpRow:
    instruction: int
    op: str
    node: str = ""
    where: str = ""
    arena_bytes: int = 0  # distinct planned tensors the call reads or writes
    instructions: int | None = None  # from a profile (instructions or cycles: ReportData.unit)
    arena_measured: int | None = None  # arena bytes the call touched, measured (QEMU profile)


@dataclass
class Lifetime:
    value: int
    offset: int
    nbytes: int
    first: int  # instruction index of first use (-1: a method input)
    last: int  # last use (number of instructions: a method output)


@dataclass
class ReportData:
    rows: list[OpRow]
    lifetimes: list[Lifetime]
    arena_bytes: int
    num_instructions: int
    program_bytes: int
    export: dict[str, Any] = field(default_factory=dict)
    inference: int | None = None  # whole-inference instructions from the profile
    overhead: int | None = None  # inference - sum of kernel calls (executor and markers)
    unit: str = "instructions"  # of the profile's counts: "instructions" or "cycles"
    mark: int | None = None  # one profiler mark's own cost (each count includes one)


def _tensor_args(plan, args: list[int]) -> set[int]:
    """Planned tensor value indices among a call's arguments (tensor lists expanded)."""
    out: set[int] = set()
    for a in args:
        v = plan.values[a]
        if isinstance(v, TensorList):
            out |= _tensor_args(plan, list(v.items))
        elif isinstance(v, Tensor) and v.allocation is not None:
            out.add(a)
    return out


def collect(
    program: Program,
    pte_bytes: int,
    export_report: dict[str, Any] | None = None,
    profile: dict[str, Any] | None = None,
) -> ReportData:
    """The report's contents from a Program, export's report.json and an optional profile
    (the runner's, torchmcu.device.profile, or icount.profile_instructions'); its first
    run is shown."""
    plan = program.execution_plan[0]
    instructions = plan.chains[0].instructions if plan.chains else []
    nodes = {n["instruction"]: n for n in (export_report or {}).get("nodes", [])}
    timing = _timing(profile)
    counts, measured = timing["counts"], timing["measured"]
    rows: list[OpRow] = []
    uses: dict[int, list[int]] = {}
    for i, ins in enumerate(instructions):
        if not isinstance(ins, KernelCall):
            continue
        op = plan.operators[ins.op_index]
        tensors = _tensor_args(plan, list(ins.args))
        for t in tensors:
            uses.setdefault(t, []).append(i)
        n = nodes.get(i, {})
        rows.append(
            OpRow(
                instruction=i,
                op=f"{op.name}.{op.overload}" if op.overload else op.name,
                node=str(n.get("node", "")),
                where=str(n.get("module") or n.get("source") or ""),
                arena_bytes=sum(plan.values[t].nbytes for t in tensors),
                instructions=counts.get(i),
                arena_measured=measured.get(i),
            )
        )
    end = len(instructions)
    lifetimes = []
    for idx, v in enumerate(plan.values):
        if not isinstance(v, Tensor) or v.allocation is None or v.nbytes == 0:
            continue
        used = uses.get(idx, [])
        first = -1 if idx in plan.inputs else (min(used) if used else 0)
        last = end if idx in plan.outputs else (max(used) if used else first)
        lifetimes.append(Lifetime(idx, v.allocation.offset, v.nbytes, first, last))
    arena = plan.non_const_buffer_sizes[1] if len(plan.non_const_buffer_sizes) > 1 else 0
    return ReportData(
        rows,
        lifetimes,
        int(arena),
        end,
        pte_bytes,
        dict(export_report or {}),
        timing["inference"],
        timing["overhead"],
        timing["unit"],
        timing["mark"],
    )


def _timing(profile: dict[str, Any] | None) -> dict[str, Any]:
    """Counts, measured arena bytes, whole inference and overheads of a profile's first run."""
    out: dict[str, Any] = {
        "counts": {}, "measured": {}, "inference": None, "overhead": None,
        "unit": "instructions", "mark": None,
    }  # fmt: skip
    if not profile:
        return out
    if profile.get("runs"):  # the runner's profile (profile.json)
        run = profile["runs"][0]
        ops = run["operators"]
        out["counts"] = {o["instruction"]: int(o["count"]) for o in ops if o["count"] is not None}
        out["measured"] = {
            o["instruction"]: int(o["arena_touched"])
            for o in ops
            if o.get("arena_touched") is not None
        }
        out["inference"], out["overhead"] = run.get("inference"), run.get("unattributed")
        out["unit"], out["mark"] = profile.get("unit", "instructions"), run.get("overhead")
    elif profile.get("kernels"):  # icount.profile_instructions
        out["counts"] = {k["instruction"]: int(k["instructions"]) for k in profile["kernels"][0]}
        if profile.get("inference"):
            out["inference"] = int(profile["inference"][0])
            out["overhead"] = int(profile["executor"][0])
        if profile.get("overhead"):
            out["mark"] = int(profile["overhead"][0])
    return out


# --- SVG charts -------------------------------------------------------------------------------


def _color(op: str, ops: list[str]) -> str:
    return _PALETTE[ops.index(op) % len(_PALETTE)]


def _short(op: str) -> str:
    return op.removeprefix("cortex_m::").removesuffix(".out")


def time_chart(data: ReportData) -> str:
    """Horizontal bars, one per kernel call, length = its count (empty without a profile)."""
    rows = [r for r in data.rows if r.instructions is not None]
    if not rows:
        return (
            '<p class="note">No profile given: build with profile=True and pass it to see time.</p>'
        )
    ops = sorted({r.op for r in data.rows})
    top = max(r.instructions or 0 for r in rows) or 1
    bar_h, label_w, width = 16, 260, 900
    h = bar_h * len(rows) + 30
    parts = [
        f'<svg id="time-chart" width="{width}" height="{h}" role="img" '
        + f'aria-label="{data.unit} per kernel call">'
    ]
    for k, r in enumerate(rows):
        y = 10 + k * bar_h
        w = (width - label_w - 110) * (r.instructions or 0) / top
        label = html.escape(f"[{r.instruction}] {_short(r.op)}")
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end" font-size="11">{label}</text>'
        )
        parts.append(
            f'<rect class="bar" x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{bar_h - 4}" '
            f'fill="{_color(r.op, ops)}"><title>{label}: {r.instructions:,}</title></rect>'
        )
        parts.append(
            f'<text x="{label_w + w + 4:.1f}" y="{y + 12}" font-size="11">{r.instructions:,}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def lifetime_chart(data: ReportData) -> str:
    """Rectangles: x = instructions the tensor is live for, y = its bytes in the arena."""
    if not data.lifetimes or data.arena_bytes == 0:
        return '<p class="note">No planned tensors.</p>'
    width, height, left, bottom = 900, 420, 70, 30
    plot_w, plot_h = width - left - 10, height - bottom - 10
    span = data.num_instructions + 1  # column 0: inputs (-1), last column: outputs
    col = plot_w / (span + 1)
    scale = plot_h / data.arena_bytes
    parts = [
        f'<svg id="memory-chart" width="{width}" height="{height}" role="img" '
        + 'aria-label="memory plan lifetimes">',
        f'<rect x="{left}" y="10" width="{plot_w}" height="{plot_h}" fill="#f7f7f7" stroke="#999"/>',
    ]
    for k, lt in enumerate(data.lifetimes):
        x = left + (lt.first + 1) * col
        w = max((lt.last - lt.first + 1) * col, 2.0)
        y = 10 + plot_h - (lt.offset + lt.nbytes) * scale
        h = max(lt.nbytes * scale, 1.0)
        tip = html.escape(
            f"value {lt.value}: {lt.nbytes:,} B at offset {lt.offset:,}, "
            f"instructions {lt.first}..{lt.last}"
        )
        parts.append(
            f'<rect class="lifetime" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
            f'fill="{_PALETTE[k % len(_PALETTE)]}" fill-opacity="0.75" stroke="#333" '
            f'stroke-width="0.5"><title>{tip}</title></rect>'
        )
    for frac in (0.0, 0.5, 1.0):
        y = 10 + plot_h - frac * plot_h
        parts.append(
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="11">'
            f"{int(frac * data.arena_bytes):,}</text>"
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle" font-size="11">'
        f"instruction (inputs left, outputs right); arena offset in bytes upward</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


# --- page and summary -------------------------------------------------------------------------

_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #eee; }
.note { color: #666; }
"""


def summary(data: ReportData) -> str:
    """Plain-text summary for the terminal."""
    lines = [
        f"program {data.program_bytes:,} bytes, {len(data.rows)} kernel calls, "
        + f"arena {data.arena_bytes:,} bytes ({len(data.lifetimes)} planned tensors)"
    ]
    if data.inference is not None:
        kernels = sum(r.instructions or 0 for r in data.rows)
        lines.append(
            f"inference {data.inference:,} {data.unit}: kernels {kernels:,}, "
            f"executor and markers {data.overhead:,}"
        )
        if data.mark is not None:
            lines.append(f"profiler overhead {data.mark:,} {data.unit} per mark (one per call)")
        by_op: dict[str, int] = {}
        for r in data.rows:
            by_op[r.op] = by_op.get(r.op, 0) + (r.instructions or 0)
        for op, n in sorted(by_op.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {_short(op):<32s} {n:>12,}  {100.0 * n / max(kernels, 1):5.1f}%")
    return "\n".join(lines)


def render(data: ReportData, title: str = "torchmcu report") -> str:
    """The HTML page (inline CSS and SVG only)."""
    total = sum(r.instructions or 0 for r in data.rows)
    head = ["#", "operator", "node", "source", "arena bytes planned", data.unit, "share"]
    measured = any(r.arena_measured is not None for r in data.rows)
    if measured:
        head.append("arena bytes touched (measured)")
    rows = []
    for r in data.rows:
        n = "" if r.instructions is None else f"{r.instructions:,}"
        share = (
            "" if r.instructions is None or not total else f"{100.0 * r.instructions / total:.1f}%"
        )
        cells = [
            f'<td class="num">{r.instruction}</td>',
            f"<td>{html.escape(_short(r.op))}</td>",
            f"<td>{html.escape(r.node)}</td>",
            f"<td>{html.escape(r.where)}</td>",
            f'<td class="num">{r.arena_bytes:,}</td>',
            f'<td class="num">{n}</td>',
            f'<td class="num">{share}</td>',
        ]
        if measured:
            touched = "" if r.arena_measured is None else f"{r.arena_measured:,}"
            cells.append(f'<td class="num">{touched}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    facts = [
        ("board", data.export.get("board", "")),
        ("program bytes", f"{data.program_bytes:,}"),
        ("constant bytes", f"{data.export.get('constant_bytes', 0):,}"),
        ("arena bytes", f"{data.arena_bytes:,}"),
        ("arena lower bound", f"{data.export.get('arena_lower_bound', 0):,}"),
        ("kernel calls", str(len(data.rows))),
    ]
    if data.inference is not None:
        facts += [
            (f"inference {data.unit}", f"{data.inference:,}"),
            (f"kernel {data.unit}", f"{total:,}"),
            ("executor and profiler marks", f"{data.overhead:,}"),
        ]
        if data.mark is not None:
            facts.append(("profiler overhead per mark", f"{data.mark:,}"))
    fact_rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in facts
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<table id="facts">{fact_rows}</table>'
        "<h2>Operators</h2>"
        '<table id="ops"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>"
        "<tbody>" + "".join(rows) + "</tbody></table>"
        "<h2>Where the time goes</h2>"
        + time_chart(data)
        + "<h2>Memory plan</h2>"
        + lifetime_chart(data)
        + f"<pre>{html.escape(summary(data))}</pre></body></html>\n"
    )
