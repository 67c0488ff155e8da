"""The embedded engine on real pages (issue 15): each page is rendered at 72, 150 and 300 DPI
through the product's own PDF path and read from its pixels (no text layer), and its text layer,
in the order the PDF draws it, is the ground truth.

Pages: two slides of Debian's texlive-publishers-doc (a title slide drawn over a picture, a
bullet list the layout model boxes twice; tests/data/README.md), the two-column ASME page, a
real three-column page (multicol's documentation, texlive-latex-base-doc), a page of the libtasn1
manual (Debian's libtasn1-doc, `make doc-pdfs`), a real exam page with a fill-in header and
circuit figures (cesenaexam's example), a real government form (the US SF-424's page 2, from
pypdf's source distribution), a table of contents (Writing R Extensions, Debian's r-doc-pdf),
a small table boxed as a figure (An Introduction to R, the same package), and pages written
here with reportlab: three columns under a title, a form and a chart slide.
None of them is a page of scripts/eval_real_pages.py's held-out set.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from pdfs import write_pdf
from PIL import Image
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.platypus import BaseDocTemplate, Frame, PageTemplate, Paragraph

from mineru_cli.config import LoadOptions
from mineru_cli.engines.ocr import OcrEngine, _bgr, _pixel_split
from mineru_cli.inputs import SourceFile, open_document

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data"
LIBTASN1 = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")  # page 4: prose (p5 is held out)
DPIS = (72, 150, 300)


def squash(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def cer(hyp: str, truth: str) -> float:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.distance(squash(hyp), squash(truth)) / max(1, len(squash(truth)))


def char_f1(hyp: str, truth: str) -> float:
    """Order-free character F1: are the characters there at all, wherever they are read."""
    a, b = Counter(squash(hyp)), Counter(squash(truth))
    tp = sum((a & b).values())
    return 0.0 if not tp else 2 * tp / (sum(a.values()) + sum(b.values()))


def text_layer(pdf: Path, page: int = 0):
    """The page's text layer as a reader sees it (the product's text layer: invisible, clipped and
    tiny text dropped, as a slide's hidden "(Original size: ...)" note), at 72 DPI."""
    with open_document(SourceFile(pdf, pdf.name, "pdf"), LoadOptions(dpi=72, text_layer="auto")) as doc:
        layer = doc.page(page).text_layer
    assert layer is not None and layer.trusted, pdf
    return layer


def truth_text(pdf: Path, page: int = 0) -> str:
    """The page's text layer line by line in the PDF's own order."""
    return "\n".join(line.text for line in text_layer(pdf, page).lines)


def render(pdf: Path, dpi: int, page: int = 0) -> Image.Image:
    with open_document(SourceFile(pdf, pdf.name, "pdf"), LoadOptions(dpi=dpi)) as doc:
        return doc.page(page).image


# Pages written with reportlab, in reading order (the text layer is drawn in that order).
THREE_COLUMNS = [
    f"{topic} {n}. "
    + f"This paragraph about {topic.lower()} belongs to column {1 + (n - 1) // 3}. "
    + "Readers follow each column from top to bottom before moving to the next one."
    for n, topic in enumerate(
        ["Filing", "Deadlines", "Payments", "Refunds", "Records", "Penalties", "Appeals", "Contacts", "Forms"], 1
    )
]


def three_column_pdf(path: Path) -> Path:
    """Instructions in three narrow columns under a full-width title (as tax instructions are)."""
    styles = getSampleStyleSheet()
    width, height = A4
    gap, margin = 18, 40
    column = (width - 2 * margin - 2 * gap) / 3
    frames = [Frame(margin + k * (column + gap), 40, column, height - 150, id=f"c{k}") for k in range(3)]

    def title(canvas, _doc):
        canvas.setFont("Helvetica-Bold", 18)
        canvas.drawString(margin, height - 70, "Instructions for the Annual Return")

    doc = BaseDocTemplate(str(path), pagesize=A4)
    doc.addPageTemplates([PageTemplate(id="three", frames=frames, onPage=title)])
    doc.build([Paragraph(p + " " + p.split(". ", 1)[1], styles["BodyText"]) for p in THREE_COLUMNS])
    return path


FORM_FIELDS = [
    ("Family name", "Johnson"),
    ("Given names", "Maria Elena"),
    ("Date of birth", "14 March 1987"),
    ("Place of birth", "Lisbon"),
    ("Street address", "22 Harbour Road"),
    ("City", "Porto"),
    ("Postal code", "4100-012"),
    ("Telephone", "+351 220 114 560"),
]


