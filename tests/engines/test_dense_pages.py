"""Dense pages cost about their lines, not their lines squared: a long table block, loose lines
that make thousands of paragraphs, a text block of thousands of rows, a region for each line,
one very long row, a foot full of numbers, a figure or a table region for each number, and
a column of row ends beside a region of thousands of rows, a VLM block for each number.

The pages are tests/data/price_list_6pt_chromium.pdf (a 6 pt price list),
number_grid_chromium.pdf (numbers set apart in a grid, each a line of its own) and
deflist_texinfo_radmin_p64.pdf, read from their text layers and repeated into one bigger page,
as a long longtable or a scrolling screenshot reads. Each test counts the work assembling the
blocks takes (`_work`: the lines of mineru_cli's code it runs, loop rounds included, the same on
any machine) for the page repeated `times` and 4 x `times`: work that grows with the lines
grows about 4 times, work over pairs of lines or regions about 16 times; the bound is
GROWTH_BOUND. Each of these steps compared pairs before (every row, line, region or block
against every other) and took seconds to minutes on such pages."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import pytest

import mineru_cli
from mineru_cli.config import LoadOptions
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.engines.assembly import assemble_blocks
from mineru_cli.engines.cuts import cut_at_gutters
from mineru_cli.engines.fusion import assign_lines
from mineru_cli.engines.lines import Line
from mineru_cli.engines.ocr import text_layer_lines
from mineru_cli.inputs import SourceFile, open_document
from mineru_cli.reading_order import group_rows, sort_blocks

DATA = Path(__file__).resolve().parent.parent / "data"
PACKAGE = str(Path(mineru_cli.__file__).resolve().parent)
GROWTH_BOUND = 5.0  # work on 4 x the page over work on the page: 4 when linear, 16 when quadratic

Page = tuple[list[Line], tuple[int, int]]


def _work(run: Callable[[], object]) -> int:
    """The lines of mineru_cli's code that `run()` executes, each loop round counted (a line
    event of sys.settrace): the work it does, counted the same on any machine and under load."""
    count = 0

    def in_package(frame, event, arg):
        nonlocal count
        count += event == "line"
        return in_package

    def on_call(frame, event, arg):
        return in_package if frame.f_code.co_filename.startswith(PACKAGE) else None

    before = sys.gettrace()
    sys.settrace(on_call)
    try:
        run()
    finally:
        sys.settrace(before)
    return count


def _page(name: str, dpi: int) -> Page:
    path = DATA / name
    doc = open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=dpi))
    try:
        page = doc.page(0)
    finally:
        doc.close()
    assert page.text_layer is not None and page.text_layer.trusted
    return text_layer_lines(page.text_layer), page.image.size


def _stacked(page: Page, times: int) -> Page:
    """The page's lines repeated `times` down one tall page."""
    lines, (width, height) = page
    return [ln.moved(0, k * height) for k in range(times) for ln in lines], (width, height * times)


def _in_one_row(page: Page, times: int) -> Page:
    """The page's rows laid end to end, `times` over, into one row at the top of a wide page."""
    lines, (width, height) = page
    rows = group_rows([ln.box for ln in lines])
    laid = [
        lines[i].moved((k * len(rows) + n) * width, 10 - lines[i].box[1])
        for k in range(times)
        for n, row in enumerate(rows)
        for i in row
    ]
    return laid, (width * len(rows) * times, height)


def _at_the_foot(page: Page, times: int) -> Page:
    """The page repeated `times` side by side, at the foot of a page 7 times as tall: every line in
    its foot margin."""
    lines, (width, height) = page
    return [ln.moved(k * width, 6 * height) for k in range(times) for ln in lines], (width * times, 7 * height)


def _loose(page: Page) -> tuple[list[Line], list, tuple[int, int]]:
    """The page's lines with no layout regions: all loose lines."""
    lines, size = page
    return lines, [], size


def _blocks(lines: list[Line], regions: list, size: tuple[int, int]) -> list:
    return sort_blocks(assemble_blocks(lines, regions, size))


