"""A page's blocks from its layout regions and text lines (`assemble_blocks`): regions found twice,
round others, or figures that are text are settled; each line goes to the region holding most of
it; lines outside every region are grouped into paragraphs, grids of short cells into tables;
each block gets its rows and text (engines.joining), and page_roles types the page's furniture."""

from __future__ import annotations

import bisect
import functools
import re
import statistics
from typing import Sequence

from mineru_cli.core.blocks import Block
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.core.geometry import (
    Box,
    BoxGrid,
    area,
    best_holders,
    covered,
    enclosing,
    held,
    iou,
    shares_columns,
    shares_rows,
)
from mineru_cli.engines import code_blocks, indexes
from mineru_cli.engines.joining import NO_MARKERS, Markers, block_rows, block_text, page_markers
from mineru_cli.engines.lines import Line, level_boxes
from mineru_cli.engines.page_roles import (
    body_height,
    captions_of_floats,
    foot_numbers,
    footer_rows,
    frame_title,
    mark_sidebar,
    refine_type,
    without_headline_bars,
    without_slide_frames,
)
from mineru_cli.engines.regions import FLOWING, GROUPING, REGION_TYPES
from mineru_cli.engines.table_text import TABLE_LINE, table_cells, table_edges
from mineru_cli.reading_order import LEVEL, column_stretches, group_rows, level

# The text regions that may nest (see _without_envelopes).
_NESTING = frozenset({T.TEXT, T.REF_TEXT})
# The class a figure region that is really text gets (see _figures_of_text): a text region
# (LAYOUT_TYPES has no such class) that is not split at a table's gutters (see _region_columns).
_FIGURE_TEXT = "figure_text"


def assemble_blocks(
    lines: list[Line], regions: Sequence[tuple[Box, str, float]], page_size: tuple[int, int]
) -> list[Block]:
    """Lines + layout regions -> unordered blocks (pure geometry, no models).

    Text blocks never run across columns: the lines of a text region, or of a paragraph of
    loose lines, that a vertical gutter splits into side-by-side columns become one block per
    column (reading_order.text_columns), so the page order reads each column down; a figure
    region that is text and holds a small table stays one block (_region_columns)."""
    # Figures that are really text become text first, so that one holding text regions is an
    # envelope like any other (a table of contents boxed as a figure round its first entries).
    regions = without_slide_frames(without_headline_bars(regions, page_size), lines, page_size)
    regions = _without_envelopes(
        _figures_of_text(_without_figures_in_tables(_without_duplicates(regions)), lines, page_size)
    )
    regions = table_edges(lines, regions)
    members: list[list[Line]] = [[] for _ in regions]
    loose: list[Line] = []
    homes = best_holders([line.box for line in lines], [r[0] for r in regions], GROUPING["line_in_region"])
    for line, best in zip(lines, homes):
        (members[best] if best is not None else loose).append(line)
    loose = _row_ends(regions, members, loose)
    page_columns = _PageColumns(lines)

    blocks = []
    markers = page_markers(lines)
    for (box, cls, score), group in zip(regions, members):
        kind = REGION_TYPES.get(cls, T.TEXT)
        index, loose = _index(box, kind, cls, group, loose)
        if index is not None:  # the paragraph above it, then one text block, its columns' rows one after another
            head, columns = index
            blocks += [make_block(T.TEXT, head, markers=markers)] if head else []
            blocks.append(_index_block([block_rows(column) for column in columns], markers))
            continue
        if kind == T.TABLE:
            pieces = _table_pieces(group)
            prose = _prose_kind(pieces, box)
            if prose is None:
                group = pieces
            else:  # read as text, its lines whole
                kind, cls = prose, "text"
        if group:
            columns = _region_columns(group, kind, cls, page_columns)
            if len(columns) == 1:
                blocks += _text_and_code(kind, group, box, markers)
            else:  # the region ran across columns: one block per column, boxed by its lines
                blocks += [b for column in columns for b in _text_and_code(kind, column, markers=markers)]
        elif kind == T.IMAGE:  # pictures keep their place even without text
            x1, y1, x2, y2 = (int(v) for v in box)
            blocks.append(Block(T.IMAGE, (x1, y1, x2, y2), "", score))
        # other empty regions are layout false positives: dropped
    paragraphs = _grid_cells(_paragraphs(loose))
    loose_columns = [column for columns in paragraphs for column in columns]
    blocks += [b for column in loose_columns for b in _text_and_code(T.TEXT, column, markers=markers)]
    blocks = code_blocks.join_code(blocks, lambda lines: make_block(T.CODE, lines))

    median_h = statistics.median(ln.height for ln in lines) if lines else 0
    for b in blocks:
        refine_type(b, median_h, page_size[1])
    # a footline's pieces are typed first: a sidebar's column reaches down beside them and would take them
    foot_numbers(blocks, page_size[1])
    footer_rows(blocks, *page_size)
    mark_sidebar(blocks, page_size)
    captions_of_floats(blocks)
    frame_title(blocks, body_height(lines, page_size), page_size)
    return blocks


