"""A block's text from its lines: rows (a drop cap joined to its row), and the rows joined into
lines the way the page sets them: a hyphenated word rejoined, list items, description-list
entries and numbered items each starting a line (`join_lines`, `page_markers`)."""

from __future__ import annotations

import bisect
import re
import statistics
from typing import Collection, Mapping, Sequence

from mineru_cli.core.blocks import NOT_LINES
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.engines.lines import Line, join_text, level_boxes
from mineru_cli.reading_order import group_rows

# a numbered-item marker's label read one way (_label_keys)
LabelKey = tuple[tuple[str, bool], str, str, int]
# the page's numbered-item markers (page_markers): their labels' keys, each with the left edges of
# the lines whose marker has it
Markers = Mapping[LabelKey, Sequence[float]]
NO_MARKERS: Markers = {}


def block_rows(lines: list[Line]) -> list[list[Line]]:
    """A block's lines in rows, top down, each left to right; a drop cap joins its word
    (_drop_cap) instead of making one row of the lines beside it."""
    cap = _drop_cap(lines)
    rest = [ln for ln in lines if ln is not cap]
    rows = [[rest[i] for i in row] for row in group_rows(level_boxes(rest))]
    if cap is not None:
        _join_drop_cap(rows, cap)
    return rows


# A drop cap (IEEEtran's \\IEEEPARstart, lettrine) is a paragraph's first letter set two or more
# lines tall at its left edge, the first lines indented beside it. As a line of its own it shares
# rows with all of them and made them one row, read left to right (the second line's words before
# the first's). It stands at least DROP_CAP_HEIGHTS x the block's median line height tall.
DROP_CAP_HEIGHTS = 1.8


def _drop_cap(lines: list[Line]) -> Line | None:
    """The block's drop cap: one or two capitals DROP_CAP_HEIGHTS x its other lines' median
    height tall or more, with no line beside it on its left, and a line beside it on its right
    whose top is level with its own (the paragraph's first line). None when there is none."""
    if len(lines) < 3:
        return None
    median_h = statistics.median(ln.height for ln in lines)
    for cap in lines:
        if not (cap.text.isalpha() and cap.text.isupper() and len(cap.text) <= 2):
            continue
        if cap.height < DROP_CAP_HEIGHTS * median_h:
            continue
        beside = [ln for ln in lines if ln is not cap and _beside(ln, cap)]
        if any(ln.box[0] < cap.box[0] for ln in beside):
            continue
        centre = (cap.box[0] + cap.box[2]) / 2  # the reader's box of a cap is padded past the indent
        if any(ln.box[0] >= centre and abs(ln.box[1] - cap.box[1]) < median_h for ln in beside):
            return cap
    return None


def _beside(line: Line, cap: Line) -> bool:
    """Whether `line` stands in the drop cap's rows: half its height or more within them (the
    cap's box reaches a pixel or two into the row under it)."""
    shared = min(line.box[3], cap.box[3]) - max(line.box[1], cap.box[1])
    return shared >= line.height / 2


def _join_drop_cap(rows: list[list[Line]], cap: Line) -> None:
    """Put the drop cap before the first line beside it, joined to its word ("T" and "HIS is"
    read "THIS is"); a cap with no line beside it after all starts the first row."""
    for row in rows:
        first = row[0]
        if _beside(first, cap) and first.box[0] >= cap.box[0]:
            box = (cap.box[0], min(cap.box[1], first.box[1]), first.box[2], max(cap.box[3], first.box[3]))
            row[0] = Line(box, cap.text + first.text, (cap.score + first.score) / 2, first.slope, first.mono)
            return
    rows.insert(0, [cap])


def block_text(
    kind: str, rows: list[list[Line]], cells: list[list[str]] | None, markers: Markers = NO_MARKERS, index: bool = False
) -> str:
    """Tables: one row per line, cells tab-separated. Equations and image
    labels (NOT_LINES): one row per line. Prose: rows re-flowed into one paragraph. `index`: the
    rows are a column of an index (see join_lines)."""
    if cells:
        return "\n".join("\t".join(row) for row in cells)
    row_texts = [join_text([ln.text for ln in row]) for row in rows]
    if kind in NOT_LINES:
        return "\n".join(row_texts)
    rights = [max(ln.box[2] for ln in row) for row in rows]
    height = statistics.median(ln.height for row in rows for ln in row)
    lefts, noted = _body_lefts(rows, height)
    return join_lines(row_texts, lefts, height, markers, rights, noted, index, references=kind == T.REF_TEXT)


