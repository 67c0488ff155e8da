"""Charts whose markdown table the Pro model wrote in a loop: detect the repetition and keep the
largest well-formed table in the answer, as the Pro client does (mineru-vl-utils 2.x,
chart_invalid_repetition).

A looping decoder repeats rows, cells, single tokens or the whole answer. When any sign of that
is present the table is rebuilt from the rows that parse (noisy rows after the separator are
dropped) and the largest legal table wins; with no sign, or no legal table, the content stays.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from .markdown_table import without_outer_pipes

_SEPARATOR_CELL = re.compile(r"^:?-{3,}:?$")
# words (with inner - _ . /) or any single non-space character: the units a loop repeats
_REPEAT_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-_./][A-Za-z0-9]+)*|[^\s]", re.UNICODE)
_CHAR_RUN = re.compile(r"([A-Za-z0-9])\1{19,}")  # one letter or digit 20 times in a row
_FRAGMENT_SPLIT = re.compile(r"\s*(?:::|;|,|\|)\s*")
_FRAGMENT_REPEATS = 8
_CELL_MAX_LEN = 300
_CELL_MAX_DOUBLE_COLONS = 20
_CELL_MAX_SEMICOLONS = 30
_LONG_LINE = 30  # lines at least this long count as repeated on fewer occurrences
_SAME_TOKEN_RUN = 8
_WHOLE_REPEAT_MIN_LEN = 80


# --------------------------------------------------------------------------- rows


def split_row(line: str) -> list[str] | None:
    """A row's cells (stripped), or None for a line with no pipe.

    Unlike the table conversion, a backslash keeps itself and hides the next character, and a
    pipe inside `code` does not split.
    """
    if "|" not in line:
        return None
    text = without_outer_pipes(line)
    cells: list[str] = []
    buf: list[str] = []
    escaped = in_code = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "`":
            in_code = not in_code
        elif ch == "|" and not in_code:
            cells.append("".join(buf).strip())
            buf = []
            continue
        buf.append(ch)
    cells.append("".join(buf).strip())
    return cells


def is_separator_row(cells: list[str] | None) -> bool:
    return bool(cells) and all(_SEPARATOR_CELL.fullmatch(cell.replace(" ", "")) for cell in cells or ())


def _is_separator_line(line: str) -> bool:
    return is_separator_row(split_row(line))


# --------------------------------------------------------------------------- detection


def _cell_is_repetitive(cell: str) -> bool:
    """An overlong cell, or one fragment (split on :: ; , |) eight times or more."""
    if (
        len(cell) > _CELL_MAX_LEN
        or cell.count("::") > _CELL_MAX_DOUBLE_COLONS
        or cell.count(";") > _CELL_MAX_SEMICOLONS
    ):
        return True
    counts: dict[str, int] = {}
    for fragment in _FRAGMENT_SPLIT.split(cell):
        normalized = re.sub(r"\s+", " ", fragment).strip().lower()
        if len(normalized) < 3:
            continue
        counts[normalized] = counts.get(normalized, 0) + 1
        if counts[normalized] >= _FRAGMENT_REPEATS:
            return True
    return False


def _has_repetitive_cell(content: str) -> bool:
    """A repetitive cell in a data row of a table (rows after a header and its separator)."""
    in_table = separator_seen = False
    for line in content.splitlines():
        row = split_row(line)
        if row is None:
            in_table = separator_seen = False
        elif not in_table:
            in_table, separator_seen = True, False  # the header
        elif not separator_seen:
            separator_seen = is_separator_row(row)
        elif any(cell.strip() and _cell_is_repetitive(cell.strip()) for cell in row):
            return True
    return False


def _whole_content_repeats(content: str) -> bool:
    """The answer (spaces collapsed, 80 characters or more) is one unit written twice or more."""
    compact = re.sub(r"\s+", " ", content).strip()
    size = len(compact)
    if size < _WHOLE_REPEAT_MIN_LEN:
        return False
    period = (compact + compact).find(compact, 1)
    return 0 < period < size and size % period == 0


def _has_repeated_lines(lines: list[str]) -> bool:
    """The same non-blank line several times in a row (2 when long, 3 otherwise), or a long
    non-separator line four times or more anywhere."""
    for line, group in itertools.groupby(lines):
        if not line:
            continue
        count = sum(1 for _ in group)
        if (count >= 2 and len(line) >= _LONG_LINE) or count >= 3:
            return True
    positions: dict[str, int] = {}
    for line in lines:
        if len(line) >= _LONG_LINE and not _is_separator_line(line):
            positions[line] = positions.get(line, 0) + 1
            if positions[line] >= 4:
                return True
    return False


def _has_token_run(content: str) -> bool:
    """One token (case ignored) eight times in a row, separator lines left out."""
    text = "\n".join(line for line in content.splitlines() if not _is_separator_line(line))
    tokens = [token.lower() for token in _REPEAT_TOKEN.findall(text)]
    return any(sum(1 for _ in group) >= _SAME_TOKEN_RUN for _, group in itertools.groupby(tokens))


def has_repetition(content: str) -> bool:
    """Any sign that the model looped while writing this chart's table."""
    lines = [line.strip() for line in content.strip("\n").splitlines()]
    return (
        "\\|" in content  # the model escapes pipes only when it has lost the table's structure
        or re.search(r"\n{5,}", content) is not None
        or _whole_content_repeats(content)
        or _CHAR_RUN.search(content) is not None
        or _has_repetitive_cell(content)
        or _has_repeated_lines(lines)
        or _has_token_run(content)
    )


