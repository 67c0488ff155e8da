"""Reading order from boxes alone: pure functions, no models.

Boxes are (x1, y1, x2, y2) in pixels, y growing downwards. The page-level
order is a recursive XY-cut: split at horizontal whitespace bands first, then
at vertical ones. Plain XY-cut interleaves two columns whose paragraph gaps
happen to line up (left p1, right p1, left p2, ...), so consecutive horizontal
bands that share a column gutter are merged back before cutting vertically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mineru_cli.core.blocks import PAGE_BOTTOM, PAGE_SIDE, PAGE_TOP

Box = Sequence[float]

# A column of a page is at least this share of the width of what it stands beside.
MIN_COLUMN_SHARE = 0.2
# Two lines are level (one row) when their middles lie within this share of a line's height.
LEVEL = 0.2
# A side panel (a slide's navigation sidebar, a margin note) is a column narrower than a text
# column must be: the outermost piece beside a gutter, of at least SIDE_PANEL_LINES lines set in
# print at most SIDE_PANEL_PRINT x the height of the other lines'.
SIDE_PANEL_LINES = 4
SIDE_PANEL_PRINT = 0.8

# An outer side piece of two or more blocks, at most MARGIN_WIDTH of the width of the widest
# piece beside it, whose blocks fill less than MARGIN_FILL of the height of all the pieces and
# under 1 / MARGIN_BODY of what the piece next to it fills, holds margin notes.
MARGIN_WIDTH = 0.4
MARGIN_FILL = 0.75
MARGIN_BODY = 1.5


def reading_order(boxes: Sequence[Box], types: Sequence[str] | None = None) -> list[int]:
    """Indices of `boxes` in reading order: headers, side text, body (XY-cut), footers.

    `types` (block types, parallel to `boxes`) pins PAGE_TOP types first, PAGE_SIDE types after
    them, before the body, and PAGE_BOTTOM last."""
    types = list(types) if types is not None else [""] * len(boxes)
    top = [i for i, t in enumerate(types) if t in PAGE_TOP]
    side = [i for i, t in enumerate(types) if t in PAGE_SIDE]
    bottom = [i for i, t in enumerate(types) if t in PAGE_BOTTOM]
    pinned = set(top) | set(side) | set(bottom)
    body = [i for i in range(len(boxes)) if i not in pinned]
    return xy_cut(boxes, top) + xy_cut(boxes, side) + xy_cut(boxes, body) + xy_cut(boxes, bottom)


def sort_blocks(blocks: list) -> list:
    """Blocks (anything with .bbox and .type) sorted into reading order."""
    order = reading_order([b.bbox for b in blocks], [b.type for b in blocks])
    return [blocks[i] for i in order]


def xy_cut(boxes: Sequence[Box], idx: Sequence[int] | None = None) -> list[int]:
    """Recursive XY-cut over the boxes named by `idx` (all when None)."""
    idx = list(range(len(boxes))) if idx is None else list(idx)
    if len(idx) <= 1:
        return idx
    bands = _merge_column_bands(boxes, _split(boxes, idx, axis=1))
    if len(bands) > 1:
        return [i for band in bands for i in xy_cut(boxes, band)]
    columns = _split(boxes, idx, axis=0)
    if len(columns) > 1:
        ordered = _corner_first(boxes, columns)
        notes = _margin_notes(boxes, columns) if ordered == columns else []
        body = [i for col in ordered if col not in notes for i in xy_cut(boxes, col)]
        left = columns[0] if columns[0] in notes else []
        right = columns[-1] if columns[-1] in notes else []
        return _with_notes(boxes, body, left, right)
    # Overlapping boxes with no whitespace cut: top-to-bottom, left-to-right.
    return sorted(idx, key=lambda i: (boxes[i][1], boxes[i][0]))


def group_rows(boxes: Sequence[Box], min_overlap: float = 0.5) -> list[list[int]]:
    """Cluster boxes (e.g. text lines) into rows; rows top-down, each left-right.

    A box joins the first row made that shares at least `min_overlap` of the smaller height with
    the box's vertical extent. Only the open rows are searched: a row whose bottom lies no lower
    than the top of every box still to come can take none of them (they would share no height),
    so it closes. Boxes come in the order of their middles, so a block's rows close as the boxes
    pass them, and a table of thousands of rows costs about its boxes times the few rows open."""
    order = sorted(range(len(boxes)), key=lambda i: (_center(boxes[i], 1), boxes[i][0]))
    upcoming = _upcoming_tops(boxes, order) if min_overlap > 0 else [float("-inf")] * len(order)
    rows: list[list] = []  # [top, bottom, members], in the order made
    open_rows: list[list] = []
    for k, i in enumerate(order):
        y1, y2 = boxes[i][1], boxes[i][3]
        open_rows = [row for row in open_rows if row[1] > upcoming[k]]
        for row in open_rows:
            top, bottom, members = row
            shared = min(y2, bottom) - max(y1, top)
            if shared >= min_overlap * max(1.0, min(y2 - y1, bottom - top)):
                row[0], row[1] = min(top, y1), max(bottom, y2)
                members.append(i)
                break
        else:
            rows.append([y1, y2, [i]])
            open_rows.append(rows[-1])
    rows.sort(key=lambda r: (r[0] + r[1]) / 2)
    return [sorted(m, key=lambda i: boxes[i][0]) for _, _, m in rows]


def _upcoming_tops(boxes: Sequence[Box], order: list[int]) -> list[float]:
    """For each place in `order`, the highest top (least y) of the boxes from there on."""
    tops = [float("inf")] * len(order)
    least = float("inf")
    for k in range(len(order) - 1, -1, -1):
        least = min(least, boxes[order[k]][1])
        tops[k] = least
    return tops


def column_bands(boxes: Sequence[Box]) -> list[tuple[float, float]]:
    """Disjoint x-intervals covered by the boxes, left to right (table columns)."""
    bands: list[list[float]] = []
    for x1, x2 in sorted((b[0], b[2]) for b in boxes):
        if bands and x1 < bands[-1][1]:
            bands[-1][1] = max(bands[-1][1], x2)
        else:
            bands.append([x1, x2])
    return [(a, b) for a, b in bands]


def _center(box: Box, axis: int) -> float:
    return (box[axis] + box[axis + 2]) / 2


def _split(boxes: Sequence[Box], idx: list[int], axis: int) -> list[list[int]]:
    """Split at whitespace along `axis` (0: vertical cuts by x, 1: horizontal by y).

    Boxes are shrunk a little first so that layout boxes touching or
    overlapping by a few pixels still leave a cut between them.
    """
    spans = []
    for i in idx:
        lo, hi = boxes[i][axis], boxes[i][axis + 2]
        pad = min(3.0, (hi - lo) * 0.1)
        spans.append((lo + pad, hi - pad, i))
    spans.sort()
    groups: list[list[int]] = []
    reach = float("-inf")
    for lo, hi, i in spans:
        if groups and lo < reach:
            groups[-1].append(i)
        else:
            groups.append([i])
        reach = max(reach, hi)
    return groups


def _is_multi_column(boxes: Sequence[Box], idx: list[int]) -> bool:
    return len(_split(boxes, idx, axis=0)) > 1


def _merge_column_bands(boxes: Sequence[Box], bands: list[list[int]]) -> list[list[int]]:
    """Re-join consecutive horizontal bands that continue the same columns.

    Two bands merge when at least one of them is itself multi-column and their union is split
    by a gutter into columns that are each at least MIN_COLUMN_SHARE of the union's width. Two
    single-column bands (a right-aligned date above a left-aligned salutation) stay in
    top-to-bottom order, and so does a slide's title under a navigation bar whose last entry
    lies right of everything below it: that entry is too narrow to be a column (merged, it was
    read after the whole slide).
    """
    merged: list[list[int]] = []
    for band in bands:
        if merged:
            prev = merged[-1]
            union = prev + band
            if (_is_multi_column(boxes, prev) or _is_multi_column(boxes, band)) and _has_columns(boxes, union):
                merged[-1] = union
                continue
        merged.append(list(band))
    return merged


def _has_columns(boxes: Sequence[Box], idx: list[int]) -> bool:
    """Whether a gutter splits these boxes into two or more columns, each at least
    MIN_COLUMN_SHARE of their width."""
    columns = _split(boxes, idx, axis=0)
    return len(columns) >= 2 and _columns_wide_enough(boxes, columns)


def _width(boxes: Sequence[Box], idx: Sequence[int]) -> float:
    """The horizontal extent of these boxes together."""
    return max(boxes[i][2] for i in idx) - min(boxes[i][0] for i in idx)


def _narrow(boxes: Sequence[Box], columns: list[list[int]]) -> list[bool]:
    """Per side-by-side piece, whether it is narrower than MIN_COLUMN_SHARE of their width."""
    width = max(1.0, _width(boxes, [i for c in columns for i in c]))
    return [_width(boxes, c) < MIN_COLUMN_SHARE * width for c in columns]


def _columns_wide_enough(boxes: Sequence[Box], columns: list[list[int]]) -> bool:
    """Whether each of these side-by-side pieces is at least MIN_COLUMN_SHARE of their width."""
    return not any(_narrow(boxes, columns))


def _corner_first(boxes: Sequence[Box], columns: list[list[int]]) -> list[list[int]]:
    """Side-by-side pieces left to right, except that a
    narrow piece right of the first that lies mostly above all the others (its middle above
    their tops) is read first: a corner block, as a form's OMB number and expiry date top right,
    level with its title and first field. Other pieces never change places: a narrow sidebar or
    margin note that starts a little above a paragraph, or a label beside a taller value, keeps
    left-to-right order, and so do real columns beside a narrow strip."""
    narrow = _narrow(boxes, columns)
    tops = [min(boxes[i][1] for i in c) for c in columns]
    highest, next_highest = sorted(tops)[:2]  # the others' highest top is one of these two
    for n, piece in enumerate(columns[1:], 1):
        middle = (tops[n] + max(boxes[i][3] for i in piece)) / 2
        if narrow[n] and middle < (next_highest if tops[n] == highest else highest):
            return [piece, *columns[:n], *columns[n + 1 :]]
    return columns


def _margin_notes(boxes: Sequence[Box], columns: list[list[int]]) -> list[list[int]]:
    """The outer side pieces that hold margin notes: two or more blocks, narrow beside the widest
    piece (at most MARGIN_WIDTH of its width) and sparse (they fill less than MARGIN_FILL of the
    pieces' height), as a manual's option names set in the margin beside each option's
    description, beside a denser body (the piece next to them fills MARGIN_BODY x their height
    or more).
    Read as a column, such notes all came before (or after) the body they annotate. A slide's
    navigation bar (its sections in short pieces side by side) has no dense body and reads
    piece after piece.
    A sidebar that runs down the page is dense and stays a column, and so does one block (a
    stamp in the margin, a form's label beside its value)."""
    widest = max(_width(boxes, c) for c in columns)
    top = min(boxes[i][1] for c in columns for i in c)
    height = max(1.0, max(boxes[i][3] for c in columns for i in c) - top)
    outer = [(columns[0], columns[1]), (columns[-1], columns[-2])]
    return [
        c
        for c, beside in outer
        if len(c) >= 2
        and _width(boxes, c) <= MARGIN_WIDTH * widest
        and _filled(boxes, c) < MARGIN_FILL * height
        and _filled(boxes, beside) >= MARGIN_BODY * _filled(boxes, c)
    ]


def _filled(boxes: Sequence[Box], idx: list[int]) -> float:
    """The height these boxes cover together (overlaps counted once)."""
    covered, reach = 0.0, float("-inf")
    for y1, y2 in sorted((boxes[i][1], boxes[i][3]) for i in idx):
        covered += max(0.0, y2 - max(y1, reach))
        reach = max(reach, y2)
    return covered


def _with_notes(boxes: Sequence[Box], body: list[int], left: list[int], right: list[int]) -> list[int]:
    """The body's order with each margin note beside the body block that shares the most of its
    rows, read along that row: a note left of the body before the block, one right of it after.
    A note level with no body block comes after the last body block above it. So a note is read
    with the paragraph it annotates, never as a column that splits the body."""
    order = list(body)
    notes = set(left) | set(right)
    for note in sorted(notes, key=lambda i: (boxes[i][1], boxes[i][0])):
        block = _level_block(boxes, body, note)
        if block is not None:
            at = order.index(block) + (note in right)
        else:
            above = [n for n, i in enumerate(order) if i not in notes and boxes[i][3] <= boxes[note][1]]
            at = above[-1] + 1 if above else 0
        while at < len(order) and order[at] in notes and boxes[order[at]][1] <= boxes[note][1]:
            at += 1  # after the notes of that block set higher up
        order.insert(at, note)
    return order


def _level_block(boxes: Sequence[Box], body: list[int], note: int) -> int | None:
    """The body block that shares the most rows with `note`, None when none shares any."""
    y1, y2 = boxes[note][1], boxes[note][3]
    shared = {i: min(y2, boxes[i][3]) - max(y1, boxes[i][1]) for i in body}
    best = max(body, key=lambda i: shared[i], default=None)
    return best if best is not None and shared[best] > 0 else None


def level(a: Box, b: Box) -> bool:
    """Whether two lines stand in one row: their middles within LEVEL of the shorter's height."""
    height = max(1.0, min(a[3] - a[1], b[3] - b[1]))
    return abs(_center(a, 1) - _center(b, 1)) <= LEVEL * height


def text_columns(
    boxes: Sequence[Box], min_share: float = 0.2, min_lines: int = 2, min_heights: float = 6.0
) -> list[list[int]]:
    """Split text lines into side-by-side columns, left to right, at vertical gutters that run
    through all of them (each column then reads top to bottom, never row by row across).

    A piece narrower than `min_share` of the lines' width, or than `min_heights` x their median
    line height (a few words: a column of text is wider), or with fewer than `min_lines` lines,
    is no column (a table of contents' page numbers, a label beside a value, the columns of a
    small table that has no table region: Star / Mass / Luminosity): it joins its nearer
    neighbour, unless it is a side panel in smaller print (_side_panel). One group (all lines)
    when nothing splits."""
    idx = list(range(len(boxes)))
    if len(idx) < 2 * min_lines:
        return [idx]
    groups = _split(boxes, idx, axis=0)
    left, right = min(b[0] for b in boxes), max(b[2] for b in boxes)
    width = max(1.0, right - left)
    heights = sorted(b[3] - b[1] for b in boxes)
    narrowest = max(min_share * width, min_heights * heights[len(heights) // 2])

    def extent(group):
        return min(boxes[i][0] for i in group), max(boxes[i][2] for i in group)

    def weak(group):
        x1, x2 = extent(group)
        if len(group) < min_lines:
            return True
        return (x2 - x1) < narrowest and not _side_panel(boxes, groups, group, min_heights)

    while len(groups) > 1:
        bad = next((n for n, g in enumerate(groups) if weak(g)), None)
        if bad is None:
            break
        if bad == 0:
            other = 1
        elif bad == len(groups) - 1:
            other = bad - 1
        else:  # the nearer neighbour
            gap_left = extent(groups[bad])[0] - extent(groups[bad - 1])[1]
            gap_right = extent(groups[bad + 1])[0] - extent(groups[bad])[1]
            other = bad - 1 if gap_left <= gap_right else bad + 1
        lo, hi = sorted((bad, other))
        groups[lo : hi + 1] = [groups[lo] + groups[hi]]
    return [sorted(g) for g in groups]


def _side_panel(boxes: Sequence[Box], groups: list[list[int]], group: list[int], min_heights: float) -> bool:
    """Whether `group`, a piece too narrow for a column of text, is a side panel all the same:
    the first or last of the side-by-side `groups`, SIDE_PANEL_LINES lines or more in smaller
    print than the rest (at most SIDE_PANEL_PRINT x their median height), and at least
    `min_heights` x its own line height wide. A beamer sidebar (the talk's outline, 15 % of the
    slide's width) and the slide's body are one text region for the layout model: joined, they
    were read row by row, each body line followed by an outline entry. A table's narrow column
    is set in the table's print, or its cells each stand level with a line beside them
    (_cells_of_rows), and a list's numbers are a few heights wide: all still join their
    neighbour."""
    if (group is not groups[0] and group is not groups[-1]) or len(group) < SIDE_PANEL_LINES:
        return False
    mine = set(group)
    own = _median_height(boxes, group)
    rest = _median_height(boxes, [i for g in groups for i in g if i not in mine])
    x1, x2 = min(boxes[i][0] for i in group), max(boxes[i][2] for i in group)
    return own <= SIDE_PANEL_PRINT * rest and x2 - x1 >= min_heights * own and not _cells_of_rows(boxes, groups, group)


def _cells_of_rows(boxes: Sequence[Box], groups: list[list[int]], group: list[int]) -> bool:
    """Whether every line of `group` stands level with a line of the piece beside it: a table's
    first or last column (a command set in a monospaced font, whose boxes are shorter than the
    description's beside it), each cell in its row, not a panel whose lines keep their own rows."""
    beside = groups[1] if group is groups[0] else groups[-2]
    return all(any(in_one_row(boxes[i], boxes[j]) for j in beside) for i in group)


def in_one_row(a: Box, b: Box) -> bool:
    """Whether two lines share half the shorter one's height or more: one row, as group_rows
    makes them."""
    shared = min(a[3], b[3]) - max(a[1], b[1])
    return shared >= min(a[3] - a[1], b[3] - b[1]) / 2


def _median_height(boxes: Sequence[Box], idx: Sequence[int]) -> float:
    heights = sorted(boxes[i][3] - boxes[i][1] for i in idx)
    return heights[len(heights) // 2]


def column_stretches(
    boxes: Sequence[Box],
    min_share: float = 0.2,
    min_lines: int = 2,
    min_heights: float = 6.0,
    max_gap: float = 0.8,
    read_across: Callable[[list[int]], bool] | None = None,
) -> list[list[int]]:
    """Split text lines into side-by-side columns where a gutter runs through a stretch of their
    rows only: groups top to bottom, the columns of each such stretch left to right between the
    rows that run across (text_columns, which splits only at a gutter through all the lines, is
    tried first).

    A manual's example box set beside its output, then a paragraph under both, is one text region
    for the layout model: with no gutter through the paragraph, its two boxes were read row by row
    across, one line of code then one line of its output. Consecutive rows that continue the same
    gutter within `max_gap` x the median line height of each other are one stretch (a column's
    last lines below the other's end join it; a line set further below both, past the boxes'
    frames, does not); each stretch is split as text_columns splits lines (its pieces at least
    as wide and as long as a column must be), and the rows between split stretches stay
    together. One group (all lines) when nothing splits. `read_across(indices)`: whether a
    stretch whose right-hand column holds these lines is read row by row all the same (an
    index's or a contents list's page numbers, each row's entry paired with its pages)."""
    whole = text_columns(boxes, min_share, min_lines, min_heights)
    if len(whole) > 1 or not boxes:
        return whole
    heights = sorted(b[3] - b[1] for b in boxes)
    reach = max_gap * heights[len(heights) // 2]
    stretches: list[list[int]] = []
    for band in _split(boxes, list(range(len(boxes))), axis=1):
        if stretches and _continues_columns(boxes, stretches[-1], band, reach):
            stretches[-1] += band
        else:
            stretches.append(list(band))
    pieces: list[list[int]] = []
    plain: list[int] = []  # rows between split stretches, top to bottom
    for stretch in stretches:
        columns = text_columns([boxes[i] for i in stretch], min_share, min_lines, min_heights)
        if len(columns) == 1 or (read_across is not None and read_across([stretch[i] for i in columns[-1]])):
            plain += stretch
            continue
        if plain:
            pieces.append(sorted(plain))
            plain = []
        pieces += [sorted(stretch[i] for i in column) for column in columns]
    if plain:
        pieces.append(sorted(plain))
    return pieces


def _continues_columns(boxes: Sequence[Box], above: list[int], band: list[int], reach: float) -> bool:
    """Whether `band` continues the columns of the rows `above` it: within `reach` px under them,
    one of the two split by a gutter, and their union split by one into columns at least
    MIN_COLUMN_SHARE of its width (as _merge_column_bands merges a page's bands), a narrower
    piece joined to its nearer neighbour first (_wide_pieces)."""
    gap = min(boxes[i][1] for i in band) - max(boxes[i][3] for i in above)
    if gap > reach:
        return False
    if not (_is_multi_column(boxes, above) or _is_multi_column(boxes, band)):
        return False
    return len(_wide_pieces(boxes, _split(boxes, above + band, axis=0))) >= 2


def _wide_pieces(boxes: Sequence[Box], pieces: list[list[int]]) -> list[list[int]]:
    """Side-by-side pieces, each narrower than MIN_COLUMN_SHARE of their width joined to its
    nearer neighbour until each holds a piece that wide on its own. An index's page numbers stand
    apart from their entries across the gap of a dot leader that the reader reads as nothing: in
    a few rows of a multi-column index (under a letter heading) they are pieces of their own, too
    narrow for columns, and the index's columns, still there beside them, broke into stretches
    read row by row across. Narrow pieces joined to each other make no column: a listing's line
    numbers beside a short line of code are no column left of the listing's deeper lines; and a
    narrow first piece is left as it is (page numbers stand right of their entries, while a
    listing's narrow marks at its left joined its code into a column of their own)."""
    pieces = [list(p) for p in pieces]
    wide = [not narrow for narrow in _narrow(boxes, pieces)]
    while len(pieces) > 1 and not all(wide):
        bad = wide.index(False)
        if bad == 0:
            break
        if bad == len(pieces) - 1:
            other = bad - 1
        else:
            left = min(boxes[i][0] for i in pieces[bad]) - max(boxes[i][2] for i in pieces[bad - 1])
            right = min(boxes[i][0] for i in pieces[bad + 1]) - max(boxes[i][2] for i in pieces[bad])
            other = bad - 1 if left <= right else bad + 1
        lo, hi = sorted((bad, other))
        pieces[lo : hi + 1] = [pieces[lo] + pieces[hi]]
        wide[lo : hi + 1] = [wide[lo] or wide[hi]]
    return pieces