def form_pdf(path: Path) -> Path:
    """A filled-in form: a title, two columns of ruled fields (label above its value; the text
    layer has the left column first), a declaration below them, a signature line."""

    def draw(c):
        width, height = A4
        c.setFont("Helvetica-Bold", 16)
        c.drawString(60, height - 70, "Application for a Library Card")
        c.setFont("Helvetica", 10)
        c.drawString(60, height - 90, "Please write in capital letters. Fields marked with a star are required.")
        for n, (label, value) in enumerate(FORM_FIELDS):  # the left column's fields first
            x = 60 if n < len(FORM_FIELDS) // 2 else 310
            y = height - 150 - 60 * (n % (len(FORM_FIELDS) // 2))
            c.rect(x, y - 30, 225, 46)
            c.setFont("Helvetica", 9)
            c.drawString(x + 6, y + 4, label + " *")
            c.setFont("Helvetica", 13)
            c.drawString(x + 6, y - 20, value)
        c.setFont("Helvetica", 10)
        y = height - 150 - 60 * 4 - 20
        c.drawString(60, y, "I declare that the information given above is true and complete.")
        c.drawString(60, y - 16, "I will return borrowed items on time and report any loss at once.")
        c.line(60, y - 70, 260, y - 70)
        c.drawString(60, y - 84, "Signature of the applicant")

    return write_pdf(path, draw)


SLIDE = (453.5, 255.1)  # a 16:9 beamer slide, in points
BULLETS = ["Revenue rose in every quarter", "The third quarter was the best", "Costs stayed flat all year"]
QUARTERS = ["Q1", "Q2", "Q3", "Q4"]


def chart_slide_pdf(path: Path) -> Path:
    """A 16:9 slide: a title, three bullets on the left, a bar chart with its axis labels on the
    right (the kind of slide whose chart text the issue found missing)."""
    from reportlab.graphics import renderPDF
    from reportlab.graphics.charts.barcharts import VerticalBarChart
    from reportlab.graphics.shapes import Drawing, String

    def draw(c):
        w, h = SLIDE
        c.setFont("Helvetica-Bold", 20)
        c.drawString(24, h - 40, "Quarterly Results")
        c.setFont("Helvetica", 11)
        for n, bullet in enumerate(BULLETS):
            c.drawString(30, h - 90 - 24 * n, "- " + bullet)
        drawing = Drawing(200, 160)
        chart = VerticalBarChart()
        chart.x, chart.y, chart.width, chart.height = 30, 25, 160, 110
        chart.data = [(12, 18, 27, 21)]
        chart.valueAxis.valueMin, chart.valueAxis.valueMax, chart.valueAxis.valueStep = 0, 30, 10
        chart.categoryAxis.categoryNames = QUARTERS
        chart.categoryAxis.labels.fontSize = chart.valueAxis.labels.fontSize = 10
        drawing.add(chart)
        drawing.add(String(60, 145, "Revenue (million)", fontSize=10))
        renderPDF.draw(drawing, c, 235, 40)

    return write_pdf(path, draw, pagesize=SLIDE)


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2, lang="en")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("real_pages")
    found = {
        "two-column (ASME)": DATA / "two_column_asme.pdf",
        "three columns": three_column_pdf(folder / "three_columns.pdf"),
        "three columns (multicol p4)": DATA / "three_column_multicol.pdf",
        "form": form_pdf(folder / "form.pdf"),
        "chart slide": chart_slide_pdf(folder / "chart_slide.pdf"),
        "title slide over a picture (BFH)": DATA / "slide_title_bfh.pdf",
        "list slide boxed twice (TUDa)": DATA / "slide_list_tuda.pdf",
        "exam page (cesenaexam)": DATA / "exam_form_cesena.pdf",
        "government form (SF-424 p2)": DATA / "form_sf424_p2.pdf",
        "table of contents (R-exts p4)": TOC,
        "small table boxed as a figure (R-intro p40)": TABLE_FIGURE,
    }
    if LIBTASN1.is_file():
        one = folder / "libtasn1_p4.pdf"
        import pypdfium2 as pdfium

        src, out = pdfium.PdfDocument(str(LIBTASN1)), pdfium.PdfDocument.new()
        out.import_pages(src, [3])
        out.save(str(one))
        found["prose (libtasn1 p4)"] = one
    return found


@pytest.fixture(scope="module")
def reads(engine, pages):
    """read(page name, dpi) -> (the engine's result, its text in reading order), each page read
    once at each DPI, when a test first asks for it."""
    done: dict[tuple[str, int], tuple] = {}

    def read(name: str, dpi: int) -> tuple:
        if (name, dpi) not in done:
            result = engine.parse(render(pages[name], dpi))
            done[name, dpi] = (result, "\n".join(b.text for b in result.blocks))
        return done[name, dpi]

    return read


# Bounds on the CER in reading order, and the DPIs whose CERs must lie within 0.02 of each
# other (figures when written, where noted, in the comments). A 16:9 slide at 72 DPI is 454 x 255 px: its 6-8 pt
# furniture (footer, logo lines) is then 6-8 px high, below what the recogniser reads, so the
# slides' text is compared across 150 and 300 DPI; their own tests below read them at 72 too.
MAX_CER = {
    "two-column (ASME)": (0.05, DPIS),  # 0.012-0.016 in test_ocr_engine.py
    "three columns": (0.05, DPIS),
    # 0.007 at 150 and 300 DPI when written; at 72 DPI 0.046 (its 10 pt type is 10 px high and
    # misread in places; character F1 0.993 at all three), so its order is compared at 150 and 300
    "three columns (multicol p4)": (0.05, (150, 300)),
    "form": (0.1, (150, 300)),  # 0.000 / 0.003; at 72 DPI 0.138: see below
    "prose (libtasn1 p4)": (0.05, DPIS),
    "chart slide": (0.4, (150, 300)),  # its labels (no chart region found) are read beside the bullets
    "title slide over a picture (BFH)": (0.15, (150, 300)),
}
# The form at 72 DPI: the layout model calls its 7 px instruction line a `header`, which is pinned
# above the title (CER 0.138, all characters right); its fields are checked at 72 DPI below.
# Not in the resolution check: the TUDa list slide, 0.048 at 150 DPI and 0.070 at 300 when
# written (0.02 apart: why is not looked into yet); its list is checked for order below.
PAGE_NAMES = list(MAX_CER)


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_a_real_page_reads_alike_at_72_150_and_300_dpi(pages, reads, name):
    if name not in pages:
        pytest.skip(f"{LIBTASN1} is not installed (make doc-pdfs)")
    bound, dpis = MAX_CER[name]
    truth = truth_text(pages[name])
    cers = {dpi: round(cer(reads(name, dpi)[1], truth), 4) for dpi in dpis}
    f1s = {dpi: round(char_f1(reads(name, dpi)[1], truth), 4) for dpi in dpis}
    assert max(cers.values()) <= bound, (cers, f1s)
    assert max(cers.values()) - min(cers.values()) <= 0.02, (cers, f1s)
    assert min(f1s.values()) >= 0.9, f1s


def rows_truth(pdf: Path) -> str:
    """The page's text layer line by line in rows, top down, each row left to right (a line
    joins the row it overlaps by half its height): for a one-column page whose PDF draws its
    lines out of reading order."""
    rows: list[list] = []  # [top, bottom, lines]
    for line in sorted(text_layer(pdf).lines, key=lambda line: line.box[1]):
        x1, y1, x2, y2 = line.box
        if rows and min(y2, rows[-1][1]) - max(y1, rows[-1][0]) >= 0.5 * (y2 - y1):
            rows[-1][2].append(line)
            rows[-1][1] = max(rows[-1][1], y2)
        else:
            rows.append([y1, y2, [line]])
    return "\n".join(" ".join(line.text for line in sorted(row[2], key=lambda line: line.box[0])) for row in rows)


def test_a_real_government_form_reads_top_down_at_every_dpi(pages, reads):
    """SF-424 page 2: the OMB number and expiry date sit top right, level with the title. At
    72 DPI the layout model boxes them with "Version 02" beside a block of the title and the
    first field; that corner block is too narrow to be a column, so it is read first (it came
    after the title and the field: CER 0.19). When written: CER 0.038 at 72 DPI ("Version 02"
    before the title, a few letters misread; character F1 0.993), 0.000 at 150 and 300."""
    name = "government form (SF-424 p2)"
    truth = rows_truth(pages[name])
    cers = {dpi: round(cer(reads(name, dpi)[1], truth), 4) for dpi in DPIS}
    assert cers[150] <= 0.01 and cers[300] <= 0.01 and cers[72] <= 0.06, cers
    for dpi in DPIS:
        at = _position(reads(name, dpi)[1], ["OMB Number", "Application for Federal", "9. Type of Applicant 1", "15."])
        assert -1 not in at and at == sorted(at), (dpi, at)


TOC = DATA / "toc_r_exts_p4.pdf"
# Dot leaders are spacing drawn with dots: how many the text layer has depends on the line's width,
# and no reader reproduces the count, so they are left out of the comparison (as in
# scripts/eval_real_pages.py).
LEADERS = re.compile(r"(?:\.\s*){3,}")


def test_a_table_of_contents_reads_alike_at_every_dpi(reads):
    """Writing R Extensions, page ii: entries with dot leaders and page numbers, two chapter
    entries whose numbers stand left of the entries' column. At 300 DPI the layout model boxes
    the whole list as a figure around a text region over its first eleven entries, and the
    chapter numbers lie mostly outside both boxes: the first entries' page numbers were read as a
    second block, the chapter numbers at the end (CER 0.233 at 300 DPI against 0.046 at 150).
    When written: 0.045 / 0.042 / 0.047 at 72 / 150 / 300 DPI."""
    truth = LEADERS.sub("", truth_text(TOC))
    texts = {dpi: LEADERS.sub("", reads("table of contents (R-exts p4)", dpi)[1]) for dpi in DPIS}
    cers = {dpi: round(cer(texts[dpi], truth), 4) for dpi in DPIS}
    assert max(cers.values()) <= 0.08 and max(cers.values()) - min(cers.values()) <= 0.02, cers
    for dpi in DPIS:
        flat = squash(texts[dpi])
        assert "2WritingRdocumentationfiles" in flat and "3TidyingandprofilingRcode" in flat, dpi
        at = _position(texts[dpi], ["1.8.1 C-level messages", "1.11 Services", "2 Writing R", "2.1 Rd format"])
        assert -1 not in at and at == sorted(at), (dpi, at)


TABLE_FIGURE = DATA / "table_figure_r_intro_p40.pdf"


@pytest.mark.parametrize("dpi", (72, 96, 150))
def test_a_small_table_boxed_as_a_figure_reads_row_by_row(reads, dpi):
    """An Introduction to R, page 34: a small data table (Price ... Cent.heat, five rows) over the
    line "The data frame may then be read as". At 96 DPI the layout model boxes the table as a
    figure and that line as its caption; the figure's lines are text, and they were cut at the
    gutter between the table's Rooms and Age columns into two column blocks, each read down,
    with the caption between them (CER 0.048 against 0.006 at 72 and 150 DPI)."""
    name = "small table boxed as a figure (R-intro p40)"
    truth = truth_text(TABLE_FIGURE)
    _, text = reads(name, dpi)
    assert cer(text, truth) <= 0.02, (dpi, round(cer(text, truth), 4))
    rows = ["Price Floor Area Rooms Age Cent.heat", "52.00 111.0 830 5 6.2 no", "59.75 93.0 900 5 1.9 yes"]
    at = _position(text, [*rows, "The data frame may then be read as", "> HousePrice <- read.table"])
    assert -1 not in at and at == sorted(at), (dpi, at)


def _position(text: str, needles: list[str]) -> list[int]:
    flat = squash(text).lower()
    return [flat.find(squash(n).lower()) for n in needles]


@pytest.mark.parametrize("dpi", DPIS)
def test_three_columns_read_one_after_the_other(reads, dpi):
    _, text = reads("three columns", dpi)
    starts = _position(text, [p.split(". ")[0] + ". This paragraph" for p in THREE_COLUMNS])
    assert -1 not in starts and starts == sorted(starts), starts


@pytest.mark.parametrize("dpi", DPIS)
def test_a_real_three_column_page_reads_column_after_column(reads, dpi):
    _, text = reads("three columns (multicol p4)", dpi)
    starts = _position(
        text,
        [
            "corresponding to this footnote",  # the first column's first line
            "Additionally you can set",  # its last paragraph
            "counter, to some positive",  # the second column's first line
            "However, if the setting is too",
            "any acceptable solution at all",  # the third column's first line
            "Finally, when doing the",
        ],
    )
    assert -1 not in starts and starts == sorted(starts), starts


@pytest.mark.parametrize("dpi", DPIS)
def test_a_form_keeps_each_value_after_its_label(reads, dpi):
    result, text = reads("form", dpi)
    for label, value in FORM_FIELDS:
        at_label, at_value = _position(text, [label, value])
        assert -1 < at_label < at_value, (label, value, text)
    assert _position(text, ["Family name"])[0] < _position(text, ["I declare"])[0] < _position(text, ["Signature"])[0]


@pytest.mark.parametrize("dpi", DPIS)
def test_a_chart_slide_keeps_its_chart_text(reads, dpi):
    """The bullets are page text (in the Markdown, in order); the chart's labels are kept in the
    blocks too, in an image block's text and lines when the layout model boxes the chart as a
    figure (the Markdown leaves a figure out, as MinerU's pipeline does)."""
    result, text = reads("chart slide", dpi)
    markdown = result.markdown
    at = _position(markdown, ["Quarterly Results", *BULLETS])
    assert -1 not in at and at == sorted(at), markdown
    for label in [*QUARTERS, "Revenue(million)", "30"]:
        assert squash(label).lower() in squash(text).lower(), (label, text)
    for block in result.blocks:
        if block.type == "image":
            assert block.text and block.extra["lines"], block
            assert not any(line["text"] in markdown for line in block.extra["lines"] if len(line["text"]) > 3)


@pytest.mark.parametrize("dpi", DPIS)
def test_a_template_slide_keeps_its_text_in_the_markdown(reads, dpi):
    """A title slide drawn over a picture: the layout model boxes the whole slide as a figure;
    the slide's title and its lines are text (they were all left out of the Markdown)."""
    result, _ = reads("title slide over a picture (BFH)", dpi)
    for words in ["TEX-Beamer using BFH CI", "Version 0.4"]:
        assert squash(words).lower() in squash(result.markdown).lower(), result.markdown


@pytest.mark.parametrize("dpi", DPIS)
def test_a_list_boxed_twice_reads_its_items_in_order(reads, dpi):
    result, text = reads("list slide boxed twice (TUDa)", dpi)
    items = ["Verwendung wie beamer", "keine besondere Syntax", "Klassenoption accentcolor", "Option serif=true"]
    at = _position(result.markdown, items)
    assert -1 not in at and at == sorted(at), result.markdown


EXAMPLE_BESIDE_OUTPUT = DATA / "example_beside_output_lshort_zh_p28.pdf"


@pytest.mark.parametrize("dpi", (150, 300))
def test_an_example_beside_its_output_reads_box_after_box(engine, dpi):
    """lshort-zh-cn p28 (tests/data/README.md): an example's source and its output in two boxes
    side by side, then a paragraph under both, one text region for the layout model. The boxes
    read one after the other, each sentence whole, before the paragraph (their lines were read
    row by row across both boxes: 不会令内容另起一段，不会令内容另起一段，而是在段落中直接而是...)."""
    result = engine.parse(render(EXAMPLE_BESIDE_OUTPUT, dpi))
    ideographs = "".join(c for c in "".join(b.text for b in result.blocks) if "\u4e00" <= c <= "\u9fff")
    sentence = "另外需要注意的是使用断行命令不会令内容另起一段而是在段落中直接开始新的一行"
    source, output = ideographs.find(sentence), ideographs.rfind(sentence)
    assert -1 < source < output < ideographs.find("断页的命令有两个"), ideographs


MARGIN_NOTES = DATA / "margin_notes_exam_zh_p29.pdf"


@pytest.mark.parametrize("dpi", (150, 300))
def test_margin_notes_are_read_beside_the_body_they_annotate(engine, dpi):
    """exam-zh's manual, page 29 (tests/data/README.md): each option's key names stand in the
    left margin beside its description. The notes were read as a column before the body (all of
    them, then the descriptions); each is read beside the option it names, so the body between
    two notes stays between them."""
    text = "".join(b.text for b in engine.parse(render(MARGIN_NOTES, dpi)).blocks)
    thickness, yshift = text.find("sealline/line-thickness"), text.find("sealline/line-yshift")
    assert -1 < thickness < text.find("密封线的线厚度") < text.find("密封线的水平偏移量") < yshift, text
    assert yshift < text.find("密封线的垂直伸缩量"), text


INDEX_WITH_LEADERS = DATA / "index_leaders_hologo_p74.pdf"


def test_an_index_entry_keeps_its_page_numbers(engine):
    """hologo's index, page 74 (tests/data/README.md): each entry's page numbers stand right of
    it across a gap of dot leaders, a gutter through some of the column's rows only. Those
    stretches were split as columns (every entry, then every page list: "\\TeX. \\texorpdfstring
    \\text ..." then "52, 53, 54 714, 735, ..."); a stretch whose right-hand column is page
    numbers is read row by row, each entry with its pages."""
    text = " ".join(b.text for b in engine.parse(render(INDEX_WITH_LEADERS, 150)).blocks)
    assert "\\texorpdfstring 714, 735, 759, 784" in text, text
    assert "\\textbf 48, 108, 110, 111" in text, text


INDEX_COLUMNS = DATA / "index_columns_imtekda_p25.png"


INDEX_OVERFULL_ENTRY = DATA / "index_overfull_entry_aomart_p36.png"
INDEX_TABLE_REGION = DATA / "index_table_region_kdgdocs_p23.png"
INDEX_ABOVE_SECTION = DATA / "index_above_section_imtekda_p27.png"
INDEX_SUB_ENTRIES = DATA / "index_sub_entries_xcolor_p65.png"
SORTED_TABLE = DATA / "table_sorted_items_chromium.png"
SORTED_NAME_COLUMNS = DATA / "table_sorted_name_columns_chromium.png"


def _index_text(engine, path: Path) -> tuple[list, str]:
    """The page's blocks and the text of its one block that holds an index's entries."""
    blocks = engine.parse(Image.open(path).convert("RGB")).blocks
    index = [b for b in blocks if b.text.count("\n") >= 20]
    assert len(index) == 1, [(b.type, b.text[:80]) for b in blocks]
    return blocks, index[0].text


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.split("\n")]


