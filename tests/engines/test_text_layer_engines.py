"""The engines on born-digital PDF pages: a trusted text layer gives the text (exactly, no OCR
model runs), and `--mode standard` sends only tables and equations to the VLM."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import mineru, read_journal
from pdfs import (
    COLUMN_PARAGRAPHS,
    FORM_FIELDS,
    FORM_TITLE,
    FORM_VALUES,
    PROSE,
    TABLE_ROWS,
    TITLE,
    annotate,
    field_pixels,
    first_page,
    form_labels,
    form_pdf,
    prose,
    table_pdf,
    two_column_pdf,
    typewriter,
    write_pdf,
)
from tablegrid import html_grid

from mineru_cli.config import LoadOptions
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.engines.ocr import OcrEngine
from mineru_cli.inputs import SourceFile, open_document
from mineru_cli.writers import content_list_items


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text.replace("#", ""))


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2)


def test_a_trusted_two_column_page_reads_exactly_in_column_order(engine, tmp_path):
    page = first_page(two_column_pdf(tmp_path / "cols.pdf"))
    assert page.text_layer.trusted
    result = engine.parse(page.image, page.text_layer)
    # CER 0 in reading order: the title, then the paragraphs down the left column, then the right
    assert _squash(result.markdown) == _squash(TITLE + "".join(COLUMN_PARAGRAPHS))
    assert {b.extra["source"] for b in result.blocks} == {"text_layer"}
    assert result.counts == {"text_layer_blocks": len(result.blocks)}
    assert "ocr" not in result.timings and "layout" in result.timings  # no text model ran
    pixels = engine.parse(page.image)  # the same page read from its pixels
    assert {b.extra["source"] for b in pixels.blocks} == {"ocr"} and "ocr" in pixels.timings


def test_an_untrusted_layer_is_read_from_the_pixels(engine, tmp_path):
    path = write_pdf(tmp_path / "few.pdf", lambda c: prose(c, lines=["Chapter 3"], size=40))
    page = first_page(path)
    assert not page.text_layer.trusted
    result = engine.parse(page.image, page.text_layer)
    assert {b.extra["source"] for b in result.blocks} == {"ocr"} and "ocr" in result.timings


def test_a_ruled_table_gets_its_cells_from_the_text_layer(engine, tmp_path):
    page = first_page(table_pdf(tmp_path / "table.pdf"), dpi=100)
    result = engine.parse(page.image, page.text_layer)
    (table,) = [b for b in result.blocks if b.type == "table"]
    # the structure model's cells, filled with the layer's exact lines (tests/engines/test_table.py)
    assert html_grid(table.extra["html"]) == TABLE_ROWS
    assert table.text == "\n".join("\t".join(row) for row in TABLE_ROWS)


@pytest.mark.e2e
def test_the_record_says_whether_the_text_layer_was_used_and_resume_and_off_follow_it(tmp_path, record_validator):
    docs = tmp_path / "docs"
    docs.mkdir()
    two_column_pdf(docs / "cols.pdf")
    write_pdf(docs / "few.pdf", lambda c: prose(c, lines=["Chapter 3"]))
    from PIL import Image, ImageDraw

    shot = Image.new("RGB", (900, 300), "white")
    ImageDraw.Draw(shot).text((30, 30), PROSE[0], fill="black", font_size=32)
    shot.save(docs / "shot.png")

    args = ("parse", "docs", "--engine", "ocr", "--workers", "1", "--cpus", "2")
    first = mineru(*args, "--out", "auto.jsonl", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    records = {r["source"]: r for r in read_journal(tmp_path / "auto.jsonl", record_validator)}
    cols, few, shot_rec = records["cols.pdf"], records["few.pdf"], records["shot.png"]
    assert cols["text_layer"]["used"] is True and cols["text_layer"]["chars"] > 1000
    assert {b["source"] for b in cols["blocks"]} == {"text_layer"}
    assert _squash(cols["markdown"]) == _squash(TITLE + "".join(COLUMN_PARAGRAPHS))
    assert few["text_layer"] == {
        "used": False,
        "chars": 8,
        "hidden": 0,
        "reason": "too_few_chars",
        "detail": "8 visible characters (fewer than 50)",
    }
    assert {b["source"] for b in few["blocks"]} <= {"ocr"}
    assert shot_rec["text_layer"] is None  # an image has no text layer

    again = mineru(*args, "--out", "auto.jsonl", cwd=tmp_path)  # a re-run redoes nothing
    assert again.returncode == 0, again.stderr
    assert read_journal(tmp_path / "auto.jsonl") == list(records.values())  # the same records, none redone

    off = mineru(*args, "--out", "off.jsonl", "--text-layer", "off", "--no-cache", cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    pixels = {r["source"]: r for r in read_journal(tmp_path / "off.jsonl", record_validator)}
    assert all(r["text_layer"] is None for r in pixels.values())
    assert {b["source"] for b in pixels["cols.pdf"]["blocks"]} == {"ocr"}
    assert pixels["cols.pdf"]["fingerprint"] != cols["fingerprint"]  # --text-layer is part of it
    # the same pixels under both settings: only where the text came from differs
    assert pixels["cols.pdf"]["image"] == cols["image"]
    assert json.dumps(pixels["shot.png"]["blocks"]).replace('"ocr"', "") == json.dumps(shot_rec["blocks"]).replace(
        '"ocr"', ""
    )


@pytest.mark.parametrize("text_layer, source", [("auto", "text_layer"), ("off", "ocr")])
def test_a_filled_form_keeps_its_values_in_their_fields(engine, tmp_path, text_layer, source):
    """A value filled into a form field is in the page's blocks whether the page's text layer is
    used (the value joins it) or not (OCR reads the field as rendered), in its field's place,
    after its label."""
    path = form_pdf(tmp_path / "form.pdf")
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(text_layer=text_layer)) as doc:
        page = doc.page(0)
    result = engine.parse(page.image, page.text_layer)
    assert {b.extra["source"] for b in result.blocks} == {source}
    for label, name in (("Full name:", "name"), ("Address:", "address")):
        (block,) = [b for b in result.blocks if _squash(FORM_VALUES[name]) in _squash(b.text)]
        assert _squash(block.text).index(_squash(label)) < _squash(block.text).index(_squash(FORM_VALUES[name]))
        x1, y1, x2, y2 = field_pixels(FORM_FIELDS[name])
        bx1, by1, bx2, by2 = block.bbox
        assert bx1 < x2 and x1 < bx2 and by1 <= (y1 + y2) / 2 <= by2  # the block reaches into the field's row


@pytest.mark.parametrize("text_layer, source", [("auto", "text_layer"), ("off", "ocr")])
def test_text_typed_onto_a_form_without_fields_is_in_its_place(engine, tmp_path, text_layer, source):
    """A value typed onto a printed form with a viewer's typewriter tool (a FreeText annotation)
    is in the page's blocks whether the text layer is used (the value joins it) or not (OCR
    reads the rendered page), in its place, read after its label (the layout model may give a
    value a region of its own)."""
    typed = [typewriter(FORM_FIELDS[name], value) for name, value in FORM_VALUES.items()]
    path = annotate(write_pdf(tmp_path / "typed.pdf", form_labels), typed)
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(text_layer=text_layer)) as doc:
        page = doc.page(0)
    result = engine.parse(page.image, page.text_layer)
    assert {b.extra["source"] for b in result.blocks} == {source}
    text = _squash("".join(b.text for b in result.blocks))
    for label, name in (("Full name:", "name"), ("Address:", "address")):
        assert text.index(_squash(label)) < text.index(_squash(FORM_VALUES[name]))
        (block,) = [b for b in result.blocks if _squash(FORM_VALUES[name]) in _squash(b.text)]
        x1, y1, x2, y2 = field_pixels(FORM_FIELDS[name])
        bx1, by1, bx2, by2 = block.bbox
        assert bx1 < x2 and x1 < bx2 and by1 <= (y1 + y2) / 2 <= by2  # the block reaches into the value's row


def test_an_empty_field_and_a_checked_box_add_no_text(engine, tmp_path):
    def checkbox(c):
        c.acroForm.checkbox(name="agree", checked=True, x=160, y=500, size=20)

    path = form_pdf(tmp_path / "form.pdf", values={"name": FORM_VALUES["name"]}, more=checkbox)
    page = first_page(path)
    result = engine.parse(page.image, page.text_layer)
    assert {b.extra["source"] for b in result.blocks} == {"text_layer"}
    assert _squash("".join(b.text for b in result.blocks)) == _squash(
        FORM_TITLE + "Full name:" + FORM_VALUES["name"] + "Address:"
    )


def test_an_author_line_low_on_a_title_page_stays_in_the_markdown(engine):
    """The title page of R's "An Introduction to R" (tests/data/title_r_intro_p1.pdf): the layout
    model calls the authors' line, 85 % down the page, a "header". Running heads sit at the top
    of their page: a header in the lower half is text, read in its place after the title, and in
    the Markdown (furniture is left out of it)."""
    path = Path(__file__).parents[1] / "data" / "title_r_intro_p1.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(text_layer="auto")) as doc:
        page = doc.page(0)
    assert page.text_layer is not None and page.text_layer.trusted
    result = engine.parse(page.image, page.text_layer)
    (authors,) = [b for b in result.blocks if "Venables" in b.text]
    assert authors.type == "text"
    assert "W. N. Venables, D. M. Smith and the R Core Team" in result.markdown
    titles = [n for n, b in enumerate(result.blocks) if "An Introduction to R" in b.text]
    assert titles and titles[0] < result.blocks.index(authors)


@pytest.mark.parametrize("text_layer, source", [("auto", "text_layer"), ("off", "ocr")])
def test_a_word_hyphenated_at_a_line_end_is_made_whole(engine, text_layer, source):
    """Writing R Extensions, page 111 (tests/data/hyphens_r_exts_p111.pdf): "environ-" / "ment"
    and "speci-" / "fied" are words broken at a line end, read whole (MinerU drops such a hyphen);
    "EUC-" / "JP" goes on with a capital, and its hyphen stays."""
    path = Path(__file__).parents[1] / "data" / "hyphens_r_exts_p111.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer=text_layer)) as doc:
        page = doc.page(0)
    result = engine.parse(page.image, page.text_layer)
    assert {b.extra["source"] for b in result.blocks if b.type == "text"} == {source}
    assert "environment" in result.markdown and "specified" in result.markdown
    assert "environ-ment" not in result.markdown and "speci-fied" not in result.markdown
    assert "EUC-JP" in result.markdown


def test_a_word_broken_at_a_soft_hyphen_in_chromium_is_made_whole(engine):
    """A page Chromium printed (tests/data/soft_hyphens_chromium.pdf): its words break at soft
    hyphens, where Chromium sets U+2010 HYPHEN, not the ASCII one; the Markdown read "docu‐
    ments" and "incom‐ prehensible"."""
    path = Path(__file__).parents[1] / "data" / "soft_hyphens_chromium.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150)) as doc:
        page = doc.page(0)
    assert page.text_layer is not None and page.text_layer.trusted
    result = engine.parse(page.image, page.text_layer)
    for word in ("documents", "incomprehensible", "hyphenation", "Extraordinarily"):
        assert result.markdown.count(word) == 6
    assert "\u2010" not in result.markdown


