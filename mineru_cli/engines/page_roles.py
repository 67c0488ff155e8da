"""What a block is from where it stands on the page: page numbers and footers at its edges, a
form's fields, a caption over or under its float (`captions_of_floats`), and on a slide its frame
title (`frame_title`), its sidebar (`mark_sidebar`), its headline bar (`without_headline_bars`) and its
headline's navigation circles (`without_navigation_dots`)."""

from __future__ import annotations

import bisect
import re
import statistics
from typing import Sequence

from mineru_cli.core.blocks import PAGE_BOTTOM, PAGE_TOP, Block
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.core.geometry import Box, best_holder, enclosing, int_box
from mineru_cli.engines.lines import Line
from mineru_cli.engines.regions import GROUPING, REGION_TYPES
from mineru_cli.engines.table_text import LABEL_NUMBER, TABLE_WORDS
from mineru_cli.reading_order import SIDE_PANEL_PRINT, group_rows

# Blocks that a lone number near the top or bottom edge turns into a page number.
_PAGE_NUMBER_FROM = frozenset({T.TEXT}) | PAGE_TOP | PAGE_BOTTOM

# A page number: arabic, or a lower-case roman numeral up to 399 as a book's front matter
# numbers its pages (a well-formed numeral, so that words such as "civil" are not one).
_ROMAN = r"(?-i:(?=[ivxlc])c{0,3}(xc|xl|l?x{0,3})(ix|iv|v?i{0,3}))"
_PAGE_NUMBER = re.compile(rf"^(page\s*)?[-–—]?\s*(\d{{1,3}}|{_ROMAN})\s*[-–—]?(\s*(/|of)\s*\d{{1,3}})?$", re.I)


# A beamer slide's headline with miniframes: under each section's name a row of small circles,
# one a frame, the current one filled. The recogniser reads such a row as "0●00000", "OOOOO",
# "000000" or a lone "o": a line of only these characters, in the top NAV_BAND of the page,
# that starts under the left end of the line just above it is that navigation, not text. Slides
# are wider than tall; on a portrait page such a line is a table's "0" under its column's head.
# On a slide too a table's "0" stands under its column's head, but the table's row holds its
# other cells beside it, where a headline's row holds only circles.
NAV_BAND = 0.1
_NAV_DOTS = re.compile(r"[0Oo○●◦•]+")


def without_navigation_dots(lines: list[Line], size: tuple[int, int]) -> list[Line]:
    """The lines without a slide headline's rows of frame circles (see NAV_BAND); a page
    taller than wide is no slide and keeps them."""
    page_w, page_h = size
    if page_h >= page_w:
        return lines
    return [line for line in lines if not _navigation_dots(line, lines, page_h)]


def _navigation_dots(line: Line, lines: list[Line], page_h: int) -> bool:
    """Whether `line` is a row of frame circles under a section's name (see NAV_BAND)."""
    if line.box[1] > NAV_BAND * page_h or not _NAV_DOTS.fullmatch(line.text.replace(" ", "")):
        return False
    x1, y1 = line.box[0], line.box[1]
    middle = (line.box[1] + line.box[3]) / 2
    words = [other for other in lines if not _NAV_DOTS.fullmatch(other.text.replace(" ", ""))]
    if any(_same_row(other.box, line.box) for other in words):
        return False  # a table's row: its other cells beside the "0"
    return any(
        other.box[3] <= middle and y1 - other.box[3] < line.height and abs(other.box[0] - x1) < line.height
        for other in words
    )


def _same_row(a: Box, b: Box) -> bool:
    """Whether the two boxes' middles stand within a third of the shorter one's height: a table's
    cells in one row do. A section's name and the circles under it share up to half their
    height at 150 DPI, and the last section's name, its box tall where it holds the circle
    under it, shared that much with the first section's circles; their middles stand apart."""
    shorter = min(a[3] - a[1], b[3] - b[1])
    return abs((a[1] + a[3]) - (b[1] + b[3])) / 2 < shorter / 3


