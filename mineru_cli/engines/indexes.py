"""A book's or a package manual's index set in two or more columns, read column after column
(`index_columns`).

The layout model boxes an index page's columns as one figure or one table (or a text region that
runs across them). Read as a table's cells or row by row across, its entries interleave: the
first column's entry, the second's, the third's, then the first column's next. The columns of an
index are found by their entries' left edges, not by a gutter through the lines: an entry wider
than its column (a long macro name) runs into the next column's indent, and the gap between
columns is then closed in a few rows. An index's rows end in page references, some in a list or
after a leader (a list of "item 1", "item 2" has none), every column holds its entries' references,
and its entries, read down each column, stand in alphabetical order: a table of names and numbers
has its numbers in columns of their own, and its second column of names in no order."""

from __future__ import annotations

import bisect
import re
import statistics

from mineru_cli.core.geometry import Box
from mineru_cli.engines.lines import Line

# A line of page references: numbers (arabic or roman), ranges and commas. A dot leader's dots
# before them are the OCR's, as a line of their own or the line's start.
PAGE_REFS = re.compile(r"^(?:\d+|[ivxlcdm]+)(?:\s*[,–-]\s*(?:\d+|[ivxlcdm]+))*[,.]?$", re.IGNORECASE)
# An entry and its page references in one line ("\@aom@by . 72, 75–77, 465"): arabic numbers only
# (a word ending a line may be a roman numeral's letters: "mix", "did").
_ENDS_IN_REFS = re.compile(r"[\s.]\d+(?:\s*[,–-]\s*\d+)*[,.]?$")
# Page references in a list ("22, 24") or after a leader (". . 3"): a list whose items end in
# their numbers ("item 1", "item 2") has none.
_LISTED = re.compile(r"\d\s*,\s*\d|\.\s*\.\s*\d")
_LEADER = " .·•:…"  # a leader's dots as the OCR reads them

INDEX = {
    "refs_share": 0.4,  # at least this share of the lines are page references or end in them
    "listed": 3,  # at least this many lines hold references in a list or after a leader
    "listed_share": 0.05,  # and at least this share of the lines
    "column_refs_share": 0.25,  # and of each column's lines (a table's column of names holds none)
    "start_heights": 2.0,  # a loose line this x the line height beside an index's region may be its
    "start_tolerance": 0.5,  # entries starting a column start within this x the line height of each other
    "column_entries": 3,  # a column holds at least this many entries
    "column_share": 0.1,  # and at least this share of the index's entries
    "column_heights": 6.0,  # a column is at least this x the line height wide
    "referenced": 0.5,  # at least this share of a column's entries have their references in the column
    "ordered": 0.7,  # each column's entries ascend alphabetically in at least this share of their pairs
    "entries": 8,  # an index has at least this many entries
}


def is_refs(line: Line) -> bool:
    """Whether `line` holds page references only."""
    return bool(PAGE_REFS.match(line.text.strip(_LEADER)))


def index_columns(lines: list[Line]) -> tuple[list[Line], list[list[Line]]] | None:
    """The lines above an index that run across its columns (the paragraph before it, which the
    layout model boxed with it) and the index's columns, left to right, each with its lines (read
    down the column, each row's entry before its references); None where `lines` hold no index
    set in two or more columns. An entry starts a column at its left edge, or stands indented
    under one (a sub-entry; a wrapped entry's rest); every other line goes to the column whose
    start lies left of it, nearest (a line of references stands right of its entry, never left of
    its column)."""
    if len(lines) < 2 * INDEX["entries"]:
        return None
    if sum(_with_refs(ln) for ln in lines) < INDEX["refs_share"] * len(lines):
        return None
    if sum(bool(_LISTED.search(ln.text)) for ln in lines) < max(INDEX["listed"], INDEX["listed_share"] * len(lines)):
        return None
    entries = [ln for ln in lines if _is_entry(ln)]
    if len(entries) < INDEX["entries"]:
        return None
    height = statistics.median(ln.height for ln in lines)
    starts = _column_starts(entries, height)
    if len(starts) < 2 or min(b - a for a, b in zip(starts, starts[1:])) < INDEX["column_heights"] * height:
        return None
    reach = INDEX["start_heights"] * height
    across = {id(ln) for ln in lines if any(ln.box[0] < x - reach and ln.box[2] > x + reach for x in starts[1:])}
    top = min((ln.box[1] for ln in lines if id(ln) not in across), default=0)
    head = [ln for ln in lines if id(ln) in across and (ln.box[1] + ln.box[3]) / 2 < top]
    in_head = {id(ln) for ln in head}
    columns: list[list[Line]] = [[] for _ in starts]
    for ln in lines:
        if id(ln) not in in_head:
            columns[max(0, bisect.bisect_right(starts, ln.box[0]) - 1)].append(ln)
    for column in columns:
        if sum(_with_refs(ln) for ln in column) < INDEX["column_refs_share"] * len(column):
            return None
        if not _referenced(column, height):
            return None
        names = [ln for ln in column if not is_refs(ln)]
        if not _alphabetical(sorted(names, key=lambda ln: (ln.box[1], ln.box[0]))):
            return None
    return head, columns


