"""Code blocks of the OCR engine: a born-digital page's rows set wholly in a monospaced font (its
text layer says which: TextLine.mono, Line.mono) are a listing, a `code` block whose text keeps
the rows as set (indents, blank lines); prose set in a typewriter font, a lone typewriter word
and inline code stay text. Pure functions over lines and blocks; engines.assembly calls `code_runs`
when it makes a text block, `code_text` for a code block's text and `join_code` on the page's
blocks.
"""

from __future__ import annotations

import re
import statistics
from typing import Callable

from mineru_cli.core.blocks import Block
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.core.geometry import Box, enclosing, intersection, shares_columns
from mineru_cli.engines.lines import CJK, Line, join_text
from mineru_cli.reading_order import group_rows, in_one_row

# The blocks whose monospaced rows are code: text, and references (the layout model boxes a run
# of short listings between paragraphs as a reference list: gnuplot's and R's manuals).
CODE_HOSTS = frozenset({T.TEXT, T.REF_TEXT})
# The blocks that are code when all of their rows, more than one, are: the layout model boxes a
# piece of a listing cut at its blank lines as a title, and two listings side by side as an
# equation. A heading or a formula with one row in typewriter stays what it is.
LISTING_HOSTS = frozenset({T.TITLE, T.EQUATION})


def _code_rows(rows: list[list[Line]]) -> list[bool]:
    """Which rows are code: every line of the row monospaced, but for a line number left of
    them (a listing numbered in the text font: minted's and listings' `numbers=left`). Inline
    code in a sentence sets only some of its row in the monospaced font, so the row is prose;
    so is a lone row that is one plain word (_NAME_ROW): a description list's term set in
    typewriter (the options "draft", "final" of a LaTeX package's manual), a sentence's last
    word wrapped alone, or a web address (a footnote's too, after its number)."""
    code = [_code_row(row) for row in rows]
    texts = [join_text([ln.text for ln in row]) for row in rows]
    for i in range(1, len(rows) - 1):  # a numbered listing's blank line: its number alone
        if code[i - 1] and texts[i].isdigit():
            code[i] = any(code[i + 1 :])
    for i, row in enumerate(rows):
        alone = not (i > 0 and code[i - 1]) and not (i + 1 < len(rows) and code[i + 1])
        if code[i] and alone and _NAME_ROW.match(join_text([ln.text for ln in row if ln.mono])):
            code[i] = False
    start = 0
    for i in range(1, len(rows) + 1):  # each run of code rows
        if i == len(rows) or code[i] != code[start]:
            if code[start] and _typewriter_prose(texts[start:i]):
                code[start:i] = [False] * (i - start)
            start = i
    return code


# Text set in a monospaced font that reads as sentences, not code: a memo, a letter or a
# plain-text printout set wholly in Courier. Its rows are long (at least PROSE_ROW characters on
# average) and nearly all of its characters (all but PROSE_MARKS) are letters, digits, spaces and
# sentence punctuation; a listing's lines are shorter and denser in brackets, operators,
# underscores and backslashes. Rows are measured in character cells: a CJK character fills two
# (a monospaced CJK font sets it double width), and the full-width commas, stops and quotes of
# CJK text are sentence punctuation.
PROSE_ROW = 40
PROSE_MARKS = 0.02
_CJK_PUNCTUATION = r"\u3001-\u3003\u3008-\u3011\uff01\uff08\uff09\uff0c\uff1a\uff1b\uff1f"
_NOT_PROSE = re.compile(r"[^\w\s.,;:!?'\"‘’“”()\[\]–—…" + _CJK_PUNCTUATION + "-]|_")


def _typewriter_prose(rows: list[str]) -> bool:
    chars = sum(len(row) for row in rows)
    cells = chars + sum(len(CJK.findall(row)) for row in rows)
    marks = sum(len(_NOT_PROSE.findall(row)) for row in rows)
    return cells >= PROSE_ROW * len(rows) and marks <= PROSE_MARKS * chars