# Margin notes set flush right in the left margin (\marginpar in KOMA-Script and memoir, ltxdoc's
# macro names) share the rows of the body beside them, and a layout region may hold both. A row
# with a note starts at the note's left edge, ragged as the notes' widths are: read as rows out of
# the body's indent (description list terms), they broke the body's sentences into lines. The
# notes are the rows' first lines that stand apart from the rest of their row, two or more, whose
# right edges agree within NOTE_ALIGN line heights while their left edges spread wider than a
# line height (a description list's short terms, beside their definitions, share their left edge).
NOTE_ALIGN = 0.5


def _body_lefts(rows: list[list[Line]], height: float) -> tuple[list[float], set[int]]:
    """The rows' left edges, a margin note's row taken at the body's edge: where its note stands
    apart, at the line after it; where the reader made the note and the body one line, at the
    body's left edge (the leftmost of the rows that start right of the notes). And the rows that
    have a note."""
    lefts = [float(min(ln.box[0] for ln in row)) for row in rows]
    column = _note_column(rows, height)
    body = [x for x in lefts if column is not None and x > column]
    if column is None or not body:
        return lefts, set()
    noted = {i for i, x in enumerate(lefts) if x < column}
    for i in noted:
        after = [ln.box[0] for ln in rows[i] if ln.box[0] > column]
        lefts[i] = float(min(after)) if after else min(body)
    return lefts, noted


def _note_column(rows: list[list[Line]], height: float) -> float | None:
    """The right edge of the block's column of margin notes (see NOTE_ALIGN), None when it has
    none."""
    firsts = [row[0] for row in (sorted(row, key=lambda ln: ln.box[0]) for row in rows) if len(row) > 1]
    if len(firsts) < 2:
        return None
    right = statistics.median(ln.box[2] for ln in firsts)
    notes = [ln for ln in firsts if abs(ln.box[2] - right) <= NOTE_ALIGN * height]
    lefts = [ln.box[0] for ln in notes]
    if len(notes) < 2 or max(lefts) - min(lefts) <= height:
        return None
    return max(ln.box[2] for ln in notes) + NOTE_ALIGN * height


# A row that ends in a letter and a hyphen, continued by a row that starts with a lower-case
# letter, holds a word broken at the line end ("exten-" / "sion"): MinerU's rule
# (is_hyphen_at_line_end with _next_line_starts_with_lowercase_text). The text layer cannot tell
# more: pdfium marks every hyphen that ends a line alike, a compound's ("platform-" / "specific")
# as well, and those few are joined too ("platformspecific"). The hyphen may be Unicode's own
# (U+2010: Chromium sets it where it breaks a word at a soft hyphen or by `hyphens: auto`) or a
# soft hyphen left in the text where it shows.
_BROKEN_WORD = re.compile("[A-Za-z][-\u2010\u00ad]$")


# A row that starts with a bullet starts a list item: it begins a new line of the block's text
# (MinerU's list start lines, which its Markdown breaks before), instead of being re-flowed into
# the item before it. A dash starts a (nested) item only in a block that has a bullet item: a row
# of prose may start with a spaced dash ("– as said –").
_BULLETS = "•●○◦▪▫■□‣⁃∙►▸➢✓❖"
_BULLET = re.compile(rf"[{_BULLETS}]|·(?=\s)")
_SUB_BULLET = re.compile(r"[–-](?=\s)")
# A bullet glyph after a word, inside a row or at its end, is a separator ("Accounts •
# Admissions • Careers"; a list item never ends in one): in a block that uses it so, the same
# glyph at a row's start is one of those separators that a row break put there, not a list item.
_SEPARATOR = re.compile(rf"(?<=\S\s)([{_BULLETS}·])(?=\s+\S|\s*$)")