def _index(
    box: Box, kind: str, cls: str, group: list[Line], loose: list[Line]
) -> tuple[tuple[list[Line], list[list[Line]]] | None, list[Line]]:
    """The index a text, table or text-figure region holds (indexes.index_columns: the lines
    above it, its columns), with the lines of no region beside it that complete it (a table box drawn over the index's
    references but not its first column of entries), and the loose lines left; None and `loose`
    where the region holds no index."""
    if not group or not (kind in (T.TEXT, T.TABLE) or cls == _FIGURE_TEXT):
        return None, loose
    near = indexes.beside(box, group, loose)
    index = indexes.index_columns(group + near) if near else None
    if index is None:
        near, index = [], indexes.index_columns(group)
    taken = {id(ln) for ln in near}
    return index, [ln for ln in loose if id(ln) not in taken]


def _row_ends(regions: Sequence[tuple[Box, str, float]], members: list[list[Line]], loose: list[Line]) -> list[Line]:
    """Loose lines that end or start a row of a text region join it; the others are returned.

    A table of contents' page numbers often stand just right of the layout model's box around
    the entries (its dot leaders read as nothing), and its chapter numbers just left of it;
    grouped on their own they were read as a column of numbers after the entries. A row end is
    short (row_end_heights x its height wide at most), reaches past one side of the region and
    lies within row_gap x its height of that side, and is level with a line of the region on its
    inner side (`_row_home`); and it belongs to no other column (`_of_another_column`)."""
    owner = {id(ln): n for n, group in enumerate(members) for ln in group}  # line -> its region
    page = _LinesByTop([ln for group in members for ln in group] + loose)
    by_middle = [_LinesByMiddle(group) for group in members]
    homes = []  # each line is judged against the regions as the layout gave them (order-free)
    for line in loose:
        found = _row_home(line, regions, by_middle) if _short(line) else None
        homes.append(None if found is None or _of_another_column(line, *found, regions, owner, page) else found[0])
    for line, home in zip(loose, homes):
        if home is not None:
            members[home].append(line)
    return [line for line, home in zip(loose, homes) if home is None]


def _short(line: Line) -> bool:
    return line.box[2] - line.box[0] <= GROUPING["row_end_heights"] * line.height


def _row_home(
    line: Line, regions: Sequence[tuple[Box, str, float]], members: list[_LinesByMiddle]
) -> tuple[int, str] | None:
    """(the text region whose row `line` ends or starts, "right" or "left": the side it stands
    on), or None. `members`: each region's lines."""
    x1, _, x2, _ = line.box
    reach = GROUPING["row_gap"] * line.height
    for n, (box, cls, _score) in enumerate(regions):
        if REGION_TYPES.get(cls, T.TEXT) not in FLOWING or not members[n].lines:
            continue
        if box[0] < x1 <= box[2] + reach and x2 > box[2]:
            side = "right"
        elif box[0] - reach <= x2 < box[2] and x1 < box[0]:
            side = "left"
        else:
            continue
        if any(level(m.box, line.box) and _inward(line, m, side) for m in members[n].level_with(line)):
            return n, side
    return None


def _inward(line: Line, other: Line, side: str) -> bool:
    """Whether `other` stands on the inner side of `line`, a row end on `side` of its region."""
    slack = line.height / 2
    return other.box[2] <= line.box[0] + slack if side == "right" else other.box[0] >= line.box[2] - slack