@pytest.mark.parametrize("text_layer", ["auto", "off"])
def test_each_item_of_a_bulleted_list_starts_a_line(engine, text_layer):
    """attachfile2's documentation, page 3 (tests/data/list_attachfile2_p3.pdf): a to-do list of
    twelve bullets, one with two dashed sub-items, that the layout model boxes as one text block.
    Its rows were re-flowed into one paragraph ("... to do: • Documentation, documentation, ...
    • Improving portability ..."); each item now starts a line of the block's text, and the
    Markdown breaks before it (MinerU's list start lines), through the text layer and from the
    pixels alike. The prose rows of an item stay joined."""
    path = Path(__file__).parents[1] / "data" / "list_attachfile2_p3.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer=text_layer)) as doc:
        page = doc.page(0)
    result = engine.parse(page.image, page.text_layer)
    # the list's code lines (a `def` in typewriter under one item) are a code block between its parts
    lines = [line for b in result.blocks if b.type != "code" for line in b.text.split("\n")]
    items = [line for line in lines if line.startswith("•")]
    assert len(items) >= 12, lines
    assert "• GoToE links." in lines and "• Option scale for icons?" in lines
    subs = [line for line in lines if line[:1] in "–-"]
    assert len(subs) == 2 and subs[0][2:].startswith("coordinate transformation") and subs[1][2:].startswith("Syntax")
    assert any(line.startswith("• Layout of PinPush, especially the tip does not scale well") for line in lines)
    assert "  \n• GoToE links.  \n" in result.markdown