# A row that starts with a number or a letter and a dot or a bracket ("1.", "2)", "(a)", "iv.",
# "3.2.") starts a numbered list item only with the evidence of its list: another row of the block
# starts with the item next to it in the sequence (same style, the number one up or one down),
# set at the same x. A row of prose that a wrap starts with "2." or "1990." has no such sibling.
_NUMBERED = re.compile(r"[(（]?(\d{1,3}(?:\.\d{1,3})*|[a-zA-Z]|[ivxlc]{1,6}|[IVXLC]{1,6})([.)．、）])(?=\s|$)")
# A reference's label in a reference list ("[12]"), a numbered item's there as "12." is one.
_CITATION_LABEL = re.compile(r"\[(\d{1,3})(\])(?=\s|$)")
# A row that ends so ends a sentence (or an item's clause): the row after it may start a new one.
_SENTENCE_END = re.compile(r"[.:;!?。：；！？][)\]\"'”’）]*$")


def join_lines(
    rows: list[str],
    lefts: Sequence[float] | None = None,
    height: float = 0.0,
    markers: Markers = NO_MARKERS,
    rights: Sequence[float] | None = None,
    noted: Collection[int] = (),
    index: bool = False,
    references: bool = False,
) -> str:
    """A paragraph's rows joined as join_text joins them, a word broken at a line end made whole
    again (its hyphen dropped; a hyphen before a capital or a digit, "Non-" / "ASCII", stays), and
    each list item on a line of its own. Given the rows' left edges and the line height, numbered
    items start lines too, and so does the prose that follows a list out of its indent; `markers`
    are the page's (page_markers), where a numbered item's sibling may stand in another block.
    Given their right edges too, each entry of a description list starts a line, its term and
    its definition on it (_description_entries). An index's letter heading is a line of its own
    (_letter_heading). A row with a margin note (`noted`, see NOTE_ALIGN) after a row that ends
    short of the block's right edge starts a paragraph beside its note (ltxdoc's macro name beside
    its description): it starts a line too. `references`: the rows are a reference list's, whose
    labels include "[12]" and exclude an author's initial, "B." (_numbered_items)."""
    out, listed = "", False
    separators = {glyph for row in rows for glyph in _SEPARATOR.findall(row)}
    numbered = _numbered_items(rows, lefts, height, markers, references)
    index_starts, index_rest = _index_entries(rows, index)
    items = [
        i
        for i, row in enumerate(rows)
        if i not in index_rest and (i in numbered or (_BULLET.match(row) and row[0] not in separators))
    ]
    after = _after_list(rows, lefts, height, items)
    headings = {i for i, row in enumerate(rows) if _letter_heading(row)}
    entries = index_starts | headings | {i + 1 for i in headings}
    indented = _description_entries(rows, lefts, rights, height) | _noted_paragraphs(noted, rights, height)
    if index_starts:  # an index's row under a wrapped entry goes on with it; under a head, it is a sub-entry
        indented = {i for i in indented if not (i and _wrapped_entry(rows[i - 1]))}
    entries = (entries | indented) - index_rest
    starts = set(items)
    for i, row in enumerate(rows):
        item = i in starts
        listed = (listed or item) and i != after
        if out and (item or i == after or i in entries or (listed and _SUB_BULLET.match(row))):
            out += "\n" + row
        elif _BROKEN_WORD.search(out[-2:]) and row[:1].islower():  # (its end: a long block's text is long)
            out = out[:-1] + row
        else:
            out = join_text([out, row])
    return out


def _wrapped_entry(row: str) -> bool:
    """Whether an index's row is an entry wrapped onto the next ("abstract (environ-" / "ment)
    . 106"): it ends in a hyphen, an opening bracket or a comma, or leaves a bracket open."""
    row = row.rstrip()
    return row.endswith(("-", "(", ",")) or row.count("(") > row.count(")")


def _noted_paragraphs(noted: Collection[int], rights: Sequence[float] | None, height: float) -> set[int]:
    """The rows with a margin note that start a paragraph: the row before ends short of the
    block's right edge (FULL_ROW line heights or more)."""
    if not noted or rights is None or height <= 0:
        return set()
    edge = _right_margin(rights, height) - FULL_ROW * height
    return {i for i in noted if i and rights[i - 1] < edge}