def _read_in_order(text: str, entries: Sequence[str]) -> bool:
    at = [text.find(entry) for entry in entries]
    return -1 not in at and at == sorted(at)


def test_an_index_in_columns_reads_each_column_down_one_entry_a_line(engine):
    """IMTEKda's manual p25 at 150 DPI (tests/data/README.md): an index in three columns under a
    paragraph, boxed as one figure, each entry's page numbers across a dot leader's gap. Read as
    a table's cells or row by row, the columns interleaved ("Symbols Acrobat: PDF
    cleardoubleplain (op- ..."); the index is one text block that reads its first column down,
    then the second, then the third, each entry, its pages with it, a line of its own, and the
    paragraph above it, which the figure's box holds too, a block before it."""
    blocks, text = _index_text(engine, INDEX_COLUMNS)
    assert _read_in_order(text, ["\\@chair", "\\@titlepicdesc", "\\addtocontents", "\\BLogo", "\\date"]), text
    lines = _lines(text)
    for entry in ("\\@bachelortrue 22", "\\@masterfalse 17, 20, 22", "\\BLogo 102, 161", "\\dedication 381"):
        assert entry in lines, lines
    assert "Numbers written in italic" not in text
    assert any(b.text.startswith("Numbers written in italic") for b in blocks), [b.text[:60] for b in blocks]