def refine_type(block: Block, median_h: float, page_h: int) -> None:
    """Corrections for what the layout model often gets wrong: short blocks in
    a big font are titles (it calls a page's title a "header" or misses it),
    and the reverse; a lone number at the top or bottom edge is a page number."""
    lines = block.extra.get("lines", [])
    if not lines:
        return
    if _off_its_edge(block, page_h) or (block.type == T.FOOTER and _form_field(block)):
        block.type = T.TEXT
    height = statistics.median(ln["bbox"][3] - ln["bbox"][1] for ln in lines)
    ratio: dict[str, float] = {T.TEXT: GROUPING["title_height"], T.HEADER: GROUPING["header_title_height"]}
    if block.type in ratio and median_h and len(lines) <= 3 and height >= ratio[block.type] * median_h:
        block.type = T.TITLE
    elif block.type == T.TITLE and len(lines) > 1 and height < GROUPING["header_title_height"] * median_h:
        block.type = T.TEXT  # several lines in body size: a paragraph, not a heading
    near_edge = block.bbox[3] <= EDGE_BAND * page_h or block.bbox[1] >= (1 - EDGE_BAND) * page_h
    if block.type in _PAGE_NUMBER_FROM and near_edge and _PAGE_NUMBER.match(block.text):
        block.type = T.PAGE_NUMBER


# Running heads, feet and page numbers stand within this share of the page's height of its edge.
EDGE_BAND = 0.12
# A footer the layout model finds is furniture within this share of the page's height of its
# foot: a LaTeX page on A4 or letter paper sets its page number in the foot margin, 12 to 17 % of
# the page above its foot. A header keeps to EDGE_BAND: what the model calls a header just below
# the top 12 % is more often the first line of the text (a chapter's or section's heading, a
# title page's first line) than a running head.
FOOT_MARGIN = 0.2
# A running foot's pieces are short: each under this share of the page's width (a two-column
# page's column is over 40 % of it).
FOOT_PIECE = 0.3

# A slide's frame title starts within this share of its height of its top (under a headline).
FRAME_TITLE_BAND = 0.15


def body_height(lines: list[Line], size: tuple[int, int]) -> float:
    """A slide's body print: the median height of its lines outside EDGE_BAND of its top and
    foot. The headline and footline bars (section names, the talk's title and author, in small
    print) hold as many lines as the body or more, and the page's median is theirs."""
    page_w, page_h = size
    if page_h < page_w:
        inner = [ln for ln in lines if EDGE_BAND * page_h < (ln.box[1] + ln.box[3]) / 2 < (1 - EDGE_BAND) * page_h]
        lines = inner or lines
    return statistics.median(ln.height for ln in lines) if lines else 0


def frame_title(blocks: list[Block], body_h: float, size: tuple[int, int]) -> None:
    """On a slide (a page wider than tall) the frame's title is the first text of one or two
    rows under the headline, in the slide's top FRAME_TITLE_BAND, when its print is at least the
    body's (body_height). The headline's section names and subsection over it are in small
    print (under GROUPING's body_line of the body's), and a theme sets the frame title little
    bigger than the body (beamer's \\large over \\normalsize), under the ratio that makes a page's
    text a title. A first text in body print but no bigger (a slide's opening line, as big as
    its list) is no title, and a slide that has a title there keeps it."""
    page_w, page_h = size
    if page_h >= page_w or not body_h:
        return
    top = [b for b in blocks if b.bbox[1] < FRAME_TITLE_BAND * page_h and b.type in _FRAME_TITLE_FROM]
    top = [b for b in top if _title_shaped(b.extra.get("lines", []))]
    if any(b.type == T.TITLE for b in top):
        return  # a sidebar's talk title can stand a pixel above the frame title in the same band
    floats = [b.bbox for b in blocks if b.type in _FLOATS]
    for block in sorted(top, key=lambda b: b.bbox[1]):
        lines = block.extra["lines"]
        height = statistics.median(ln["bbox"][3] - ln["bbox"][1] for ln in lines)
        if height < GROUPING["body_line"] * body_h or _of_a_float(block, floats, page_w):
            continue  # the headline's small print, or a landscape page's caption or plot label
        if height >= body_h:
            block.type = T.TITLE
        return