R_EXTS_LISTINGS = (
    "AC_CHECK_LIB(foo, fun, [HAVE_FOO=TRUE], [HAVE_FOO=FALSE])\nAC_SUBST(HAVE_FOO)\n......\n"
    "AC_CONFIG_FILES([foo.R])\nAC_OUTPUT",
    'foo <- function(x) {\n    if(!@HAVE_FOO@)\n      stop("Sorry, library ’foo’ is not available")\n    ...',
    'foo <- function(x) {\n    if(!FALSE)\n      stop("Sorry, library ’foo’ is not available")\n    ...',
)


def test_listings_in_a_monospaced_font_are_code_blocks_between_their_paragraphs(engine, tmp_path):
    """Writing R Extensions, page 30 (tests/data/code_r_exts_p30.pdf): three listings set in
    CMTT10 are code blocks, one row a line with its indentation, in reading order between the
    paragraphs around them; the first one ran into the sentence after it ("in configure.ac
    (assuming ..."), each was re-flowed into one line. Rows of prose with inline code stay prose.
    Markdown fences them unescaped; content_list gives them as code items."""
    path = Path(__file__).parents[1] / "data" / "code_r_exts_p30.pdf"
    page = first_page(path, dpi=150)
    assert page.text_layer.trusted
    result = engine.parse(page.image, page.text_layer)
    kinds = [b.type for b in result.blocks]
    code = [b for b in result.blocks if b.type == "code"]
    assert [b.text for b in code] == list(R_EXTS_LISTINGS)
    first = kinds.index("code")
    before, after = result.blocks[first - 1], result.blocks[first + 1]
    assert before.type == after.type == "text"
    assert before.text.endswith("one could use") and "AC_CHECK_LIB" not in before.text
    assert after.text.startswith("in configure.ac (assuming Autoconf 2.50 or later).")
    assert "HAVE_FOO to TRUE" in before.text  # a row with inline code is prose
    assert all(b.bbox[1] >= before.bbox[3] and b.bbox[3] <= after.bbox[1] for b in code[:1])
    assert f"```\n{R_EXTS_LISTINGS[0]}\n```" in result.markdown  # no `\_` inside the fence
    record = {"image": {"width": page.image.width, "height": page.image.height}, "page_index": 0}
    record["blocks"] = [b.as_dict() for b in result.blocks]
    items = [item for item in content_list_items(record, tmp_path) if item["type"] == "code"]
    assert [item["code_body"] for item in items] == list(R_EXTS_LISTINGS)
    pixels = engine.parse(page.image)  # read from its pixels (--text-layer off), as it was
    assert "code" not in [b.type for b in pixels.blocks]


def test_a_lone_web_address_in_typewriter_stays_in_its_paragraph():
    """The ejpecp class's guide, page 1 (tests/data/article_ejpecp_p1.pdf): its running head's
    DOI line, set in typewriter between two lines of prose, stays in the head's text block; the
    two \\documentclass lines of its example are code."""
    path = Path(__file__).parents[1] / "data" / "article_ejpecp_p1.pdf"
    page = first_page(path, dpi=150)
    result = OcrEngine(threads=2).parse(page.image, page.text_layer)
    (head,) = [b for b in result.blocks if "https://doi.org/" in b.text]
    assert head.type == "text" and head.text.startswith("Electron. Commun. Probab.")
    code = [b.text for b in result.blocks if b.type == "code"]
    assert code[:2] == ["\\documentclass[ECP]{ejpecp}", "\\documentclass[EJP]{ejpecp}"]


def test_a_memo_typed_wholly_in_courier_is_prose_not_code(engine):
    """A memo set wholly in a Courier face (tests/data/typewriter_memo_chromium.pdf: Chromium's
    print of four paragraphs in Liberation Mono) is prose: its rows are long and hold sentences,
    not a listing's brackets and operators, so they are re-flowed into text as before, not
    fenced as one code block."""
    path = Path(__file__).parents[1] / "data" / "typewriter_memo_chromium.pdf"
    page = first_page(path, dpi=150)
    assert page.text_layer is not None and all(ln.mono for ln in page.text_layer.lines)
    result = engine.parse(page.image, page.text_layer)
    assert "code" not in [b.type for b in result.blocks]
    assert "```" not in result.markdown
    assert "the cost of any repair that both parties have approved in writing" in result.markdown


def test_prose_in_a_monospaced_cjk_font_is_prose_not_code(engine):
    """Three paragraphs of Chinese set in WenQuanYi Micro Hei Mono (tests/data/cjk_mono_prose_chromium.pdf,
    Chromium's print): every line under the heading is monospaced, but its rows are sentences, long in character
    cells (each CJK character fills two) and stopped by full-width commas and stops, so they
    are text, not one fenced block."""
    path = Path(__file__).parents[1] / "data" / "cjk_mono_prose_chromium.pdf"
    page = first_page(path, dpi=150)
    assert page.text_layer is not None and all(ln.mono for ln in page.text_layer.lines[1:])  # under the heading
    result = engine.parse(page.image, page.text_layer)
    assert "code" not in [b.type for b in result.blocks]
    assert "```" not in result.markdown
    assert "整个过程大约需要五分钟。" in result.markdown


def test_a_listing_broken_across_two_columns_keeps_the_reading_order(engine):
    """A <pre> of 60 numbered rows that Chromium breaks from the foot of the left column to the
    top of the right one (tests/data/code_two_columns_chromium.pdf). Its two pieces are code
    blocks in column order, after the left column's prose and before the right column's, each
    one row a line; the piece right of the other starts higher, so it is not a comment beside
    the first piece's rows, and the two are not interleaved into one block."""
    path = Path(__file__).parents[1] / "data" / "code_two_columns_chromium.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    code = [b.text.splitlines() for b in result.blocks if b.type == "code"]
    rows = [f"line_{i:02d} = value({i}) + offset  # n{i}" for i in range(1, 61)]
    assert [row for block in code for row in block] == rows
    text = result.markdown
    assert text.index("the reader waits patiently.") < text.index("line_01 =") < text.index("line_22 =")
    assert text.index("line_22 =") < text.index("line_23 =") < text.index("line_60 =")
    assert text.index("line_60 =") < text.index("After the listing, the right column")


