"""Elongated pages read piece by piece (engines/tiles.py): a scrolling screenshot of real pages,
a strip of real text lines side by side, and a thin spacer image refused before the detector
enlarges it past any memory.

The pages are tests/data's real PDF pages (tests/data/README.md), rendered through the product's
own PDF path; their text layers are the truth.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_real_pages import DATA, cer, char_f1

from mineru_cli.config import LoadOptions
from mineru_cli.engines import tiles
from mineru_cli.engines.ocr import OCR_SETTINGS, OcrEngine
from mineru_cli.inputs import SourceFile, open_document

pytestmark = pytest.mark.slow

DET_SIDE = OCR_SETTINGS["det_limit_side_len"]
# Four real pages, one under the other: a title page, a two-column paper, three columns of prose,
# and tables (none of them a table of contents, whose dot leaders the truth would spell out).
STACKED = ["title_r_intro_p1.pdf", "two_column_asme.pdf", "three_column_multicol.pdf", "booktabs_table.pdf"]


def page_and_layer(pdf: Path, dpi: int):
    with open_document(SourceFile(pdf, pdf.name, "pdf"), LoadOptions(dpi=dpi, text_layer="auto")) as doc:
        page = doc.page(0)
        assert page.text_layer is not None and page.text_layer.trusted, pdf
        return page.image, page.text_layer


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2, lang="en")


@pytest.fixture(scope="module")
def scroll():
    """The four pages at 100 DPI stacked into one 850 x 4210 px screenshot, the text layer's
    lines in its pixels, and the truth: each page's text layer in the PDF's own order."""
    images, lines, truth, top = [], [], [], 0
    for name in STACKED:
        image, layer = page_and_layer(DATA / name, 100)
        images.append(image)
        lines += [(x1, y1 + top, x2, y2 + top) for x1, y1, x2, y2 in (line.box for line in layer.lines)]
        truth += [line.text for line in layer.lines]
        top += image.height
    page = Image.new("RGB", (max(im.width for im in images), top), "white")
    top = 0
    for image in images:
        page.paste(image, (0, top))
        top += image.height
    return page, lines, "\n".join(truth)


def test_a_scrolling_screenshot_of_real_pages_reads_as_its_pages_do(engine, scroll):
    """Read whole, the page was shrunk to 404 x 2000 for the text models and squeezed into the
    layout model's 608 x 800: the characters were mostly there (F1 0.978) but their order was
    lost (CER 0.662, columns and pages interleaved). The pages read one by one: CER 0.009."""
    page, _, truth = scroll
    text = "\n".join(block.text for block in engine.parse(page).blocks)
    assert cer(text, truth) <= 0.03 and char_f1(text, truth) >= 0.98, (cer(text, truth), char_f1(text, truth))


def test_the_cuts_fall_between_text_lines(scroll):
    page, lines, _ = scroll
    parts = tiles.pieces(np.asarray(page), DET_SIDE)
    assert len(parts) >= 3 and [p.x for p in parts] == [0] * len(parts)
    assert parts[0].y == 0 and sum(p.pixels.shape[0] for p in parts) == page.height
    for before, after in zip(parts, parts[1:]):
        assert after.y == before.y + before.pixels.shape[0]
    assert all(p.pixels.shape[0] <= tiles.TILE_SIDE for p in parts)
    for cut in (p.y for p in parts[1:]):
        crossing = [box for box in lines if box[1] < cut < box[3]]
        assert not crossing, (cut, crossing)


def test_running_heads_at_a_cut_are_text(engine, scroll, monkeypatch):
    """A piece's top is no page top, nor its bottom a page bottom: what the layout model calls a
    header or footer there is text (only the first piece's header and the last one's footer stay)."""
    page, _, _ = scroll

    def furniture(pixels):
        h = pixels.shape[0]
        return [((10, 0, 200, 20), "header", 0.9), ((10, h - 20, 200, h), "footer", 0.9)]

    monkeypatch.setattr(engine, "_piece_regions", furniture)
    kinds = [cls for _, cls, _ in engine._regions(np.asarray(page)[:, :, ::-1])]
    assert len(kinds) >= 6
    assert kinds[0] == "header" and kinds[-1] == "footer" and set(kinds[1:-1]) == {"text"}, kinds


@pytest.fixture(scope="module")
def strip():
    """Sixteen real text lines of the ASME page (150 DPI) side by side, 120 px apart: a strip
    of about 8,000 x 69 px (over 100:1), and their text in that order."""
    image, layer = page_and_layer(DATA / "two_column_asme.pdf", 150)
    lines = [line for line in layer.lines if len(line.text) > 8][:16]
    crops = [image.crop(tuple(int(v) for v in line.box)) for line in lines]
    gap = 120
    out = Image.new("RGB", (sum(c.width + gap for c in crops) + gap, max(c.height for c in crops) + 40), "white")
    x = gap
    for crop in crops:
        out.paste(crop, (x, 20))
        x += crop.width + gap
    return out, "\n".join(line.text for line in lines)


def test_a_strip_of_real_lines_side_by_side_reads_in_order(engine, strip):
    """Whole, the strip was shrunk to 2000 px wide (and 21 px high) for the detector: a 13,000 px
    strip of 24 such lines failed ("too elongated"), a 30,000 x 400 one of 20 labels read two."""
    image, truth = strip
    assert image.width > tiles.TILE_SIDE * 3 and image.width > 100 * image.height
    result = engine.parse(image)
    text = "\n".join(block.text for block in result.blocks)
    assert cer(text, truth) <= 0.03, (cer(text, truth), text)
    lines, _ = engine.text_lines(image)  # the hybrid mode's lines
    assert char_f1("\n".join(line.text for line in lines), truth) >= 0.98


@pytest.fixture(scope="module")
def thin_strip():
    """Real text lines of the ASME page at 100 DPI side by side, 60 px apart, as many as fit in
    2000 px: a strip about 1950 x 24 px (a line of text cut from a web page), and their text."""
    image, layer = page_and_layer(DATA / "two_column_asme.pdf", 100)
    crops, texts, x, gap = [], [], 60, 60
    for line in (line for line in layer.lines if len(line.text) > 8):
        crop = image.crop(tuple(int(v) for v in line.box))
        if x + crop.width + gap > tiles.TILE_SIDE:
            break
        crops.append((x, crop))
        texts.append(line.text)
        x += crop.width + gap
    out = Image.new("RGB", (x, max(c.height for _, c in crops) + 4), "white")
    for left, crop in crops:
        out.paste(crop, (left, 2))
    return out, "\n".join(texts)


def test_a_thin_strip_of_real_lines_is_read_not_refused(engine, thin_strip):
    """RapidOCR pads a strip wider than 8:1 above and below instead of enlarging it, so its
    detector reads this one from ~2,900 x 736 pixels: it was read by engine 3.8 and refused as
    "too elongated" (an estimate of 43 M pixels) by 3.9."""
    image, truth = thin_strip
    assert image.width <= tiles.TILE_SIDE and image.height < 27 and len(truth) > 60, image.size
    text = "\n".join(block.text for block in engine.parse(image).blocks)
    assert cer(text, truth) <= 0.05, (cer(text, truth), text)
    assert tiles.detector_pixels(image.width, image.height, DET_SIDE) < 3_000_000


def test_a_page_of_ordinary_shape_is_one_piece():
    for size in [(2480, 3508), (3508, 2480), (1080, 2400), (1969, 3500), (4000, 2000), (300, 1900)]:
        page = np.full((size[1], size[0]), 255, np.uint8)
        assert len(tiles.pieces(page, DET_SIDE)) == 1, size


def test_a_page_without_a_blank_row_is_cut_where_least_changes():
    """No blank band to cut in (a photograph): pieces still cover the page, each within the
    limit, cut at the rows where the fewest columns change."""
    rng = np.random.default_rng(0)
    page = rng.integers(0, 256, (7000, 900), dtype=np.uint8)
    page[1500] = page[1499]  # the one row that does not change, within reach of the first cut
    spans = tiles.cut(page, tiles.TILE_SIDE)
    assert spans[0][0] == 0 and spans[-1][1] == 7000
    assert all(a < b <= a + tiles.TILE_SIDE for a, b in spans)
    assert all(prev[1] == nxt[0] for prev, nxt in zip(spans, spans[1:]))
    assert spans[0] == (0, 1500)


def parse_in_4_gb(size: tuple[int, int]) -> str:
    """What OcrEngine.parse makes of a white page of this size, run in a process limited to 4 GB
    of address space, so that code that tries to take more fails there, not the machine."""
    code = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        from PIL import Image
        from mineru_cli.engines.ocr import OcrEngine
        try:
            print("ok", OcrEngine(threads=1).parse(Image.new("RGB", {size!r}, "white")).warnings)
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    return out.stdout + out.stderr[-2000:]


def test_a_thin_spacer_image_is_refused_before_the_detector_enlarges_it():
    """A 1900 x 4 px image (a spacer or rule of a saved web page): the detector enlarges its short
    side to 736 px and the long side alike, past 6 GB (it failed to allocate under that limit).
    It is refused at once with the reason."""
    assert tiles.detector_pixels(1900, 4, DET_SIDE) > tiles.DETECTOR_PIXELS
    out = parse_in_4_gb((1900, 4))
    assert "PageError the text detector cannot read a 1900x4 px page (the page is too elongated" in out, out


@pytest.mark.parametrize("size", [(1, 100_000), (100_000, 1)])
def test_a_one_pixel_spacer_is_refused_without_enlarging_it_whole(size):
    """A 1 x 100,000 px spacer image (473 bytes as a PNG): the orientation classifier enlarged it
    whole to 256 px across, 19.6 GB (a worker took 14 GB and four minutes, or the kernel killed
    it). Its middle is classified, and the page is refused at once for the detector."""
    w, h = size
    out = parse_in_4_gb(size)
    assert f"PageError the text detector cannot read a {w}x{h} px page (the page is too elongated" in out, out


def test_a_tall_thin_strip_is_read_in_pieces_the_detector_can_hold():
    """A 24 x 1500 px strip (a side bar): the detector got 736 x 46,000 px of it (4.7 GB, and as
    much again for the second look of a page where it finds nothing). Now pieces of it, each
    within DETECTOR_PIXELS, and no second look for a strip: about 1 GB."""
    assert tiles.detector_pixels(24, 1500, DET_SIDE) > 5 * tiles.DETECTOR_PIXELS
    parts = tiles.pieces(np.full((1500, 24, 3), 255, np.uint8), DET_SIDE)
    assert len(parts) > 1
    assert all(tiles.detector_pixels(24, p.pixels.shape[0], DET_SIDE) <= tiles.DETECTOR_PIXELS for p in parts)
    out = parse_in_4_gb((24, 1500))
    assert out.startswith("ok ['no text found on the page']"), out


def table_screenshot(path: Path) -> Path:
    """A full-page Chromium screenshot (1280 px wide, 6,438 px high) of an HTML page holding a
    heading, a sentence and a bordered table of 200 rows (user, group, home directory)."""
    from test_review import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: install Debian's chromium package (make test does where it can)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    groups = ["daemon", "backup", "staff", "audio"]
    rows = "".join(
        f"<tr><td>{i}</td><td>user{i * 7}</td><td>{groups[i * 7 % 4]}</td><td>/var/lib/svc{i}</td></tr>"
        for i in range(1, 201)
    )
    html = path.with_suffix(".html")
    html.write_text(
        "<html><body style='font:16px sans-serif;margin:40px'><h1>Service accounts</h1>"
        "<p>The accounts below are created at install time.</p>"
        "<table border=1 cellpadding=6 style='border-collapse:collapse'>"
        f"<tr><th>No</th><th>Name</th><th>Group</th><th>Home</th></tr>{rows}</table>"
        "<p>End of the table.</p></body></html>"
    )
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(html.as_uri())
        page.screenshot(path=str(path), full_page=True)
        browser.close()
    return path


def test_an_upright_screenshot_of_a_long_table_is_not_turned(engine, tmp_path):
    """The orientation classifier sees the centre of the page shrunk to 256 px wide: on this
    screenshot a slice of table rows, which it took for upside down (180 degrees, score 0.90), so
    the rows were read last to first. Each piece of the page is classified instead, and the way
    up most pieces surely give stands."""
    image = Image.open(table_screenshot(tmp_path / "table.png")).convert("RGB")
    assert image.height > 2.5 * image.width
    assert engine._upright(np.asarray(image)[:, :, ::-1].copy())[0] == 0