# A slide's headline bar (a theme's coloured band holding the frame title and a logo) runs across
# at least HEADLINE_BAR_WIDTH of the slide's width from its top FRAME_TITLE_BAND and ends within
# its top HEADLINE_BAR_DEPTH.
HEADLINE_BAR_WIDTH = 0.8
HEADLINE_BAR_DEPTH = 0.25


def without_headline_bars(
    regions: Sequence[tuple[Box, str, float]], size: tuple[int, int]
) -> list[tuple[Box, str, float]]:
    """A slide's regions without the figure or table the layout model boxes round its headline
    bar (TUDa's frame title beside the university's logo on a coloured band): its frame title and
    subtitle were a picture's text or a table's cells. The bar's lines are read as loose text, so
    the frame title is found as on any slide (frame_title). A figure or table under the frame
    title starts below FRAME_TITLE_BAND, and one across the slide's top that reaches below
    HEADLINE_BAR_DEPTH is a slide's picture."""
    page_w, page_h = size
    if page_h >= page_w:
        return list(regions)
    return [r for r in regions if not _headline_bar(r, page_w, page_h)]


def _headline_bar(region: tuple[Box, str, float], page_w: int, page_h: int) -> bool:
    (x1, y1, x2, y2), cls, _score = region
    return (
        REGION_TYPES.get(cls) in _FLOATS
        and y1 < FRAME_TITLE_BAND * page_h
        and y2 <= HEADLINE_BAR_DEPTH * page_h
        and x2 - x1 >= HEADLINE_BAR_WIDTH * page_w
    )


# A table region this much of a slide's width and height wide and high is round the whole slide.
SLIDE_FRAME = 0.9


def without_slide_frames(
    regions: Sequence[tuple[Box, str, float]], lines: Sequence[Line], size: tuple[int, int]
) -> list[tuple[Box, str, float]]:
    """A slide's regions without a table the layout model boxes round the whole slide (SLIDE_FRAME)
    when the slide has a sidebar (sidebar_texts, each line taken as a block): the outline beside
    the body looked like a table's first column, and the slide's contents (a table of contents,
    a listing and a list) were read as its rows, each outline entry in a cell beside the body's
    line at its height. The lines are read as loose text, so the sidebar is found as on any
    slide. A table that fills a slide without a sidebar keeps its region: the columns of a
    change log are set in one print, and a sidebar's in smaller print than the body's; so does a
    table whose narrow first column is in smaller print, its lines in the table's rows (_in_rows)."""
    page_w, page_h = size
    framing = [
        r
        for r in regions
        if REGION_TYPES.get(r[1]) == T.TABLE
        and r[0][2] - r[0][0] >= SLIDE_FRAME * page_w
        and r[0][3] - r[0][1] >= SLIDE_FRAME * page_h
    ]
    if not framing or page_h >= page_w:
        return list(regions)
    one_line_blocks = [
        Block(T.TEXT, int_box(line.box), line.text, line.score, {"lines": [line.as_dict()]}) for line in lines
    ]
    side = sidebar_texts(one_line_blocks, size)
    if not side or _in_rows(side, one_line_blocks, page_h):
        return list(regions)
    return [r for r in regions if r not in framing]


# A table's first or last column stands in its rows: fewer than this share of its lines between
# the head and foot bands stand level with none of the other lines. A sidebar's outline sets its
# entries at its own pitch, and a quarter to a half of them stood between the body's lines (beamer's
# lecture slide 9, hitszbeamer's slides boxed whole, 100 to 300 DPI).
OFF_ROWS = 0.2