def _of_another_column(
    line: Line,
    home: int,
    side: str,
    regions: Sequence[tuple[Box, str, float]],
    owner: dict[int, int],
    page: _LinesByTop,
) -> bool:
    """Whether a would-be row end of region `home` belongs to another column. So it does when
    - a region in the line's rows overlaps its x-range;
    - a longer line outside `home` lies over or under it within row_end_clear x its height (an
      equation number at the end of the left column, level with a line of the right column);
    - a line outside `home` stands level with it further out: it does not end its row (one of a
      tall display's equation numbers, too far from the prose for the rule above; also a
      two-column table of contents' left page numbers when the right column's rows are level
      with them, which look like line numbers in a gutter and stay loose);
    - it is one of a column of short loose lines not all level with text on their inner side:
      a margin's line numbers, which also number blank rows and stand beside displays.
    Joined, such a line bridged the gutter (the columns were read row by row), or put line
    numbers inside sentences."""
    beside = [box for n, (box, _, _) in enumerate(regions) if n != home and shares_rows(box, line.box)]
    if any(shares_columns(box, line.box) for box in beside):
        return True
    near = [o for o in page.near(line, GROUPING["row_end_clear"] * line.height) if owner.get(id(o)) != home]
    if any(_stacked(line, o) for o in near):
        return True
    if any(o is not line and level(o.box, line.box) and _inward(o, line, side) for o in near):
        return True
    column = _short_column(line, owner, page)
    return not all(
        any(id(t) not in column and level(t.box, o.box) and _inward(o, t, side) for t in page.near(o, 0))
        for o in column.values()
    )


def _short_column(line: Line, owner: dict[int, int], page: _LinesByTop) -> dict[int, Line]:
    """The short loose lines stacked with `line` over its x-range (by id), chained through the
    lines `page.near` gives within row_end_clear x their height. That is generous upwards (up to
    the page's tallest line farther): the chain then keeps a margin's numbers whole across a gap
    of a few rows (bounded strictly, lineno's manual joined some of its margin line numbers to
    its contents rows), at the cost of a page number column sometimes taking in a short line
    far above it and staying loose."""
    column, frontier = {id(line): line}, [line]
    while frontier:
        cur = frontier.pop()
        for o in page.near(cur, GROUPING["row_end_clear"] * cur.height):
            if id(o) in column or id(o) in owner or not _short(o):
                continue
            if shares_columns(o.box, cur.box):
                column[id(o)] = o
                frontier.append(o)
    return column


class _LinesByMiddle:
    """A region's lines sorted by their middles, to find those level with a line without a pass
    over all (a text block of thousands of rows, with a short loose line beside each)."""

    def __init__(self, lines: list[Line]):
        self.lines = sorted(lines, key=_middle)
        self.middles = [_middle(ln) for ln in self.lines]

    def level_with(self, line: Line) -> list[Line]:
        """The lines whose middles lie within LEVEL x `line`'s height of its middle, a pixel
        more: all those `level` with it (it measures by the shorter height), and a few more."""
        reach = LEVEL * max(1.0, line.box[3] - line.box[1]) + 1
        lo = bisect.bisect_left(self.middles, _middle(line) - reach)
        return self.lines[lo : bisect.bisect_right(self.middles, _middle(line) + reach)]


def _middle(line: Line) -> float:
    return (line.box[1] + line.box[3]) / 2


class _LinesByTop:
    """A page's lines sorted by their tops, to find those near a line without a pass over all."""

    def __init__(self, lines: list[Line]):
        self.lines = sorted(lines, key=lambda ln: ln.box[1])
        self.tops = [ln.box[1] for ln in self.lines]
        self.tallest = max((ln.height for ln in lines), default=1)

    def near(self, line: Line, reach: float) -> list[Line]:
        """The lines whose boxes come within `reach` px above or below `line`'s (a superset:
        callers test the geometry they need)."""
        lo = bisect.bisect_left(self.tops, line.box[1] - reach - self.tallest)
        hi = bisect.bisect_right(self.tops, line.box[3] + reach)
        return self.lines[lo:hi]


def _stacked(line: Line, other: Line) -> bool:
    """Whether `other` is a longer line of the same column as `line`: over its x-range, within
    row_end_clear x its height above or below it."""
    if _short(other):
        return False
    y_gap = max(other.box[1] - line.box[3], line.box[1] - other.box[3])
    return shares_columns(line.box, other.box) and y_gap <= GROUPING["row_end_clear"] * line.height


