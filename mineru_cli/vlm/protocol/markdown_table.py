"""Markdown tables in the Pro model's image-analysis answers: the checks and the HTML conversion
the Pro client (mineru-vl-utils 2.x, image_analysis_postprocess) applies to them.

A chart's content is a markdown table; a "pure_table" picture's content is a markdown table (or
OTSL). The client converts only a table it can read whole (header, separator, rows of the same
width) and empties a chart whose table is malformed, so the same rules live here.
"""

from __future__ import annotations

import html
import re

_SEPARATOR_CELL = re.compile(r":?-{3,}:?")


def without_outer_pipes(line: str) -> str:
    """The line stripped, less one leading and one trailing pipe (a row's outer pipes are optional)."""
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|"):
        text = text[:-1]
    return text


def column_count(line: str) -> int:
    """Columns as the client counts them: every pipe between the outer ones, escaped or not."""
    return len(without_outer_pipes(line).split("|"))


def is_separator_line(line: str) -> bool:
    """`| --- | :---: | ---: |`: two columns or more of three or more dashes, colons optional,
    outer pipes optional.

    The client writes this as one regular expression whose adjacent `\\s*` make it quadratic on
    a long run of spaces (a looping answer has them); reading the cells gives the same answer in
    linear time.
    """
    cells = without_outer_pipes(line).split("|")
    return len(cells) >= 2 and all(_SEPARATOR_CELL.fullmatch(cell.strip()) for cell in cells)


def is_row_candidate(line: str) -> bool:
    """A line that looks like a table row: a pipe and at least two columns."""
    text = line.strip()
    return bool(text) and "|" in text and column_count(text) >= 2


def split_row(line: str) -> list[str]:
    """A row's cells, stripped; `\\|` is a literal pipe, any other backslash stays as written."""
    cells: list[str] = []
    current: list[str] = []
    escaped = False
    for char in without_outer_pipes(line):
        if escaped:
            current.append("|" if char == "|" else "\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if escaped:
        current.append("\\")
    cells.append("".join(current).strip())
    return cells


def markdown_table_to_html(content: str) -> str | None:
    """The whole content as one HTML table, or None when it is not exactly one well-formed table.

    Every line must be a row (no blank lines), the second the separator, and every row as wide
    as the header; the header becomes <th> cells, the rest <td>, all text HTML-escaped.
    """
    if not content or not content.strip():
        return None
    lines = [line.strip() for line in content.strip().splitlines()]
    if len(lines) < 2 or any(not line for line in lines):
        return None
    header_line, separator_line, body_lines = lines[0], lines[1], lines[2:]
    if not is_row_candidate(header_line) or not is_separator_line(separator_line):
        return None
    header = split_row(header_line)
    if len(header) < 2 or len(split_row(separator_line)) != len(header):
        return None
    body: list[list[str]] = []
    for line in body_lines:
        if not is_row_candidate(line):
            return None
        cells = split_row(line)
        if len(cells) != len(header):
            return None
        body.append(cells)
    header_html = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body_html = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in body)
    return f"<table><tr>{header_html}</tr>{body_html}</table>"


def _table_under_separator_is_malformed(lines: list[str], sep_idx: int) -> bool:
    """The table a separator line belongs to is broken: no header row above it, a header or
    separator of the wrong width, or a data row (up to a blank or non-row line) of another width."""
    header_idx = sep_idx - 1
    while header_idx >= 0 and not lines[header_idx].strip():
        header_idx -= 1
    if header_idx < 0 or not is_row_candidate(lines[header_idx]):
        return True
    width = column_count(lines[header_idx])
    if width < 2 or column_count(lines[sep_idx]) != width:
        return True
    for line in lines[sep_idx + 1 :]:
        if not line.strip() or not is_row_candidate(line):
            break
        if column_count(line) != width:
            return True
    return False


def has_malformed_table(content: str) -> bool:
    """The content holds a broken markdown table (the client then drops a chart's content).

    Broken: any separator line whose table is malformed, or at least two row-like lines with no
    separator at all (the model lost or garbled it).
    """
    lines = content.splitlines()
    separators = [i for i, line in enumerate(lines) if is_separator_line(line)]
    for sep_idx in separators:
        if _table_under_separator_is_malformed(lines, sep_idx):
            return True
    row_candidates = sum(1 for line in lines if is_row_candidate(line))
    return row_candidates >= 2 and not separators