def test_an_index_entry_wider_than_its_column_leaves_the_columns_apart(engine):
    """aomart's manual p36 at 150 DPI (tests/data/README.md): a three-column index boxed as one
    figure, where an entry wider than its column ("\\@aom@manuscript@modefalse") runs into the
    next column's indent and closes the gutter between them: the first two columns were read row
    by row across ("\\@@and 233, 459, 475, 522 226, 239, 409, 411, 413, \\@A1ph ..."). The
    columns start where their entries start, and each reads down; the third column's first rows,
    the second column's last entry's page references, follow that entry."""
    _, text = _index_text(engine, INDEX_OVERFULL_ENTRY)
    first = ["\\@accepted", "\\@aom@manuscript@modefalse", "\\@copyrightyear"]
    rest = ["\\@currentcontribution", "\\@empty", "\\@mainrpi", "403, 405, 407", "\\@makefnmark", "\\@setcontribs"]
    assert _read_in_order(text, first + rest), text
    assert "\\@aom@and 73, 75–77, 233, 459, 475, 522" in _lines(text), text


def test_an_index_keeps_the_first_column_a_table_box_left_out(engine):
    """kdgdocs' manual p23 at 150 DPI (tests/data/README.md): the layout model boxes the index as a
    table from its first column's page references rightwards, the first column's entries outside
    the box. Read as a table, every row paired another column's entry with the first column's
    references, and the entries became a block each after it. The lines beside the box that
    complete the index are its own: one block, each entry with its pages."""
    blocks, text = _index_text(engine, INDEX_TABLE_REGION)
    assert not [b for b in blocks if b.type == "table"], [(b.type, b.text[:60]) for b in blocks]
    lines = _lines(text)
    for entry in ("\\@academicyear 147, 148, 237, 312", "\\@defensedate 139, 140, 333", "\\clearpage 272, 281, 344"):
        assert entry in lines, lines
    assert _read_in_order(text, ["\\@academicyear", "\\@promoteriii", "\\@promoteriv", "\\clearpage"]), text