def _region_columns(lines: list[Line], kind: str, cls: str, page_columns: _PageColumns) -> list[list[Line]]:
    """A region's lines split into side-by-side columns (one group for a kind that does not
    flow as text). A figure region that is text (_FIGURE_TEXT) is one thing the layout model
    saw: where a piece beyond its gutter holds table cells (_tabular), the gutter is one between
    a table's columns, and the region stays one block read row by row (cut there, each half of
    the table reads down on its own, and a caption under it joins the left half's column). A
    form's columns of fields boxed as one figure hold one line a row and are split as text is;
    a figure round two text regions goes as their envelope (_without_envelopes). A listing
    (every line monospaced, but for numbers: its line numbers, the page's number boxed with it)
    is no table: a page of code set in two columns (a package's source printed in multicols),
    boxed as one figure, has rows of a comment mark and the text after it, side by side as cells
    are, and reads column after column all the same. Where the region's own lines show no
    gutter, the page's column gutter through them splits them (_across_page_columns)."""
    if kind not in FLOWING:
        return [lines]
    columns = _columns(lines)
    if len(columns) == 1:
        columns = _across_page_columns(lines, page_columns)
    listing = any(ln.mono for ln in lines) and all(ln.mono or ln.text.isdigit() for ln in lines)
    if cls == _FIGURE_TEXT and len(columns) > 1 and not listing and any(_tabular(column) for column in columns):
        return [lines]
    return columns


class _PageColumns:
    """The page's columns: each line's piece of column_stretches over all the page's lines (as
    _columns splits a region's), by the line's id; worked out when a region of two or more lines
    first asks (a page of loose lines never does, and one long row of them costs the split
    more than linear time)."""

    def __init__(self, lines: list[Line]):
        self.lines = lines

    @functools.cached_property
    def of_line(self) -> dict[int, int]:
        return {id(ln): n for n, piece in enumerate(_columns(self.lines)) for ln in piece}

    def gutter(self, left: int, right: int, apart: set[int]) -> float | None:
        """The gap between pieces `left` and `right` that the page's lines not in `apart` leave;
        None where one of the pieces has no such line (nothing outside the region shows a
        gutter there: a table's columns with no table region are pieces of their own)."""
        rest = [ln for ln in self.lines if id(ln) not in apart]
        ends = [ln.box[2] for ln in rest if self.of_line[id(ln)] == left]
        starts = [ln.box[0] for ln in rest if self.of_line[id(ln)] == right]
        return min(starts) - max(ends) if ends and starts else None


def _across_page_columns(lines: list[Line], page: _PageColumns) -> list[list[Line]]:
    """A region's lines split where the page's column gutter runs through them: one group per
    page column, left to right, where the region's lines in each are side by side with the
    others' across a gap at least half the gutter the page's other lines leave there (one group
    otherwise). A region's own lines show no gutter when a column holds one line of it, or a few
    short ones beside the other's tall ones (a text region that the layout model drew over one
    column's last line and the other's heading; a beamer sidebar's outline in small print level
    with the body's rows); the page's other lines above and below it show the columns all the
    same, and a region whose columns no line outside it continues (a bordered table's columns
    with no table region) stays whole. A wide equation over both columns may break near the
    gutter, its pieces nearly closing it: it stays whole too."""
    if len(lines) < 2 or any(id(ln) not in page.of_line for ln in lines):  # lines the page's split never saw
        return [lines]
    groups: dict[int, list[Line]] = {}
    for ln in lines:
        groups.setdefault(page.of_line[id(ln)], []).append(ln)
    if len(groups) < 2:
        return [lines]
    spans = sorted((min(ln.box[0] for ln in g), max(ln.box[2] for ln in g), n) for n, g in groups.items())
    apart = {id(ln) for ln in lines}
    for (_, right, n), (next_left, _, m) in zip(spans, spans[1:]):
        gap, gutter = next_left - right, page.gutter(n, m, apart)
        if gutter is None or gap <= 0 or gap < GROUPING["page_gutter_share"] * gutter:
            return [lines]
    return [groups[n] for _, _, n in spans]


def _tabular(lines: list[Line]) -> bool:
    """Whether over table_rows of these lines' rows hold two or more lines side by side: a
    table's cells (a column of text has one line a row). A row of an index's entry and its page
    references (_index_row) is a column's one line that a leader's gap split: no cells."""
    rows = [[lines[i] for i in row] for row in group_rows(level_boxes(lines))]
    return sum(len(row) > 1 and not _index_row(row) for row in rows) > GROUPING["table_rows"] * len(rows)


def _index_row(row: list[Line]) -> bool:
    """Whether a row is an entry and one line of page references (indexes.is_refs) after it: an index
    entry ("\\@chair", "79, 80, 231") read as two lines across its dot leader. A table's row of
    numbers ("4", "900"), or of a name and two or more numbers, is cells."""
    entry, *rest = sorted(row, key=lambda ln: ln.box[0])
    refs = [indexes.is_refs(ln) for ln in (entry, *rest)]
    return len(rest) == 1 and refs == [False, True]