def _referenced(column: list[Line], height: float) -> bool:
    """Whether most of a column's entries have their page references in the column: at the
    entry's end, or on a line of references that starts in its row or the row under it. Split
    at a wrong edge (letter headings centred in a column, or references misread as words), a
    column's entries have theirs in the next column."""
    entries = [ln for ln in column if _is_entry(ln)]
    middles = sorted((ln.box[1] + ln.box[3]) / 2 for ln in column if is_refs(ln))
    found = 0
    for ln in entries:
        if _ENDS_IN_REFS.search(ln.text):
            found += 1
            continue
        k = bisect.bisect_left(middles, ln.box[1])
        found += k < len(middles) and middles[k] <= ln.box[3] + height
    return found >= INDEX["referenced"] * len(entries)


def _is_entry(line: Line) -> bool:
    """Whether `line` is an entry: no page references, and no letter heading (one that stands
    alone, centred in its column: no column starts at it)."""
    return not is_refs(line) and len(line.text) > 1


def _with_refs(line: Line) -> bool:
    """Whether `line` is page references or ends in them."""
    return is_refs(line) or bool(_ENDS_IN_REFS.search(line.text))


def beside(box: Box, lines: list[Line], others: list[Line]) -> list[Line]:
    """Those of `others` (lines of no region) that stand level with the region `box` holding
    `lines`, starting left of it and reaching within start_heights x their line height of its
    left side: an index's first column of entries that the layout model's table box left out, its
    references inside (a figure's label right of an index is no entry of it)."""
    if not lines:
        return []
    reach = INDEX["start_heights"] * statistics.median(ln.height for ln in lines)
    x1, y1, _, y2 = box
    return [
        ln for ln in others if y1 <= (ln.box[1] + ln.box[3]) / 2 <= y2 and x1 - reach <= ln.box[2] and ln.box[0] < x1
    ]


def _column_starts(entries: list[Line], height: float) -> list[int]:
    """The left edges where the index's columns start: edges where enough entries start level
    (within start_tolerance x the line height), the one with the most entries of those closer
    than a column's width (column_heights x the line height) to each other. An indented
    sub-entry, or a reference the OCR misread as a word, starts a few lines beside a column's
    edge, never as many as the column's entries."""
    xs = sorted(ln.box[0] for ln in entries)
    tolerance = INDEX["start_tolerance"] * height
    counts = [(bisect.bisect_right(xs, x + tolerance) - n, x) for n, x in enumerate(xs)]
    least = max(INDEX["column_entries"], INDEX["column_share"] * len(entries))
    starts: list[int] = []
    for count, x in sorted(counts, key=lambda c: (-c[0], c[1])):
        if count < least:
            break
        if all(abs(x - start) >= INDEX["column_heights"] * height for start in starts):
            starts.append(x)
    return sorted(starts)


def _alphabetical(names: list[Line]) -> bool:
    """Whether a column's entries, top to bottom, ascend in alphabetical order in at least
    `ordered` of their neighbouring pairs, under either the index's case-blind order or the
    character codes' (makeindex sorts "\\@CTXcolumntype" before "\\@CTalign")."""
    keys = [_sort_key(ln.text) for ln in names]
    keys = [k for k in keys if k]
    if len(keys) < 2:
        return True
    pairs = len(keys) - 1
    plain = sum(a.casefold() <= b.casefold() for a, b in zip(keys, keys[1:]))
    codes = sum(a <= b for a, b in zip(keys, keys[1:]))
    return max(plain, codes) >= INDEX["ordered"] * pairs


def _sort_key(text: str) -> str:
    """An entry's letters and digits, the references after it left out: what the index sorts."""
    entry = _ENDS_IN_REFS.sub("", text)
    return "".join(ch for ch in entry if ch.isalnum())
