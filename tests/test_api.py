"""The Python API: mineru_cli.parse() yields typed records, with the CLI's journal semantics."""

from __future__ import annotations

import shutil

import pytest
from helpers import EXAMPLES, read_journal

import mineru_cli
from mineru_cli.core import PageRecord, SetupError, Status

pytestmark = pytest.mark.e2e  # runs the real CLI / worker pool on real pages (make test-fast skips it)


@pytest.fixture()
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    shutil.copy(EXAMPLES / "prose.png", d / "prose.png")
    shutil.copy(EXAMPLES / "report.pdf", d / "report.pdf")
    (d / "broken.pdf").write_bytes(b"%PDF-1.4\n garbage")
    return d


def test_parse_without_out_yields_records_and_writes_nothing(docs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = list(mineru_cli.parse(docs, engine="ocr", cache=False))
    assert all(isinstance(r, PageRecord) for r in got)
    by_id = {r.id: r for r in got}
    assert sorted(by_id) == ["broken.pdf#0", "prose.png#0", "report.pdf#0", "report.pdf#1"]
    assert by_id["broken.pdf#0"].status is Status.FAILED and by_id["broken.pdf#0"].error.kind == "corrupt"
    prose = by_id["prose.png#0"]
    assert prose.ok and prose.blocks and prose.blocks[0].type == "title" and "#" in prose.markdown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]


def test_parse_with_out_journals_each_record_and_resumes(docs, tmp_path, record_validator):
    out = tmp_path / "r.jsonl"
    first = list(mineru_cli.parse([docs / "prose.png", docs / "broken.pdf"], out=out, engine="ocr", cache=False))
    lines = read_journal(out, record_validator)
    assert sorted(r.as_dict()["id"] for r in first) == sorted(line["id"] for line in lines)
    assert {line["id"]: line for line in lines} == {r.id: r.as_dict() for r in first}
    again = list(mineru_cli.parse([docs / "prose.png", docs / "broken.pdf"], out=out, engine="ocr", cache=False))
    assert [r.as_dict() for r in sorted(again, key=lambda r: r.id)] == sorted(lines, key=lambda x: x["id"])
    assert read_journal(out) == lines  # resumed: nothing redone, nothing added


def test_breaking_out_keeps_what_was_journaled(docs, tmp_path):
    out = tmp_path / "r.jsonl"
    records = mineru_cli.parse(docs, out=out, engine="ocr", cache=False, workers=1)
    first = next(records)
    records.close()  # what a `break` out of the loop does
    lines = read_journal(out)
    assert [line["id"] for line in lines] == [first.id]
    rest = list(mineru_cli.parse(docs, out=out, engine="ocr", cache=False))
    assert len(rest) == 4 and len(read_journal(out)) == 4  # the rest parsed, none twice


def test_bad_options_raise_setup_errors_before_any_work(docs, tmp_path):
    with pytest.raises(SetupError, match="--mode 'fast': choose from vlm, hybrid, ocr"):
        next(mineru_cli.parse(docs, out=tmp_path / "r.jsonl", mode="fast"))
    with pytest.raises(SetupError, match="unknown option"):
        next(mineru_cli.parse(docs, colour="red"))
    with pytest.raises(SetupError, match="--format needs a journal"):
        next(mineru_cli.parse(docs, formats=["markdown"]))
    assert not (tmp_path / "r.jsonl").exists()
