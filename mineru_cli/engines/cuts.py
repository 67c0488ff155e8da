"""Where the embedded engine cuts a detected line before it joins a block: at a column gutter it
runs across (`cut_at_gutters`), and inside a table region at a blank run between narrow columns
(`cut_at_table_columns`). Each cut reads its two sides again through a `Split`: the pixels'
(engines.ocr reads each piece again) or the text layer's (its own characters)."""

from __future__ import annotations

import statistics
from typing import Callable, Sequence

import cv2
import numpy as np

from mineru_cli.core.blocks import BlockType as T
from mineru_cli.core.geometry import Box, BoxGrid, best_holder, best_holders, shares_rows
from mineru_cli.engines.lines import Line, level_boxes
from mineru_cli.engines.regions import FLOWING, GROUPING, REGION_TYPES
from mineru_cli.engines.table_text import TABLE_LINE
from mineru_cli.reading_order import group_rows

# A blank run inside a table's line at least this many of the table's line heights wide, where
# another row has a gap between two lines, is a column gap: at 150 DPI a LaTeX table's columns
# stand 0.65 or more of the detector's line box apart, its word spaces under 0.3, the space
# around a relation sign ("Refs. >= 10") about 0.4.
COLUMN_GAP = 0.55


# How a line is cut at an x: the lines its two sides make (a side with no text gives none).
Split = Callable[[Line, int], list[Line]]


def cut_at_gutters(
    lines: list[Line], regions: Sequence[tuple[Box, str, float]], split: Split
) -> tuple[list[Line], list[tuple[Box, str, float]]]:
    """Lines that run from a text region across the column gutter beside it, cut in the gutter;
    and the regions, those that lines of no region were cut into reaching to the cut.

    The detector joins text that touches or overprints across a gutter into one line (a left
    column's display formula running into the right column's text: "G(x,grocavity"); that line
    belongs to the right column's region, whose block then spans the gutter, and the page has
    no vertical cut left, so its columns are read row by row. A line of a flowing region that
    reaches past the region's side (by over its own height) into the x-range of lines standing
    wholly beside the region in its rows, in another flowing region (another column: an
    equation's number beside a narrow paragraph's region is none), is cut midway between those
    lines and the region.

    A text layer has the formula's glyphs that print over the next column as lines of their own,
    in no region, standing half in the gutter: they link the formula's paragraph to the column
    beside it. A line of no region that runs into a flowing region from beyond the gutter is cut
    at the same place (`_entry_cut`), and the region reaches to the cut, so that the piece over
    the gutter's far half is the region's (whose side the layout model draws a few pixels either
    way of its text: the piece, mostly over the region, is often not held by it).

    `split` cuts a line: the pixels' lines are read again piece by piece, a text layer's are cut
    between their characters."""
    boxes = [box for box, _, _ in regions]
    flowing = [REGION_TYPES.get(cls, T.TEXT) in FLOWING for _, cls, _ in regions]
    homes = best_holders([line.box for line in lines], boxes, GROUPING["line_in_region"])
    in_flow = [(line, h) for line, h in zip(lines, homes) if h is not None and flowing[h]]
    beside = _beside(in_flow, boxes)  # found once a region
    out: list[Line] = []
    reached = list(boxes)
    for line, home in zip(lines, homes):
        cut = None
        if home is None:
            entry = _entry(line, boxes, beside)
            if entry is not None:
                h, cut = entry
                x1, y1, x2, y2 = reached[h]
                reached[h] = (min(x1, cut), y1, max(x2, cut), y2)
        elif home in beside:
            cut = _gutter_cut(line, boxes[home], beside[home])
        out += [line] if cut is None else split(line, cut)
    return out, [(box, cls, score) for box, (_, cls, score) in zip(reached, regions)]


def _beside(in_flow: list[tuple[Line, int]], boxes: list[Box]) -> dict[int, list[Line]]:
    """Each flowing region's (a region of the lines of `in_flow`: (line, its region)) lines of
    the other flowing regions that share its rows, in their order. Each region tests only the
    lines a grid over the lines' rows (their y-ranges) files near its own, so that a page of a
    region for each of hundreds of lines costs about the lines in each region's rows."""
    lines = [line.box for line, _ in in_flow]
    grid = BoxGrid([_rows_of(b) for b in lines])
    beside = {}
    for home in {h for _, h in in_flow}:
        near = grid.near(_rows_of(boxes[home]))
        beside[home] = [in_flow[i][0] for i in near if in_flow[i][1] != home and shares_rows(lines[i], boxes[home])]
    return beside


def _rows_of(b: Box) -> Box:
    """The box's y-range alone, as a box of no width: shares_rows looks at nothing else."""
    return (0, b[1], 0, b[3])