def test_a_page_of_code_set_in_two_columns_reads_column_after_column(engine):
    """setspace's documentation, page 2 (tests/data/code_two_columns_setspace_p2.pdf): the
    package's source printed verbatim in two columns, which the layout model boxes as one figure.
    Its rows are a "%%%" and the text after it, side by side as a table's cells are, but every
    line is monospaced: a listing, no table. The left column reads down to its foot, then the
    right one, each a code block; read row by row across both, the page's CER was 0.745."""
    path = Path(__file__).parents[1] / "data" / "code_two_columns_setspace_p2.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    left, right = [b.text.splitlines() for b in result.blocks if b.type == "code"]
    assert left[0] == "% \\iffalse meta-comment" and left[-1].split() == ["%%%", "on", "Tue", "6", "Aug", "96,"]
    assert right[0] == "%%%" and right[1].split() == ["%%%", "Ted", "Stern"]
    assert right[-1].split() == ["%%%", "https://github.com/rf-latex/setspace/issues/5"]
    assert not any("GT, Tue 10 Dec 1996" in row for row in left)


def test_a_page_number_boxed_with_a_two_column_listing_does_not_join_its_columns(engine):
    """setspace's documentation, page 3 (tests/data/code_two_columns_setspace_p3.pdf): the same
    two columns of source, but the figure the layout model boxes round them takes in the page's
    number, set in the text font under the gutter. A number is no sign of a table: the columns
    still read one after the other."""
    path = Path(__file__).parents[1] / "data" / "code_two_columns_setspace_p3.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    left, right = [b.text.splitlines() for b in result.blocks if b.type == "code"]
    assert left[:2] == ["%%%", "%%% }"] and left[-1] == "\\ProcessOptions"
    assert right[0].startswith("% GT:  Sat 28 Sep 1996:  Widely using \\newcommand")
    assert right[-1].split() == ["depth.3\\baselineskip"]


def test_line_numbers_boxed_apart_from_their_listing_stay_with_their_rows(engine):
    """acmart's documentation, page 60 (tests/data/code_line_numbers_acmart_p60.pdf): a docstrip
    listing of journal names, lines 1066-1119, numbered in the text font. The layout model boxes
    each number apart from the listing; read as blocks of their own, the page read a column of
    54 numbers and then the code (CER 0.724). Each number stays at the head of its row, as
    printed."""
    path = Path(__file__).parents[1] / "data" / "code_line_numbers_acmart_p60.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    (code,) = [b.text.splitlines() for b in result.blocks if b.type == "code"]
    assert [row.split() for row in code[:3]] == [["1066", "JEA,%"], ["1067", "JERIC,%"], ["1068", "JETC,%"]]
    assert code[-1].split() == ["1119", "TSLP,%"] and len(code) == 54
    assert [b.text for b in result.blocks if b.type != "code"] == ["60"]


def test_two_listings_side_by_side_read_one_after_the_other(engine):
    """tests/data/code_side_by_side_chromium.pdf (Chromium's print): a C listing and a Python one
    side by side in a flex row, boxed as one figure. The Python listing stands within the C
    listing's rows, as a comment at a row's end does, but its blank line falls where the C
    listing has a row: it is a listing of its own, read after the C one, not joined row by row
    into it. Comments aligned at the rows' ends (tests/data/code_aligned_comments_chromium.pdf)
    stay on their rows."""
    path = Path(__file__).parents[1] / "data" / "code_side_by_side_chromium.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    c, python = [b.text.splitlines() for b in result.blocks if b.type == "code"]
    assert c[0] == "int sum(int *v, int n) {" and c[-1] == "}" and len(c) == 14
    assert python[0] == "def total(values):" and python[-1] == "    return m" and len(python) == 12
    path = Path(__file__).parents[1] / "data" / "code_aligned_comments_chromium.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    (code,) = [b.text.splitlines() for b in result.blocks if b.type == "code"]
    assert len(code) == 16 and code[0].split("#") == ["total = 0                         ", " running sum"]
    assert code[4].split("#") == ["        price = price * 9 // 10   ", " ten percent off"]


def test_a_listing_whose_backslashes_come_from_the_math_font_is_one_code_block(engine):
    """Doxygen's manual, page 21 (tests/data/code_backslash_cmsy_doxygen.pdf): its Qt-style example
    is set in NimbusMonL, but LaTeX takes the backslash of "\\param a an integer argument." from
    CMSY10. Those four rows are still monospaced rows of the listing, which stays one code block,
    not cut around a paragraph of them re-flowed into one line."""
    path = Path(__file__).parents[1] / "data" / "code_backslash_cmsy_doxygen.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    code = [b.text for b in result.blocks if b.type == "code"]
    assert len(code) == 2 and code[0].startswith("/*!  A test class */")
    rows = code[1].splitlines()
    assert rows[0] == "//!    A test class." and rows[-1].strip() == "int testMe(int a,const char *s);"
    assert "\\param a an integer argument." in rows and "\\return The test results" in rows
    assert not any("\\param" in b.text for b in result.blocks if b.type != "code")


def test_listings_the_layout_model_boxes_as_an_equation_or_a_title_are_code(engine):
    """tests/data/code_listing_pieces_chromium.pdf (Chromium's print, listings in Liberation Mono):
    two listings side by side, which the layout model boxes as one equation, are a code block that
    keeps them side by side, not an equation read across both; a listing with a blank line after
    each statement, which it cuts into a text region and a title over the same rows, is one code
    block, not a code row and a paragraph of the other two."""
    path = Path(__file__).parents[1] / "data" / "code_listing_pieces_chromium.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    assert "equation" not in [b.type for b in result.blocks]
    side, spaced = [b.text.splitlines() for b in result.blocks if b.type == "code"]
    assert side[0].startswith("while (n > 0) {") and side[0].endswith("for (i = 0; i < n; i++) {")
    assert [row.split() for row in side[1:]] == [
        ["total", "+=", "next(n);"] + ["total", "+=", "next(i);"],
        ["n--;", "}"],
        ["}"],
    ]
    assert side[0].index("for") + 4 == side[1].rindex("total")  # the right-hand listing, indented as set
    assert [row for row in spaced if row] == ["x = read_value()", "y = transform(x)", "write_value(y)"]
    assert "write_value" not in "".join(b.text for b in result.blocks if b.type != "code")


