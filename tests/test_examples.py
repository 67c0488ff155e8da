"""`mineru parse examples/` end to end: every page ok, text right, columns read in order."""

from __future__ import annotations

import json

import pytest
from helpers import EXAMPLES, mineru, read_journal
from textmetrics import cer, record_text, squash

pytestmark = pytest.mark.e2e  # runs the real CLI / worker pool on real pages (make test-fast skips it)

# Measured on this machine (2 cores) with the embedded engine (PP-OCRv6-small, cls_thresh 0.99),
# CER per page without whitespace: prose 0.000, two_column 0.000, table 0.000, slide 0.025,
# chinese 0.000, report p1 0.000, p2 0.000; mean 0.004. The slide's cost is its bullets, which
# the recogniser reads as "●" (the ground truth has none), plus a stray "_" from the chart.
# The bounds leave about 2x room for onnxruntime/CPU-kernel differences.
MAX_CER = 0.05
MAX_MEAN_CER = 0.01
TRUTH = {
    "prose.png#0": "prose",
    "two_column.png#0": "two_column",
    "table.png#0": "table",
    "slide.png#0": "slide",
    "chinese.png#0": "chinese",
    "report.pdf#0": "report.p1",
    "report.pdf#1": "report.p2",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, record_validator):
    tmp = tmp_path_factory.mktemp("examples")
    out = tmp / "results.jsonl"
    r = mineru(
        "parse",
        str(EXAMPLES),
        "--out",
        str(out),
        "--no-cache",
        "--format",
        "content-list",
        "--out-dir",
        str(tmp / "docs"),
        cwd=tmp,
        timeout=600,
    )
    return r, {rec["id"]: rec for rec in read_journal(out, record_validator)}, tmp / "docs"


def test_every_example_page_is_ok(run):
    r, recs, _ = run
    assert r.returncode == 0, r.stderr
    assert "engine: ocr" in r.stderr  # auto says which engine it chose
    assert sorted(recs) == sorted(TRUTH)
    assert all(rec["status"] == "ok" and rec["blocks"] and rec["markdown"] for rec in recs.values())
    assert recs["report.pdf#1"]["page_count"] == 2
    # PDFs render at 200 DPI: an A4 page (8.27 x 11.69 in) is about 1654 x 2339 pixels.
    image = recs["report.pdf#0"]["image"]
    assert abs(image["width"] - 1654) <= 1 and abs(image["height"] - 2339) <= 1 and image["scale"] == 1.0


@pytest.mark.parametrize("pid", sorted(TRUTH))
def test_character_error_rate(run, pid):
    truth = (EXAMPLES / "ground_truth" / f"{TRUTH[pid]}.txt").read_text("utf-8")
    assert cer(record_text(run[1][pid]), truth) <= MAX_CER


def test_mean_character_error_rate(run):
    rates = [
        cer(record_text(run[1][pid]), (EXAMPLES / "ground_truth" / f"{name}.txt").read_text("utf-8"))
        for pid, name in TRUTH.items()
    ]
    assert sum(rates) / len(rates) <= MAX_MEAN_CER


def test_two_column_page_reads_column_by_column(run):
    text = squash(record_text(run[1]["two_column.png#0"]))
    paragraphs = (EXAMPLES / "ground_truth" / "two_column.txt").read_text("utf-8").split("\n\n")
    # Where each ground-truth paragraph starts in the output: must be increasing, i.e. the whole
    # left column (top to bottom) comes before the right column.
    starts = [text.find(squash(p)[:25]) for p in paragraphs]
    assert -1 not in starts, (starts, text[:200])
    assert starts == sorted(starts)
    assert run[1]["two_column.png#0"]["blocks"][0]["type"] == "title"


def test_content_list_and_markdown_per_document(run):
    _, recs, docs = run
    items = json.loads((docs / "table_png" / "table_content_list.json").read_text("utf-8"))
    (table,) = [it for it in items if it["type"] == "table"]
    assert table["table_body"].startswith("<table>") and "<td>" in table["table_body"]
    assert (docs / "table_png" / table["img_path"]).is_file()
    assert all(it["page_idx"] == 0 and all(0 <= v <= 1000 for v in it["bbox"]) for it in items)
    report = json.loads((docs / "report_pdf" / "report_content_list.json").read_text("utf-8"))
    assert {it["page_idx"] for it in report} == {0, 1}
    md = (docs / "report_pdf" / "report.md").read_text("utf-8")
    assert md == recs["report.pdf#0"]["markdown"] + "\n" + recs["report.pdf#1"]["markdown"]