# --------------------------------------------------------------------------- repair


def _repair_split_row(line: str) -> list[str] | None:
    """A row for the rebuild: full-width and broken pipes (｜ ¦) and escaped pipes become plain
    pipes first; None unless there are two cells or more."""
    normalized = line.strip().replace("\uff5c", "|").replace("\u00a6", "|").replace("\\|", "|")
    if "|" not in normalized:
        return None
    cells = split_row(normalized)
    if cells is None or len(cells) < 2:
        return None
    return cells


def _is_noisy_row(cells: list[str]) -> bool:
    return not is_separator_row(cells) and any(cell.strip() and _cell_is_repetitive(cell.strip()) for cell in cells)


def _row_blocks(content: str) -> list[list[list[str]]]:
    """Runs of consecutive row lines; after a block's separator, noisy rows are dropped."""
    blocks: list[list[list[str]]] = []
    current: list[list[str]] = []
    separator_seen = False
    for line in content.splitlines():
        cells = _repair_split_row(line)
        if cells is None:
            if current:
                blocks.append(current)
                current = []
            separator_seen = False
        elif not current:
            current.append(cells)
            separator_seen = False
        elif not separator_seen:
            current.append(cells)
            separator_seen = is_separator_row(cells)
        elif not _is_noisy_row(cells):
            current.append(cells)
    if current:
        blocks.append(current)
    return blocks


def _clean_cell(cell: str) -> str:
    cleaned = re.sub(r"\s+", " ", cell.replace("\t", " ")).strip()
    if cleaned.count("`") % 2 == 1:
        cleaned += "`"  # close an unclosed code span so it cannot swallow the next pipes
    return cleaned.replace("|", "\\|")


def _format_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_clean_cell(cell) for cell in header) + " |"]
    lines.append("| " + " | ".join("---" for _ in header) + " |")
    lines.extend("| " + " | ".join(_clean_cell(cell) for cell in row) + " |" for row in rows)
    return "\n".join(lines)


def _table_at_separator(rows: list[list[str]], sep_idx: int) -> str | None:
    """The table whose separator is rows[sep_idx]: the header above it, then the data rows of the
    header's width up to the next separator or width change; None without a data row."""
    if sep_idx < 1:
        return None
    header = rows[sep_idx - 1]
    if len(header) < 2 or is_separator_row(header):
        return None
    data: list[list[str]] = []
    for row in rows[sep_idx + 1 :]:
        if is_separator_row(row) or len(row) != len(header):
            break
        data.append(row)
    return _format_table(header, data) if data else None


def _tables_without_separator(rows: list[list[str]]) -> Iterator[str]:
    """Runs of two or more same-width rows (no separator), the first taken as the header."""
    index = 0
    while index < len(rows):
        if is_separator_row(rows[index]) or len(rows[index]) < 2:
            index += 1
            continue
        width = len(rows[index])
        end = index + 1
        while end < len(rows) and not is_separator_row(rows[end]) and len(rows[end]) == width:
            end += 1
        if end - index >= 2:
            yield _format_table(rows[index], rows[index + 1 : end])
        index = max(end, index + 1)


def _has_pipe_boundaries(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("|") and stripped.endswith("|")


def _is_legal_table(table: str) -> bool:
    """A rebuilt table that reads back whole: header, separator and rows, all pipe-bounded and of
    one width (a cell's backticks or backslashes can still break it)."""
    lines = table.strip().splitlines()
    if len(lines) < 3:
        return False
    header, separator = split_row(lines[0]), split_row(lines[1])
    if header is None or separator is None or not is_separator_row(separator):
        return False
    if not _has_pipe_boundaries(lines[0]) or not _has_pipe_boundaries(lines[1]) or len(header) != len(separator):
        return False
    for line in lines[2:]:
        row = split_row(line)
        if row is None or not _has_pipe_boundaries(line) or len(row) != len(header):
            return False
    return True


def _table_size(table: str) -> tuple[int, int, int]:
    lines = table.splitlines()
    return (len(lines), len(split_row(lines[0]) or []), len(table))


def largest_legal_table(content: str) -> str:
    """The largest legal table (rows, then columns, then length; the first on a tie), or ""."""
    candidates: list[str] = []
    for rows in _row_blocks(content):
        for index, row in enumerate(rows):
            if is_separator_row(row):
                table = _table_at_separator(rows, index)
                if table and _is_legal_table(table):
                    candidates.append(table)
        candidates.extend(table for table in _tables_without_separator(rows) if _is_legal_table(table))
    return max(candidates, key=_table_size) if candidates else ""


def repair_chart_repetition(content: str) -> str:
    """The chart's table with the model's loop cut out, or the content unchanged when it shows no
    repetition or holds no legal table to fall back on."""
    if not has_repetition(content):
        return content
    return largest_legal_table(content) or content