def _in_rows(column: list[Block], blocks: list[Block], page_h: int) -> bool:
    """Whether a side column found among a page's lines (each a block) is a table's column: its
    lines between the bands each level with another line (a row's cells), but for under OFF_ROWS of
    them. A screenshot of a table that fills the image, its first column's codes in smaller print
    (a sidebar's marks: a gutter, down the page, smaller print), lost its table."""
    mine = {id(b) for b in column}
    others = [b.bbox for b in blocks if id(b) not in mine]
    inner = [b for b in column if _between_bands(b, page_h)]
    off = [b for b in inner if not any(len(group_rows([b.bbox, box])) == 1 for box in others)]
    return len(off) < OFF_ROWS * len(inner)


# A slide's sidebar (beamer's sidebar themes: the talk's title and author, a logo, the outline)
# is a column at its left or right edge, at most SIDEBAR_WIDTH of the slide's width, that runs
# down over SIDEBAR_RUN of the slide's height.
SIDEBAR_WIDTH = 0.25
SIDEBAR_RUN = 0.5
# The lines between the bands that make a sidebar of one text block: an outline the layout
# model boxes whole holds an entry a line, a picture's caption beside it a few lines at most.
SIDEBAR_LINES = 4
# What a sidebar's text may have been typed: it becomes aside_text.
_SIDEBAR_FROM = frozenset({T.TEXT, T.TITLE, T.HEADER, T.REF_TEXT})


def mark_sidebar(blocks: list[Block], size: tuple[int, int]) -> None:
    """A slide's sidebar is aside_text (MinerU's type for text beside a page's body, left out of
    its Markdown; read before the body, see PAGE_SIDE): a column of blocks at the slide's left or right edge,
    within SIDEBAR_WIDTH of it, that a gutter no other block's text crosses keeps apart from the body,
    that runs down over SIDEBAR_RUN of the slide's height and holds two or more texts between
    its head and foot bands (EDGE_BAND; or one text of SIDEBAR_LINES lines), in print smaller than the body's (at most
    SIDE_PANEL_PRINT x its median line height). Its blocks stand level with the body's rows, and
    read by position each outline entry fell between two of the body's paragraphs. A logo's
    name in a slide's top corner over a footline's label in its bottom corner holds no text
    between the bands, a slide's narrow column of text is set in the body's print, and a
    picture's caption beside it runs down a few lines, not the slide's height."""
    for block in sidebar_texts(blocks, size):
        block.type = T.ASIDE_TEXT


def sidebar_texts(blocks: list[Block], size: tuple[int, int]) -> list[Block]:
    """The texts of the slide's sidebar (see mark_sidebar), or none."""
    page_w, page_h = size
    if page_h >= page_w:
        return []
    found: list[Block] = []
    for side in ("left", "right"):
        panel, body = _side_column(blocks, side, size)
        texts = [b for b in panel if b.type in _SIDEBAR_FROM]
        inner = [b for b in texts if _between_bands(b, page_h)]
        body_texts = [b for b in body if b.type in _SIDEBAR_FROM]
        if not _enough_inner_text(inner) or not body_texts:
            continue
        run = max(b.bbox[3] for b in panel) - min(b.bbox[1] for b in panel)
        own, body_print = _line_height(texts), _line_height(body_texts)
        if run >= SIDEBAR_RUN * page_h and 0 < own <= SIDE_PANEL_PRINT * body_print:
            found += texts
    return found


def _enough_inner_text(inner: list[Block]) -> bool:
    """Whether a side column's texts between the head and foot bands make a sidebar's: two or
    more blocks, or one of SIDEBAR_LINES lines or more (the outline boxed as one block)."""
    return len(inner) >= 2 or sum(len(b.extra.get("lines", [])) for b in inner) >= SIDEBAR_LINES