def cut_at_table_columns(
    lines: list[Line], regions: Sequence[tuple[Box, str, float]], bgr: np.ndarray, split: Split
) -> list[Line]:
    """The pixels' lines of each table region cut where they cross a column gap of the table.

    The detector reads a table's cells set closer than about a line height as one line ("0pt
    3pt", "Space Space" over two narrow columns), and that line then fills one cell. A line is
    cut at a blank run inside its ink at least COLUMN_GAP of the table's median line height wide
    (wider than a word space or the space around a relation sign) whose middle lies between two
    lines the detector kept apart in another row of the table: a gap between its columns."""
    out = list(lines)
    for box, cls, _ in regions:
        if cls != "table":
            continue
        inside = [
            i for i, line in enumerate(out) if best_holder(line.box, [box], GROUPING["line_in_region"]) is not None
        ]
        gaps = _column_gaps([out[i] for i in inside])
        height = statistics.median(out[i].height for i in inside) if inside else 0
        cut: dict[int, list[Line]] = {}
        for i in inside:
            if out[i].box[2] - out[i].box[0] > TABLE_LINE * (box[2] - box[0]):
                continue  # a caption or note set in the region: its sentence spaces are no column gaps
            xs = [x for x in _ink_gaps(bgr, out[i], COLUMN_GAP * height) if any(a < x < b for a, b in gaps)]
            if xs:
                cut[i] = _cut_at(out[i], xs, split)
        if cut:
            out = [piece for i, line in enumerate(out) for piece in cut.get(i, [line])]
    return out


def _column_gaps(lines: list[Line]) -> list[tuple[int, int]]:
    """The gaps between neighbouring lines of one row: (left line's end, right line's start)."""
    gaps = []
    for row in group_rows(level_boxes(lines)):
        ordered = sorted(row, key=lambda i: lines[i].box[0])
        for a, b in zip(ordered, ordered[1:]):
            if lines[a].box[2] < lines[b].box[0]:
                gaps.append((lines[a].box[2], lines[b].box[0]))
    return gaps


def _ink_gaps(bgr: np.ndarray, line: Line, wide: float) -> list[int]:
    """The middles of the blank runs inside a line's ink at least `wide` pixels wide."""
    x1, y1, x2, y2 = line.box
    crop = np.ascontiguousarray(bgr[y1:y2, x1:x2])
    if crop.size == 0:
        return []
    grey = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)
    dark, light = int(grey.min()), int(grey.max())
    if light - dark < 64:
        return []
    ink = [bool(v) for v in np.any(grey < (light + dark) / 2, axis=0)]
    columns = [x for x, inked in enumerate(ink) if inked]
    middles: list[int] = []
    start = None
    for x in range(columns[0], columns[-1] + 1):
        if not ink[x] and start is None:
            start = x
        elif ink[x] and start is not None:
            if x - start >= wide:
                middles.append(x1 + (start + x) // 2)
            start = None
    return middles


def _cut_at(line: Line, xs: list[int], split: Split) -> list[Line]:
    """`line` cut at each of `xs` (left to right). A cut one of whose sides reads as nothing
    is not made: the side has ink (a column gap lies inside the line's ink), and the line's
    own reading holds what it shows (a row of dashes, "— — —", reads "___" whole and "" in
    parts)."""
    pieces = [line]
    for x in sorted(xs):
        last = pieces.pop()
        cut = split(last, x) if last.box[0] < x < last.box[2] else []
        pieces += cut if len(cut) == 2 else [last]
    return pieces


def _gutter_cut(line: Line, region: Box, beside: list[Line]) -> int | None:
    """Where `line` (a line of `region`) is cut: the middle of the gutter between the region's
    side it reaches past and the lines of other flowing regions beside the region in its rows
    (`beside`); None where it stays whole."""
    x1, _, x2, _ = line.box
    reach = line.height
    if x1 < region[0] - reach:  # past the left side: the column on the left ends before it
        edge = _beside_edge(region, beside, "left")
        if edge is not None and x1 < edge:
            return _gutter_middle(region, edge, "left")
    if x2 > region[2] + reach:
        edge = _beside_edge(region, beside, "right")
        if edge is not None and x2 > edge:
            return _gutter_middle(region, edge, "right")
    return None


def _beside_edge(region: Box, beside: list[Line], side: str) -> int | None:
    """The edge nearest `region` of the lines of `beside` wholly on its `side` ("left": their
    rightmost end, "right": their leftmost start); None where none stand there."""
    if side == "left":
        return max((o.box[2] for o in beside if o.box[2] <= region[0]), default=None)
    return min((o.box[0] for o in beside if o.box[0] >= region[2]), default=None)


def _gutter_middle(region: Box, edge: int, side: str) -> int:
    """The middle of the gutter between `region`'s side and the edge of the lines beside it."""
    return (edge + int(region[0] if side == "left" else region[2])) // 2


def _entry(line: Line, boxes: list[Box], beside: dict[int, list[Line]]) -> tuple[int, int] | None:
    """(the flowing region that `line`, a line of no region, runs into across a gutter, where
    it is cut: see _entry_cut), or None. `beside`: each flowing region's lines beside it."""
    for home, others in beside.items():
        cut = _entry_cut(line, boxes[home], others)
        if cut is not None:
            return home, cut
    return None


def _entry_cut(line: Line, region: Box, beside: list[Line]) -> int | None:
    """Where `line`, a line of no region, is cut: in the middle of the gutter (as _gutter_cut
    finds it) that it crosses into `region` from beyond, starting past the region's side by over
    its own height, with its middle in the region's rows; None where it does not."""
    x1, y1, x2, y2 = line.box
    if not region[1] <= (y1 + y2) / 2 <= region[3]:
        return None
    reach = line.height
    if x1 < region[0] - reach and x2 > region[0]:
        side = "left"
    elif x2 > region[2] + reach and x1 < region[2]:
        side = "right"
    else:
        return None
    edge = _beside_edge(region, beside, side)
    return None if edge is None else _gutter_middle(region, edge, side)