def test_an_index_above_a_section_is_read_before_it(engine):
    """IMTEKda's manual p27 at 150 DPI (tests/data/README.md): the index's last three columns,
    boxed as a table, over the "Change History" section whose title stands under the first
    column. The index reads column after column as one block, and the section after all of it."""
    blocks, text = _index_text(engine, INDEX_ABOVE_SECTION)
    assert not [b for b in blocks if b.type == "table"], [(b.type, b.text[:60]) for b in blocks]
    assert _read_in_order(text, ["floatrow", "units", "pagesize (option)", "sidewaysfigure", "\\topfraction"]), text
    texts = [b.text for b in blocks]
    history = next(n for n, t in enumerate(texts) if t == "Change History")
    assert texts.index(text) < history, texts


def test_an_index_head_keeps_its_sub_entries_on_lines_of_their_own(engine):
    """xcolor's manual p65 at 150 DPI (tests/data/README.md): an index whose heads ("color
    functions", "color models") carry no page numbers, their sub-entries indented under them.
    Each head and each sub-entry is a line of its own (a rule that let an index's indented rows
    go on with the entry above, for a wrapped entry's rest, glued each head to its first
    sub-entry: "color functions twheel . 16, 17")."""
    text = "\n".join(b.text for b in engine.parse(Image.open(INDEX_SUB_ENTRIES).convert("RGB")).blocks)
    lines = _lines(text)
    for head, first in (("color functions", "twheel"), ("color models", "Gray")):
        assert head in lines and lines[lines.index(head) + 1].startswith(first), lines