def _side_column(blocks: list[Block], side: str, size: tuple[int, int]) -> tuple[list[Block], list[Block]]:
    """(the blocks of the column within SIDEBAR_WIDTH of the slide's `side` edge, the others), or
    ([], []) where the text of one of the others reaches past the column's inner edge: no gutter
    between them. The page's head and foot (a footline across the slide) may cross it. The
    column's blocks between the head and foot bands (EDGE_BAND) set its inner edge; a block in a
    band is the column's where it starts inside that edge: a frame title set beside the sidebar's
    logo, within SIDEBAR_WIDTH of the edge, is the body's."""
    page_w, page_h = size
    left = side == "left"
    near = [
        b
        for b in blocks
        if (b.bbox[2] <= SIDEBAR_WIDTH * page_w if left else b.bbox[0] >= (1 - SIDEBAR_WIDTH) * page_w)
    ]
    between = [b for b in near if _between_bands(b, page_h)]
    if not between:
        return [], []
    if left:
        edge = max(b.bbox[2] for b in between)
        panel = [b for b in near if b in between or b.bbox[0] < edge]
    else:
        edge = min(b.bbox[0] for b in between)
        panel = [b for b in near if b in between or b.bbox[2] > edge]
    rest = [b for b in blocks if b not in panel]
    if left:
        apart = all(_ink(b)[0] > max(p.bbox[2] for p in panel) for b in _inner(rest))
    else:
        apart = all(_ink(b)[2] < min(p.bbox[0] for p in panel) for b in _inner(rest))
    return (panel, rest) if apart else ([], [])


def _between_bands(block: Block, page_h: int) -> bool:
    """Whether the block's middle stands between the page's head and foot bands (EDGE_BAND)."""
    return EDGE_BAND * page_h < (block.bbox[1] + block.bbox[3]) / 2 < (1 - EDGE_BAND) * page_h


def _ink(block: Block) -> Box:
    """Where a block's text stands: its lines' extent, or its box where it has no lines. A
    layout region's box can reach past its lines over a gutter: a slide's reference list was
    boxed from the sidebar's outline to the right margin."""
    lines = block.extra.get("lines")
    return enclosing([ln["bbox"] for ln in lines]) if lines else block.bbox


def _inner(blocks: list[Block]) -> list[Block]:
    """The blocks that are not the page's head or foot."""
    return [b for b in blocks if b.type not in PAGE_TOP | PAGE_BOTTOM]


def _line_height(blocks: list[Block]) -> float:
    """The median height of the blocks' lines."""
    heights = [ln["bbox"][3] - ln["bbox"][1] for b in blocks for ln in b.extra.get("lines", [])]
    return statistics.median(heights) if heights else 0.0


# What the layout model calls a slide's frame title: text, or a header (a running head's class).
_FRAME_TITLE_FROM = frozenset({T.TEXT, T.HEADER, T.TITLE})


# Regions whose captions and labels are no frame title.
_FLOATS = frozenset({T.TABLE, T.IMAGE})
# A float's caption starts with its label ("Table 4.", "Figure 2:", "Fig 3", "Abbildung 1.2",
# "Рис. 5", "图 3.2").
_FIGURE_WORDS = r"figure|fig\.|fig(?=\s)|abbildung|abb\.|рисунок|рис\.|图"
_CAPTION_LABEL = re.compile(rf"^({TABLE_WORDS}|{_FIGURE_WORDS})\s*{LABEL_NUMBER}", re.I)


def _of_a_float(block: Block, floats: Sequence[Box], page_w: int) -> bool:
    """Whether a text in a landscape page's top band belongs to a table or a plot, not to a slide:
    a caption (its label, or a table's or picture's region round it, as a rotated table's float
    holds its caption), or a label at the page's right (a plot's legend, "h = 0.02"), where no
    frame title starts: a theme sets it at the slide's left or centred."""
    if _CAPTION_LABEL.match(block.text) or block.bbox[0] >= page_w / 2:
        return True
    return best_holder(block.bbox, floats, GROUPING["line_in_region"]) is not None


