"""`torchmcu report`: the per-operator table, the time chart and the memory lifetime chart of a
hand-built program checked against numbers worked out by hand; the page needs no network; and
a profiled run on QEMU whose per-operator counts add up to the whole inference minus the
reported executor/marker overhead. (No headless browser is installed here, so the page is
checked by parsing it rather than by a screenshot.)
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from torchmcu import htmlreport
from torchmcu.pte.program import (
    Allocation,
    Chain,
    ExecutionPlan,
    KernelCall,
    Operator,
    Program,
    ScalarType,
    Tensor,
)


def _program() -> Program:
    values = [
        Tensor(ScalarType.FLOAT, [1, 4], [0, 1], allocation=Allocation(1, 0)),  # 0 x, 16 B
        Tensor(ScalarType.CHAR, [1, 4], [0, 1], allocation=Allocation(1, 16)),  # 1 q, 4 B
        Tensor(ScalarType.INT, [1, 2], [0, 1], allocation=Allocation(1, 0)),  # 2 y, 8 B
    ]
    plan = ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[2],
        chains=[
            Chain(
                inputs=[0],
                outputs=[2],
                instructions=[KernelCall(0, [0, 1, 1]), KernelCall(1, [1, 2, 2])],
            )
        ],
        operators=[
            Operator("cortex_m::quantize_per_tensor", "out"),
            Operator("cortex_m::foo", "out"),
        ],
        non_const_buffer_sizes=[0, 32],
    )
    return Program(execution_plan=[plan], constants=[b""])


PROFILE = {
    "kernels": [
        [
            {"instruction": 0, "op": "cortex_m::quantize_per_tensor.out", "instructions": 100},
            {"instruction": 1, "op": "cortex_m::foo.out", "instructions": 300},
        ]
    ],
    "inference": [410],
    "executor": [10],
}


class _Page(HTMLParser):
    """Collects table rows by table id, SVG rects by svg id, and any external references."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[list[str]]] = {}
        self.rects: dict[str, list[dict[str, str]]] = {}
        self.external: list[str] = []
        self._table = self._svg = None
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "link", "img", "iframe") or "src" in a or "href" in a:
            self.external.append(tag)
        if tag == "table":
            self._table = a.get("id")
            self.rows.setdefault(self._table, [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "svg":
            self._svg = a.get("id")
            self.rects.setdefault(self._svg, [])
        elif tag == "rect" and self._svg is not None:
            self.rects[self._svg].append(a)

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.rows[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "svg":
            self._svg = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_collect_by_hand() -> None:
    data = htmlreport.collect(
        _program(), 1234, {"nodes": [{"instruction": 1, "node": "fc"}]}, PROFILE
    )
    assert [(r.instruction, r.arena_bytes, r.instructions, r.node) for r in data.rows] == [
        (0, 20, 100, ""),
        (1, 12, 300, "fc"),
    ]
    assert [(lt.value, lt.offset, lt.nbytes, lt.first, lt.last) for lt in data.lifetimes] == [
        (0, 0, 16, -1, 0),
        (1, 16, 4, 0, 1),
        (2, 0, 8, 1, 2),
    ]
    assert data.arena_bytes == 32 and data.inference == 410 and data.overhead == 10


def test_page_has_table_and_charts_and_no_network() -> None:
    data = htmlreport.collect(_program(), 1234, {}, PROFILE)
    page = _Page()
    page.feed(htmlreport.render(data))
    assert page.external == []
    ops = page.rows["ops"]
    assert [(r[0], r[1], r[4], r[5], r[6]) for r in ops] == [
        ("0", "quantize_per_tensor", "20", "100", "25.0%"),
        ("1", "foo", "12", "300", "75.0%"),
    ]
    bars = [r for r in page.rects["time-chart"] if r.get("class") == "bar"]
    assert float(bars[1]["width"]) == pytest.approx(3 * float(bars[0]["width"]), rel=1e-3)
    lifetimes = [r for r in page.rects["memory-chart"] if r.get("class") == "lifetime"]
    assert len(lifetimes) == 3
    # y grows downward: x (offset 0, 16 B) sits lowest and q (offset 16) right above it.
    x, q, y = lifetimes
    assert float(x["y"]) + float(x["height"]) == pytest.approx(float(y["y"]) + float(y["height"]))
    assert float(q["y"]) + float(q["height"]) == pytest.approx(float(x["y"]), abs=0.2)
    assert float(x["height"]) == pytest.approx(2 * float(y["height"]), rel=1e-3)
    # Lifetimes left to right: x (input .. 0), q (0 .. 1), y (1 .. output).
    assert float(x["x"]) < float(q["x"]) < float(y["x"])


@pytest.mark.skipif(
    shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
    reason="needs arm-none-eabi-gcc and qemu-system-arm",
)
def test_cli_report_with_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torchmcu
    from torchmcu.cli import main
    from torchmcu.examples import models

    model, example = models.build("small_cnn")
    exp = torchmcu.export(model, example, calibration=models.calibration("small_cnn", 4, seed=1))
    pte = exp.save(tmp_path)
    rc = main(["report", str(pte), "--profile", "--build-dir", str(tmp_path / "fw")])
    assert rc == 0
    out = capsys.readouterr().out
    m = re.search(
        r"inference ([\d,]+) instructions: kernels ([\d,]+), executor and markers ([\d,]+)", out
    )
    assert m, out
    inference, kernels, overhead = (int(g.replace(",", "")) for g in m.groups())
    assert inference == kernels + overhead and 0 < overhead < 200
    page = _Page()
    page.feed(pte.with_suffix(".html").read_text())
    assert page.external == []
    rows = page.rows["ops"]
    assert len(rows) == exp.report["instructions"]
    assert sum(int(r[5].replace(",", "")) for r in rows) == kernels
    assert len([r for r in page.rects["memory-chart"] if r.get("class") == "lifetime"]) > 3