@pytest.mark.parametrize(
    "path, row",
    [
        (SORTED_TABLE, "Copper wire\tKessler GmbH\t25\t18"),
        (SORTED_NAME_COLUMNS, "Dartford City\tDavies\t30\t15\t5\t10\t50"),
    ],
)
def test_a_sorted_table_of_names_and_numbers_stays_a_table(engine, path, row):
    """Two Chromium tables (tests/data/README.md) whose rows, sorted by their first column, end in
    whole numbers after two columns of names, as an index's columns' rows end in page numbers: a
    parts list whose second column (suppliers) is in no alphabetical order, and a league table
    whose second column (coaches) is sorted too. Neither is an index (the first has no order down
    its second column, and in both no number stands in the first column: an index's every
    column holds page references); each stays one table, each row's cells together."""
    blocks = engine.parse(Image.open(path).convert("RGB")).blocks
    tables = [b for b in blocks if b.type == "table"]
    assert len(tables) == 1, [(b.type, b.text[:60]) for b in blocks]
    assert row in tables[0].text.split("\n"), tables[0].text


LISTING_NUMBERS = DATA / "listing_line_numbers_index_p10.pdf"


def test_a_listing_keeps_each_line_number_with_its_code(engine):
    """index's documentation, page 10 at 150 DPI (tests/data/README.md): a listing whose line
    numbers stand in a narrow column left of code indented to several depths. The numbers and
    the shallowest lines (\"}{%\") are each too narrow for a column; joined, they were taken for
    one left of the deeper lines, and the listing broke into blocks of bare numbers and blocks of
    code without them. It is one block, each line after its number."""
    with open_document(SourceFile(LISTING_NUMBERS, LISTING_NUMBERS.name, "pdf"), LoadOptions(dpi=150)) as doc:
        page = doc.page(0)
        result = engine.parse(page.image, page.text_layer)
    lines = [" ".join(line.split()) for b in result.blocks for line in b.text.split("\n")]
    for line in ("178 \\bigskip", "186 \\let\\item\\@idxitem", "189 \\onecolumn", "219 \\onecolumn"):
        assert line in lines, lines


PROSE_NUMBERS = DATA / "prose_row_ends_numbers_chromium.pdf"