# A caption stands within this many of its line heights of its float's edge.
CAPTION_GAP = 2.0
# What the layout model and refine_type call a caption at a page's top.
_CAPTION_FROM = frozenset({T.HEADER, T.TITLE})


def captions_of_floats(blocks: list[Block]) -> None:
    """A "header" or a title that starts with a float's label ("TABLE I.", "Fig. 2") right over
    or under a table or a picture is its caption: the layout model calls a caption at the top of
    a page a running head, which kept it out of the Markdown as page furniture, and a running
    head in a size over the body's becomes a title (refine_type)."""
    floats = [b for b in blocks if b.type in _FLOATS]
    for block in blocks:
        if block.type not in _CAPTION_FROM or not _CAPTION_LABEL.match(block.text):
            continue
        float_ = next((f for f in floats if _next_to_float(block, f)), None)
        if float_ is not None:
            block.type = T.TABLE_CAPTION if float_.type == T.TABLE else T.IMAGE_CAPTION


def _next_to_float(caption: Block, float_: Block) -> bool:
    """Whether a caption's box overlaps a float's columns and stands within CAPTION_GAP of its
    lines' height over or under it."""
    cx1, cy1, cx2, cy2 = caption.bbox
    fx1, fy1, fx2, fy2 = float_.bbox
    height = statistics.median(ln["bbox"][3] - ln["bbox"][1] for ln in caption.extra["lines"])
    gap = max(fy1 - cy2, cy1 - fy2)
    return min(cx2, fx2) > max(cx1, fx1) and gap <= CAPTION_GAP * height


def _title_shaped(lines: list[dict]) -> bool:
    """Whether a block's lines could be a frame title: one or two rows, and words, not a logo's
    letters."""
    return bool(lines) and len(group_rows([ln["bbox"] for ln in lines])) <= 2 and _wordlike(lines)


def _wordlike(lines: list[dict]) -> bool:
    """Whether some line is at least twice as wide as tall: a word, not a logo's letters."""
    return any(ln["bbox"][2] - ln["bbox"][0] >= 2 * (ln["bbox"][3] - ln["bbox"][1]) for ln in lines)


def foot_numbers(blocks: list[Block], page_h: int) -> None:
    """A lone page number in the page's foot margin (FOOT_MARGIN) that no text stands below or
    beside becomes a page number. A LaTeX page on A4 or letter paper sets its number 12 to 17 %
    of the page above its foot, above EDGE_BAND, and the layout model often boxes it as text
    (or, in a big font, as a title): read as text, it ended the page's Markdown. A number with
    text below it or in its row (a footnote's mark, a table's last cell, a chart's tick) stays.

    The text is found through the blocks' bottoms, sorted (`standing`): with nothing below a
    number, what shares its row is what ends between its top and its bottom."""
    foot = (1 - FOOT_MARGIN) * page_h
    standing = sorted((b.bbox[3], n) for n, b in enumerate(blocks) if b.type not in PAGE_BOTTOM)
    for n, block in enumerate(blocks):
        if block.type not in (T.TEXT, T.TITLE) or block.bbox[1] < foot or not _PAGE_NUMBER.match(block.text):
            continue
        if standing[-1][0] > block.bbox[3]:  # text below it
            continue
        in_row = standing[bisect.bisect_right(standing, block.bbox[1], key=lambda s: s[0]) :]
        if not any(m != n and len(group_rows([block.bbox, blocks[m].bbox])) == 1 for _, m in in_row):
            block.type = T.PAGE_NUMBER
            standing.remove((block.bbox[3], n))


