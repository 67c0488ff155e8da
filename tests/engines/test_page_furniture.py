"""Running feet on real LaTeX pages (Debian's TeX documentation, tests/data/README.md), read
through the product's own PDF path at 150 DPI with their text layer: the layout model's footer
in the page's foot margin is page furniture, kept out of the Markdown."""

from __future__ import annotations

import pytest
from test_real_pages import DATA

from mineru_cli.config import LoadOptions
from mineru_cli.engines.ocr import OcrEngine
from mineru_cli.inputs import SourceFile, open_document

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2, lang="en")


def parse(engine: OcrEngine, name: str):
    pdf = DATA / name
    with open_document(SourceFile(pdf, pdf.name, "pdf"), LoadOptions(dpi=150)) as doc:
        page = doc.page(0)
    assert page.text_layer is not None and page.text_layer.trusted
    return engine.parse(page.image, page.text_layer), page.image.height


@pytest.mark.parametrize(
    ("name", "number", "last"),
    [
        ("page_number_euler_p12.pdf", "12", "TUGboat 10(1):31–36, 1989."),
        ("page_number_breqn_p61.pdf", "61", "if the style allows equations to extend into the margins)."),
    ],
)
def test_a_latex_pages_number_in_its_foot_margin_stays_out_of_the_markdown(engine, name, number, last):
    """euler's documentation on A4 and breqn's on letter paper: the page number stands 14 to 17 %
    of the page above its foot, and the layout model boxes it as a footer; read as text, it
    ended the page's Markdown ("12", "61")."""
    result, height = parse(engine, name)
    (block,) = [block for block in result.blocks if block.text == number]
    assert block.type == "footer" and block.bbox[1] > 0.8 * height, block
    assert result.markdown.rstrip().endswith(last), result.markdown[-200:]


def test_a_foot_row_of_text_pieces_below_two_columns_reads_after_them(engine):
    """elsarticle's preprint foot on a two-column page ("Preprint submitted to Elsevier" left,
    the date right, just under the columns' footnotes): the layout model boxes both pieces as
    text, and each joined the column above it, so the right column was read after the left
    piece. As footers the row reads at the page's end, left to right."""
    result, _ = parse(engine, "preprint_foot_elstest_3pd_p1.pdf")
    texts = [block.text for block in result.blocks]
    left = texts.index("Preprint submitted to Elsevier")
    assert result.blocks[left].type == "footer", result.blocks[left]
    assert texts[left + 1 :] == ["June 8, 2018"], texts[left:]
    assert "Preprint submitted" not in result.markdown


@pytest.mark.parametrize(
    ("name", "number", "last"),
    [
        ("page_number_adfathesis_p10.pdf", "10", "273 \\newcommand{\\@secondreader}{}\n```"),
        ("page_number_roman_unswcover_p5.pdf", "v", "Signed Olivier Mehani Date 14 December 2011"),
    ],
)
def test_a_page_number_the_layout_model_boxes_as_text_in_the_foot_margin_is_a_page_number(engine, name, number, last):
    """adfathesis's page 10 and unswcover's front matter page v (both A4): the page number stands
    12 to 18 % of the page above its foot, above the edge band, and the layout model boxes it as
    text; it ended the page's Markdown ("10", "v")."""
    result, height = parse(engine, name)
    (block,) = [block for block in result.blocks if block.text == number]
    assert block.type == "page_number" and block.bbox[1] > 0.8 * height, block
    assert result.markdown.rstrip().endswith(last), result.markdown[-200:]


@pytest.mark.parametrize(
    ("name", "fields"),
    [("form_date_uwthesis_p3.pdf", ["Date:"]), ("form_fields_foot_chromium.pdf", ["Signed:", "Name:", "Date:"])],
)
def test_a_forms_field_labels_at_the_pages_foot_stay_in_the_markdown(engine, name, fields):
    """uwthesis's signature page (its last row a "Date:" line to fill in, 19 % of the page above
    its foot) and a consent form printed by Chromium (a last row "Signed:", "Name:", "Date:"):
    the layout model boxes the labels as footers, or the row joined them as a running foot's
    pieces, and they were left out of the Markdown."""
    result, _ = parse(engine, name)
    labels = [block for block in result.blocks if block.text in fields]
    assert [block.text for block in labels] == fields, [block.text for block in result.blocks]
    assert all(block.type == "text" for block in labels), labels
    assert all(field in result.markdown for field in fields), result.markdown[-300:]
