"""Slide screenshots as users feed them to the embedded engine: HTML slides written here and
screenshot in headless Chromium at 1280 x 720 and 1920 x 1080, their DOM text in reading order
the truth (title bar, body, footer bar: the talk's title, the author, the slide's number), and
a real beamer slide (tests/data/slide_toc_abntex2.pdf) exported as a 1280 x 720 image."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PIL import Image
from test_real_pages import DATA, cer, squash

from mineru_cli.engines.ocr import OcrEngine

pytestmark = pytest.mark.slow

CSS = """
body{margin:0;font-family:'DejaVu Sans',sans-serif}
.slide{width:100vw;height:100vh;position:relative;background:#fff;color:#222;overflow:hidden}
.title{background:#1f4e9c;color:#fff;font-size:4.2vh;padding:2.5vh 4vw;font-weight:bold}
.body{padding:3vh 5vw;font-size:3.2vh;line-height:1.45;display:flex;gap:5vw}
.body>div{flex:1} li{margin:0.6vh 0}
.pic{width:40vw;height:38vh;background:linear-gradient(135deg,#7aa6d8,#2d5f8f 60%,#d8c37a)}
.cap{font-size:2.3vh;color:#555;font-style:italic}
.footer{position:absolute;bottom:0;left:0;right:0;height:5vh;background:#eee;font-size:2vh;color:#555;
 display:flex;justify-content:space-between;align-items:center;padding:0 3vw}
"""
FOOTER = '<div class="footer"><span>Quarterly Review 2024</span><span>Jane Doe, ACME Corp</span><span>12</span></div>'
SLIDES = {
    "picture and bullets": '<div class="title">Field Site Overview</div><div class="body"><div><div class="pic"></div>'
    '<div class="cap">Figure 2: Aerial view of the northern plot in May.</div></div><div><ul>'
    "<li>Plot covers twelve hectares</li><li>Soil samples taken every week</li><li>Drone survey flown at noon</li>"
    "</ul></div></div>",
    "bullets": '<div class="title">Project Goals for the Next Year</div><div class="body"><div><ul>'
    "<li>Reduce build times across all teams</li><li>Improve documentation quality</li>"
    "<li>Ship the mobile client by October</li></ul></div></div>",
}


def screenshot(path: Path, body: str, size: tuple[int, int]) -> tuple[Path, str]:
    """The slide screenshot in Chromium at `size`, and its DOM text in reading order."""
    from test_review import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: install Debian's chromium package (make test does where it can)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": size[0], "height": size[1]})
        slide = f"<div class='slide'>{body}{FOOTER}</div>"
        page.set_content(f"<html><head><style>{CSS}</style></head><body>{slide}</body></html>")
        page.screenshot(path=str(path))
        truth = page.inner_text(".slide")
        browser.close()
    return path, truth


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2, lang="en")


@pytest.mark.parametrize(("name", "size"), [("picture and bullets", (1280, 720)), ("bullets", (1920, 1080))])
def test_a_slides_footer_bar_reads_left_to_right_after_its_body(engine, tmp_path, name, size):
    """The layout model boxes some pieces of the footer bar as footer or page number and others
    as text: the text ones read before the furniture ones, or joined the columns above them (the
    talk's title read between the caption and the bullets beside the picture). The whole bar is
    footers and reads left to right at the slide's end."""
    path, truth = screenshot(tmp_path / "slide.png", SLIDES[name], size)
    result = engine.parse(Image.open(path).convert("RGB"))
    text = "\n".join(block.text for block in result.blocks)
    tail = [squash(block.text) for block in result.blocks[-3:]]
    assert tail == ["QuarterlyReview2024", "JaneDoe,ACMECorp", "12"], [(b.type, b.text) for b in result.blocks]
    assert all(block.type in ("footer", "page_number") for block in result.blocks[-3:]), result.blocks[-3:]
    # bullets the recogniser reads as "•" are no words of the DOM's text
    assert cer(text.replace("•", ""), truth) <= 0.05, text


def exported(pdf: Path, width: int) -> Image.Image:
    """The PDF's first page as a slide deck's image export `width` px wide."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    try:
        page = doc[0]
        return page.render(scale=width / page.get_width()).to_pil().convert("RGB")
    finally:
        doc.close()


def test_a_table_of_contents_slides_first_entry_is_kept_in_its_place(engine):
    """The layout model boxes the first entry of a beamer outline slide (a third of the way
    down) as a header: it was pinned above the slide's title and left out of the Markdown as page
    furniture. A header is a running head only at the page's top edge; this one is text."""
    result = engine.parse(exported(DATA / "slide_toc_abntex2.pdf", 1280))
    entries = ["Sumário", "Introdução", "Fontes a serem consultadas", "Resultados", "Referências"]
    at = [squash(result.markdown).find(squash(entry)) for entry in entries]
    assert -1 not in at and at == sorted(at), result.markdown
    assert not [block for block in result.blocks if block.type == "header"], result.blocks


def test_a_beamer_sidebar_reads_apart_from_the_slides_body(engine):
    """A beamer sidebar (the lecture's outline, 15 % of the slide's width, in smaller print) and
    the slide's list are one text region for the layout model: read row by row, each rule of the
    list was followed by an outline entry ("Bezeichner dürfen nicht mit einer Ziffer anfangen.
    Was ist Syntax?"). The sidebar is a column of its own: the list reads whole, then the outline
    in its order, and no block holds both."""
    result = engine.parse(Image.open(DATA / "slide_sidebar_beamer_lecture.png").convert("RGB"))
    rules = [
        "Welche der folgenden Regeln sind Syntax-Regeln?",
        "Bezeichner dürfen nicht mit einer Ziffer anfangen.",
        "Programme müssen in endlicher Zeit ein Ergebnis produzieren.",
        "Öffnende und schließende geschweifte Klammern müssen »balanciert« sein.",
        "Methoden von Null-Objekten dürfen nicht aufgerufen werden.",
        "Variablen müssen vor ihrer ersten Benutzung deklariert werden.",
    ]
    outline = ["Ziele und Inhalt", "Was ist Syntax?", "Was ist Semantik?", "Grundlage der", "Zusammenfassung"]
    text = squash("\n".join(block.text for block in result.blocks))
    starts = [text.find(squash(rule)) for rule in rules]
    assert -1 not in starts, text
    # consecutive rules stand together: at most a list number the recogniser read between them
    ends = [start + len(squash(rule)) for start, rule in zip(starts, rules)]
    assert all(0 <= nxt - end <= 1 for end, nxt in zip(ends, starts[1:])), text
    at = [text.find(squash(entry)) for entry in outline]
    assert -1 not in at and at == sorted(at), text
    for block in result.blocks:
        body = squash(block.text)
        assert not (any(squash(r) in body for r in rules) and any(squash(e) in body for e in outline)), block.text


def test_a_beamer_sidebar_boxed_as_one_block_reads_before_the_body(engine):
    """The layout model boxes a lecture slide's whole outline (beamer's sidebar, 150 DPI) as one
    text block: with one text between the head and foot bands the column was no sidebar, and the
    outline read after the body's last bullet. A block of many lines is an outline: the column is
    aside_text and reads after the head, before the frame title."""
    result = engine.parse(Image.open(DATA / "slide_sidebar_outline_one_block_150dpi.png").convert("RGB"))
    text = squash("\n".join(block.text for block in result.blocks))
    outline, title = text.find(squash("Ziele und Inhalt")), text.find(squash("Beobachtungen zu einem deutschen Text."))
    last_bullet = text.find(squash("sofort über die Bedeutung nachdenken"))
    assert -1 not in (outline, title, last_bullet) and outline < title < last_bullet, text
    sidebar = [block for block in result.blocks if "Zusammenfassung" in block.text]
    assert sidebar and all(block.type == "aside_text" for block in sidebar), result.blocks
    assert "Ziele und Inhalt" not in result.markdown, result.markdown


def test_a_bordered_table_with_no_table_region_reads_row_by_row(engine):
    """A bordered table on a 1920 x 1080 Chromium slide gets no table region from the layout
    model, and its cells are loose lines: the columns stand further apart than a word space and
    "Laptop"'s box is taller than "Workstation"'s, so they made three paragraphs, read column by
    column ("Machine Laptop", "Workstation Cluster node", then the numbers). The pieces are one
    grid of short cells level in rows: each row reads left to right, the rows top to bottom."""
    result = engine.parse(Image.open(DATA / "slide_table_grid_chromium.png").convert("RGB"))
    rows = ["Machine Cores Pages per hour", "Laptop 4 900", "Workstation 16 3600", "Cluster node 64 14000"]
    text = squash("\n".join(block.text for block in result.blocks))
    assert squash(" ".join(rows)) in text, [(b.type, b.text) for b in result.blocks]


NAV_DOTS = re.compile(r"(?<!\S)[0Oo○●◦•]+(?!\S)")


@pytest.mark.parametrize(
    ("name", "sections", "title"),
    [
        (
            "slide_miniframes_beamer_talk.png",
            ["Introduction", "Bad News: Hardness Results", "Good News: Tractability Results", "Summary"],
            "The Integrated Approach",
        ),
        (
            "slide_miniframes_beamer_talk_150dpi.png",
            ["Introduction", "Bad News: Hardness Results", "Good News: Tractability Results", "Summary"],
            "Our formalization of haplotyping.",
        ),
        (
            "slide_miniframes_thubeamer.png",
            ["Contents", "Research Contents", "Results", "Future Work", "References"],
            "Case 3",
        ),
    ],
)
def test_a_headlines_frame_circles_are_no_text(engine, name, sections, title):
    """A beamer headline with miniframes: each section's name over a row of small circles, one
    a frame. The recogniser read the rows as "000000", "0●00000", "000●0", "00" and "o", and
    they stood in the text beside the section names. They are navigation: the headline reads
    the section names alone, and the frame's title after them."""
    result = engine.parse(Image.open(DATA / name).convert("RGB"))
    text = "\n".join(block.text for block in result.blocks)
    assert not NAV_DOTS.search(text), [(block.type, block.text) for block in result.blocks]
    at = [squash(text).find(squash(name)) for name in [*sections, title]]
    assert -1 not in at and at == sorted(at), text


def test_a_portrait_pages_table_keeps_its_zeros_at_the_top(engine):
    """A "0" under a column's head in the top tenth of a page is read as a row of frame circles
    under a section's name (see test_a_headlines_frame_circles_are_no_text). On a page taller
    than wide, no slide, it is a table's cell: a build report's table at the top of an A4 page
    (a Chromium-printed page, 150 DPI) kept none of its zeros."""
    result = engine.parse(exported(DATA / "table_zeros_top_chromium.pdf", 1240))
    text = "\n".join(block.text for block in result.blocks)
    rows = [squash(row) for row in ("0 0 0 parser", "0 3 0 lexer", "1 0 2 emitter")]
    assert all(row in squash(text) for row in rows), text


def test_a_slides_table_keeps_its_zeros_at_the_top(engine):
    """On a slide too a "0" under a column's head in the top tenth is a table's cell: a build
    report's table at the top of a 1920 x 1080 Chromium slide lost its first row's zeros ("0 0 0
    parser" read "parser"). A table's row holds its other cells beside the "0"; a headline's row
    holds nothing but circles."""
    result = engine.parse(Image.open(DATA / "slide_table_zeros_top_chromium.png").convert("RGB"))
    text = "\n".join(block.text for block in result.blocks)
    rows = [squash(row) for row in ("passed failed skipped suite", "0 0 0 parser", "0 3 0 lexer", "12 0 2 emitter")]
    assert squash("".join(rows)) in squash(text), text


@pytest.mark.parametrize(
    ("name", "title"),
    [
        ("slide_frame_title_thubeamer.png", "Case 3"),
        ("slide_frame_title_beamer_talk.png", "General formalization of haplotyping."),
        ("slide_frame_title_urbeamer.png", "Hausschriftart: Frutiger Next LT W1G"),
    ],
)
def test_a_frame_title_under_a_headline_is_a_title(engine, name, title):
    """A beamer frame title is set little bigger than the body, and the headline's section names
    over it and the footline's pieces under the body are in small print and as many lines as
    the body: against the page's median line height the frame title was no title, and read as
    text. It is the first text in body print or bigger under the headline; a logo's letters over
    it (URbeamer's "UR", a title by its size) are no frame title."""
    result = engine.parse(Image.open(DATA / name).convert("RGB"))
    titles = [squash(block.text) for block in result.blocks if block.type == "title"]
    assert squash(title) in titles, [(block.type, block.text) for block in result.blocks]


def test_a_frame_title_on_a_headline_bar_beside_a_logo_is_a_title(engine):
    """TUDa's beamer demo p5 (tests/data/slide_headline_bar_tuda_p5.png, 150 DPI): the frame
    title and its subtitle stand on a coloured bar across the slide's top beside the
    university's logo. The layout model boxes the whole bar as a table (as a picture on p4), and
    the title was read as the table's cells. The bar is the slide's headline, no float: its
    frame title is a title."""
    result = engine.parse(Image.open(DATA / "slide_headline_bar_tuda_p5.png").convert("RGB"))
    blocks = [(block.type, block.text) for block in result.blocks]
    assert not [b for b in result.blocks if b.type in ("table", "image")], blocks
    titles = [squash(block.text) for block in result.blocks if block.type == "title"]
    assert titles and titles[0].startswith(squash("Frame mit Untertitel")), blocks


def test_a_beamer_sidebar_beside_a_paragraph_is_a_column_of_its_own(engine):
    """beamer's lecture example, slide 21 (Formale Alphabete) at 150 DPI
    (tests/data/slide_sidebar_gutter_beamer_lecture_p21.png): the layout model boxes a paragraph
    of the body with the sidebar's outline beside it ("Was ist Syntax? ... Was ist Semantik?")
    as one figure. Its outline lines are short and dense, each level with one of the body's tall
    rows, so the region's own lines showed no column; the page's sidebar runs above and below the
    region, and the outline is read apart from the paragraph."""
    result = engine.parse(Image.open(DATA / "slide_sidebar_gutter_beamer_lecture_p21.png").convert("RGB"))
    (body,) = [block for block in result.blocks if "Alphabete werden" in block.text]
    assert "Syntax" not in body.text and "Semantik" not in body.text, body.text
    assert "Pointer oder ein Leerzeichen" in body.text, body.text
    text = squash("\n".join(block.text for block in result.blocks))
    outline = ["Ziele und Inhalt", "Was ist Syntax?", "Was ist Semantik?"]
    at = [text.find(squash(entry)) for entry in outline]
    assert -1 not in at and at == sorted(at), text


# hitszbeamer's sidebar outline (tests/data/README.md), top to bottom: the section entries and,
# in smaller print under them, the subsections
HITSZ_SECTIONS = ["研究内容及进度", "研究工作及成果", "后期工作与安排", "问题与解决方案", "按时完成可能性", "Q&A"]
HITSZ_SUBSECTIONS = ["课题主要研究内容", "进度介绍", "研究工作一", "研究工作四", "后期研究工作", "进度安排"]


def test_a_slide_boxed_whole_as_a_table_reads_its_sidebar_apart(engine):
    """hitszbeamer's table-of-contents slide (150 DPI): the layout model boxes the whole slide as
    one table (0.73), the sidebar's outline the table's first column, and each outline entry was
    a cell beside the body's entry at its height ("目录 报告标题 杨敬轩 研究内容及进度 目录 研究内容及进度
    研究工作及成果 课题主要研究内容 ..."). With a sidebar (smaller print, a gutter, down the
    slide) the region is no table: the outline is aside_text, read before the body, and the body's
    six entries read in their order with no outline entry among them. The footline's left part
    (the author over the talk's title, boxed as one text) stands in the rows of the institute and
    the slide's number: a footer, read after the body."""
    image = Image.open(DATA / "slide_frame_table_sidebar_hitszbeamer_p2.png").convert("RGB")
    result = engine.parse(image)
    blocks = [(block.type, block.text) for block in result.blocks]
    assert not [b for b in result.blocks if b.type == "table"], blocks
    aside = squash("".join(b.text for b in result.blocks if b.type == "aside_text"))
    assert all(squash(entry) in aside for entry in HITSZ_SECTIONS + HITSZ_SUBSECTIONS), blocks
    body = squash("".join(b.text for b in result.blocks if b.type not in ("aside_text", "footer", "page_number")))
    assert squash("".join(HITSZ_SECTIONS)) in body, blocks
    assert not any(squash(entry) in body for entry in HITSZ_SUBSECTIONS), blocks
    text = squash("".join(b.text for b in result.blocks))
    assert text.find(squash("进度介绍")) < text.find(squash("".join(HITSZ_SECTIONS))), blocks
    foot = [b for b in result.blocks if "杨敬轩" in b.text and b.bbox[1] > 0.9 * image.height]
    assert foot and all(b.type == "footer" for b in foot), blocks
    assert result.blocks[-1].type in ("footer", "page_number") and "课题主要研究内容" not in result.markdown, blocks


def test_a_sidebar_beside_a_region_that_reaches_into_it_is_found(engine):
    """hitszbeamer's second reference slide (150 DPI): the layout model boxes the reference list
    from the sidebar's outline (x 27) to the right margin, though its lines start at x 133. The
    box crossed the sidebar's gutter, so the column was no sidebar, and read by position the
    outline broke in two round the references. Where a block's lines stand decides the gutter:
    the outline is aside_text and reads whole, then the two references."""
    result = engine.parse(Image.open(DATA / "slide_sidebar_reference_hitszbeamer_p15.png").convert("RGB"))
    blocks = [(block.type, block.text) for block in result.blocks]
    text = squash("".join(b.text for b in result.blocks))
    refs = [text.find(squash(ref)) for ref in ("辛希孟", "翟士民")]
    outline = [text.find(squash(entry)) for entry in HITSZ_SECTIONS + HITSZ_SUBSECTIONS]
    assert -1 not in refs + outline and max(outline) < min(refs) and refs == sorted(refs), blocks
    sidebar = [b for b in result.blocks if any(entry in b.text for entry in HITSZ_SUBSECTIONS)]
    assert sidebar and all(b.type == "aside_text" for b in sidebar), blocks


def test_a_table_that_fills_a_landscape_screenshot_keeps_its_small_print_first_column(engine):
    """A screenshot of a project table (tests/data/README.md) that the layout model boxes whole
    (0.99): its narrow first column of codes in smaller grey print (11 px beside 15 px) has a
    sidebar's marks (at the left edge, apart by a gutter, down the image, smaller print), and the
    region was dropped as a slide boxed whole: the codes became aside_text, left out of the
    Markdown, and the other cells loose text. Each code stands in its row, level with the row's
    cells, where an outline's entries stand at their own pitch: the table stays, row by row."""
    result = engine.parse(Image.open(DATA / "table_codes_small_print_chromium.png").convert("RGB"))
    blocks = [(block.type, block.text) for block in result.blocks]
    tables = [b for b in result.blocks if b.type == "table"]
    assert len(tables) == 1 and not [b for b in result.blocks if b.type == "aside_text"], blocks
    rows = tables[0].text.splitlines()
    assert any(row.startswith("PR-2024-001\tInstall the new pumping station") for row in rows), rows
    assert "PR-2024-012" in result.markdown, result.markdown