def _code_row(row: list[Line]) -> bool:
    mono = [ln for ln in row if ln.mono]
    if not mono:
        return False
    left = min(ln.box[0] for ln in mono)
    return all(ln.mono or (ln.text.isdigit() and ln.box[2] <= left) for ln in row)


# A row of one word of letters, digits, dots and underscores ("savemem", "0.21", "manual."), or
# of one web address (a journal's DOI line in its running head).
_NAME_ROW = re.compile(r"^(?:\d+ )?(?:[\w.]+|(?:https?|ftp)://\S+)$")


def code_runs(kind: str, rows: list[list[Line]]) -> list[tuple[bool, list[list[Line]]]]:
    """A block's rows in runs, in reading order: (True, a run of rows set wholly in a monospaced
    font: a listing, verbatim text; see _code_rows), or (False, a run of the rows around them).
    A block of another kind than CODE_HOSTS and LISTING_HOSTS is one run that is not code."""
    runs: list[tuple[bool, list[list[Line]]]] = []
    if kind not in CODE_HOSTS | LISTING_HOSTS:
        return [(False, rows)]
    for row, is_code in zip(rows, _code_rows(rows)):
        if runs and runs[-1][0] == is_code:
            runs[-1][1].append(row)
        else:
            runs.append((is_code, [row]))
    if kind in LISTING_HOSTS and not (len(runs) == 1 and runs[0][0] and len(rows) > 1):
        return [(False, rows)]
    return runs


def code_text(rows: list[list[Line]]) -> str:
    """A code block's text as set: one row a line, nothing joined or re-flowed, each line indented
    and its pieces spaced by their x offsets from the block's left edge, counted in characters
    (the pitch: the monospaced lines' width per character); rows further apart than one line
    step (_line_step) have the blank lines between them kept."""
    left = min(ln.box[0] for row in rows for ln in row)
    widths = [(ln.box[2] - ln.box[0]) / len(ln.text) for row in rows for ln in row if ln.mono and ln.text]
    # at least a pixel a character: a lone brace's box from a text layer shrunk under the area cap can be 0 wide
    pitch = max(1.0, statistics.median(widths)) if widths else 1.0
    tops = [min(ln.box[1] for ln in row) for row in rows]
    step = _line_step(rows, tops)
    out = []
    for k, row in enumerate(rows):
        if k:  # a listing's blank lines: rows a step or more further down than the next row
            out += [""] * max(0, round((tops[k] - tops[k - 1]) / step) - 1)
        text = ""
        for ln in sorted(row, key=lambda ln: ln.box[0]):
            column = round((ln.box[0] - left) / pitch)
            text += " " * max(int(bool(text)), column - len(text)) + ln.text
        out.append(text.rstrip())
    return "\n".join(out)


def _line_step(rows: list[list[Line]], tops: list[int]) -> float:
    """The distance from one row of a code block to the next: the least between two rows set
    in the monospaced font (a numbered listing's blank line holds its number alone, in a
    smaller font whose top stands lower), else the least between any two."""
    mono = [any(ln.mono for ln in row) for row in rows]
    steps = [b - a for a, b, m, n in zip(tops, tops[1:], mono, mono[1:]) if b > a and m and n]
    steps = steps or [b - a for a, b in zip(tops, tops[1:]) if b > a]
    return min(steps, default=1)


def join_code(blocks: list[Block], make_code: Callable[[list[Line]], Block]) -> list[Block]:
    """Code blocks that are pieces of one listing, joined: the layout model often cuts a listing
    at its blank lines, or boxes a comment at a row's end apart. Two code blocks join when they
    stand one under the other at most CODE_GAP line heights apart and overlap in x, or side by
    side in one row, with no other block between them. Then each code block takes its line
    numbers (_line_numbers)."""
    blocks = _join_pieces(blocks, make_code)
    for code in [b for b in blocks if b.type == T.CODE]:
        numbers = [b for b in blocks if _line_numbers(b, code, blocks)]
        if numbers:
            lines = [_code_line(d) for d in code.extra["lines"]]
            lines += [_number_line(d) for b in numbers for d in b.extra["lines"]]
            blocks = [x for x in blocks if x is not code and not any(x is b for b in numbers)] + [make_code(lines)]
    return blocks


