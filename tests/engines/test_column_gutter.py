"""A two-column page whose left column's display formula runs into the right column's text
(elstest-3pd.pdf page 3, tests/data/README.md), read from its pixels (no text layer): the
detector joins the formula's last fraction with the right column's lines across the gutter."""

from __future__ import annotations

import pytest
from PIL import Image
from test_real_pages import DATA

from mineru_cli.config import LoadOptions
from mineru_cli.engines.ocr import OcrEngine
from mineru_cli.inputs import SourceFile, open_document

pytestmark = pytest.mark.slow

PAGE = DATA / "gutter_formula_elstest_3pd_p3.pdf"


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2, lang="en")


@pytest.mark.parametrize("dpi", [150, 300])
def test_a_formula_running_into_the_next_column_does_not_join_its_columns(engine, dpi):
    """Formula (5) of the left column overprints "mi-crocavity" and "WGM" of the right one; the
    joined lines ("G(x,grocavity ...") made the right column's block span the gutter, and the
    columns were read row by row. Cut in the gutter, the left column reads down first."""
    with open_document(SourceFile(PAGE, PAGE.name, "pdf"), LoadOptions(dpi=dpi, text_layer="off")) as doc:
        image = doc.page(0).image
    result = engine.parse(image)
    (right,) = [block for block in result.blocks if block.text.startswith("In this section let us")]
    assert right.bbox[0] > image.width / 2, right
    md = result.markdown
    left_end = md.index("Here we introduced the initial state")
    assert left_end < md.index("In this section let us"), md[:1500]


@pytest.mark.parametrize("dpi", [150, 300])
def test_a_formula_running_into_the_next_column_keeps_the_text_layer_in_columns(engine, dpi):
    """The same page from its text layer: the formula's glyphs that print over the right column
    ("Gn(x, y)", "An x + Bny") are lines of their own, half in the gutter, that linked the
    formula's paragraph to the right column; the page was read row by row (the right column's
    "In this section let us" before the left column's "Here e, m are"). Cut at the right column's
    side, the left column reads down first."""
    with open_document(SourceFile(PAGE, PAGE.name, "pdf"), LoadOptions(dpi=dpi, text_layer="auto")) as doc:
        page = doc.page(0)
        image, layer = page.image, page.text_layer
    assert layer is not None and layer.trusted
    result = engine.parse(image, layer)
    (right,) = [block for block in result.blocks if block.text.startswith("In this section let us")]
    (left,) = [block for block in result.blocks if block.text.startswith("Here we introduced the initial state")]
    assert right.bbox[0] > left.bbox[2], (right, left)  # the right column's block starts past the gutter
    md = result.markdown
    assert md.index("Here e, m are the electron") < md.index("In this section let us"), md[:1500]
    assert md.index("Here we introduced the initial state") < md.index("In this section let us"), md[:1500]


EQUATION_NUMBER = DATA / "gutter_equation_number_acm_lualatex_p3.pdf"


def test_a_line_beside_an_equation_number_stays_whole(engine):
    """acmart's lualatex sample, page 3 at 300 DPI: a display equation's number "(1)" stands at
    the left column's right edge, beside a paragraph whose layout region is narrower than its
    lines. The number is in no text region, so it is no other column: the paragraph's line
    ("... formatted somewhat differently in the display-math environment") stays whole (it was
    cut at the number, and its right piece read after the equation)."""
    with open_document(
        SourceFile(EQUATION_NUMBER, EQUATION_NUMBER.name, "pdf"), LoadOptions(dpi=300, text_layer="off")
    ) as doc:
        image = doc.page(0).image
    text = " ".join(block.text for block in engine.parse(image).blocks)
    assert "formatted somewhat differently in the display" in text, text


REFERENCES_HEADING = DATA / "references_table_asmejour_p5.png"


def test_a_text_region_over_both_columns_reads_each_column_down(engine):
    """Page 5 of the asmejour template at 150 DPI (tests/data/references_table_asmejour_p5.png):
    the layout model draws one text region over the left column's "... yields the well-known"
    and the right column's heading "References" beside it, one line of each. The region's own
    lines are too few to show the gutter; the page's lines above and below show it, and the
    region becomes one block per column: the heading starts the right column, and the rest of
    the left column (Appendix B, Annexe C) reads before the reference list."""
    result = engine.parse(Image.open(REFERENCES_HEADING).convert("RGB"))
    (heading,) = [block for block in result.blocks if "References" in block.text]
    assert "well-known" not in heading.text and heading.bbox[0] > 600, heading
    text = "\n".join(block.text for block in result.blocks)
    assert text.index("well-known") < text.index("Annexe C") < text.index("References") < text.index("[1]"), text


WIDE_EQUATION = DATA / "wide_equation_apssamp_p4.png"


def test_a_wide_equation_broken_near_the_gutter_stays_one_block(engine):
    """Page 4 of REVTeX's APS sample at 150 DPI (tests/data/wide_equation_apssamp_p4.png):
    equation (7) runs across both columns, and its region's lines break near the gutter. The
    pieces stand much closer than the gutter the page's other lines leave (page_gutter_share):
    the region stays one block, read after the right column's "... set in a wide format" that
    introduces it. Cut at the gutter, its left half was read in the left column and its right
    half ("+ xwQe ...") after the right column's paragraph."""
    image = Image.open(WIDE_EQUATION).convert("RGB")
    result = engine.parse(image)
    (equation,) = [block for block in result.blocks if "xwQe" in block.text]
    assert equation.bbox[0] < 0.4 * image.width < 0.6 * image.width < equation.bbox[2], equation
    text = "\n".join(block.text for block in result.blocks)
    assert text.index("set in a wide format") < text.index("xwQe") < text.index("This is typed"), text


def test_a_region_over_a_column_and_the_paragraph_under_it_is_not_split_by_the_page_columns():
    """Made-up boxes (no page at hand shows it): a region holding a left column's last rows and a
    short line of the full-width paragraph under the columns. The page's column split puts the
    two in different pieces, one above the other, and the page's gutter between them is negative
    (other lines overlap across it): the region's lines are not side by side, so it stays whole
    (it was split, the lower line read first)."""
    from mineru_cli.engines import assembly
    from mineru_cli.engines.lines import Line

    def line(x1: int, y1: int, x2: int) -> Line:
        return Line((x1, y1, x2, y1 + 20), "word word word", 1.0)

    page = [line(100, 100 + k * 30, 900) for k in range(4)]
    page += [line(x, 300 + k * 30, x + 380) for k in range(20) for x in (100, 520)]
    short = line(100, 950, 300)
    page += [short] + [line(100, 980 + k * 30, 900) for k in range(3)]
    region = [ln for ln in page if ln.box[0] == 100 and ln.box[2] == 480 and ln.box[1] >= 780] + [short]
    columns = assembly._across_page_columns(region, assembly._PageColumns(page))
    assert columns == [region]
