"""`torchmcu report`: the per-operator table, the time chart and the memory lifetime chart of a
hand-built program checked against numbers worked out by hand; the page needs no network; and
a profiled run on QEMU whose per-operator counts add up to the whole inference minus the
reported executor/marker overhead. (No headless browser is installed here, so the page is
checked by parsing it rather than by a screenshot.)
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from torchmcu import htmlreport
from torchmcu.pte import program as pm

# scripts/setup.sh installs these tools, so in CI a missing one is a failure, not a skip.


def _program() -> pm.Program:
    values = [
        pm.Tensor(pm.ScalarType.FLOAT, [1, 4], [0, 1], allocation=pm.Allocation(1, 0)),  # 0 x, 16 B
        pm.Tensor(pm.ScalarType.CHAR, [1, 4], [0, 1], allocation=pm.Allocation(1, 16)),  # 1 q, 4 B
        pm.Tensor(pm.ScalarType.INT, [1, 2], [0, 1], allocation=pm.Allocation(1, 0)),  # 2 y, 8 B
    ]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[2],
        chains=[
            pm.Chain(
                inputs=[0],
                outputs=[2],
                instructions=[pm.KernelCall(0, [0, 1, 1]), pm.KernelCall(1, [1, 2, 2])],
            )
        ],
        operators=[
            pm.Operator("cortex_m::quantize_per_tensor", "out"),
            pm.Operator("cortex_m::foo", "out"),
        ],
        non_const_buffer_sizes=[0, 32],
    )
    return pm.Program(execution_plan=[plan], constants=[b""])


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


@pytest.mark.needs("arm-gcc", "newlib", "qemu")
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


def _png_rgb(path: Path):
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into an array."""
    import struct
    import zlib

    import numpy as np

    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(raw):
        n, kind = struct.unpack(">I4s", raw[pos : pos + 8])
        body = raw[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    data = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * bpp)
    out = np.zeros((height, width * bpp), dtype=np.int32)
    prev = np.zeros(width * bpp, dtype=np.int32)
    for y in range(height):
        f, line = data[y, 0], data[y, 1:].astype(np.int32)
        cur = np.zeros_like(line)
        if f in (0, 2):
            cur = (line + (prev if f == 2 else 0)) & 255
        else:  # Sub, Average, Paeth depend on the left neighbour: byte by byte
            for i in range(len(line)):
                a = cur[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[i] = (line[i] + pred) & 255
        out[y], prev = cur, cur
    return out.reshape(height, width, bpp)[:, :, :3]


@pytest.mark.needs("chromium")
def test_headless_chromium_renders_table_and_charts(tmp_path: Path) -> None:
    import subprocess

    import numpy as np

    page = tmp_path / "report.html"
    page.write_text(htmlreport.render(htmlreport.collect(_program(), 1234, {}, PROFILE)))
    base = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1000,1400"]
    dom = subprocess.run(
        [*base, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert 'id="ops"' in dom.stdout and 'id="memory-chart"' in dom.stdout, dom.stderr[-2000:]
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*base, f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=False,
    )
    rgb = _png_rgb(shot)
    assert rgb.shape[:2] == (1400, 1000)

    def pixels(hex_color: str) -> int:
        want = [int(hex_color[i : i + 2], 16) for i in (1, 3, 5)]
        return int(np.all(rgb == want, axis=2).sum())

    # Drawn, not just present in the DOM: the memory chart's background and the two time bars
    # (first two palette colours, one per operator) cover real pixels.
    assert pixels("#f7f7f7") > 100_000
    assert pixels("#4e79a7") > 500 and pixels("#f28e2b") > 1_000