def _description_list(rows: list[list[Line]]) -> bool:
    """Whether a table region's rows are a description list: a man page's options (a short
    term, its definition's wrapped rows indented under it or beside it) are boxed as one table,
    and the table's cells would pair each term with another term's rows. Fewer than
    list_rows of its rows hold lines side by side (a table's rows hold cells)."""
    return sum(len(row) > 1 for row in rows) < GROUPING["list_rows"] * len(rows)


def _columns(lines: list[Line]) -> list[list[Line]]:
    """A region's lines split into columns (column_stretches). Where a stretch splits into
    columns whose right-hand one is all page references (indexes.is_refs), it is an index or a
    contents list whose dot leaders the gap stands for: each row's entry goes with its pages, and
    the rows are read across."""

    def page_numbers(column: list[int]) -> bool:
        return all(indexes.is_refs(lines[i]) for i in column)

    columns = column_stretches(
        [ln.box for ln in lines],
        GROUPING["column_share"],
        min_heights=GROUPING["column_heights"],
        read_across=page_numbers,
    )
    return [[lines[i] for i in column] for column in columns]


def _without_envelopes(regions: Sequence[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """Drop text regions the layout model found twice over (it does so on some pages at some
    sizes, and the order of overlapping blocks is then anyone's guess): a text region that
    holds two or more other text regions is an envelope of them and goes (its other lines are
    then grouped as loose lines); of a region and one region inside it, the inner one goes.
    A figure region that is text (_FIGURE_TEXT) round a title is an envelope too (a page's
    header panel boxed whole as a figure): it goes and the title stays, whose lines, shared out
    between the two boxes, were read out of order. A region holds only regions it overlaps, so
    each is tested only against those that share a cell of a BoxGrid with it."""
    text_like = [i for i, r in enumerate(regions) if REGION_TYPES.get(r[1], T.TEXT) in _NESTING]
    nesting = set(text_like)
    grid = BoxGrid([box for box, _, _ in regions])
    dropped: set[int] = set()
    for i in sorted(text_like, key=lambda i: -area(regions[i][0])):
        if i in dropped:
            continue
        near = grid.near(regions[i][0])
        inner = [
            j
            for j in near
            if j in nesting
            and j != i
            and j not in dropped
            and covered(regions[j][0], regions[i][0]) >= GROUPING["nested_region"]
        ]
        if len(inner) >= 2 or _round_a_title(regions[i], [regions[j] for j in near]):
            dropped.add(i)
        elif inner:
            dropped.add(inner[0])
    return [r for i, r in enumerate(regions) if i not in dropped]


def _round_a_title(region: tuple[Box, str, float], near: Sequence[tuple[Box, str, float]]) -> bool:
    """Whether a figure region that is text holds a title region (of those `near` it)."""
    return region[1] == _FIGURE_TEXT and any(
        REGION_TYPES.get(cls) == T.TITLE and covered(box, region[0]) >= GROUPING["nested_region"]
        for box, cls, _score in near
    )


def _without_duplicates(regions: Sequence[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """Of two regions over nearly the same box (IoU >= duplicate_region), whatever their classes,
    keep the one the model is surer of. The layout model often boxes one list or paragraph as
    both `text` and `title` (or `figure_caption`): each line then went to whichever box held it
    a pixel better, and the two blocks, one over the other, read their lines interleaved.
    A table boxed also as a figure stays a table, however sure the model is of the figure: a
    figure's text is left out of the Markdown, a table's is its cells.

    Twins overlap, so each region is tested only against the kept ones that share a cell of a
    BoxGrid with it."""
    ranked = sorted(regions, key=lambda r: -r[2])
    grid = BoxGrid([box for box, _, _ in ranked])
    kept: list[int] = []  # indices in `ranked`, in the order kept
    place: dict[int, int] = {}  # index in `ranked` -> its place in `kept`
    for n, (box, cls, _score) in enumerate(ranked):
        twins = [
            place[k] for k in grid.near(box) if k in place and iou(box, ranked[k][0]) >= GROUPING["duplicate_region"]
        ]
        if not twins:
            place[n] = len(kept)
            kept.append(n)
            continue
        twin = min(twins)  # the first kept, as a pass over the kept regions in order finds it
        if cls == "table" and ranked[kept[twin]][1] == "figure":
            del place[kept[twin]]
            place[n], kept[twin] = twin, n
    return [ranked[k] for k in kept]


def _without_figures_in_tables(regions: Sequence[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """Drop figure regions that lie inside a table region (nested_region of their area): the
    layout model boxes a table's wide text column apart as a figure, and each line goes to the
    smaller box that holds it, so the column left the table's cells and was read after it."""
    tables = [box for box, cls, _score in regions if REGION_TYPES.get(cls) == T.TABLE]
    return [
        (box, cls, score)
        for box, cls, score in regions
        if REGION_TYPES.get(cls) != T.IMAGE
        or not any(covered(box, table_box) >= GROUPING["nested_region"] for table_box in tables)
    ]


def _figures_of_text(
    regions: Sequence[tuple[Box, str, float]], lines: Sequence[Line], page_size: tuple[int, int]
) -> list[tuple[Box, str, float]]:
    """Figure regions that are really text, as text: a slide template's picture is no picture.

    A "figure" with text covering most of the page (background_figure) is the page's background
    (a title slide drawn over a photo): it goes, and its lines are read as text. A figure whose lines
    at body size (body_line x the page's median line height) cover text_figure of its area, or
    hold text_figure_chars characters, is text set in a frame or over a coloured panel, or a
    form's ruled fields: it becomes a text region (_FIGURE_TEXT). A chart or a diagram keeps its
    labels (a few short or small lines) as a figure's text."""
    if not lines:
        return list(regions)
    median_h = statistics.median(ln.height for ln in lines)
    page_area = max(1.0, float(page_size[0] * page_size[1]))
    boxes = [ln.box for ln in lines]
    grid = BoxGrid(boxes)  # a page of many small figures tests each against the lines near it
    out = []
    for box, cls, score in regions:
        if REGION_TYPES.get(cls) == T.IMAGE:
            inside = [lines[i] for i in held(boxes, grid, box, GROUPING["line_in_region"])]
            if inside and area(box) >= GROUPING["background_figure"] * page_area:
                continue
            body = [ln for ln in inside if ln.height >= GROUPING["body_line"] * median_h]
            covering = sum(area(ln.box) for ln in body) >= GROUPING["text_figure"] * max(1.0, area(box))
            if covering or sum(len(ln.text) for ln in body) >= GROUPING["text_figure_chars"]:
                cls = _FIGURE_TEXT
        out.append((box, cls, score))
    return out


def _paragraphs(lines: list[Line]) -> list[list[Line]]:
    """Group loose lines into paragraphs: union of lines that touch vertically
    (small gap, shared x-range, similar height) or continue the same row. Each line is tested
    only against the lines within its reach (_near_pairs): linked lines lie within
    para_gap x the lower one's height of each other vertically and row_gap x it across, so a
    page of thousands of loose lines (a grid of tiny boxes, or one long row of them) costs its
    lines times those near each, not every pair of them."""
    parent = list(range(len(lines)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in _near_pairs(lines, GROUPING["para_gap"], GROUPING["row_gap"]):
        if _linked(lines[i], lines[j]):
            parent[root(i)] = root(j)
    groups: dict[int, list[Line]] = {}
    for i, line in enumerate(lines):
        groups.setdefault(root(i), []).append(line)
    return list(groups.values())


def _near_pairs(lines: list[Line], gap: float, row_gap: float) -> list[tuple[int, int]]:
    """The pairs (i, j), i < j, of lines whose boxes come within `gap` x line i's height of each
    other vertically and `row_gap` x it across (overlapping ones included): a superset of the
    pairs any test of that reach accepts, found through a BoxGrid of the lines' boxes."""
    grid = BoxGrid([ln.box for ln in lines])
    pairs = []
    for i, line in enumerate(lines):
        pairs += [(i, j) for j in grid.near(line.box, row_gap * line.height, gap * line.height) if j > i]
    return pairs


def _table_pieces(lines: list[Line]) -> list[Line]:
    """A table's lines, each text layer line as its pieces: a text layer keeps cells set closer
    than its line gap (a LaTeX table's 12 pt between columns) in one line ("37 mm (1.46 in) 0.75
    in (19 mm)": two columns' cells, or a whole row), which then fell into one cell, the others
    of its row empty. The OCR's lines come cut there already."""
    return [piece for line in lines for piece in (line.pieces or (line,))]


# A row's leading label in a list boxed as a table, set apart from its text: a reference's number
# ("[12]") or an item's ("3.", "(a)", "iv."), closed by its bracket, stop or parenthesis: never a
# word or a bare number ("CPU", "404", "a": a key/value table's keys). A reference list's rows
# start with a bracketed number.
_ROW_LABEL = re.compile(r"^[\[(]?(?:\d{1,3}|[A-Za-z]|[ivxIVX]{1,4})[\].)]$")
_CITATION = re.compile(r"^\[\d{1,3}\](?:\s|$)")
# A table region is prose when at least this share of its rows' lines (labels aside) are wider
# than TABLE_LINE of the region: a paragraph's lines but its last fill the column.
_PROSE_ROWS = 2 / 3


def _prose_kind(lines: list[Line], box: Box) -> T | None:
    """The kind of a table region whose lines are no table's cells (None for a table): a
    description list (_description_list) is text; a reference list or a column of paragraphs
    boxed as a table (the layout model boxes a page's references as a table, a figure and a
    reference list at once, and the table wins its twins) holds one line a row besides a leading
    label (_ROW_LABEL), most of them as wide as the column (_PROSE_ROWS); read as cells, each
    reference became a row of a label and a line, its wrapped lines rows of their own. A table's
    rows hold cells side by side, narrower than half the table (TABLE_LINE). It is a reference
    list (ref_text) when two or more rows start with a bracketed number, else text."""
    rows = [sorted((lines[i] for i in row), key=lambda ln: ln.box[0]) for row in group_rows(level_boxes(lines))]
    if len(rows) < 3 or 2 * sum(ln.mono for ln in lines) > len(lines):  # too few rows to tell; a listing
        return None
    if all(len(row) == 1 or (len(row) == 2 and _ROW_LABEL.match(row[0].text)) for row in rows):
        bodies = [row[-1] for row in rows]
        wide = sum(ln.box[2] - ln.box[0] > TABLE_LINE * (box[2] - box[0]) for ln in bodies)
        if wide >= _PROSE_ROWS * len(bodies):
            return T.REF_TEXT if sum(bool(_CITATION.match(row[0].text)) for row in rows) >= 2 else T.TEXT
    return T.TEXT if _description_list(rows) else None


def _grid_cells(groups: list[list[Line]]) -> list[list[list[Line]]]:
    """Paragraphs of loose lines as their columns, with the cells of one table joined into one
    group read row by row: a table with no table region (a bordered grid on a slide) breaks into
    pieces where its columns stand further apart than a word space, or where a cell's box is
    taller than the next (a descender), and each piece read down on its own took the table column
    by column. Pieces side by side are one grid when they are short cells (_one_grid); a joined
    grid is not split at its gutters again (a wide cell's column would pass for a column of
    text). Other paragraphs are split into columns as text is (_columns)."""
    groups = [list(g) for g in groups]
    looks = [_GridLook(g) for g in groups]
    grids: list[list[Line]] = []
    while True:
        pair = _grid_pair(groups, looks)
        if pair is None:
            break
        a, b = groups[pair[0]], groups[pair[1]]
        kept = [n for n in range(len(groups)) if n not in pair]
        groups = [groups[n] for n in kept] + [a + b]
        looks = [looks[n] for n in kept] + [_GridLook(groups[-1])]
        grids = [g for g in grids if g is not a and g is not b] + [groups[-1]]
    return [[g] if any(g is grid for grid in grids) else _columns(g) for g in groups]


class _GridLook:
    """What _one_grid asks of one paragraph, found once: whether its lines are short cells, whether
    they are cells side by side (_tabular), and its vertical extent (two paragraphs of one grid
    have lines level with each other, so they overlap in height)."""

    def __init__(self, lines: list[Line]):
        self.short = _short_cells(lines)
        self.tabular = self.short and _tabular(lines)
        self.top = min(ln.box[1] for ln in lines)
        self.bottom = max(ln.box[3] for ln in lines)

    def may_join(self, other: _GridLook) -> bool:
        """Whether _one_grid can hold for the two (a pixel of slack: level boxes of no height)."""
        return (self.tabular or other.tabular) and self.top - 1 <= other.bottom and other.top - 1 <= self.bottom


def _grid_pair(groups: list[list[Line]], looks: list[_GridLook]) -> tuple[int, int] | None:
    """The first pair of paragraphs (a before b in `groups`' order) that are one grid
    (_one_grid), tested only where their looks allow it: a page of thousands of loose lines,
    none a grid, costs a pass over them instead of _one_grid on every pair."""
    short = [n for n, look in enumerate(looks) if look.short]
    tabular = [n for n in short if looks[n].tabular]
    if not tabular:
        return None
    for x in short:
        for y in short if looks[x].tabular else tabular:
            if x != y and looks[x].may_join(looks[y]) and _one_grid(groups[x], groups[y]):
                return x, y
    return None


def _one_grid(a: list[Line], b: list[Line]) -> bool:
    """Whether paragraphs `a` and `b` are pieces of one table: each row of the one with fewer
    rows (two or more) is level with a line of the other (so the two stand side by side), one
    of them is already cells side by side (_tabular), and the lines of both are short cells,
    their median narrower than a column of text (column_heights x their median height). Two
    columns of prose set on one baseline grid have long lines and stay apart; two lists of
    single words side by side, neither a grid of its own, are read one after the other."""
    if not (_short_cells(a) and _short_cells(b)) or not (_tabular(a) or _tabular(b)):
        return False
    rows_a, rows_b = group_rows(level_boxes(a)), group_rows(level_boxes(b))
    fewer, rows, other = (a, rows_a, b) if len(rows_a) <= len(rows_b) else (b, rows_b, a)
    if len(rows) < 2:
        return False
    return all(any(level(fewer[i].box, y.box) for i in row for y in other) for row in rows)


def _short_cells(lines: list[Line]) -> bool:
    widths = sorted(ln.box[2] - ln.box[0] for ln in lines)
    heights = sorted(ln.height for ln in lines)
    return widths[len(widths) // 2] < GROUPING["column_heights"] * heights[len(heights) // 2]


def _linked(a: Line, b: Line) -> bool:
    h = min(a.height, b.height)
    if max(a.height, b.height) > 1.3 * h:  # a heading does not join body text
        return False
    x_shared = min(a.box[2], b.box[2]) - max(a.box[0], b.box[0])
    y_shared = min(a.box[3], b.box[3]) - max(a.box[1], b.box[1])
    if y_shared >= 0.5 * h:  # same row: pieces of one line split at a wide space
        return -x_shared <= GROUPING["row_gap"] * h
    narrower = min(a.box[2] - a.box[0], b.box[2] - b.box[0])
    return -y_shared <= GROUPING["para_gap"] * h and x_shared >= 0.5 * max(1, narrower)


def _text_and_code(kind: str, lines: list[Line], region_box=None, markers: Markers = NO_MARKERS) -> list[Block]:
    """A block's lines as blocks: its runs of rows set wholly in a monospaced font are code
    blocks, the rows around them blocks of its kind (code_blocks.code_runs), each boxed by its
    own rows. A block without such rows is one block. `markers` are the page's numbered-item
    markers (page_markers), whose items may stand in other blocks."""
    if not any(ln.mono for ln in lines):
        return [make_block(kind, lines, region_box, markers)]
    rows = block_rows(lines)
    runs = code_blocks.code_runs(kind, rows)
    if len(runs) == 1:
        return [_block_of_rows(T.CODE if runs[0][0] else kind, rows, region_box, markers)]
    return [_block_of_rows(T.CODE if is_code else kind, part, markers=markers) for is_code, part in runs]


def make_block(kind: str, lines: list[Line], region_box=None, markers: Markers = NO_MARKERS) -> Block:
    return _block_of_rows(kind, block_rows(lines), region_box, markers)


def _index_block(columns: list[list[list[Line]]], markers: Markers) -> Block:
    """An index's block: its columns' rows one after another, each column's text joined on its
    own (a column's first entry starts a line, whatever the last row of the column before ends
    in)."""
    block = _block_of_rows(T.TEXT, [row for rows in columns for row in rows], markers=markers)
    block.text = "\n".join(block_text(T.TEXT, rows, None, markers, index=True) for rows in columns)
    return block


def _block_of_rows(kind: str, rows: list[list[Line]], region_box=None, markers: Markers = NO_MARKERS) -> Block:
    """A block of lines grouped in rows (block_rows; a run of whole rows of a block is grouped the same
    on its own, so code_runs' runs need no grouping again)."""
    ordered = [ln for row in rows for ln in row]
    boxes = [ln.box for ln in ordered] + ([region_box] if region_box is not None else [])
    x1, y1, x2, y2 = enclosing(boxes)
    bbox = (int(x1), int(y1), int(x2), int(y2))
    extra: dict = {"lines": [ln.as_dict() for ln in ordered]}
    cells = table_cells(ordered) if kind == T.TABLE else None
    if cells:
        extra["cells"] = cells
    score = sum(ln.score for ln in ordered) / len(ordered)
    text = code_blocks.code_text(rows) if kind == T.CODE else block_text(kind, rows, cells, markers)
    return Block(kind, bbox, text, score, extra)