# An index (or a contents list) ends each entry with its page references ("\\chair . . 3, 77"),
# a long list of them wrapped after a comma, a long entry's references on the row under it
# after its dot leader. In a block where INDEX_ROWS of the rows or more end so, a row after one
# that ends in a page number (or in a colon: a head whose sub-entries follow) starts an entry,
# and a row that starts with a page reference or a leader goes on with the entry before it: each
# entry is a line of its own, as the page shows it, instead of all of them re-flowed into one
# paragraph (or a wrapped entry's references taken for a description's indented row). A row of
# prose seldom ends in a number, and a paragraph's rows almost never do so by the half; a list
# whose items end in their numbers ("item 1", "item 2") is no index either: an index has some
# entries whose pages follow a leader or go on in a list (". . 3", "22, 24"). A short paragraph
# may end half its rows in a number ("... on May 5, 2021" / "and agreed ..."): an index holds
# INDEX_ENDS such rows or more.
INDEX_ROWS = 0.5
INDEX_ENDS = 3
_PAGE_END = re.compile(r"(?:^|[\s.,])\d+(?:[–-]\d+)?$|\.\s*\.\s*[ivxlc]+$")  # (a roman page after a leader)
_PAGE_LIST = re.compile(r"(?:\d,\s*|\.\s*\.\s*)\d+(?:[–-]\d+)?$")
_PAGES_ON = re.compile(r"[.\s·•:…]*\d+(?:[–-]\d+)?(?:,|$)")  # (a leader's dots as the OCR reads them)


def _index_entries(rows: list[str], index: bool = False) -> tuple[set[int], set[int]]:
    """(the rows that start an index's entries, the rows that go on with the entry before them);
    both empty in a block that is no index (see INDEX_ROWS and INDEX_ENDS), unless `index` says
    the rows are an index's (a column of one whose entries each have one page: no list)."""
    ends = [i for i, row in enumerate(rows) if _PAGE_END.search(row.rstrip())]
    listed = any(_PAGE_LIST.search(rows[i].rstrip()) for i in ends)
    if not index and (len(ends) < max(INDEX_ENDS, INDEX_ROWS * len(rows)) or not listed):
        return set(), set()
    rest = {i for i, row in enumerate(rows) if i and _PAGES_ON.match(row)}
    heads = [i for i, row in enumerate(rows) if row.rstrip().endswith(":")]  # "environments:"
    return {i + 1 for i in ends + heads if i + 1 < len(rows)} - rest, rest


def _letter_heading(row: str) -> bool:
    """Whether the row is an index's letter heading: one capital letter alone on its row (no
    row of prose is, a paragraph's last word ends in its stop). It and the entry after it each
    start a line, wherever the index sets it (centred in its column, or at the entries' edge)."""
    return len(row.strip()) == 1 and row.strip().isupper()


# A description list (Texinfo's @table, LaTeX's description, an HTML <dl>, a man page's options)
# sets each entry's term at the list's left edge and its definition's rows indented under it
# (DEFINITION_INDENT line heights: Texinfo 4.5, LaTeX and Chromium 2; a paragraph's first-line
# indent is about 1.2), the term alone on its row or run in with the definition's first row.
DEFINITION_INDENT = (1.5, 10.0)
# A row that reaches within FULL_ROW line heights of the block's right edge wraps on.
FULL_ROW = 2.0


