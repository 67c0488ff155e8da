"""Tables: the model's OTSL answer as the HTML table MinerU writes."""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Iterable, Iterator

OTSL_TOKENS = ("<fcel>", "<ecel>", "<lcel>", "<ucel>", "<xcel>", "<nl>")
_OTSL_SPLIT = re.compile("(" + "|".join(OTSL_TOKENS) + ")")

# a cell of the grid: (row, column, rowspan, colspan, text), the row and column of its top left
_Cell = tuple[int, int, int, int, str]


def otsl_to_html(otsl: str) -> str:
    """An OTSL table as an HTML <table> with rowspan/colspan, as MinerU writes it.

    <fcel> opens a cell with text, <ecel> an empty one, <lcel> continues the cell on the left,
    <ucel> the one above, <xcel> both; <nl> ends a row. Short rows are padded with empty cells.
    Returns "" when there is no cell. Text that is not right after a cell token, and anything
    after text that appears before the first token, is dropped (MinerU's alignment rule).
    """
    if otsl.startswith("<table") and otsl.endswith("</table>"):
        return otsl
    parts = [p for p in _OTSL_SPLIT.split(otsl) if p.strip()]
    tokens = [p for p in parts if p in OTSL_TOKENS]
    rows = [list(g) for is_nl, g in itertools.groupby(tokens, lambda t: t == "<nl>") if not is_nl]
    if not rows:
        return ""
    ncols = max(len(r) for r in rows)
    for padded in rows:
        padded.extend(["<ecel>"] * (ncols - len(padded)))

    # attach each piece of text to the token right before it, walking the original parts in
    # step with the padded grid; once they disagree, no more text is attached
    texts: dict[tuple[int, int], str] = {}
    p = 0
    for r, row in enumerate(rows):
        for c, token in enumerate(row):
            if p < len(parts) and parts[p] == token:
                p += 1
                if p < len(parts) and parts[p] not in OTSL_TOKENS:
                    texts[(r, c)] = parts[p]
                    p += 1
        if p < len(parts) and parts[p] == "<nl>":
            p += 1

    nrows = len(rows)
    grid: list[list[_Cell | None]] = [[None] * ncols for _ in range(nrows)]
    for r, row in enumerate(rows):
        for c, token in enumerate(row):
            if token not in ("<fcel>", "<ecel>"):
                continue
            colspan = rowspan = 1
            # an <ecel> followed by text hides a span to its right (MinerU)
            if not (token == "<ecel>" and (r, c) in texts):
                while c + colspan < ncols and row[c + colspan] in ("<lcel>", "<xcel>"):
                    colspan += 1
            while r + rowspan < nrows and rows[r + rowspan][c] in ("<ucel>", "<xcel>"):
                rowspan += 1
            text = texts.get((r, c), "").strip() if token == "<fcel>" else ""
            cell: _Cell = (r, c, rowspan, colspan, text)
            for i in range(r, r + rowspan):
                for j in range(c, c + colspan):
                    grid[i][j] = cell  # later cells overwrite earlier ones, as in MinerU

    if not any(token in ("<fcel>", "<ecel>") for row in rows for token in row):
        return ""

    def cells(i: int) -> Iterator[tuple[int, int, str]]:  # row i's cells, each at its top-left place
        for j in range(ncols):
            r, c, rowspan, colspan, text = grid[i][j] or (i, j, 1, 1, "")
            if (r, c) == (i, j):
                yield rowspan, colspan, text

    return html_table(cells(i) for i in range(nrows))


def html_table(rows: Iterable[Iterable[tuple[int, int, str]]]) -> str:
    """`<table><tr><td rowspan="2" colspan="3">text</td>...</tr></table>`: each row's cells as
    (rowspan, colspan, text), the text escaped, a span of 1 left out. A VLM table and one the
    embedded engine reads (engines.table.to_html) are written in this one form."""
    out = ["<table>"]
    for row in rows:
        out.append("<tr>")
        for rowspan, colspan, text in row:
            attrs = (f' rowspan="{rowspan}"' if rowspan > 1 else "") + (f' colspan="{colspan}"' if colspan > 1 else "")
            out.append(f"<td{attrs}>{html.escape(text)}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)