def test_a_listing_numbered_in_the_text_font_is_one_code_block(engine):
    """elteikthesis's minted example (tests/data/code_numbered_elteikthesis_minted.pdf): a C++
    listing in cm-super's sftt and sfit whose line numbers are set in 6 pt sfrm, close enough
    to join the unindented lines ("1 #include <stdio>"), and alone on its blank lines ("2").
    Its rows are one code block, one row a line, numbers kept (the layout model boxes the
    numbers of lines 10 and 11 apart)."""
    path = Path(__file__).parents[1] / "data" / "code_numbered_elteikthesis_minted.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    (code,) = [b.text for b in result.blocks if b.type == "code"]
    rows = [" ".join(row.split()) for row in code.splitlines()]
    assert rows[:9] == [
        "1 #include <stdio>",
        "2",
        "3 int main()",
        "4 {",
        "5 int c;",
        '6 std::cout << "Hello World!" << std::endl;',
        "7",
        '8 std::cout << "Press any key to exit." << std::endl;',
        "9 std::cin >> c;",
    ]
    assert rows[-2:] == ["return 0;", "12 }"]
    assert code.splitlines()[4].startswith(" 5  ")  # "int c;" indented past the numbers


@pytest.mark.parametrize("text_layer", ["auto", "off"])
def test_a_bullet_between_words_is_no_list_item_where_a_row_starts_with_it(engine, text_layer):
    """A Chromium-made page (tests/data/bullet_separators_chromium.pdf): a paragraph whose
    opening hours are set apart by bullets between them ("Opening hours • Monday to Thursday
    ... ● Friday 9:00 to 16:00 • closed on public holidays"), the row break falling just before
    one. That bullet started a line of its own, as a list item does, and the Markdown broke the
    sentence there; the glyph stands between words in the same block, so it stays in the row."""
    path = Path(__file__).parents[1] / "data" / "bullet_separators_chromium.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer=text_layer)) as doc:
        page = doc.page(0)
    result = engine.parse(page.image, page.text_layer)
    hours = next(b for b in result.blocks if "Opening hours" in b.text)
    assert re.search(r"16:00 \W closed on public holidays", hours.text), hours.text


@pytest.mark.parametrize("text_layer", ["auto", "off"])
def test_each_numbered_item_starts_a_line_and_the_prose_after_the_list_too(engine, text_layer):
    """ltxgrid's documentation, page 21 (tests/data/list_numbered_ltxgrid_p21.pdf): eight steps
    numbered "1." to "8.", their rows hanging under the item's text, and a paragraph after them
    set back at the margin ("As you can see, ..."), all one text block. The steps were re-flowed
    into one paragraph, and the paragraph after the list was joined to step 8; each step and the
    paragraph after them now start lines of the block's text (the Markdown breaks before them),
    through the text layer and from the pixels alike. An item's own rows stay joined."""
    path = Path(__file__).parents[1] / "data" / "list_numbered_ltxgrid_p21.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer=text_layer)) as doc:
        page = doc.page(0)
    result = engine.parse(page.image, page.text_layer)
    lines = [line for b in result.blocks for line in b.text.split("\n")]
    steps = [line for line in lines if re.match(r"\d\. ", line)]
    assert [step[:2] for step in steps] == [f"{n}." for n in range(1, 9)], lines
    assert steps[1].startswith("2. lineno itself effectively does") and steps[1].endswith("to \\toks15.")
    after = next(line for line in lines if line.startswith("As you can see, the process of taking over"))
    assert after.endswith("Each new package inserts itself on front of LATEX."), after
    assert "(\\toks15).  \nThis means" not in result.markdown and "  \nAs you can see" in result.markdown


@pytest.mark.parametrize("text_layer", ["auto", "off"])
def test_the_paragraph_after_a_texinfo_list_starts_a_line_at_its_paragraph_indent(engine, text_layer):
    """The R FAQ, page 11 (tests/data/list_after_texinfo_rfaq_p11.pdf): Texinfo sets a bulleted
    list's bullets in from the margin and the items' text further in, and the paragraph after the
    list ("An annotated bibliography ...") with its first row indented between the two: neither
    left of the bullets nor under the items' text. The paragraph was joined to the last item; it
    now starts a line of its own, through the text layer and from the pixels alike."""
    path = Path(__file__).parents[1] / "data" / "list_after_texinfo_rfaq_p11.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer=text_layer)) as doc:
        page = doc.page(0)
    lines = [line for b in engine.parse(page.image, page.text_layer).blocks for line in b.text.split("\n")]
    last = next(line for line in lines if "(R-ints) is a guide to" in line)
    assert last.endswith("(Added in R 2.4.0.)"), last
    assert any(line.startswith("An annotated bibliography") for line in lines), lines
    # the item before the last stays a line of its own (the reader drops some other bullets)
    assert any(re.fullmatch(r"• .R Installation and Administration. \(R-admin\)\.", line) for line in lines), lines


@pytest.mark.parametrize("text_layer", ["auto", "off"])
def test_each_entry_of_a_texinfo_table_starts_a_line(engine, text_layer):
    """R Installation and Administration, page 64 (tests/data/deflist_texinfo_radmin_p64.pdf): a
    Texinfo @table of configure variables, each term at the margin with its definition indented
    after it on its row ("FFLAGS  debugging and optimization flags, ...") or, for a long term,
    under it ("SHLIB_CFLAGS" over "for shared objects ..."), then a paragraph at the margin.
    The table was read as one paragraph, term after definition after term; each entry now
    starts a line (the term, then its definition), and so does the paragraph after the table,
    through the text layer and from the pixels alike."""
    path = Path(__file__).parents[1] / "data" / "deflist_texinfo_radmin_p64.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer=text_layer)) as doc:
        page = doc.page(0)
    lines = [line for b in engine.parse(page.image, page.text_layer).blocks for line in b.text.split("\n")]
    assert "SHLIB_CFLAGS for shared objects (no known examples)" in lines, lines
    assert "FCFLAGS debugging and optimization flags, free-form Fortran" in lines, lines
    assert "DEFS defines to be used when compiling C code in R itself" in lines, lines
    assert any(line.startswith("Library paths specified as") for line in lines), lines