def test_a_short_paragraph_whose_rows_end_in_numbers_is_no_index(engine):
    """A Chromium page of short justified paragraphs at 150 DPI (tests/data/README.md), half the
    rows of the first three ending in a number ("... on May 5, 2021" / "and agreed ...",
    "... 2019, 2020" / "and 2021 together ..."): read as an index's entries, they broke after
    each such row. Each paragraph is one run of text."""
    with open_document(SourceFile(PROSE_NUMBERS, PROSE_NUMBERS.name, "pdf"), LoadOptions(dpi=150)) as doc:
        page = doc.page(0)
        result = engine.parse(page.image, page.text_layer)
    paragraphs = [b.text for b in result.blocks if b.type == "text"]
    assert len(paragraphs) == 4, paragraphs
    assert not any("\n" in text for text in paragraphs), paragraphs


@pytest.mark.parametrize("dpi", (150, 300))
def test_a_real_figure_keeps_its_labels_out_of_the_markdown(reads, dpi):
    """A real exam page (cesenaexam's example, tests/data/README.md): exercise 2's circuit is a
    figure drawn in vectors, so its labels are in the text layer; they stay in an image block
    (its text and lines), not in the text around it, and the exercise around it reads in order."""
    result, _ = reads("exam page (cesenaexam)", dpi)
    figures = [b for b in result.blocks if b.type == "image" and "R1" in b.text and "L1" in b.text]
    assert len(figures) == 1, [(b.type, b.text[:60]) for b in result.blocks]
    assert figures[0].extra["lines"]
    text = "\n".join(b.text for b in result.blocks if b.type != "image")
    assert "L1 " not in text.split("Esercizio 2", 1)[-1].split("R1 = 4", 1)[0], text
    at = _position(text, ["Esercizio 2", "Il circuito rappresentato in figura", "impedenza equivalente"])
    assert -1 not in at and at == sorted(at), text


@pytest.mark.xfail(
    strict=True,
    reason="not fixed: the layout model boxes the exam's name fields together with exercise 1 and "
    "its circuit as one figure region, read as text split at the circuit's gutter into two columns, "
    "so Matricola and Firma come after exercise 1's left column",
)
def test_a_real_exam_forms_fields_read_along_their_row(reads):
    result, _ = reads("exam page (cesenaexam)", 150)
    text = "\n".join(b.text for b in result.blocks if b.type != "image")
    at = _position(text, ["Cognome", "Nome", "Matricola", "Firma", "Parti Svolte", "Esercizio 1"])
    assert -1 not in at and at == sorted(at), text


@pytest.mark.parametrize("degrees", [90, 180])
def test_a_turned_page_is_read_upright(engine, pages, reads, degrees):
    """The two-column page scanned sideways or upside down reads as it does upright."""
    name = "two-column (ASME)"
    truth = truth_text(pages[name])
    upright = cer(reads(name, 150)[1], truth)
    image = render(pages[name], 150).rotate(degrees, expand=True)  # turned counter-clockwise
    result = engine.parse(image)
    text = "\n".join(b.text for b in result.blocks)
    assert cer(text, truth) <= upright + 0.02, (cer(text, truth), upright)
    back = (360 - degrees) % 360
    assert {b.extra.get("angle") for b in result.blocks} == {back}
    assert f"page read turned {back} degrees" in " ".join(result.warnings)


@pytest.mark.parametrize("upside_down", [False, True])
@pytest.mark.parametrize("dpi", [150, 200, 300])
def test_a_page_of_two_short_lines_in_white_is_read(engine, dpi, upside_down):
    """A thesis's dedication page (two italic lines on an empty A4 page, a real PDF whose text
    layer is too short to use): the text detector at full size found nothing on it, and the page
    was recorded with "no text found". Read again on the page shrunk, its lines were read upside
    down where the orientation classifier, seeing an empty centre, had the page's way up wrong
    (300 DPI, or the page fed upside down: "Dond ontd Dad dedatto"). An empty page still reads
    empty."""
    page = render(DATA / "dedication_dottorato_p3.pdf", dpi)
    result = engine.parse(page.rotate(180) if upside_down else page)
    assert squash(" ".join(b.text for b in result.blocks)) == squash("Dedicated to Donald Knuth"), result.blocks
    assert "no text found on the page" not in result.warnings
    if upside_down:  # boxes in the pixels given: the lines sit just below the middle, on the left
        assert all(b.bbox[2] < page.width / 2 and b.bbox[1] > page.height / 2 for b in result.blocks), result.blocks
    blank = engine.parse(Image.new("RGB", page.size, "white"))
    assert blank.blocks == [] and blank.warnings == ["no text found on the page"]


def test_a_sideways_page_of_two_short_lines_reads_no_wrong_text(engine):
    """The dedication page turned sideways at 300 DPI: neither look finds a line on it as the
    classifier leaves it. Read the other way up as well, it gave "aud td" where the page had been
    recorded empty; whatever is read of it now is its own text."""
    page = render(DATA / "dedication_dottorato_p3.pdf", 300).rotate(270, expand=True)
    result = engine.parse(page)
    text = squash(" ".join(b.text for b in result.blocks))
    assert text in ("", squash("Dedicated to Donald Knuth")), result.blocks