def _growth(make: Callable[[int], tuple[list[Line], list, tuple[int, int]]], times: int) -> tuple[float, list, list]:
    """Work on the page made 4 x `times` over work on it made `times`, and the blocks of each."""
    small, big = make(times), make(4 * times)
    out: dict[int, list] = {}
    work = [_work(lambda n=n, page=page: out.setdefault(n, _blocks(*page))) for n, page in enumerate((small, big))]
    return work[1] / work[0], out[0], out[1]


@pytest.fixture(scope="module")
def price_list() -> Page:
    return _page("price_list_6pt_chromium.pdf", 300)


@pytest.fixture(scope="module")
def number_grid() -> Page:
    return _page("number_grid_chromium.pdf", 200)


def _whole_page_table(page: Page) -> tuple[list[Line], list, tuple[int, int]]:
    lines, size = page
    return lines, [((0, 0, *size), "table", 0.9)], size


def test_a_table_of_thousands_of_rows_groups_in_about_its_rows(price_list):
    growth, one, four = _growth(lambda n: _whole_page_table(_stacked(price_list, n)), 4)
    rows = len(_blocks(*_whole_page_table(price_list))[0].extra["cells"])
    assert [b.type for b in four] == [T.TABLE]
    assert len(four[0].extra["cells"]) == 4 * len(one[0].extra["cells"]) == 16 * rows > 900
    assert four[0].extra["cells"][-1] == one[0].extra["cells"][-1]
    assert growth < GROWTH_BOUND


def test_thousands_of_loose_lines_group_in_about_their_count(price_list):
    growth, one, four = _growth(lambda n: _loose(_stacked(price_list, n)), 4)
    assert len(four) == 4 * len(one) and len(_stacked(price_list, 16)[0]) > 1200
    assert growth < GROWTH_BOUND


def test_a_grid_of_numbers_set_apart_groups_in_about_its_numbers(number_grid):
    lines, _ = number_grid
    growth, one, four = _growth(lambda n: _loose(_stacked(number_grid, n)), 1)
    assert len(one) == len(lines) > 200  # each number is a paragraph of its own
    assert sorted(b.text for b in four) == sorted(b.text for b in one * 4)
    assert growth < GROWTH_BOUND


def test_a_text_block_of_thousands_of_rows_joins_in_about_its_rows():
    """R Installation and Administration, page 64 (deflist_texinfo_radmin_p64.pdf: a Texinfo
    @table of configure variables) stacked into one text region: a block of thousands of rows,
    whose right margin and description entries are found in about its rows, each entry still
    a line."""
    page = _page("deflist_texinfo_radmin_p64.pdf", 150)

    def one_region(n: int) -> tuple[list[Line], list, tuple[int, int]]:
        lines, size = _stacked(page, n)
        return lines, [((0, 0, *size), "text", 0.9)], size

    growth, _, blocks = _growth(one_region, 25)
    rows = [row for b in blocks for row in b.text.split("\n")]
    assert len(blocks) == 1 and len(one_region(100)[0]) > 4500
    assert rows.count("DEFS defines to be used when compiling C code in R itself") == 100
    assert growth < GROWTH_BOUND


def test_a_region_for_each_line_costs_about_the_regions(number_grid):
    """Each number boxed as a text region of its own (as the layout model boxes a page of many
    small figures or cells, 784 of them on one page): duplicate and nested regions, and each
    line's region, are found in about the regions' count, and each number is still a block."""

    def own_regions(n: int) -> tuple[list[Line], list, tuple[int, int]]:
        lines, size = _stacked(number_grid, n)
        return lines, [(ln.box, "text", 0.9) for ln in lines], size

    growth, one, four = _growth(own_regions, 1)
    assert len(one) == len(number_grid[0]) > 200
    assert sorted(b.text for b in four) == sorted(b.text for b in one * 4)
    assert growth < GROWTH_BOUND


def test_one_long_row_of_loose_lines_costs_about_its_lines(number_grid):
    """The grid's rows end to end as one row of over a thousand numbers (a wide spreadsheet's
    row, a scrolling strip): the lines near each, and the side-by-side pieces the page is read
    in, are found in about the lines' count; each number is still a block, read left to right."""
    growth, one, four = _growth(lambda n: _loose(_in_one_row(number_grid, n)), 1)
    assert len(four) == 4 * len(one) == 4 * len(number_grid[0])
    assert [b.bbox[0] for b in four] == sorted(b.bbox[0] for b in four)
    assert growth < GROWTH_BOUND