@pytest.mark.parametrize("text_layer", ["auto", "off"])
def test_a_man_pages_options_boxed_as_a_table_read_as_a_description_list(engine, text_layer):
    """ls(1), page 2, as `groff -man -Tpdf` sets it (tests/data/deflist_man_ls_groff_p2.pdf):
    the options, each a tag at the margin with its definition indented beside it ("-o  like -l,
    ...") or, for a long tag, under it. The layout model boxes the whole list as one table, whose
    cells paired tags with other options' definitions ("--si  -H, --dereference-command-line",
    "-o  print entry names without quoting"). Under a quarter of its rows hold lines side by
    side, so it is read as text: each option starts a line with its own definition after it,
    through the text layer and from the pixels alike."""
    path = Path(__file__).parents[1] / "data" / "deflist_man_ls_groff_p2.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer=text_layer)) as doc:
        page = doc.page(0)
    blocks = engine.parse(page.image, page.text_layer).blocks
    assert not any(b.type == T.TABLE for b in blocks), [b.type for b in blocks]
    lines = [line for b in blocks for line in b.text.split("\n")]
    # the recogniser may read the options "-o" and "-l" as "-0" and "-1"
    assert any(re.fullmatch(r"-[o0] like -[l1], but do not list group information", line) for line in lines), lines
    assert "--si likewise, but use powers of 1000 not 1024" in lines, lines
    assert any(line.startswith("-N, --literal print entry names without quoting") for line in lines), lines


@pytest.mark.parametrize("text_layer", ["auto", "off"])
def test_a_numbered_item_whose_sibling_is_in_another_block_starts_a_line(engine, text_layer):
    """R Data Import/Export, page 13 (tests/data/list_apart_texinfo_rdata_p13.pdf): a Texinfo
    enumerate whose items "5." to "10." each start with a short row. The layout model boxes
    "10. Comments" with the paragraphs of item 9 before it, and "9." in the block of items 6 to 9:
    with no sibling in its own block, item 10 was read on into the paragraph before it ("(if any).
    10. Comments By default, ..."). Its sibling elsewhere on the page, at its x, makes it an
    item that starts a line, through the text layer and from the pixels alike."""
    path = Path(__file__).parents[1] / "data" / "list_apart_texinfo_rdata_p13.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer=text_layer)) as doc:
        page = doc.page(0)
    lines = [line for b in engine.parse(page.image, page.text_layer).blocks for line in b.text.split("\n")]
    assert any(line.startswith("10. Comments By default, read.table uses") for line in lines), lines
    before = next(line for line in lines if "include the column of row names" in line)
    assert before.endswith("(if any)."), before