def _description_entries(
    rows: list[str], lefts: Sequence[float] | None, rights: Sequence[float] | None, height: float
) -> set[int]:
    """The rows that start a description list's entries: a row that does not end a sentence (a
    term, or a definition's first row that wraps), whose next rows stand indented under it; and
    the first row after those that comes back out of their indent (the next entry, or the prose
    after the list). A row that the row before wraps into is no term (_wrapped_into). One
    indented row that wraps, followed by one that wraps too (or by none),
    is a paragraph's first row, not a definition: the rows after it wrap back to the edge, and the
    row before it ends the paragraph before.
    In a block with such entries, a row at a term's edge after a row that ends short of the
    block's right edge starts one too: an entry whose term and definition share a row (Texinfo
    sets a short term so), or the prose after the list."""
    if lefts is None or rights is None or height <= 0:
        return set()
    low, high = (k * height for k in DEFINITION_INDENT)
    edge = _right_margin(rights, height) - FULL_ROW * height
    starts: set[int] = set()
    i = 0
    while i < len(rows) - 1:
        if (
            _SENTENCE_END.search(rows[i])
            or not low <= lefts[i + 1] - lefts[i] <= high
            or _wrapped_into(i, lefts, rights, edge, height)
        ):
            i += 1
            continue
        end = i + 1  # the definition's rows: at its indent, or deeper (an example in it)
        while end < len(rows) and lefts[end] >= lefts[i + 1] - height / 2:
            end += 1
        if end == i + 2 and rights[i + 1] >= edge and (end == len(rows) or rights[end] >= edge):
            i += 1
            continue
        starts.add(i)
        if end < len(rows):
            starts.add(end)
        i = end
    terms = sorted(lefts[i] for i in starts)
    for i in range(1, len(rows)):
        if rights[i - 1] < edge and _near_any(terms, lefts[i], height / 2):
            starts.add(i)
    return starts


def _near_any(xs: list[float], x: float, reach: float) -> bool:
    """Whether some of `xs` (sorted) lies within `reach` of `x`: a bisection, for a list of
    thousands of entries has thousands of terms."""
    return bisect.bisect_right(xs, x + reach) > bisect.bisect_left(xs, x - reach)


def _right_margin(rights: Sequence[float], height: float) -> float:
    """The block's right margin: of the right edges within 6 line heights of the rightmost, the
    one that most rows share (within half a line height; the rightmost of a tie). A line of
    code in a definition may stand out past the margin that the wrapping rows share."""
    # the rightmost found once and the rows sharing each edge counted through the sorted edges:
    # a block of thousands of rows would cost their square
    rightmost = max(rights)
    near = sorted(x for x in rights if x >= rightmost - 6 * height)
    shared = [bisect.bisect_right(near, x + height / 2) - bisect.bisect_left(near, x - height / 2) for x in near]
    return near[max(reversed(range(len(near))), key=shared.__getitem__)]  # (the rightmost of a tie)


def _wrapped_into(i: int, lefts: Sequence[float], rights: Sequence[float], edge: float, height: float) -> bool:
    """Whether row `i` goes on from the row before: that row stands at its left edge and wraps.
    Such a row is prose, not a term, whatever its next rows (an example indented under it)."""
    return i > 0 and abs(lefts[i - 1] - lefts[i]) <= height / 2 and rights[i - 1] >= edge


def _numbered_items(
    rows: list[str],
    lefts: Sequence[float] | None,
    height: float,
    markers: Markers = NO_MARKERS,
    references: bool = False,
) -> set[int]:
    """The rows that start numbered list items: each has a sibling, a row whose marker is next
    to its own in the same sequence, set at its x (within a line height: "9." and "10." are set
    flush right). The sibling may be a row of another block of the page (one of `markers`) where
    the row before ends a sentence: the layout model boxes a list's items apart, or an item with
    the prose before it. Siblings are looked up by their labels' keys (_label_keys), so that a
    block of thousands of numbered rows (an index) costs no more than its rows. In a reference
    list (`references`: each reference starts a line, and the content list takes a line for a
    reference) a bracketed number ("[12]", _CITATION_LABEL) is a label too, and a letter (or a
    roman numeral) and a dot is an author's initial, no label: of two references wrapped before
    "B. Hansen" and "C. Weber", neither goes on as a lettered item."""
    if lefts is None:
        return set()
    marks = {i: m for i, row in enumerate(rows) if (m := _label(row, references))}
    own: dict[LabelKey, list[int]] = {}
    for i, m in marks.items():
        for key in _label_keys(m):
            own.setdefault(key, []).append(i)
    found = set()
    for i, a in marks.items():
        for j in {j for key in _next_to(a) for j in own.get(key, ())}:
            if abs(lefts[i] - lefts[j]) <= height:
                found |= {i, j}
    for i, a in marks.items():
        if i and i not in found and _SENTENCE_END.search(rows[i - 1]):
            if any(abs(lefts[i] - x) <= height for key in _next_to(a) for x in markers.get(key, ())):
                found.add(i)
    return found