def test_a_foot_full_of_numbers_costs_about_its_numbers(number_grid):
    """Hundreds of numbers in the page's foot margin: which of them is a lone page number is found
    in about their count (those in its edge band already are page numbers; the others each have
    text below them or in their row and stay text, as on the page alone)."""
    growth, one, four = _growth(lambda n: _loose(_at_the_foot(number_grid, n)), 1)
    assert len(four) == 4 * len(one) == 4 * len(number_grid[0])
    assert sorted((b.text, b.type) for b in four) == sorted((b.text, b.type) for b in one * 4)
    assert {b.type for b in four} == {T.TEXT, T.PAGE_NUMBER}
    assert growth < GROWTH_BOUND


@pytest.mark.parametrize("kind", ["figure", "table"])
def test_a_figure_or_table_for_each_number_costs_about_the_numbers(number_grid, kind):
    """Each number boxed as a figure (the layout model boxes a page of many small pictures or
    icons so) or as a table: the lines each figure or table holds are found in about their
    count, and each number is still a block of its own."""

    def own_regions(n: int) -> tuple[list[Line], list, tuple[int, int]]:
        lines, size = _stacked(number_grid, n)
        return lines, [(ln.box, kind, 0.9) for ln in lines], size

    growth, one, four = _growth(own_regions, 1)
    assert len(one) == len(number_grid[0]) > 200
    assert sorted(b.text for b in four) == sorted(b.text for b in one * 4)
    assert growth < GROWTH_BOUND


def test_a_region_for_each_line_is_cut_at_gutters_in_about_the_lines(number_grid):
    """cut_at_gutters on the grid's numbers each in a text region of its own: the lines of other
    regions in each region's rows are found in about those lines' count; no number reaches over
    a gutter, so none is cut."""

    def cut(n: int) -> tuple[int, list[Line], list[Line]]:
        lines, _ = _stacked(number_grid, n)
        regions = [(ln.box, "text", 0.9) for ln in lines]
        found: list = []
        work = _work(lambda: found.extend(cut_at_gutters(lines, regions, lambda line, x: [line])[0]))
        return work, lines, found

    (small, _, _), (big, lines, found) = cut(1), cut(4)
    assert found == lines and len(lines) > 1000
    assert big / small < GROWTH_BOUND


def test_row_ends_beside_a_region_of_thousands_of_rows_join_in_about_the_rows(number_grid):
    """The grid stacked, all columns but the last in one text region and the last column's numbers
    just right of it, loose: each is a row end of the region (a table of contents' page numbers
    outside the layout model's box), found level with the region's lines in about their count
    (a pass over the region's lines for each took about their square), and joins its row."""

    def last_column_loose(n: int) -> tuple[list[Line], list, tuple[int, int]]:
        lines, size = _stacked(number_grid, n)
        last = max(ln.box[0] for ln in lines)
        inner = max(ln.box[2] for ln in lines if ln.box[0] < last)
        region = (min(ln.box[0] for ln in lines), 0, (inner + last) // 2, size[1])
        return lines, [(region, "text", 0.9)], size

    growth, one, four = _growth(last_column_loose, 2)
    assert [b.bbox[2] for b in one + four] == [max(ln.box[2] for ln in number_grid[0])] * 2
    assert (
        sorted(four[0].text.split())
        == sorted(one[0].text.split() * 4)
        == sorted(ln.text for ln in _stacked(number_grid, 8)[0])
    )
    assert growth < GROWTH_BOUND


def test_the_lines_of_a_block_for_each_number_are_found_in_about_the_numbers(number_grid):
    """fusion.assign_lines with the VLM's blocks one for each of the grid's numbers (a page of a
    table's cells read as blocks): each line goes to its block in about the lines' count."""

    def assign(n: int) -> tuple[int, list[Line], list]:
        lines, _ = _stacked(number_grid, n)
        found: list = []
        work = _work(lambda: found.extend(assign_lines(lines, [ln.box for ln in lines])))
        return work, lines, found

    (small, _, _), (big, lines, found) = assign(1), assign(4)
    assert found == [[ln] for ln in lines] and len(lines) > 1000
    assert big / small < GROWTH_BOUND
