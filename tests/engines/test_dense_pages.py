"""Dense pages cost about their lines, not their lines squared: a long table block, and loose lines
that make thousands of paragraphs, group in a time that grows with the page, not with its square.

The pages are tests/data/price_list_6pt_chromium.pdf (a 6 pt price list) and
number_grid_chromium.pdf (numbers set apart in a grid, each a line of its own), read from their
text layers and stacked into one tall page, as a long longtable or a scrolling screenshot
reads. The bounds leave a wide margin (a few tenths of a second is what they take); grouped as
before, by testing each line against every row or every other line, the table took 30 s and
the loose lines 20 s on the same machine."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mineru_cli.config import LoadOptions
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.engines.lines import Line
from mineru_cli.engines.ocr import assemble_blocks, text_layer_lines
from mineru_cli.inputs import SourceFile, open_document
from mineru_cli.reading_order import sort_blocks

DATA = Path(__file__).resolve().parent.parent / "data"
BOUND_S = 5.0


def _page(name: str, dpi: int) -> tuple[list[Line], tuple[int, int]]:
    path = DATA / name
    doc = open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=dpi))
    try:
        page = doc.page(0)
    finally:
        doc.close()
    assert page.text_layer is not None and page.text_layer.trusted
    return text_layer_lines(page.text_layer), page.image.size


def _stacked(lines: list[Line], size: tuple[int, int], times: int) -> tuple[list[Line], tuple[int, int]]:
    """The page's lines repeated `times` down one tall page."""
    width, height = size
    return [ln.moved(0, k * height) for k in range(times) for ln in lines], (width, height * times)


def _blocks(lines: list[Line], regions: list, size: tuple[int, int]) -> tuple[list, float]:
    t = time.perf_counter()
    blocks = sort_blocks(assemble_blocks(lines, regions, size))
    return blocks, time.perf_counter() - t


@pytest.fixture(scope="module")
def price_list():
    return _page("price_list_6pt_chromium.pdf", 300)


def _table(lines: list[Line], size: tuple[int, int]) -> tuple[list, float]:
    return _blocks(lines, [((0, 0, *size), "table", 0.9)], size)


def test_a_table_of_two_thousand_rows_groups_in_seconds(price_list):
    lines, size = price_list
    one, _ = _table(lines, size)
    rows = len(one[0].extra["cells"])
    tall, tall_size = _stacked(lines, size, 36)
    blocks, seconds = _table(tall, tall_size)
    assert [b.type for b in blocks] == [T.TABLE]
    assert len(blocks[0].extra["cells"]) == 36 * rows > 2000
    assert blocks[0].extra["cells"][-1] == one[0].extra["cells"][-1]
    assert seconds < BOUND_S


def test_thousands_of_loose_lines_group_in_seconds(price_list):
    lines, size = price_list
    one, _ = _blocks(lines, [], size)
    tall, tall_size = _stacked(lines, size, 36)
    blocks, seconds = _blocks(tall, [], tall_size)
    assert len(tall) > 2500
    assert len(blocks) == 36 * len(one)
    assert seconds < BOUND_S


def test_a_grid_of_numbers_set_apart_groups_in_seconds():
    lines, size = _page("number_grid_chromium.pdf", 200)
    one, _ = _blocks(lines, [], size)
    assert len(one) == len(lines) > 200  # each number is a paragraph of its own
    tall, tall_size = _stacked(lines, size, 3)
    blocks, seconds = _blocks(tall, [], tall_size)
    assert sorted(b.text for b in blocks) == sorted(b.text for b in one * 3)
    assert seconds < BOUND_S


def test_a_text_block_of_thousands_of_rows_joins_in_seconds():
    """R Installation and Administration, page 64 (deflist_texinfo_radmin_p64.pdf: a Texinfo
    @table of configure variables) stacked 400 times into one text region: a block of thousands
    of rows, whose right margin and description entries are found in a time that grows with its
    rows (finding them row against row took 17 s on the same machine), each entry still a line."""
    lines, size = _page("deflist_texinfo_radmin_p64.pdf", 150)
    tall, tall_size = _stacked(lines, size, 400)
    blocks, seconds = _blocks(tall, [((0, 0, *tall_size), "text", 0.9)], tall_size)
    rows = [row for b in blocks for row in b.text.split("\n")]
    assert len(blocks) == 1 and len(tall) > 18000
    assert rows.count("DEFS defines to be used when compiling C code in R itself") == 400
    assert seconds < BOUND_S
