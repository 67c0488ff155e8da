"""`--format layout`: <stem>_layout.pdf drawn from records, checked on the rendered PDF's pixels."""

from __future__ import annotations

import re
import time

import pypdfium2 as pdfium
import pytest
from helpers import EXAMPLES, mineru
from PIL import Image, ImageDraw

from mineru_cli.config import LoadOptions
from mineru_cli.inputs import SourceFile, open_document
from mineru_cli.layout_pdf import draw_page
from mineru_cli.overlay import colour
from mineru_cli.writers import write_documents

DPI = 72  # the test renders PDFs at 72 DPI: one layout pixel per PDF point, and fast


def _record(source, index, count, image, blocks, engine="ocr"):
    return {
        "id": f"{source}#{index}",
        "source": source,
        "page_index": index,
        "page_count": count,
        "status": "ok",
        "image": {
            "width": image.width,
            "height": image.height,
            "original_width": image.width,
            "original_height": image.height,
            "scale": 1.0,
        },
        "engine": {"name": engine},
        "blocks": blocks,
    }


def _close(a, b, tol=40):
    return all(abs(x - y) <= tol for x, y in zip(a, b))


def _render(pdf_path, index, scale=1.0):
    pdf = pdfium.PdfDocument(str(pdf_path))
    try:
        page = pdf[index]
        return page.get_size(), page.render(scale=scale).to_pil().convert("RGB"), len(pdf)
    finally:
        pdf.close()


