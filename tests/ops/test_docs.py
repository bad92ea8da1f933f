"""docs/operators.md's per-operator sections are written from the definitions
(torchmcu/ops/docs.py): the checked-in copy is current, every operator has its section with
its schema's signature, and a stale copy or a broken page is named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from torchmcu import ops
from torchmcu.ops import docs

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_copy_is_current() -> None:
    assert not docs.stale(ROOT), f"{docs.DOCS} is stale: run `{docs.COMMAND}` and commit it"


def test_every_operator_has_its_section_and_signature() -> None:
    text = (ROOT / docs.DOCS).read_text()
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    for o in ops.ops():
        name = f"{o.schema.name}.{o.schema.overload}"
        assert any(name in h for h in headings), f"{o.key} has no section"
        args = str(o.schema)[str(o.schema).index("(") :].split(" -> ")[0]
        assert args in text, f"{o.key}: its signature is not in {docs.DOCS}"


def test_hand_written_prose_is_kept(tmp_path: Path) -> None:
    text = (ROOT / docs.DOCS).read_text()
    edited = text.replace(
        "## Conventions that apply to every operator",
        "## Conventions that apply to every operator\n\nA new paragraph.",
    )
    assert "A new paragraph." in docs.operators_md(edited)


def test_a_stale_copy_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / docs.DOCS
    page.parent.mkdir(parents=True)
    text = (ROOT / docs.DOCS).read_text()
    page.write_text(text.replace("- CPU only: no TOSA lowering.", "- Runs anywhere.", 1))
    assert docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"{docs.DOCS} is stale: run `{docs.COMMAND}`\n"
    assert docs.main(["--root", str(tmp_path)]) == 0
    assert page.read_text() == text


def test_missing_markers_are_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / docs.DOCS
    page.parent.mkdir(parents=True)
    page.write_text((ROOT / docs.DOCS).read_text().replace(docs.end_marker("portable"), ""))
    assert docs.main(["--check", "--root", str(tmp_path)]) == 2
    assert "portable fp32 operators" in capsys.readouterr().err