def _label(row: str, references: bool) -> re.Match | None:
    """The numbered item's marker that starts `row`, if any; in a reference list, none for an
    author's initial and a bracketed number's too (see _numbered_items)."""
    m = _NUMBERED.match(row)
    if not references:
        return m
    if m and m[2] == "." and m[1].isalpha():
        return None
    return m or _CITATION_LABEL.match(row)


def page_markers(lines: Sequence[Line]) -> Markers:
    """The numbered-item markers that start the page's lines: their labels' keys, each with
    the left edges of the lines whose marker has it."""
    out: dict[LabelKey, list[float]] = {}
    for line in lines:
        if m := _NUMBERED.match(line.text):
            for key in _label_keys(m):
                out.setdefault(key, []).append(line.box[0])
    return out


def _label_keys(m: re.Match) -> list[LabelKey]:
    """A marker's label read each way it can be: (its style, the way it is read, the labels
    before its last number where it has several: "3." of "3.1.", the value). Two markers are of
    one sequence and follow each other (either way: 1./2., (b)/(c), iv)/v), 3.1./3.2.) where keys
    of theirs differ in the value only, by one (_next_to)."""
    style = (m.group(2), m.group(0)[0].isalnum())
    label = m.group(1)
    if "." in label:
        before, _, last = label.rpartition(".")
        return [(style, "number", before, int(last))]
    values = ((kind, _label_value(label, kind)) for kind in ("number", "letter", "roman"))
    return [(style, kind, "", int(value)) for kind, value in values if value == value]


def _next_to(m: re.Match) -> list[LabelKey]:
    """The keys of the labels that follow `m`'s or come just before it."""
    return [(style, kind, before, value + step) for style, kind, before, value in _label_keys(m) for step in (-1, 1)]


def _label_value(label: str, kind: str) -> float:
    """A marker's label as a number of the kind it is read as (NaN when it cannot be)."""
    if kind == "number":
        return int(label) if label.isdigit() else float("nan")
    if kind == "letter":
        return ord(label.lower()) if len(label) == 1 and label.isalpha() else float("nan")
    value, last = 0, 0
    for ch in reversed(label.lower()):
        digit = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}.get(ch)
        if digit is None:
            return float("nan")
        value, last = value - digit if digit < last else value + digit, max(last, digit)
    return value


def _after_list(rows: list[str], lefts: Sequence[float] | None, height: float, items: list[int]) -> int | None:
    """The row where prose after the block's last list item starts: the first row after it,
    whose row before ends a sentence, set left of the item's marker (out of the list's indent) or
    between the marker and the items' text (a paragraph's indent, as Texinfo sets the paragraph
    after an itemize: the bullet at 206 px, the items' text at 232, the paragraph at 218). An
    item's own rows stay in it, whether they hang under its text or wrap back to its marker."""
    if lefts is None or not items:
        return None
    last = items[-1]
    marker = lefts[last]
    hanging = _hanging_lefts(lefts, items, height)
    for i in range(last + 1, len(rows)):
        if i - 1 > last and lefts[i - 1] > marker + height / 4:  # the last item's rows hang too
            bisect.insort(hanging, lefts[i - 1])
        if not _SENTENCE_END.search(rows[i - 1]):
            continue
        if lefts[i] < marker - height / 2:
            return i
        text = hanging[len(hanging) // 4] if hanging else None  # where the items' text starts
        if text is not None and marker + height / 4 < lefts[i] < text - height / 4:
            return i
    return None


def _hanging_lefts(lefts: Sequence[float], items: list[int], height: float) -> list[float]:
    """The lefts, sorted, of the rows from the first item to the last that are no item and stand
    right of their item's marker: the rows that hang under the items' text, whose lower quartile
    is where that text starts (rows that wrap back to the marker tell nothing; a row read without
    its bullet, or a nested list's deeper rows, are few beside them). _after_list adds the last
    item's rows as it reads them, each kept once, so that a long block costs no more than sorting."""
    starts = set(items)
    marker, hanging = lefts[items[0]], []
    for i in range(items[0] + 1, items[-1]):
        if i in starts:
            marker = lefts[i]
        elif lefts[i] > marker + height / 4:
            hanging.append(lefts[i])
    return sorted(hanging)