def _join_pieces(blocks: list[Block], make_code: Callable[[list[Line]], Block]) -> list[Block]:
    while True:
        code = [b for b in blocks if b.type == T.CODE]
        pair = next(((a, b) for a in code for b in code if a is not b and _one_listing(a, b, blocks)), None)
        if pair is None:
            return blocks
        a, b = pair
        lines = [_code_line(d) for d in a.extra["lines"] + b.extra["lines"]]
        blocks = [x for x in blocks if x is not a and x is not b] + [make_code(lines)]


# The most blank between two pieces of one listing, in line heights (a blank line or two).
CODE_GAP = 2.5


def _one_listing(a: Block, b: Block, blocks: list[Block]) -> bool:
    """Whether code block `b` continues `a`: under it, or right of it within its rows (see join_code).
    Each is measured by its lines: a block boxed by its layout region can reach far past them (two
    regions over one listing, each holding some of its rows)."""
    h = statistics.median(ln["bbox"][3] - ln["bbox"][1] for ln in a.extra["lines"] + b.extra["lines"])
    ab, bb = _lines_box(a), _lines_box(b)
    under = -h / 2 <= bb[1] - ab[3] <= CODE_GAP * h and shares_columns(ab, bb)
    # a piece right of another stands within its rows (a comment at a row's end); one that starts
    # higher or ends lower is the next column of the page, where a listing continues after a column break
    within = bb[1] >= ab[1] - h / 2 and bb[3] <= ab[3] + h / 2
    beside = bb[0] >= ab[2] and within and len(group_rows([ab, bb])) == 1 and not _flush_right(a, h)
    beside = beside and not _in_left_margin(ab, bb, blocks) and not _two_listings(a, b)
    if not (under or beside):
        return False
    between = (min(ab[0], bb[0]), ab[1], max(ab[2], bb[2]), max(ab[3], bb[3]))
    gap = (between[0], ab[3], between[2], bb[1]) if under else (ab[2], between[1], bb[0], between[3])
    return not any(x is not a and x is not b and intersection(x.bbox, gap) > 0 for x in blocks)


# The share of a piece's rows that open with one mark for the pieces to open alike (_two_listings).
ALIKE_ROWS = 0.8


def _two_listings(a: Block, b: Block) -> bool:
    """Whether code block `b`, right of `a` within its rows, is a listing of its own set beside
    it, read after it, rather than comments at the ends of `a`'s rows or a table's columns. It
    is when one of its rows stands where `a` has none between two of its rows (each listing
    has its blank lines where its own code breaks; a comment stands on a row of code, a cell on
    its table's row), or when both open row after row with one mark (ALIKE_ROWS of each: a
    source file printed in two columns, every row a "%%%" comment, a transcript's prompts),
    where a row's comments open with their own mark."""
    left, right = _rows_of(a), _rows_of(b)
    top, bottom = left[0][1], left[-1][3]
    if any(top < r[1] and r[3] < bottom and not any(in_one_row(r, x) for x in left) for r in right):
        return True
    return _opening(a) is not None and _opening(a) == _opening(b)


def _rows_of(block: Block) -> list[Box]:
    return sorted((tuple(ln["bbox"]) for ln in block.extra["lines"]), key=lambda b: b[1])


def _opening(block: Block) -> str | None:
    """The first character that ALIKE_ROWS or more of the block's lines open with, if any."""
    firsts = [ln["text"].lstrip()[:1] for ln in block.extra["lines"]]
    mark = max(set(firsts), key=firsts.count)
    return mark if mark and firsts.count(mark) >= ALIKE_ROWS * len(firsts) else None