def test_two_page_pdf_gets_one_layout_page_per_page_with_boxes_where_the_records_say(tmp_path):
    src = SourceFile(EXAMPLES / "report.pdf", "report.pdf", "pdf")
    with open_document(src, LoadOptions(dpi=DPI)) as doc:
        images = [doc.page(i).image for i in range(doc.page_count)]
        source_pdf = pdfium.PdfDocument(str(EXAMPLES / "report.pdf"))
        sizes = [source_pdf[i].get_size() for i in range(len(source_pdf))]
        source_pdf.close()
    w, h = images[0].size
    boxes = [
        [("title", [60, 40, w - 60, 90]), ("text", [60, 120, w - 60, 300]), ("table", [60, 340, w // 2, 500])],
        [("image", [80, 80, w - 80, 400])],
    ]
    records = [
        _record("report.pdf", i, 2, images[i], [{"type": t, "bbox": bb, "text": "x"} for t, bb in boxes[i]])
        for i in range(2)
    ]
    written = write_documents(records, tmp_path, {"layout"}, lambda s, i: images[i], dpi=DPI)
    pdf_path = tmp_path / "report_pdf" / "report_layout.pdf"
    assert written == [pdf_path]  # layout alone writes no Markdown
    for i in range(2):
        (pw, ph), rendered, count = _render(pdf_path, i)
        assert count == 2
        # The source page's width in points; the legend strip adds height under the page only.
        assert pw == pytest.approx(sizes[i][0], abs=1.5) and ph > sizes[i][1]
        assert rendered.width == pytest.approx(w, abs=1)
        for kind, (x1, y1, x2, y2) in boxes[i]:
            ymid = (y1 + y2) // 2
            # the outline: left and right edges in the type's colour
            assert _close(rendered.getpixel((x1 + 1, ymid)), colour(kind)), (i, kind)
            assert _close(rendered.getpixel((x2 - 2, ymid)), colour(kind)), (i, kind)
        # the page itself is still there outside the boxes (white margin of the original)
        assert _close(rendered.getpixel((10, h // 2)), images[i].getpixel((10, h // 2)), tol=25)


def test_image_layout_page_numbers_boxes_and_keeps_its_size_at_the_dpi(tmp_path):
    image = Image.new("RGB", (400, 300), "white")
    ImageDraw.Draw(image).rectangle((150, 150, 250, 200), fill=(0, 0, 0))
    blocks = [
        {"type": "title", "bbox": [20, 20, 380, 60], "text": "Title"},
        {"type": "equation", "bbox": [100, 100, 300, 240], "text": "", "latex": "x^2", "source": "vlm"},
    ]
    rec = _record("scan.png", 0, 1, image, blocks, engine="vlm")
    write_documents([rec], tmp_path, {"layout", "markdown"}, lambda s, i: image, dpi=200)
    pdf_path = tmp_path / "scan_png" / "scan_layout.pdf"
    assert (tmp_path / "scan_png" / "scan.md").exists()
    (pw, ph), rendered, count = _render(pdf_path, 0, scale=200 / 72)
    assert count == 1
    assert pw == pytest.approx(400 * 72 / 200, abs=0.5) and ph > 300 * 72 / 200
    assert rendered.width == pytest.approx(400, abs=1)
    assert _close(rendered.getpixel((21, 40)), colour("title"))
    assert _close(rendered.getpixel((299, 170)), colour("equation"))
    # the number tag sits in the box's top-left corner, filled with the type's colour
    assert _close(rendered.getpixel((102, 102)), colour("equation"))
    # the inside of a box is tinted, not covered: the black ink stays dark
    assert max(rendered.getpixel((200, 175))) < 90
    # the legend strip under the page is not the page: light grey, with coloured swatches
    legend = rendered.crop((0, 300, rendered.width, rendered.height))
    colours = {px for _, px in legend.getcolors(1 << 20)}
    assert any(_close(px, colour("title"), 10) for px in colours)


def test_boxes_follow_an_image_of_another_size_than_the_records():
    image = Image.new("RGB", (200, 100), "white")
    rec = _record("a.png", 0, 1, Image.new("RGB", (400, 200)), [{"type": "table", "bbox": [100, 50, 300, 150]}])
    drawn = draw_page(image, rec)
    assert drawn.width == 200 and drawn.height > 100
    assert _close(drawn.getpixel((50, 50)), colour("table"))  # x1 100 of 400 -> 50 of 200
    assert _close(drawn.getpixel((149, 50)), colour("table"))


@pytest.mark.e2e
def test_format_layout_after_a_finished_run_draws_without_parsing_again(tmp_path):
    image = Image.new("RGB", (900, 300), "white")
    ImageDraw.Draw(image).text((40, 100), "Layout overlays", fill="black", font_size=60)
    image.save(tmp_path / "page.png")
    args = ["parse", "page.png", "--out", "r.jsonl", "--no-cache", "--engine", "ocr"]
    assert mineru(*args, cwd=tmp_path).returncode == 0
    journal = (tmp_path / "r.jsonl").read_bytes()
    r = mineru(*args, "--format", "layout", "--out-dir", "docs", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "0 page(s) to do" in r.stderr or "pipeline" not in r.stderr
    assert (tmp_path / "r.jsonl").read_bytes() == journal  # nothing parsed again
    (pw, ph), _, count = _render(tmp_path / "docs" / "page_png" / "page_layout.pdf", 0)
    assert count == 1 and pw == pytest.approx(900 * 72 / 200, abs=0.5)


def test_the_same_records_give_the_same_layout_pdf_byte_for_byte(tmp_path):
    """A cron re-run rewrites every document's layout PDF from the same records: it must be the
    same file (pdfium stamps a new document with the clock and draws a trailer /ID at random on
    each save), and still a valid PDF."""
    src = SourceFile(EXAMPLES / "report.pdf", "report.pdf", "pdf")
    with open_document(src, LoadOptions(dpi=DPI)) as doc:
        images = [doc.page(i).image for i in range(doc.page_count)]
    w = images[0].width
    records = [
        {
            **_record("report.pdf", i, 2, images[i], [{"type": "text", "bbox": [60, 60, w - 60, 200]}]),
            "created": f"2026-12-0{i + 1}T13:00:0{i}+01:00",
        }
        for i in (0, 1)
    ]
    runs = []
    for run in ("first", "second"):
        if runs:
            time.sleep(1.1)  # another second on the clock
        write_documents(records, tmp_path / run, {"layout"}, lambda s, i: images[i], dpi=DPI)
        runs.append((tmp_path / run / "report_pdf" / "report_layout.pdf").read_bytes())
    assert runs[0] == runs[1]
    assert b"/CreationDate(D:20261202120001+00'00')" in runs[0]  # the newest record's, in UTC
    assert _render(tmp_path / "first" / "report_pdf" / "report_layout.pdf", 1)[2] == 2
    other = [records[0], {**records[1], "blocks": [{"type": "title", "bbox": [60, 60, w - 60, 200]}]}]
    write_documents(other, tmp_path / "other", {"layout"}, lambda s, i: images[i], dpi=DPI)
    redrawn = (tmp_path / "other" / "report_pdf" / "report_layout.pdf").read_bytes()
    ids = [re.search(rb"/ID\s*\[<([0-9A-F]{32})>", data)[1] for data in (runs[0], redrawn)]
    assert ids[0] != ids[1]  # another drawing, another ID