def test_a_margin_column_of_macro_names_is_not_joined_to_the_listing_beside_it(engine):
    """ryethesis's documentation p15 (tests/data/code_margin_names_ryethesis.pdf, the doc package's
    layout): the names of the macros a listing defines stand flush right in the left margin, in the
    monospaced font, level with the listing's rows 439-441. They are no comment at those rows' end:
    the listing's code block keeps its own rows, not rows read across the margin and the listing."""
    path = Path(__file__).parents[1] / "data" / "code_margin_names_ryethesis.pdf"
    page = first_page(path, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    listing = [b for b in result.blocks if b.type == "code" and "439" in b.text]
    assert len(listing) == 1
    rows = listing[0].text.splitlines()
    assert [row.split()[0] for row in rows if row.strip()] == ["439", "440", "441"]
    assert "\\nolistofplates" not in listing[0].text


@pytest.mark.parametrize("dpi", (150, 300))
def test_a_title_in_a_header_panel_boxed_as_a_figure_reads_whole(engine, dpi):
    """elsarticle's documentation p4 (tests/data/title_header_elsdoc_p4.pdf): a shaded header panel
    holds the document's title, the author and a box of quick links. The layout model boxes the
    whole panel as a figure (text, so a figure_text region) and the title's first two lines as a
    title inside it; the title's lines were shared out between the two boxes and read out of
    order ("way to format your" / "elsarticle.cls - A better document"). The title reads whole,
    then the author, then the links."""
    path = Path(__file__).parents[1] / "data" / "title_header_elsdoc_p4.pdf"
    page = first_page(path, dpi=dpi)
    text = "\n".join(b.text for b in engine.parse(page.image, page.text_layer).blocks)
    title = "elsarticle.cls \u2013 A better way to format your document"
    assert -1 < text.find(title) < text.find("Elsevier Ltd") < text.find("QUICK LINKS"), text


@pytest.mark.parametrize("dpi", (150, 300))
def test_option_names_in_the_margin_are_no_comment_beside_the_syntax(engine, dpi):
    """exam-zh's manual p31 (tests/data/margin_code_exam_zh_p31.pdf): each option's key names
    (sealline/text-xscale, sealline/odd-text-xscale ...) stand in the left margin, in the
    monospaced font, level with the option's syntax rows (text-xscale = <float point> ...). The
    names were joined to the syntax as a comment at its rows' end, and each row read a name and
    then a syntax line; the names are a block of their own, read before the syntax."""
    path = Path(__file__).parents[1] / "data" / "margin_code_exam_zh_p31.pdf"
    page = first_page(path, dpi=dpi)
    blocks = engine.parse(page.image, page.text_layer).blocks
    rows = [row for b in blocks for row in b.text.splitlines()]
    assert not [row for row in rows if "sealline/" in row and " = " in row], rows
    text = "\n".join(b.text for b in blocks)
    names = [text.index(s) for s in ("sealline/text-xscale", "sealline/even-text-xscale", "odd-text-xscale = ")]
    assert names == sorted(names), text


def test_a_tables_column_of_commands_in_smaller_print_is_no_side_panel(engine):
    """msu-thesis's documentation p3 (tests/data/table_commands_msuthesis.pdf): a table of the
    class's commands (monospaced, in boxes shorter than the roman descriptions') and what each
    does, which the layout model boxes as one region. The commands are no side panel: each stands
    level with its description, and is read before it, not all of them before all descriptions."""
    path = Path(__file__).parents[1] / "data" / "table_commands_msuthesis.pdf"
    page = first_page(path, dpi=150)
    text = "\n".join(b.text for b in engine.parse(page.image, page.text_layer).blocks)
    order = [text.index(s) for s in ("\\maketitlepage", "Makes the main title", "\\fieldofstudy", "Takes one argument")]
    assert order == sorted(order)


# JACoW's paper template, page 1 (tests/data/README.md): Table 1, Margin Specifications, its
# columns 12 pt apart (two \tabcolsep), closer than the text layer's line gap (GAP_SPLIT)
JACOW_TABLE = [
    ["Margin", "A4 Paper", "US Letter Paper"],
    ["Top", "37 mm (1.46 in)", "0.75 in (19 mm)"],
    ["Bottom", "19 mm (0.75 in)", "0.75 in (19 mm)"],
    ["Left", "20 mm (0.79 in)", "0.79 in (20 mm)"],
    ["Right", "20 mm (0.79 in)", "1.02 in (26 mm)"],
]


def _jacow_margins(engine, dpi: int):
    page = first_page(Path(__file__).resolve().parent.parent / "data" / "table_cells_jacow_p1.pdf", dpi=dpi)
    assert page.text_layer.trusted
    result = engine.parse(page.image, page.text_layer)
    (table,) = [b for b in result.blocks if b.type == "table" and "Margin" in b.text]
    return page, table


@pytest.mark.parametrize("dpi", [150, 300])
def test_a_text_layers_table_cells_set_close_together_stay_apart(engine, dpi):
    """The layer's lines ran across the columns ("37 mm (1.46 in) 0.75 in (19 mm)", and
    "Bottom 19 mm (0.75 in) 0.75 in (19 mm)" as one line), each such line fell into one cell,
    the others of its row empty: the table takes its lines' pieces, cut at its columns' gaps."""
    _, table = _jacow_margins(engine, dpi)
    assert html_grid(table.extra["html"]) == JACOW_TABLE
    assert table.text == "\n".join("\t".join(row) for row in JACOW_TABLE)


def test_a_text_layers_table_without_its_structure_gets_the_same_line_grid(engine):
    """Without the structure model (or where it fails), the table's line grid (`cells`) is made
    of the same pieces."""
    from mineru_cli.engines.assembly import assemble_blocks
    from mineru_cli.engines.ocr import text_layer_lines

    page, table = _jacow_margins(engine, 150)
    lines = text_layer_lines(page.text_layer)
    blocks = assemble_blocks(lines, [(table.bbox, "table", 0.9)], page.image.size)
    (grid,) = [b.extra["cells"] for b in blocks if b.type == "table"]
    assert grid == JACOW_TABLE


@pytest.mark.parametrize("text_layer", [True, False])
def test_a_formula_read_as_text_is_no_latex_in_the_content_list(engine, tmp_path, text_layer):
    """unicode-math's example, page 1 (tests/data/unicode_math_example_p1.pdf): the layout model
    boxes its display formulas as equations, whose text the layer or OCR reads as it stands
    ("𝐹(𝑠) = ℒ{𝑓 (𝑡)} = ..."), not LaTeX. content_list gave them as `$$`-wrapped LaTeX with
    `text_format: latex`, where a renderer takes `{`...`}` for a group and drops the braces; the
    Markdown gives them as paragraphs. They are text items, their text as read."""
    page = first_page(Path(__file__).parents[1] / "data" / "unicode_math_example_p1.pdf", dpi=150)
    result = engine.parse(page.image, page.text_layer if text_layer else None)
    formulas = [b.text for b in result.blocks if b.type == "equation"]
    assert formulas  # the page's display formulas, boxed as such
    record = {"image": {"width": page.image.width, "height": page.image.height}, "page_index": 0}
    record["blocks"] = [b.as_dict() for b in result.blocks]
    items = content_list_items(record, tmp_path)
    assert not [item for item in items if item["type"] == "equation" or "text_format" in item]
    assert [item["text"] for item in items if item.get("text") in formulas] == formulas


@pytest.mark.parametrize("dpi", (150, 300))
def test_a_sidebars_talk_title_is_no_frame_title(engine, dpi):
    """beamer's lecture example p4 (tests/data/frame_title_sidebar_lecture_p4.pdf): the sidebar
    sets the talk's title ("Syntax versus Semantik") at the slide's top right, a pixel higher than
    the frame title ("Die zwei Hauptbegriffe der heutigen Vorlesung.") that the layout model boxes
    as a title. The sidebar's title, the first text in the top band and as big as the sidebar's
    print, was made a second title; the frame title is the slide's only title."""
    path = Path(__file__).parents[1] / "data" / "frame_title_sidebar_lecture_p4.pdf"
    page = first_page(path, dpi=dpi)
    blocks = engine.parse(page.image, page.text_layer).blocks
    titles = [_squash(b.text) for b in blocks if b.type == "title" and b.bbox[1] < 0.15 * page.image.height]
    assert titles == [_squash("Die zwei Hauptbegriffe der heutigen Vorlesung.")], [(b.type, b.text) for b in blocks]


@pytest.mark.parametrize("text_layer", (False, True))
def test_a_slides_right_sidebar_is_aside_text_read_apart_from_its_body(engine, text_layer):
    """bfh-ci's sidebar beamer demo p11 (tests/data/slide_sidebar_right_bfh_p11.pdf, 150 DPI): a
    sidebar at the slide's right edge holds the talk's title and author, the school's logo and
    name, and the outline ("Example Frames", "section pages"), in smaller print than the body.
    Its blocks stand level with the body's three blocks and were read between them, as text of
    the body. The sidebar is aside_text, read before the body (as the text layer gives it) and left
    out of the Markdown."""
    page = first_page(Path(__file__).parents[1] / "data" / "slide_sidebar_right_bfh_p11.pdf", dpi=150)
    result = engine.parse(page.image, page.text_layer if text_layer else None)
    blocks = [(b.type, _squash(b.text)) for b in result.blocks]
    sidebar = [b for b in result.blocks if b.bbox[0] > 0.8 * page.image.width and b.type != "page_number"]
    assert sidebar and all(b.type == "aside_text" for b in sidebar), blocks
    body = [
        i for i, (_, text) in enumerate(blocks) if any(w in text for w in ("Exampleblock", "Alertblock", "Beispiel"))
    ]
    last_aside = max(i for i, (kind, _) in enumerate(blocks) if kind == "aside_text")
    assert body and min(body) > last_aside, blocks
    assert "ExampleFrames" not in _squash(result.markdown) and "Alertblock" in _squash(result.markdown)


@pytest.mark.parametrize(
    ("name", "label", "text_layer"),
    [
        ("landscape_table_mnras_p6.pdf", "Table 4. An example landscape table.", False),
        ("landscape_table_mnras_p6.pdf", "Table 4. An example landscape table.", True),
        ("landscape_plot_eps_demo.pdf", "h = 0.02", True),
    ],
)
def test_a_landscape_documents_caption_or_plot_label_is_no_frame_title(engine, name, label, text_layer):
    """A page wider than tall that is no slide: mnras_guide.pdf p6, a table turned to landscape
    with its caption over it, and cmpj's eps_demo.pdf, a plot with its legend ("h = 0.02") at the
    top right (150 DPI). The caption and the legend, the first text in the top band in the body's
    print or bigger, were made a slide's frame title."""
    page = first_page(Path(__file__).parents[1] / "data" / name, dpi=150)
    blocks = engine.parse(page.image, page.text_layer if text_layer else None).blocks
    found = [b for b in blocks if _squash(label) in _squash(b.text)]
    assert found and all(b.type != "title" for b in found), [(b.type, b.text) for b in blocks]


def test_an_index_letter_heading_is_a_line_of_its_own(engine):
    """mdwtab's documentation, page 82 (tests/data/index_letters_mdwtab_p82.pdf): an index in two
    columns, its groups headed by a capital alone on its row ("D", "E"). The heading was read on
    at the end of the last entry before it ("\\crcr ... 377, 1056, 1186 D"); it is a line of its
    own, and the entry after it starts the next line."""
    path = Path(__file__).parents[1] / "data" / "index_letters_mdwtab_p82.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer="auto")) as doc:
        page = doc.page(0)
    lines = [line for b in engine.parse(page.image, page.text_layer).blocks for line in b.text.split("\n")]
    assert "D" in lines and "E" in lines, lines
    after = lines[lines.index("E") + 1]
    assert after.startswith("\\end ") and lines[lines.index("D") - 1].endswith("1186"), lines


def test_a_contents_list_keeps_an_entry_whose_page_is_roman_on_a_line_of_its_own(engine):
    """A list of tables as memoir's manual sets one (tests/data/contents_roman_pages_chromium.pdf):
    its first two entries on roman pages ("Traditional font size designations . . . xxxvi"), the
    others on arabic ones, each after a dot leader. Each entry is a line of its own, as the page
    shows them: the roman ones were read on into the next entry."""
    path = Path(__file__).parents[1] / "data" / "contents_roman_pages_chromium.pdf"
    with open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=150, text_layer="auto")) as doc:
        page = doc.page(0)
    lines = [line for b in engine.parse(page.image, page.text_layer).blocks for line in b.text.split("\n")]
    first = [i for i, line in enumerate(lines) if "Traditional font size designations" in line]
    assert len(first) == 1 and lines[first[0]].rstrip().endswith("xxxvi"), lines
    assert lines[first[0] + 1].startswith("2") and lines[first[0] + 1].rstrip().endswith("xxxvii"), lines
    assert lines[first[0] + 2].startswith("1.1"), lines