# The most blank between a listing's line numbers and its rows, in line heights.
NUMBER_GAP = 3


def _line_numbers(block: Block, code: Block, blocks: list[Block]) -> bool:
    """Whether text `block` is line numbers of code block `code`: only numbers, one a line, each
    level with a row of the code and left of it, at most NUMBER_GAP line heights from its left
    edge, with no other block between. A docstrip listing's numbers (acmart's, set in the text
    font) are boxed apart by the layout model, a block of one number each or a column of them;
    read apart, the page read a column of numbers and then the code. They are the rows' starts,
    as printed (code_text keeps each number at the head of its row)."""
    lines = block.extra.get("lines") or []
    if block.type != T.TEXT or not lines or not all(ln["text"].strip().isdigit() for ln in lines):
        return False
    rows = code.extra["lines"]
    h = statistics.median(ln["bbox"][3] - ln["bbox"][1] for ln in rows)
    cb = _lines_box(code)
    right = max(ln["bbox"][2] for ln in lines)
    if not 0 <= cb[0] - right <= NUMBER_GAP * h:
        return False
    if not all(any(in_one_row(ln["bbox"], row["bbox"]) for row in rows) for ln in lines):
        return False
    gap = (right, min(ln["bbox"][1] for ln in lines), cb[0], max(ln["bbox"][3] for ln in lines))
    return not any(x is not block and x is not code and intersection(x.bbox, gap) > 0 for x in blocks)


def _flush_right(block: Block, h: float) -> bool:
    """Whether a code block's lines, three or more, end at one x and start at several: a margin's
    column of names set flush right against the text (the doc package's index of the macros the
    code beside it defines), not a listing, whose rows end where their statements do. The code
    beside such a column is no comment at its rows' end."""
    boxes = [ln["bbox"] for ln in block.extra["lines"]]
    ends, starts = [b[2] for b in boxes], [b[0] for b in boxes]
    return len(boxes) >= 3 and max(ends) - min(ends) <= h / 2 and max(starts) - min(starts) > h


# A prose block at least this share as wide as the page's widest sets the body's left edge.
BODY_SHARE = 0.5


def _body_left(blocks: list[Block]) -> float:
    """The left edge of the page's body: the leftmost start of its prose blocks at least
    BODY_SHARE as wide as the widest (a page without prose has none, at -inf)."""
    prose = [x.bbox for x in blocks if x.type != T.CODE]
    widest = max((b[2] - b[0] for b in prose), default=0)
    return min((b[0] for b in prose if b[2] - b[0] >= BODY_SHARE * widest), default=float("-inf"))


def _in_left_margin(ab: Box, bb: Box, blocks: list[Block]) -> bool:
    """Whether code piece `ab`, left of `bb`, stands in the page's left margin: it ends left of
    the body's left edge (_body_left), and `bb` starts at that edge or right of it. A manual's
    option names set in the margin (exam-zh's sealline/odd-...) are notes beside the option's
    syntax, no comment at its rows' end: joined, each row read a note and then a code line, the
    notes interleaved with the syntax they annotate."""
    edge = _body_left(blocks)
    return ab[2] < edge <= bb[0]


def _lines_box(block: Block) -> Box:
    return enclosing([ln["bbox"] for ln in block.extra["lines"]])


def _number_line(line: dict) -> Line:
    """A line number (Block.extra["lines"]) as a Line of its code block: set in the text font, not monospaced."""
    x1, y1, x2, y2 = line["bbox"]
    return Line((x1, y1, x2, y2), line["text"], line["score"], mono=False)


def _code_line(line: dict) -> Line:
    """A code block's line (Block.extra["lines"]) as a Line again: every line of a code block is monospaced."""
    x1, y1, x2, y2 = line["bbox"]
    return Line((x1, y1, x2, y2), line["text"], line["score"], mono=True)