@pytest.mark.parametrize("text_layer_mode", ["auto", "off"])
@pytest.mark.parametrize("dpi", [150, 300])
def test_a_drop_cap_joins_its_word_and_keeps_the_lines_in_order(engine, dpi, text_layer_mode):
    """testflow's documentation, page 2 (IEEEtran's \\IEEEPARstart), its Introduction: a "T" set two lines
    tall, the first two lines indented beside it ("HIS is the documentation ... the “print work" /
    "flow” of LATEX systems ..."). As a line of its own it made those lines one row, read left to
    right: the second line before the first, or "T" between them ("... the information T HIS is
    the documentation"). The cap starts the paragraph, joined to its word, from the text layer and
    from the pixels alike."""
    pdf = DATA / "drop_cap_testflow_p2.pdf"
    with open_document(SourceFile(pdf, pdf.name, "pdf"), LoadOptions(dpi=dpi, text_layer=text_layer_mode)) as doc:
        page = doc.page(0)
        result = engine.parse(page.image, page.text_layer if text_layer_mode == "auto" else None)
    (paragraph,) = [b.text for b in result.blocks if "HIS is the documentation" in b.text]
    assert paragraph.startswith("THIS is the documentation and user guide"), paragraph
    assert re.search(r"print work flow. of", paragraph), paragraph


def test_kana_and_ideographs_drawn_alike_take_their_neighbours_script(engine):
    """jlreq's Japanese manual p10 (tests/data/cjk_justified_jlreq_ja_p10.pdf) from pixels at
    150 DPI: the recogniser reads katakana ベ in ラベル (label) as hiragana べ, and 出力 (output) as
    出 and katakana カ. A kana between two letters of the other kana, and a lone katakana beside an
    ideograph, is its look-alike in its neighbours' script."""
    text = "\n".join(b.text for b in engine.parse(render(DATA / "cjk_justified_jlreq_ja_p10.pdf", 150)).blocks)
    assert "ラべル" not in text and "出カ" not in text, text
    assert text.count("ラベル") >= 5 and text.count("出力") >= 5, text


MARGIN_NOTES_BESIDE_BODY = DATA / "margin_notes_imtekda_p3.png"


def test_margin_notes_sharing_the_bodys_rows_break_no_sentence(engine):
    """IMTEKda's manual p3 at 150 DPI (tests/data/README.md): KOMA-Script's margin notes (graphicx,
    calc, titlepage, BCOR ...) stand flush right in the left margin, on the rows of the body they
    annotate, and the layout model boxes them with the body. A row with a note starts at the
    note's ragged left edge, read as a description list's term out of the body's indent: the
    body's sentences were broken into lines ("... Da das Paket textpos mit" / "calc der Option
    absolute ..."). The body's rows are read at the body's edge: a line ends at a sentence's end."""
    blocks = engine.parse(Image.open(MARGIN_NOTES_BESIDE_BODY).convert("RGB")).blocks
    body = [b.text for b in blocks if "Die Klasse IMTEKda basiert" in b.text]
    assert len(body) == 1 and "Masterarbeiten verwendet werden!" in body[0], [b.text for b in blocks]
    lines = body[0].split("\n")
    assert all(re.search(r"[.!:]$", line) for line in lines[:-1]), lines


def test_a_katakana_counter_or_key_name_between_ideographs_stays_katakana(engine):
    """Five Japanese sentences of our own wording set by Chromium
    (tests/data/cjk_counter_marks_chromium.pdf) from pixels at 150 DPI: カ counting months, places
    and countries after a kanji numeral (数カ月, 十カ所, 二カ国) and the letters naming keys
    (ハ長調, ニ短調) stand alone between ideographs; the recogniser reads most of them as their
    ideograph look-alikes (三力月, 八長調: no words), and a lone katakana beside an ideograph
    would be taken for one. They are katakana."""
    text = "".join(b.text for b in engine.parse(render(DATA / "cjk_counter_marks_chromium.pdf", 150)).blocks)
    for word in ("数カ月", "十カ所", "三カ月", "何カ国", "五カ国", "二カ国語", "八カ所", "六カ月", "ハ長調", "ニ短調"):
        assert word in text, (word, text)
    assert "力月" not in text and "力所" not in text and "力国" not in text and "八長調" not in text, text


def test_a_line_cut_and_read_again_keeps_its_look_alikes_fitted(engine):
    """A line cut in two (at a gutter or a table's column) is read again piece by piece; each
    piece's look-alikes take their neighbours' script as the whole line's do. On the counter page
    (tests/data/cjk_counter_marks_chromium.pdf, 150 DPI) the recogniser reads 数カ月 and 十カ所 as
    数力月 and 十力所 again in the line's longer piece."""
    page = render(DATA / "cjk_counter_marks_chromium.pdf", 150)
    lines, _timings = engine.text_lines(page)
    line = next(ln for ln in lines if "数カ月" in ln.text)
    x1, _, x2, _ = line.box
    pieces = _pixel_split(engine._load_text(), _bgr(page))(line, int(x1 + 0.1 * (x2 - x1)))
    text = "".join(p.text for p in pieces)
    assert "数カ月" in text and "十カ所" in text and "力" not in text, text