@pytest.mark.parametrize("text_layer", [True, False])
def test_a_reference_wrapped_before_an_authors_initial_is_one_item(engine, tmp_path, text_layer):
    """A Chromium-made reference list (tests/data/references_initials_chromium.pdf): four IEEE-style
    references, [2] wrapped before its last author "B. Hansen" and [3] before "C. Weber", each row
    under the first hanging. The two initials, siblings at one x, were read as a lettered list's
    items: each started a line, and the content list, which takes a line of the embedded engine's
    reference list for a reference, gave "B. Hansen, “Reading order ..." as a reference of its own.
    Each reference is one line and one list item, through the text layer and from the pixels; the
    Markdown breaks before no initial."""
    page = first_page(Path(__file__).parents[1] / "data" / "references_initials_chromium.pdf", dpi=150)
    result = engine.parse(page.image, page.text_layer if text_layer else None)
    record = {"image": {"width": page.image.width, "height": page.image.height}, "page_index": 0}
    record["blocks"] = [b.as_dict() for b in result.blocks]
    (refs,) = [item for item in content_list_items(record, tmp_path) if item.get("sub_type") == "ref_text"]
    assert [item[:4] for item in refs["list_items"]] == ["[1] ", "[2] ", "[3] ", "[4] "], refs["list_items"]
    assert "N. Ito, and B. Hansen," in refs["list_items"][1] and "O. Ruiz, and C. Weber," in refs["list_items"][2]
    assert "  \nB. Hansen" not in result.markdown and "  \nC. Weber" not in result.markdown


def test_each_bracketed_reference_starts_a_line_of_its_reference_list(engine, tmp_path):
    """The asmeconf sample's references (tests/data/two_column_asme.pdf, its text layer): the left
    column's list, [1] to [7], each reference's rows hanging under its text by less than a
    description list's indent. The bracketed numbers were no list's labels, and the seven
    references were one paragraph and one list item of the content list (the right column's,
    boxed as a table, a row each). Each starts a line and is a list item of its own."""
    page = first_page(Path(__file__).parents[1] / "data" / "two_column_asme.pdf", dpi=150)
    result = engine.parse(page.image, page.text_layer)
    record = {"image": {"width": page.image.width, "height": page.image.height}, "page_index": 0}
    record["blocks"] = [b.as_dict() for b in result.blocks]
    (refs,) = [item for item in content_list_items(record, tmp_path) if item.get("sub_type") == "ref_text"]
    labels = [item[: item.index("]") + 1] for item in refs["list_items"]]
    assert labels == [f"[{n}]" for n in (*range(1, 8), *range(11, 22))], refs["list_items"]
    assert refs["list_items"][1] == (
        "[2] Gibson, Tom A. and Tucker, Matthew A. The Big Book of Cellular Studies. "
        "John Wiley and Sons, New York (2008)."
    )
