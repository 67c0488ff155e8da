"""The embedded engine on scans: a real page (tests/data) rendered, turned a few degrees as a
sheet fed askew into a scanner is, on grey paper with sensor noise and JPEG compression (fixed
seed), and read from its pixels. Its straight render read the same way is the reference: the
scan's text must come in the same order."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image
from test_real_pages import cer

from mineru_cli.engines.ocr import OcrEngine

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data"
PAGE = DATA / "article_ejpecp_p1.pdf"
DPI = 300


def truth_text(pdf: Path) -> str:
    """The page's text layer in the PDF's own order."""
    doc = pdfium.PdfDocument(str(pdf))
    try:
        return str(doc[0].get_textpage().get_text_bounded())
    finally:
        doc.close()


def render(pdf: Path, dpi: int) -> np.ndarray:
    doc = pdfium.PdfDocument(str(pdf))
    try:
        return np.array(doc[0].render(scale=dpi / 72, grayscale=True).to_pil().convert("L"))
    finally:
        doc.close()


def scan(grey: np.ndarray, degrees: float, seed: int = 7) -> Image.Image:
    """The page turned `degrees` counter-clockwise (a dark lid where the sheet does not reach),
    on paper a little grey with noise, saved as JPEG at quality 85 and read back."""
    h, w = grey.shape
    turn = cv2.getRotationMatrix2D((w / 2, h / 2), degrees, 1.0)
    page = cv2.warpAffine(grey, turn, (w, h), flags=cv2.INTER_LINEAR, borderValue=60)
    noisy = page.astype(np.float32) * (235 / 255) + np.random.default_rng(seed).normal(0, 6, page.shape)
    ok, jpeg = cv2.imencode(".jpg", np.clip(noisy, 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 85])
    assert ok
    return Image.fromarray(cv2.imdecode(jpeg, cv2.IMREAD_GRAYSCALE))


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=1)


def read(engine: OcrEngine, image: Image.Image) -> str:
    return "\n".join(block.text or "" for block in engine.parse(image).blocks)


@pytest.mark.parametrize("degrees", [2.5, -2.5])
def test_a_page_scanned_askew_reads_in_the_order_of_its_straight_scan(engine, degrees):
    truth = truth_text(PAGE)
    grey = render(PAGE, DPI)
    straight = cer(read(engine, Image.fromarray(grey)), truth)
    askew = cer(read(engine, scan(grey, degrees)), truth)
    assert askew <= straight + 0.05, (straight, askew)


@pytest.mark.parametrize("degrees", [1.5, 2.5])
def test_a_three_column_page_scanned_askew_reads_column_after_column(engine, degrees):
    """A real three-column page (multicol's documentation) at 200 DPI, scanned 1.5 or 2.5 degrees
    askew: its columns drift sideways by more than their gutters, so their boxes overlapped and
    the blocks came out interleaved (CER 0.547 against 0.015 straight). The page is levelled for
    the layout and the assembly; the blocks' boxes stay in the scan's pixels, around their lines."""
    page = DATA / "three_column_multicol.pdf"
    truth, grey = truth_text(page), render(page, 200)
    straight = cer(read(engine, Image.fromarray(grey)), truth)
    image = scan(grey, degrees)
    blocks = engine.parse(image).blocks
    askew = cer("\n".join(block.text or "" for block in blocks), truth)
    assert askew <= straight + 0.02, (straight, askew)
    for block in blocks:
        x1, y1, x2, y2 = block.bbox
        assert 0 <= x1 < x2 <= image.width and 0 <= y1 < y2 <= image.height, block.bbox
        for line in block.extra.get("lines", []):
            lx1, ly1, lx2, ly2 = line["bbox"]
            assert x1 - 2 <= lx1 and ly1 >= y1 - 2 and lx2 <= x2 + 2 and ly2 <= y2 + 2, (block.bbox, line)


def test_a_straight_page_with_a_turned_stamp_is_not_levelled():
    """The page's slope is its long lines' median only where most of them agree on it: six level
    lines and six of a stamp turned 3 degrees gave the stamp's slope (the upper middle value), and
    the whole page would have been levelled to it. An askew page's lines agree."""
    from mineru_cli.engines import deskew

    level = [((100, 100 + 40 * i, 1100, 130 + 40 * i), 0.0005 * (i % 3)) for i in range(6)]
    stamp = [((300, 900 + 60 * i, 800, 950 + 60 * i), 0.052) for i in range(6)]
    assert deskew.page_slope(level + stamp) == 0.0
    askew = [(box, 0.044 + 0.001 * (i % 3)) for i, (box, _) in enumerate(level + stamp)]
    assert abs(deskew.page_slope(askew) - 0.045) < 0.002