def footer_rows(blocks: list[Block], page_w: int, page_h: int) -> None:
    """Text blocks in the row of a footer or page number at the page's foot become footers.

    A slide's footer bar holds the talk's title, its author and the slide's number side by
    side, and the layout model boxes some of them as footer or page number and the others as
    text: pinned to the page's end, the furniture pieces read after the text ones, or the text
    ones joined the columns above them. As footers the whole bar reads left to right at the
    page's end. A block joins when it is one row of text within EDGE_BAND of the page's foot
    that shares that row with a footer or page number there, or with another such text piece
    when that row is the page's lowest (_split_foot); a text of more rows joins when each of its
    lines shares a row with a footer or page number there (_rows_of)."""
    foot = (1 - EDGE_BAND) * page_h
    furniture = [b.bbox for b in blocks if b.type in PAGE_BOTTOM and b.bbox[1] >= foot]
    texts = [b for b in blocks if b.type == T.TEXT and b.bbox[1] >= foot and not _form_field(b)]
    for block in texts:
        if not _one_row(block) and _rows_of(block, furniture):
            block.type = T.FOOTER
    pieces = [b for b in texts if b.type == T.TEXT and _one_row(b)]
    for block in pieces:
        # one row as group_rows makes them: half the shorter one's height shared (a bar's pieces differ in size)
        # the block itself too: group_rows leaves a box of no height out of its own row
        row = [block] + [b for b in pieces if b is not block and len(group_rows([block.bbox, b.bbox])) == 1]
        if any(len(group_rows([block.bbox, box])) == 1 for box in furniture) or _split_foot(row, blocks, page_w):
            block.type = T.FOOTER


def _rows_of(block: Block, furniture: Sequence[Box]) -> bool:
    """Whether each line of the block stands in the row of a footer or page number: a footline
    of two rows (the author over the talk's title at its left, the institute over the slide's
    number at its right) whose left part the layout model boxes as one text."""
    lines = [ln["bbox"] for ln in block.extra.get("lines", [])]
    return bool(lines) and all(any(len(group_rows([ln, box])) == 1 for box in furniture) for ln in lines)


def _split_foot(row: list[Block], blocks: list[Block], page_w: int) -> bool:
    """Whether these one-row text pieces, side by side at the page's foot, are a running foot:
    two or more short pieces (each under FOOT_PIECE of the page's width), and nothing on the
    page reaches below their top. A journal's preprint foot ("Preprint submitted to Elsevier"
    left, the date right) stands just under a two-column page's footnotes, and the layout
    model boxes its pieces as text: each then joined the column above it. A column's last line
    is as wide as its column unless it ends a paragraph, and the layout model keeps it in that
    paragraph's block."""
    top = min(b.bbox[1] for b in row)
    mine = {id(b) for b in row}
    return (
        len(row) >= 2
        and all(b.bbox[2] - b.bbox[0] < FOOT_PIECE * page_w for b in row)
        and all(b.bbox[3] <= top for b in blocks if id(b) not in mine)
    )


def _form_field(block: Block) -> bool:
    """Whether this text is a form's field to fill in: a label that ends in a colon ("Date:",
    "Signed:") or a blank drawn with underscores. A form's signature and date row stands at the
    page's foot, and the layout model boxes it as a footer; a running foot is a title, a name
    or a page number, and does not wait for an answer."""
    text = block.text.rstrip()
    return text.endswith(":") or "___" in text


def _one_row(block: Block) -> bool:
    boxes = [ln["bbox"] for ln in block.extra.get("lines", [])]
    return bool(boxes) and len(group_rows(boxes)) == 1


def _off_its_edge(block: Block, page_h: int) -> bool:
    """A "header" that starts below the page's top band (EDGE_BAND) or a "footer" that ends above
    its foot margin (FOOT_MARGIN): running heads and feet sit at their edge, and the layout model
    calls a title page's author line low on the page a header, and a slide's first
    table-of-contents entry, which would keep them out of the Markdown as page furniture."""
    _, y1, _, y2 = block.bbox
    return (block.type == T.HEADER and y1 > EDGE_BAND * page_h) or (
        block.type == T.FOOTER and y2 < (1 - FOOT_MARGIN) * page_h
    )
