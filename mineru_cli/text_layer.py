"""A PDF page's own text (its text layer): lines in page pixels, and whether to trust them.

Born-digital PDFs carry their text; reading it is exact and far cheaper than OCR. But a text
layer can lie, so every page gets a trust decision first, with the reason when the answer is
no (then the engines read pixels, as for an image):

* ``no_text`` / ``too_few_chars``: fewer than MIN_CHARS visible characters (a scan, a cover);
* ``unicode_errors``: at least UNICODE_ERROR_SHARE of the characters have no Unicode mapping
  (pdfium reports U+FFFD or a mapping error: a font whose codes are glyph numbers, not text);
* ``garbage``: at least GARBAGE_SHARE are code points no text holds (private use, control
  characters, unassigned): a broken ToUnicode map;
* ``ocr_layer``: most characters are invisible (render mode 3 or 7, or fully transparent)
  or painted under a picture, on a page with a picture, i.e. an old OCR layer over (or
  under) a scan, whose text is only as good as that OCR was;
* ``scanned``: opaque pictures paint SCAN_COVERAGE of the page, whatever text lies over them
  (a scan whose only text is a stamp: the stamp would be kept and the scan lost);
* ``rotated_text``: most characters do not run left to right on the rendered page (sideways,
  upside down, or set in vertical columns), or VERTICAL_SHARE of them are CJK set in vertical
  columns among horizontal text.

Characters a reader cannot see are never page content, trusted layer or not: invisible
render modes and fully transparent text, characters an opaque picture or a filled rectangle
(a redaction box) is painted over, boxes outside the page, text under MIN_HEIGHT_PX tall, and
characters with no ink under their glyph in the rendered page or the colour of what surrounds
it (white on white, clipped away). Text turned a quarter or half turn is read in
its own direction; text at other slants is left out.
The MinerU 4 standard tier's classifier uses the same signals (its thresholds: 50 characters
per page, 4 % mapping errors, 3 % garbage).

Lines: characters in the page's content order, broken where the text leaves its band (the
next line) and at horizontal gaps wider than GAP_SPLIT line heights (table cells, columns on
one baseline), so that each line lies inside one layout region; right-to-left text, ligatures
split into letters and superscripts stay in their line. A line keeps its characters: cut at its
gaps wider than CELL_GAP line heights (not after a sentence's end, not in code) they give its
pieces (TextLine.pieces), which a table takes as its cells' text, since a table's cells stand
as little as two \\tabcolsep (12 pt) apart, closer than GAP_SPLIT; and a line is cut at a
column gutter between them (TextLine.split). Boxes are pixels of the page as rendered (pdfium's own page-to-device
mapping, so the page's /Rotate is applied).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import re
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from .annotation_text import Unreadable, annotation_lines
from .core.geometry import int_box

MIN_CHARS = 50
UNICODE_ERROR_SHARE = 0.04
GARBAGE_SHARE = 0.03
INVISIBLE_SHARE = 0.5  # of the characters invisible, over a picture: an OCR layer
ROTATED_SHARE = 0.5
VERTICAL_SHARE = 0.2  # of the characters in vertical CJK columns, among horizontal text
VERTICAL_CHAIN = 3  # wide characters, each under the one before: a vertical column
MIN_HEIGHT_PX = 4.0  # a line box (ascent to descent) this small has glyphs about 2 px tall
INK_CONTRAST = 24  # grey levels between the lightest and darkest pixel of a visible glyph
INK_SHARE = 0.1  # of a glyph's box that may stand out from text the colour of its surround
FAINT_INK = 8  # ... or this many, where the text's own colour is INK_CONTRAST from the paper
GAP_SPLIT = 1.2  # a horizontal gap wider than this many line heights starts a new line
# A gap wider than this many line heights cuts a line into the pieces a table takes as cells: a
# LaTeX table's columns stand 0.5 to 1 line heights apart, its words' spaces under 0.45 (a
# justified paragraph's stretched spaces and sentence ends reach 0.9, hence not GAP_SPLIT)
CELL_GAP = 0.5
CODE_SPACE = 1.5  # monospaced characters' widths: a wider gap between two of them is no space of code
SPACE_GAP = 0.25  # a gap wider than this many line heights without a space is a word break
# Between two wide (CJK) characters, a space is a gap wider than the line's usual one between
# them by this many line heights (pdfium's generated space or not): a writer's space is a
# quarter em or more, a justified line's stretch is alike at every pair (WIDE_PAIRS or more)
WIDE_SPACE = 0.15
WIDE_PAIRS = 3
UPRIGHT_DEGREES = 10.0
OVERPRINT = 0.7  # of two like characters' extent, across and down, they share: one printed over the other
ACCENT_GAP = 0.5  # of a letter's height, the most blank between it and a spacing accent set on it
COVER_SHARE = 0.5  # of a character's box a filled rectangle painted over it covers: hidden
OPAQUE_ALPHA = 250  # a picture's own alpha at a character's centre from which it hides it
SCAN_COVERAGE = 0.9  # of the page that opaque pictures paint: a scan, read from its pixels
SCAN_OPAQUE = 0.9  # of a picture's box it must paint opaquely to count towards that
MASK_MAX_PX = 8_000_000  # the largest picture whose own mask is read (32 MB as pdfium renders it)
GRID_PX = 8  # the cell, in page pixels, of the grid the pictures' coverage is counted on
# Seen characters that show which way up the page stands, even when they are too few to use as
# its text (a figure's labels): this many at least, this share of them running left to right,
# on a page whose pictures' boxes cover less than this share of it (a picture's own text may run
# any way: a scan painted as a stencil mask or through a blend mode paints only its ink, yet it
# is the page)
UPRIGHT_MIN_CHARS = 10
UPRIGHT_SHARE = 0.9
UPRIGHT_MAX_PICTURES = 0.5

_INVISIBLE_MODES = (3, 7)  # PDF text render modes that paint nothing
_PDFIUM_HYPHEN = 0x02  # what pdfium reports for a hyphen at the end of a line
_HIGH_SURROGATES = (0xD800, 0xDC00)  # UTF-16's first halves of a pair, [start, end)
_LOW_SURROGATES = (0xDC00, 0xE000)  # ... and its second halves
SETTINGS = {
    "min_chars": MIN_CHARS,
    "unicode_error_share": UNICODE_ERROR_SHARE,
    "garbage_share": GARBAGE_SHARE,
    "invisible_share": INVISIBLE_SHARE,
    "rotated_share": ROTATED_SHARE,
    "vertical_share": VERTICAL_SHARE,
    "min_height_px": MIN_HEIGHT_PX,
    "ink_contrast": INK_CONTRAST,
    "faint_ink": FAINT_INK,
    "ink_share": INK_SHARE,
    "gap_split": GAP_SPLIT,
    "cell_gap": CELL_GAP,
    "code_space": CODE_SPACE,
    "space_gap": SPACE_GAP,
    "wide_space": WIDE_SPACE,
    "wide_pairs": WIDE_PAIRS,
    "cover_share": COVER_SHARE,
    "opaque_alpha": OPAQUE_ALPHA,
    "scan_coverage": SCAN_COVERAGE,
    "scan_opaque": SCAN_OPAQUE,
}


@dataclass(frozen=True)
class TextLine:
    box: tuple[int, int, int, int]  # page pixels (x1, y1, x2, y2)
    text: str
    mono: bool = False  # every character is set in a monospaced font (see _MONO_FONT): code, a listing
    # the characters it is made of (none for an annotation's text or a turned label, whose
    # characters stand in its own frame): to cut it at a column gutter and into a table's cells
    chars: tuple[_Char, ...] = field(default=(), compare=False, repr=False)

    def split(self, x: float) -> list[TextLine]:
        """The line cut at `x` into the lines its characters left and right of it make (by
        their middles; a side with none gives no line). A line with no characters stays whole."""
        if not self.chars:
            return [self]
        left = [ch for ch in self.chars if (ch.box[0] + ch.box[2]) / 2 < x]
        right = [ch for ch in self.chars if (ch.box[0] + ch.box[2]) / 2 >= x]
        return [_line(side) for side in (left, right) if side]

    def pieces(self) -> tuple[TextLine, ...]:
        """The line cut at its gaps wider than CELL_GAP line heights, but not after a
        sentence's end nor between monospaced characters, left to right; none when it has no
        such gap. A line of code (`mono`, its number included) is never cut: a listing the
        layout model boxes as a table keeps its rows."""
        if not self.chars or self.mono:
            return ()
        pieces: list[list[_Char]] = []
        for piece in _cut_at_gaps(list(self.chars), _Run.of(self.chars).height, CELL_GAP):
            if pieces and (_sentence_space(pieces[-1], piece) or _code_space(pieces[-1], piece)):
                pieces[-1] = pieces[-1] + piece
            else:
                pieces.append(piece)
        return tuple(_line(piece) for piece in pieces) if len(pieces) > 1 else ()


@dataclass(frozen=True)
class TextLayer:
    """A page's text layer as read, and the trust decision. `lines` hold visible text only."""

    lines: tuple[TextLine, ...]
    trusted: bool
    reason: str | None  # why not trusted (None when trusted)
    chars: int  # visible characters (spaces and line ends not counted)
    hidden: int  # characters never emitted: invisible, outside the page, too small, no ink
    detail: str = ""  # the figure behind the reason, for the record
    # the seen characters run left to right (UPRIGHT_*): the page stands upright as rendered
    upright: bool = False

    def info(self) -> dict[str, Any]:
        """The record's `text_layer` field."""
        d: dict[str, Any] = {"used": self.trusted, "chars": self.chars, "hidden": self.hidden}
        if self.reason is not None:
            d["reason"] = self.reason
            if self.detail:
                d["detail"] = self.detail
        return d

    def digest(self) -> str:
        """Hash of the lines the engines would use: part of the cache key of a trusted page
        (two PDFs can render to the same pixels with different text)."""
        rows = [
            [list(ln.box), ln.text]
            + (["mono"] if ln.mono else [])
            + ([[[list(p.box), p.text] for p in pieces]] if (pieces := ln.pieces()) else [])
            for ln in self.lines
        ]
        blob = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def scaled(self, factor: float) -> TextLayer:
        """The same layer for the page downscaled by `factor` (inputs' area cap)."""
        if factor == 1.0:
            return self

        def scale(box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
            x1, y1, x2, y2 = (int(round(v * factor)) for v in box)
            return x1, y1, x2, y2

        def scale_box(box: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
            x1, y1, x2, y2 = (v * factor for v in box)
            return x1, y1, x2, y2

        def scale_char(ch: _Char) -> _Char:
            return replace(ch, box=scale_box(ch.box), glyph=None if ch.glyph is None else scale_box(ch.glyph))

        lines = tuple(replace(ln, box=scale(ln.box), chars=tuple(map(scale_char, ln.chars))) for ln in self.lines)
        return replace(self, lines=lines)


@dataclass
class _Char:
    text: str
    box: tuple[float, float, float, float]  # device pixels
    line_end: bool = False  # pdfium reports a line break after it
    space: bool = False
    glyph: tuple[float, float, float, float] | None = None  # its ink's extent, in the frame of `box`
    mono: bool = False  # set in a monospaced font
    obj: int = 0  # the address of its text object


@dataclass
class _Counts:
    total: int = 0  # real (not generated), non-space characters
    unicode_errors: int = 0
    garbage: int = 0
    invisible: int = 0
    rotated: int = 0
    turned: dict[int, list[_Char]] = field(default_factory=lambda: {1: [], 2: [], 3: []})  # in their own frame
    hidden: int = 0  # invisible + outside + tiny + no ink
    visible: list[_Char] = field(default_factory=list)


def read_text_layer(page: pdfium.PdfPage, pixels: np.ndarray, index: int | None = None) -> TextLayer:
    """The text layer of `page` (page `index` of its document) rendered as `pixels` (H x W x 3
    RGB or H x W grey, uint8)."""
    rgb = pixels if pixels.ndim == 3 else None
    grey = pixels if rgb is None else np.asarray(Image.fromarray(rgb).convert("L"))
    height, width = grey.shape[:2]
    mapper = _DeviceMap(page, width, height)
    paint = _PaintOrder(page, mapper)
    textpage = page.get_textpage()
    try:
        counts = _read_chars(textpage, grey, rgb, mapper, paint)
    finally:
        textpage.close()
    counts.visible = _logical_rtl(_join_accents(_drop_overprints(counts.visible)))
    counts.turned = {
        turns: _logical_rtl(_join_accents(_drop_overprints(chars))) for turns, chars in counts.turned.items()
    }
    layer = _decide(counts, paint, width, height)
    if layer.trusted:  # typed-on text and filled form fields are in no text layer (annotation_text.py)
        try:
            filled = tuple(
                TextLine(box, text) for box, text in annotation_lines(page, pixels, mapper, INK_CONTRAST, index)
            )
        except Unreadable as exc:  # what they show is not readable as text: OCR reads the page
            return replace(layer, lines=(), trusted=False, reason=exc.reason, detail=exc.detail)
        layer = replace(layer, lines=layer.lines + filled)
    return layer


def _read_chars(textpage, grey: np.ndarray, rgb: np.ndarray | None, mapper: _DeviceMap, paint: _PaintOrder) -> _Counts:
    counts = _Counts()
    rect = pdfium_c.FS_RECTF()
    matrix = pdfium_c.FS_MATRIX()
    last: _Char | None = None  # the last character kept: line ends and spaces mark it
    painted: dict[int, bool] = {}  # text object address -> whether it paints nothing
    fills: dict[int, tuple[int, int, int] | None] = {}  # text object address -> its fill colour
    turned: dict[int, int | None] = {}  # text object address -> its quarter turns
    mono: dict[int, bool] = {}  # text object address -> whether its font is monospaced
    glyphs = _GlyphIndex(textpage, mapper, fills)
    count = textpage.count_chars()
    for i in range(count):
        code = _code_point(textpage, i, count)
        if code is None:
            continue  # the second half of a character beyond the BMP, read with its first
        if code == _PDFIUM_HYPHEN:
            code = ord("-")  # pdfium's mark for a hyphen that ends a line: the hyphen on the page
        ch = chr(code) if 0 < code < 0x110000 else "\ufffd"
        if ch in "\r\n":
            if last is not None:
                last.line_end = True
            continue
        generated = bool(pdfium_c.FPDFText_IsGenerated(textpage, i))
        if ch.isspace():
            if last is not None:
                last.space = True
            continue
        if generated:
            continue
        counts.total += 1
        if ch == "\ufffd" or pdfium_c.FPDFText_HasUnicodeMapError(textpage, i):
            counts.unicode_errors += 1  # pdfium found no Unicode for the character code
        elif _is_garbage(ch):
            counts.garbage += 1
        if _is_control(ch) or _is_surrogate(ch):
            ch = "\ufffd"
        visible = True
        obj = pdfium_c.FPDFText_GetTextObject(textpage, i)
        key = _address(obj)  # the text object, as a dictionary key
        pdfium_c.FPDFText_GetLooseCharBox(textpage, i, rect)
        box = mapper.box(rect.left, rect.bottom, rect.right, rect.top)
        if key and (_paints_nothing(obj, key, painted) or paint.covers(key, box)):
            counts.invisible += 1
            visible = False
        if key and key in turned:  # pdfium gives a character its text object's matrix: read once per object
            turns = turned[key]
        else:
            turns = mapper.quarter_turns(matrix) if pdfium_c.FPDFText_GetMatrix(textpage, i, matrix) else 0
            turned[key] = turns
        if visible and turns != 0:
            counts.rotated += 1
            visible = turns is not None  # text at a slant is no line of the page's grid
        glyph = glyphs.boxes[i] or box
        em = _em_px(textpage, i, mapper, matrix) if box[3] - box[1] < MIN_HEIGHT_PX else 0.0
        if visible and not _seen(box, glyph, grey, rgb, _fill(obj, key, fills), glyphs, em):
            visible = False
        if not visible:
            counts.hidden += 1
            continue
        ink, quarter = glyphs.boxes[i], turns or 0  # (visible: upright or a quarter turn)
        fixed = _monospaced(obj, key, mono)
        last = _Char(ch, _turn(box, quarter), glyph=_turn(ink, quarter) if ink else None, mono=fixed, obj=key)
        (counts.turned[quarter] if quarter else counts.visible).append(last)
    return counts


def _em_px(textpage, index: int, mapper: _DeviceMap, matrix) -> float:
    """The height in device pixels of the em character `index` is set in: its font size along
    its text's up direction, through its matrix and the page's mapping to the device. The up
    direction, not the matrix's mean scale: text squashed flat (12 pt drawn 8 times as wide and
    a twentieth as tall, a hair-thin line to a reader) has an em of mean size 12 pt."""
    if not pdfium_c.FPDFText_GetMatrix(textpage, index, matrix):
        return 0.0
    (a, b), (c, d) = mapper.dx, mapper.dy
    up = (matrix.c * a + matrix.d * c, matrix.c * b + matrix.d * d)  # text space's (0, 1) on the device
    return pdfium_c.FPDFText_GetFontSize(textpage, index) * math.hypot(*up)


class _DeviceMap:
    """pdfium's page -> bitmap pixel mapping for a render of the whole page at this size.

    The mapping is affine, so it is read from pdfium once (three points, far apart so that
    its integer pixels round to nothing) and applied here: a ctypes call per corner of every
    character cost more than all the rest of the reader."""

    def __init__(self, page, width: int, height: int):
        x, y = ctypes.c_int(), ctypes.c_int()

        def device(px: float, py: float) -> tuple[float, float]:
            pdfium_c.FPDF_PageToDevice(page, 0, 0, width, height, 0, px, py, x, y)
            return float(x.value), float(y.value)

        far = 10000.0
        ox, oy = device(0.0, 0.0)
        ax, ay = device(far, 0.0)
        bx, by = device(0.0, far)
        self.o = (ox, oy)
        self.dx = ((ax - ox) / far, (ay - oy) / far)  # device step for one point along page x
        self.dy = ((bx - ox) / far, (by - oy) / far)  # ... and along page y

    def page_point(self, x: float, y: float) -> tuple[float, float]:
        """The page point (PDF units) at device pixel (x, y): the mapping inverted."""
        (a, b), (c, d) = self.dx, self.dy
        det = a * d - b * c
        u, v = x - self.o[0], y - self.o[1]
        return (u * d - v * c) / det, (v * a - u * b) / det

    def point(self, x: float, y: float) -> tuple[float, float]:
        return self.o[0] + x * self.dx[0] + y * self.dy[0], self.o[1] + x * self.dx[1] + y * self.dy[1]

    def box(self, left: float, bottom: float, right: float, top: float) -> tuple[float, float, float, float]:
        (x1, y1), (x2, y2) = self.point(left, bottom), self.point(right, top)
        return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)

    def quarter_turns(self, m) -> int | None:
        """How the character with text matrix `m` runs on the rendered page: 0 left to right,
        1 top to bottom, 2 right to left (upside down), 3 bottom to top (its x axis, through
        the page's rotation, within UPRIGHT_DEGREES of that); None at any other slant."""
        vx = m.a * self.dx[0] + m.b * self.dy[0]
        vy = m.a * self.dx[1] + m.b * self.dy[1]
        if vx == 0 and vy == 0:
            return 0
        angle = math.degrees(math.atan2(vy, vx)) % 360  # pixel rows grow downwards: 90 is down
        turns = int(round(angle / 90)) % 4
        return turns if abs(angle - 90 * round(angle / 90)) <= UPRIGHT_DEGREES else None


def _turn(box: tuple[float, float, float, float], turns: int) -> tuple[float, float, float, float]:
    """`box` in the frame where text that runs `turns` quarter turns clockwise from left to
    right runs left to right (each turn: (x, y) -> (y, -x)); 4 - turns turns it back."""
    x1, y1, x2, y2 = box
    for _ in range(turns % 4):
        x1, y1, x2, y2 = y1, -x2, y2, -x1
    return x1, y1, x2, y2


class _GlyphIndex:
    """Every character's glyph box (its ink's extent, not the font's line box; None where
    pdfium gives none: a space, a font without outlines) in device pixels, with its text's
    fill colour, on a grid: which pixels near a character other-coloured text paints."""

    CELL = 64  # device pixels

    def __init__(self, textpage, mapper: _DeviceMap, fills: dict[int, tuple[int, int, int] | None]):
        self.boxes: list[tuple[float, float, float, float] | None] = []
        self._cells: dict[tuple[int, int], list[tuple[tuple[int, int, int, int], tuple[int, int, int] | None]]] = {}
        left, right, bottom, top = (ctypes.c_double() for _ in range(4))
        for i in range(textpage.count_chars()):
            box = None
            if pdfium_c.FPDFText_GetCharBox(textpage, i, left, right, bottom, top):
                x1, y1, x2, y2 = mapper.box(left.value, bottom.value, right.value, top.value)
                if x2 > x1 and y2 > y1:
                    box = (x1, y1, x2, y2)
                    obj = pdfium_c.FPDFText_GetTextObject(textpage, i)
                    self._add(
                        (int(x1), int(y1), int(math.ceil(x2)), int(math.ceil(y2))), _fill(obj, _address(obj), fills)
                    )
            self.boxes.append(box)

    def _add(self, box: tuple[int, int, int, int], fill: tuple[int, int, int] | None) -> None:
        for cy in range(box[1] // self.CELL, box[3] // self.CELL + 1):
            for cx in range(box[0] // self.CELL, box[2] // self.CELL + 1):
                self._cells.setdefault((cx, cy), []).append((box, fill))

    def others(self, rows: slice, columns: slice, fill: tuple[int, int, int]) -> np.ndarray:
        """The pixels of the region (rows, columns) inside glyph boxes of text of another
        colour than `fill` (or of no known colour)."""
        mask = np.zeros((rows.stop - rows.start, columns.stop - columns.start), bool)
        for cy in range(rows.start // self.CELL, (rows.stop - 1) // self.CELL + 1):
            for cx in range(columns.start // self.CELL, (columns.stop - 1) // self.CELL + 1):
                for (x1, y1, x2, y2), other in self._cells.get((cx, cy), ()):
                    if other is not None and max(abs(a - b) for a, b in zip(other, fill)) < INK_CONTRAST:
                        continue
                    r1, r2 = max(y1, rows.start), min(y2, rows.stop)
                    c1, c2 = max(x1, columns.start), min(x2, columns.stop)
                    if r1 < r2 and c1 < c2:
                        mask[r1 - rows.start : r2 - rows.start, c1 - columns.start : c2 - columns.start] = True
        return mask


def _seen(
    box,
    glyph,
    grey: np.ndarray,
    rgb: np.ndarray | None,
    fill: tuple[int, int, int] | None,
    glyphs: _GlyphIndex,
    em: float = 0.0,
) -> bool:
    """A reader sees the character (line box `box`, glyph box `glyph`, filled with colour
    `fill` where that is known, set at `em` pixels where known): on the page, tall enough, not
    the colour of what is round it, with ink under its glyph (in grey, or in colour where `rgb`
    is given). The glyph box, not the line box: a line box reaches into the lines above and
    below, whose ink made white text set between them look seen. Tall enough: the line box or
    the em, for pdfium gives some fonts' characters (Chromium's Arabic) a box as tight as their
    glyph, and a flat letter ("م" joined on, 14 px text at 100 DPI) is under MIN_HEIGHT_PX."""
    height, width = grey.shape[:2]
    x1, y1, x2, y2 = box
    if x2 <= 0 or y2 <= 0 or x1 >= width or y1 >= height:
        return False
    if max(y2 - y1, em) < MIN_HEIGHT_PX:
        return False
    x1, y1, x2, y2 = glyph  # and a pixel round it, where antialiasing spreads a thin stroke
    rows = slice(max(0, int(y1) - 1), min(height, int(math.ceil(y2)) + 1))
    columns = slice(max(0, int(x1) - 1), min(width, int(math.ceil(x2)) + 1))
    region = grey[rows, columns]
    if region.size == 0:
        return False
    if fill is not None and _like_its_surround(fill, rows, columns, grey, rgb, glyphs):
        return False
    lightest, darkest = int(region.max()), int(region.min())
    if lightest - darkest >= INK_CONTRAST:
        return True
    if rgb is not None:  # red on a green of the same grey: no contrast in grey, plain to a reader
        colours = rgb[rows, columns].reshape(-1, 3)
        if int((colours.max(axis=0) - colours.min(axis=0)).max()) >= INK_CONTRAST:
            return True
    # the thin strokes of small or light text antialias to less contrast than that (a 6 pt
    # 0.8-grey "l" at 100 DPI); such a glyph still shows where the text's colour stands out
    # from what is under it, and white on white or clipped text leaves no ink at all
    if lightest - darkest < FAINT_INK:
        return False
    if fill is None:
        return False
    paint = _grey(fill)
    return max(abs(lightest - paint), abs(darkest - paint)) >= INK_CONTRAST


def _like_its_surround(fill: tuple[int, int, int], rows: slice, columns: slice, grey, rgb, glyphs: _GlyphIndex) -> bool:
    """Whether text of colour `fill` cannot be told from what surrounds its glyph: white text
    on white paper, however close other lines' ink comes. Its colour is within INK_CONTRAST of
    the median of its box's top and bottom rows and of the median of its side columns (each:
    glyphs that touch their neighbours have the neighbours' ink down their sides), and under
    INK_SHARE of the middle of its box stands out from that colour (a pattern or a Type3 glyph
    paints its own colour, whatever fill pdfium reports), in grey and in every channel."""
    paint = _grey(fill)
    if not _edges_match(grey[rows, columns].astype(np.int16), np.int16(paint)):
        return False  # most text: its grey alone stands out
    if rgb is not None and not _edges_match(rgb[rows, columns].astype(np.int16), np.asarray(fill, np.int16)):
        return False
    # ink in the middle of the box that other-coloured text does not explain is the glyph's own
    others = glyphs.others(rows, columns, fill)
    return _little_ink(grey[rows, columns].astype(np.int16), np.int16(paint), others) and (
        rgb is None or _little_ink(rgb[rows, columns].astype(np.int16), np.asarray(fill, np.int16), others)
    )


def _grey(colour: tuple[int, int, int]) -> int:
    """A colour's grey level, as Pillow's convert("L") gives it."""
    return (colour[0] * 299 + colour[1] * 587 + colour[2] * 114) // 1000


def _edges_match(region: np.ndarray, paint) -> bool:
    """The medians of the region's top and bottom rows and of its side columns are each within
    INK_CONTRAST of `paint` (region H x W grey or H x W x 3)."""
    across = np.concatenate([region[0], region[-1]])
    down = np.concatenate([region[:, 0], region[:, -1]])
    for edge in (across, down):
        middle = np.sort(edge, axis=0)[len(edge) // 2]  # the median (np.median costs more than the rest)
        if (np.abs(middle - paint) >= INK_CONTRAST).any():
            return False
    return True


def _little_ink(region: np.ndarray, paint, others: np.ndarray) -> bool:
    """Under INK_SHARE of the middle of the region (pixels `others` marks left out) stands out
    from `paint`: other lines' ascenders and descenders reach into a box's top and bottom, a
    glyph's own strokes cross its middle."""
    h, w = region.shape[:2]
    rows, columns = slice(h // 4, h - h // 4 or None), slice(w // 6, w - w // 6 or None)
    differs = np.abs(region[rows, columns] - paint) >= INK_CONTRAST
    if differs.ndim == 3:
        differs = differs.any(axis=2)
    free = ~others[rows, columns]
    return int(free.sum()) == 0 or float((differs & free).sum()) < INK_SHARE * int(free.sum())


def _paints_nothing(obj, key: int, known: dict[int, bool]) -> bool:
    """Whether text object `obj` (at address `key`) paints nothing: an invisible render mode,
    or fully transparent (fill alpha 0, as some OCR tools hide their text over a scan). Read
    once per object."""
    if key not in known:
        mode = pdfium_c.FPDFTextObj_GetTextRenderMode(obj)
        if mode in _INVISIBLE_MODES:
            known[key] = True
        else:
            fill = _alpha(obj, pdfium_c.FPDFPageObj_GetFillColor) if mode in (0, 2, 4, 6) else 0
            stroke = _alpha(obj, pdfium_c.FPDFPageObj_GetStrokeColor) if mode in (1, 2, 5, 6) else 0
            known[key] = fill == 0 and stroke == 0
    return known[key]


def _alpha(obj, get_colour) -> int:
    colour = _colour(obj, get_colour)
    return 255 if colour is None else colour[3]


def _fill(obj, key: int, known: dict[int, tuple[int, int, int] | None]) -> tuple[int, int, int] | None:
    """The colour text object `obj` (at address `key`) paints its glyphs with: its fill, for
    text that is only filled (render mode 0); None otherwise. Read once per object."""
    if key not in known:
        colour = None
        if obj and pdfium_c.FPDFTextObj_GetTextRenderMode(obj) == 0:
            colour = _colour(obj, pdfium_c.FPDFPageObj_GetFillColor)
        known[key] = None if colour is None else colour[:3]
    return known[key]


def _colour(obj, get_colour) -> tuple[int, int, int, int] | None:
    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    return (r.value, g.value, b.value, a.value) if get_colour(obj, r, g, b, a) else None


def _code_point(textpage, i: int, count: int) -> int | None:
    """The code point of character `i` of `textpage` (of `count`). pdfium gives a character
    beyond the Basic Multilingual Plane (unicode-math's italic 𝑥, an emoji) as two characters
    with one box, its UTF-16 surrogates: the first gives the whole code point, the second None.
    Python would keep the halves as two lone surrogates, which UTF-8 cannot encode."""
    code: int = pdfium_c.FPDFText_GetUnicode(textpage, i)
    if _LOW_SURROGATES[0] <= code < _LOW_SURROGATES[1] and i > 0:
        if _HIGH_SURROGATES[0] <= pdfium_c.FPDFText_GetUnicode(textpage, i - 1) < _HIGH_SURROGATES[1]:
            return None
    if _HIGH_SURROGATES[0] <= code < _HIGH_SURROGATES[1] and i + 1 < count:
        low = pdfium_c.FPDFText_GetUnicode(textpage, i + 1)
        if _LOW_SURROGATES[0] <= low < _LOW_SURROGATES[1]:
            return 0x10000 + ((code - _HIGH_SURROGATES[0]) << 10) + (low - _LOW_SURROGATES[0])
    return code


def _is_surrogate(ch: str) -> bool:
    """Half of a UTF-16 pair without its other half: no character, and no UTF-8 for it."""
    return unicodedata.category(ch) == "Cs"


def _is_control(ch: str) -> bool:
    """A control code for a character on the page: a glyph of a font that gives no Unicode for it,
    taken as its code (TeX's math fonts without a ToUnicode map: cmmi's ε is U+000F). It is a
    character whose Unicode is not known, as pdfium's own U+FFFD is: no control code goes into
    the text, where it is an invisible byte in the Markdown. (The control codes Python counts as
    white space, U+000B, U+000C and U+001C to U+001F, are taken as spaces before this: cmex's
    bracket pieces among them.)"""
    return unicodedata.category(ch) == "Cc"


def _is_garbage(ch: str) -> bool:
    """A code point no real text holds: private use, unassigned, surrogates, controls."""
    category = unicodedata.category(ch)
    return category in ("Co", "Cn", "Cs") or (category == "Cc" and ch != "\t")


class _Cover:
    """Something opaque painted on the page: a picture, or a filled rectangle (a redaction
    box, a patch pasted over a passage). `box` is in device pixels; `at` its place in the
    paint order."""

    def __init__(self, at: tuple[int, ...], box: tuple[float, float, float, float], rectangle: bool, alpha=None):
        self.at, self.box, self.rectangle = at, box, rectangle
        self._alpha = alpha  # () -> (alpha array, device pixel -> its (col, row)) for a picture with a mask

    def hides(self, box: tuple[float, float, float, float]) -> bool:
        """Whether this hides the character with device box `box`: a picture over its centre
        (one with a mask of its own: opaque over most of the character, so that a signature's
        stroke across a letter leaves it read); a rectangle over most of the character (a
        strike-through bar over its middle does not hide it)."""
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        b = self.box
        if not (b[0] <= cx <= b[2] and b[1] <= cy <= b[3]):
            return False
        if self.rectangle:
            w = max(0.0, min(b[2], box[2]) - max(b[0], box[0]))
            h = max(0.0, min(b[3], box[3]) - max(b[1], box[1]))
            return w * h >= COVER_SHARE * max(1e-6, (box[2] - box[0]) * (box[3] - box[1]))
        if self._alpha is None:
            return True
        alpha, where = self._alpha()
        if alpha is None:
            return True  # no mask to read: taken as opaque, as a picture without one is
        h, w = alpha.shape
        opaque = 0
        for fx in (1 / 6, 1 / 2, 5 / 6):  # a 3 x 3 sample of the character's box
            for fy in (1 / 6, 1 / 2, 5 / 6):
                col, row = where(box[0] + fx * (box[2] - box[0]), box[1] + fy * (box[3] - box[1]))
                if 0 <= row < h and 0 <= col < w:  # off a turned picture's corner: not under it
                    opaque += alpha[int(row), int(col)] >= OPAQUE_ALPHA
        return opaque >= 5

    def opaque_share(self) -> float:
        """The share of the picture's box it paints opaquely."""
        if self._alpha is None:
            return 1.0
        alpha, _ = self._alpha()
        return 1.0 if alpha is None else float((alpha >= OPAQUE_ALPHA).mean())


class _PaintOrder:
    """What the page paints, in order: a character that an opaque picture or a filled
    rectangle is painted over (where that is not clipped away) is hidden however much ink
    is there. Its text is what the page's pixels do not show: the text under a scan in an
    "image over text" PDF, a passage pasted over, a redacted name. Objects inside form
    XObjects are placed through the forms' matrices (the `cm` in force where each form is
    drawn and its /Matrix) and within the clips in force where they are drawn, as pdfium draws
    them; nothing inside a form drawn translucent (a 15 % watermark) covers anything."""

    MAX_DEPTH = 8  # form XObjects inside form XObjects
    CELL = 64  # device pixels: the grid the covers are found on, by a character's centre

    def __init__(self, page, mapper: _DeviceMap):
        self.has_picture = False
        self.covers_list: list[_Cover] = []
        self.pictures: list[_Cover] = []  # the opaque pictures among them, for the page's coverage
        self.picture_boxes: list[tuple[float, float, float, float]] = []  # where every picture paints, opaque or not
        self.stencils: list[tuple[float, float, float, float]] = []  # the boxes of stencil-mask pictures
        self.text_at: dict[int, tuple[int, ...]] = {}  # text object address -> its place in the order
        self._page = page
        self._mapper = mapper
        self._grid: dict[tuple[int, int], list[_Cover]] | None = None
        count = pdfium_c.FPDFPage_CountObjects(page)
        self._walk(page, pdfium_c.FPDFPage_GetObject, count, (), _IDENTITY, None, False)

    def _walk(self, parent, get, count: int, where: tuple[int, ...], matrix: _Affine, within, faint: bool) -> None:
        """The objects of `parent` (the page, or a form whose content space `matrix` maps to
        the page), each painting only within device box `within` (None: anywhere), covering
        nothing where `faint` (drawn see-through)."""
        for k in range(count):
            obj = get(parent, k)
            kind = pdfium_c.FPDFPageObj_GetType(obj)
            at = (*where, k)
            if kind == pdfium_c.FPDF_PAGEOBJ_TEXT:
                self.text_at[_address(obj)] = at
            elif kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
                self.has_picture = True
                box = self._painted_box(obj, matrix, within)
                if box is not None:
                    self.picture_boxes.append(box)
                if box is not None and not faint and _stencil_mask(obj, self._page):
                    # a bilevel scan painted in its ink colour (/ImageMask): only its ink shows,
                    # so it hides little text, yet its box is a scanned page's
                    self.stencils.append(box)
                    continue
                if faint or pdfium_c.FPDFPageObj_HasTransparency(obj):
                    continue
                if box is not None:
                    cover = _Cover(at, box, False, self._mask_reader(obj, matrix))
                    self.covers_list.append(cover)
                    self.pictures.append(cover)
            elif kind == pdfium_c.FPDF_PAGEOBJ_PATH and not faint and _opaque_filled_rectangle(obj):
                box = self._painted_box(obj, matrix, within)
                if box is not None:
                    self.covers_list.append(_Cover(at, box, True))
            elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and len(at) < self.MAX_DEPTH:
                inner = _compose(matrix, _object_matrix(obj))  # the form's content space -> the page
                clip = self._clip_box(obj, matrix)  # the clip in force where the form is drawn
                limit = within if clip is None else clip if within is None else _intersect(within, clip)
                if clip is not None and limit is None:
                    continue  # clipped away whole
                # a form drawn with a fill alpha under 1 paints all it holds see-through (pdfium
                # keeps the alpha on the form, its objects report none)
                see_through = faint or _alpha(obj, pdfium_c.FPDFPageObj_GetFillColor) < 255
                n = pdfium_c.FPDFFormObj_CountObjects(obj)
                self._walk(obj, pdfium_c.FPDFFormObj_GetObject, n, at, inner, limit, see_through)

    def _painted_box(self, obj, matrix: _Affine, within) -> tuple[float, float, float, float] | None:
        """Where an object paints, in device pixels: its bounds within its clip paths' bounds
        (both in its content space: the page's, or the enclosing form's) and within `within`."""
        left, bottom, right, top = (ctypes.c_float() for _ in range(4))
        if not pdfium_c.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
            return None
        box = self._device_box((left.value, bottom.value, right.value, top.value), matrix)
        clip = self._clip_box(obj, matrix)
        for limit in (clip, within):
            if box is not None and limit is not None:
                box = _intersect(box, limit)
        return box

    def _clip_box(self, obj, matrix: _Affine) -> tuple[float, float, float, float] | None:
        """The bounds of an object's clip paths in device pixels (None: no clip); an empty box
        for a clip that leaves nothing."""
        clip = pdfium_c.FPDFPageObj_GetClipPath(obj)
        box: tuple[float, float, float, float] | None = None
        x, y = ctypes.c_float(), ctypes.c_float()
        for path in range(pdfium_c.FPDFClipPath_CountPaths(clip) if clip else 0):
            xs, ys = [], []
            for seg in range(pdfium_c.FPDFClipPath_CountPathSegments(clip, path)):
                segment = pdfium_c.FPDFClipPath_GetPathSegment(clip, path, seg)
                if segment and pdfium_c.FPDFPathSegment_GetPoint(segment, x, y):
                    xs.append(x.value)
                    ys.append(y.value)
            if xs:
                bounds = self._device_box((min(xs), min(ys), max(xs), max(ys)), matrix) or (0.0, 0.0, 0.0, 0.0)
                box = bounds if box is None else (_intersect(box, bounds) or (0.0, 0.0, 0.0, 0.0))
        return box

    def _device_box(self, box, matrix: _Affine) -> tuple[float, float, float, float] | None:
        """A box of a content space (left, bottom, right, top) as device pixels, through
        `matrix` to the page; None when empty."""
        if box[0] >= box[2] or box[1] >= box[3]:
            return None
        corners = [_apply(matrix, x, y) for x in (box[0], box[2]) for y in (box[1], box[3])]
        xs, ys = [p[0] for p in corners], [p[1] for p in corners]
        return self._mapper.box(min(xs), min(ys), max(xs), max(ys))

    def _mask_reader(self, obj, matrix: _Affine):
        """A reader of the picture's own alpha (a soft mask, a stencil mask), run the first
        time a character or the page's coverage asks: pdfium's "has transparency" reports the
        graphics state's, not the image's /SMask, and a signature scanned on a transparent
        background leaves the lines under it in plain view."""
        cached: list = []

        def read():
            if not cached:
                cached.append(self._read_mask(obj, matrix))
            return cached[0]

        return read

    def _read_mask(self, obj, matrix: _Affine):
        own = _object_matrix(obj)
        # pdfium renders the picture at one pixel per unit of its own matrix: a scan on an A0
        # page would take gigabytes; a picture that large is taken as opaque, unread
        if abs(own[0] * own[3]) + abs(own[1] * own[2]) > MASK_MAX_PX:
            return None, None
        image = _compose(matrix, own)  # the unit square -> the page
        inverse = _invert(image)
        if inverse is None:
            return None, None
        bitmap = pdfium_c.FPDFImageObj_GetRenderedBitmap(self._page.pdf, self._page, obj)
        if not bitmap:
            return None, None
        try:
            if pdfium_c.FPDFBitmap_GetFormat(bitmap) != pdfium_c.FPDFBitmap_BGRA:
                return None, None
            w, h = pdfium_c.FPDFBitmap_GetWidth(bitmap), pdfium_c.FPDFBitmap_GetHeight(bitmap)
            stride = pdfium_c.FPDFBitmap_GetStride(bitmap)
            buffer = ctypes.string_at(pdfium_c.FPDFBitmap_GetBuffer(bitmap), stride * h)
            alpha = np.frombuffer(buffer, np.uint8).reshape(h, stride)[:, 3 : 4 * w : 4].copy()
        finally:
            pdfium_c.FPDFBitmap_Destroy(bitmap)
        mapper = self._mapper

        def where(x: float, y: float) -> tuple[float, float]:
            u, v = _apply(inverse, *mapper.page_point(x, y))  # the image's unit square, y up
            return u * w, (1.0 - v) * h

        return alpha, where

    def covers(self, text_key: int, box: tuple[float, float, float, float]) -> bool:
        """Whether something opaque painted after the text object at address `text_key`
        hides the character box."""
        if not self.covers_list:
            return False
        at = self.text_at.get(text_key)
        if at is None:
            return False
        if self._grid is None:  # each cell: the covers over it (thousands of table borders: no scan of them all)
            self._grid = {}
            for c in self.covers_list:
                x1, y1, x2, y2 = (int(v // self.CELL) for v in c.box)
                for cy in range(y1, y2 + 1):
                    for cx in range(x1, x2 + 1):
                        self._grid.setdefault((cx, cy), []).append(c)
        centre = (int((box[0] + box[2]) / 2 // self.CELL), int((box[1] + box[3]) / 2 // self.CELL))
        return any(c.at > at and c.hides(box) for c in self._grid.get(centre, ()))

    def picture_share(self, width: int, height: int) -> float:
        """The share of the rendered page that opaque pictures paint (their union, on a grid
        of GRID_PX cells), whatever lies over them; a stencil mask's by its box."""
        boxes = list(self.stencils)
        for c in self.pictures:  # a scan may come in strips, or tiles
            big = _area(c.box) >= 0.01 * width * height  # a small one's mask is not worth reading
            if not big or c.opaque_share() >= SCAN_OPAQUE:
                boxes.append(c.box)
        return _union_share(boxes, width, height)

    def picture_box_share(self, width: int, height: int) -> float:
        """The share of the rendered page within the boxes of its pictures, opaque or not."""
        return _union_share(self.picture_boxes, width, height)


def _union_share(boxes: list[tuple[float, float, float, float]], width: int, height: int) -> float:
    """The share of a `width` x `height` page that the union of device `boxes` covers, on a
    grid of GRID_PX cells."""
    if not boxes:
        return 0.0
    gw, gh = max(1, width // GRID_PX), max(1, height // GRID_PX)
    grid = np.zeros((gh, gw), bool)
    for box in boxes:
        x1, y1, x2, y2 = (v / GRID_PX for v in box)
        grid[max(0, int(y1)) : int(math.ceil(y2)), max(0, int(x1)) : int(math.ceil(x2))] = True
    return float(grid.mean())


_Affine = tuple[float, float, float, float, float, float]  # PDF's (a, b, c, d, e, f)
_IDENTITY: _Affine = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _object_matrix(obj) -> _Affine:
    m = pdfium_c.FS_MATRIX()
    if not pdfium_c.FPDFPageObj_GetMatrix(obj, m):
        return _IDENTITY
    return (m.a, m.b, m.c, m.d, m.e, m.f)


def _compose(outer: _Affine, inner: _Affine) -> _Affine:
    """`inner` then `outer` (a point in the inner space -> the outer's parent space)."""
    a, b, c, d, e, f = inner
    A, B, C, D, E, F = outer
    return (a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D, e * A + f * C + E, e * B + f * D + F)


def _apply(m: _Affine, x: float, y: float) -> tuple[float, float]:
    return m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5]


def _invert(m: _Affine) -> _Affine | None:
    a, b, c, d, e, f = m
    det = a * d - b * c
    if abs(det) < 1e-12:
        return None
    ia, ib, ic, id_ = d / det, -b / det, -c / det, a / det
    return (ia, ib, ic, id_, -(e * ia + f * ic), -(e * ib + f * id_))


def _intersect(a, b) -> tuple[float, float, float, float] | None:
    box = (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))
    return box if box[0] < box[2] and box[1] < box[3] else None


def _area(box: tuple[float, float, float, float]) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _stencil_mask(obj, page) -> bool:
    """Whether an image object is a stencil mask (/ImageMask: one bit a sample and no colour
    space of its own; it paints the fill colour where its samples say)."""
    meta = pdfium_c.FPDF_IMAGEOBJ_METADATA()
    if not pdfium_c.FPDFImageObj_GetImageMetadata(obj, page, ctypes.byref(meta)):
        return False
    return bool(meta.bits_per_pixel == 1 and meta.colorspace == pdfium_c.FPDF_COLORSPACE_UNKNOWN)


def _opaque_filled_rectangle(obj) -> bool:
    """A path filled with an opaque colour whose outline is one axis-aligned rectangle (what
    a redaction box or a pasted patch is; curves, lines and strokes are drawings)."""
    fill, stroke = ctypes.c_int(), ctypes.c_int()
    if not pdfium_c.FPDFPath_GetDrawMode(obj, fill, stroke) or fill.value == pdfium_c.FPDF_FILLMODE_NONE:
        return False
    if pdfium_c.FPDFPageObj_HasTransparency(obj) or _alpha(obj, pdfium_c.FPDFPageObj_GetFillColor) < 255:
        return False
    m = _object_matrix(obj)
    if abs(m[1]) > 1e-6 or abs(m[2]) > 1e-6:  # turned by its own matrix: no longer its bounds
        return False
    n = pdfium_c.FPDFPath_CountSegments(obj)
    if not 4 <= n <= 5:
        return False
    xs, ys = set(), set()
    x, y = ctypes.c_float(), ctypes.c_float()
    for k in range(n):
        segment = pdfium_c.FPDFPath_GetPathSegment(obj, k)
        if not segment or pdfium_c.FPDFPathSegment_GetType(segment) == pdfium_c.FPDF_SEGMENT_BEZIERTO:
            return False
        if not pdfium_c.FPDFPathSegment_GetPoint(segment, x, y):
            return False
        xs.add(round(x.value, 2))
        ys.add(round(y.value, 2))
    return len(xs) == 2 and len(ys) == 2


def _address(obj) -> int:
    return ctypes.cast(obj, ctypes.c_void_p).value or 0


# Monospaced font families by their PostScript names (a subset's "ABCDEF+" prefix aside): TeX's
# typewriter fonts (cmtt, cmsltt, cm-super's sftt, Latin Modern Mono, New CM Mono, tx/px tt,
# TeX Gyre Cursor), Courier and its clones, and the usual programmers' fonts. The font
# descriptor's FixedPitch flag is no guide: TeX's Type 1 CMTT and most LMMono and Inconsolata
# fonts leave it unset (texlive docs, R-exts, gnuplot), and some Arial and SimSun fonts set it.
_MONO_FONT = re.compile(
    r"^(?:[A-Z]{6}\+)?(?:"
    r"CM(?:SL|I)?TT|SF(?:TT|IT|ST)|ECTT|LMMono|NewCMMono|[RrTt]?[Tt][Xx][Tt][Tt]|[Pp][Xx][Tt][Tt]|TeXGyreCursor|"
    r"Courier|NimbusMon|Inconsolata|Consolas|Menlo|Monaco|SourceCode|FiraCode|CascadiaCode|AnonymousPro|"
    r"LucidaConsole|.*Typewriter|.*Mono(?![a-z])"
    r")"
)


def _monospaced(obj, key: int, cache: dict[int, bool]) -> bool:
    """Whether a text object's font is a monospaced one (_MONO_FONT), read once per object."""
    if key in cache:
        return cache[key]
    font = pdfium_c.FPDFTextObj_GetFont(obj) if key else None
    name = ""
    if font:
        buf = ctypes.create_string_buffer(256)
        if pdfium_c.FPDFFont_GetBaseFontName(font, buf, len(buf)):
            name = buf.value.decode("latin-1")
    cache[key] = bool(_MONO_FONT.match(name))
    return cache[key]


def _decide(counts: _Counts, paint: _PaintOrder, width: int, height: int) -> TextLayer:
    visible = len(counts.visible) + sum(map(len, counts.turned.values()))
    total = max(1, counts.total)
    coverage = paint.picture_share(width, height) if counts.total else 0.0
    upright = (
        len(counts.visible) >= UPRIGHT_MIN_CHARS
        and len(counts.visible) >= UPRIGHT_SHARE * visible
        and paint.picture_box_share(width, height) < UPRIGHT_MAX_PICTURES
    )

    def untrusted(reason: str, detail: str) -> TextLayer:
        return TextLayer((), False, reason, visible, counts.hidden, detail, upright=upright)

    if counts.total == 0:
        return untrusted("no_text", "the page has no text layer")
    if paint.has_picture and counts.invisible / total >= INVISIBLE_SHARE:
        return untrusted("ocr_layer", f"{counts.invisible} of {counts.total} characters invisible or under a picture")
    # a scanned page whose only text is a visible stamp (an archive's download line, a page
    # number) would keep the stamp and lose the scan: pictures that paint the page are read
    # from its pixels, whatever text lies over them (MinerU's classifier sends documents of
    # such pages to OCR too)
    if coverage >= SCAN_COVERAGE:
        return untrusted("scanned", f"pictures paint {coverage:.0%} of the page")
    if counts.unicode_errors / total >= UNICODE_ERROR_SHARE:
        return untrusted("unicode_errors", f"{counts.unicode_errors} of {counts.total} characters without Unicode")
    if counts.garbage / total >= GARBAGE_SHARE:
        return untrusted("garbage", f"{counts.garbage} of {counts.total} characters are not text")
    if counts.rotated / total >= ROTATED_SHARE:
        return untrusted("rotated_text", f"{counts.rotated} of {counts.total} characters not upright")
    downwards = _downwards(counts.visible)
    if downwards / total >= ROTATED_SHARE:
        return untrusted("rotated_text", f"{downwards} of {counts.total} characters run top to bottom")
    columns = _in_columns(counts.visible)
    if columns / total >= VERTICAL_SHARE:
        return untrusted("rotated_text", f"{columns} of {counts.total} characters set in vertical columns")
    if visible < MIN_CHARS:
        return untrusted("too_few_chars", f"{visible} visible characters (fewer than {MIN_CHARS})")
    lines = _lines(counts.visible)
    for turns, chars in counts.turned.items():  # labels turned on an upright page, each read in its direction
        # a turned label is read whole (its characters stand in its own frame, not the page's)
        lines += [replace(ln, box=int_box(_turn(ln.box, 4 - turns)), chars=()) for ln in _lines(chars)]
    # a glyph's line box reaches past the page's edge where its text does (set at the top
    # edge, running off the side): the lines stay within the page
    lines = [replace(ln, box=_within(ln.box, width, height)) for ln in lines]
    return TextLayer(tuple(lines), True, None, visible, counts.hidden, upright=upright)


# A spacing accent -> the combining mark it puts on a letter. TeX (OT1 and T1 fonts without
# the letter) sets an accented letter as two glyphs, the accent over or under the letter, and
# the text layer holds both: "informaci´on" for the "información" a reader sees.
_ABOVE = {
    "\u00a8": "\u0308",  # ¨ diaeresis
    "\u00b4": "\u0301",  # ´ acute
    "`": "\u0300",  # grave (cmr's grave accent glyph)
    "\u02c6": "\u0302",  # ˆ circumflex
    "\u02dc": "\u0303",  # ˜ tilde
    "\u00af": "\u0304",  # ¯ macron
    "\u02c9": "\u0304",  # ˉ modifier macron
    "\u02d8": "\u0306",  # ˘ breve
    "\u02d9": "\u0307",  # ˙ dot above
    "\u02da": "\u030a",  # ˚ ring above
    "\u02dd": "\u030b",  # ˝ double acute
    "\u02c7": "\u030c",  # ˇ caron
}
_BELOW = {"\u00b8": "\u0327", "\u02db": "\u0328"}  # ¸ cedilla, ˛ ogonek
_ACCENTS = _ABOVE.keys() | _BELOW.keys()
_DOTLESS = {"\u0131": "i", "\u0237": "j"}  # TeX puts an accent over a dotless i or j


def _join_accents(chars: list[_Char]) -> list[_Char]:
    """Each spacing accent whose ink sits just over (or, for a cedilla or an ogonek, under) a
    letter's ink, joined to that letter (composed where Unicode has the accented letter: ´ over
    o is ó) and dropped from the text. The letter is found by its place, not by the content
    order: a small-caps running head draws its accents apart from their letters. An accent by
    itself (a backtick in code, a tilde between words) sits beside the letters: kept. Accents
    stacked on one letter (Vietnamese ế: an acute over a circumflex over e) join it from the
    letter outwards, each over the ink of the letter and the accents joined before it."""
    accents = [k for k, ch in enumerate(chars) if ch.glyph is not None and ch.text in _ACCENTS]
    letters = [k for k, ch in enumerate(chars) if ch.glyph is not None and _is_letter(ch.text)]
    if not accents or not letters:
        return chars
    boxes = np.array([chars[k].glyph for k in letters], dtype=float)
    reach = boxes.copy()  # each letter's ink with the accents joined to it so far
    texts: dict[int, str] = {}  # a letter's index -> the letter with its accents
    joined: set[int] = set()
    for k in sorted(accents, key=lambda k: _outwards(chars[k])):
        j = _under(chars[k], boxes, reach)
        if j is not None:
            texts[letters[j]] = _accented(texts.get(letters[j], chars[letters[j]].text), chars[k].text)
            joined.add(k)
            _reach_over(reach[j], chars[k])
    out: list[_Char] = []
    for k, ch in enumerate(chars):
        if k not in joined:
            out.append(replace(ch, text=texts[k]) if k in texts else ch)
        elif out:  # a space or a line end after the accent follows what came before it
            out[-1] = replace(out[-1], space=out[-1].space or ch.space, line_end=out[-1].line_end or ch.line_end)
    return out


def _drop_overprints(chars: list[_Char]) -> list[_Char]:
    """Characters without the copies printed over them: a page drawn twice (a text block or a
    form placed twice in one place, a poor man's bold) shows each character once, and pdfium
    drops a copy only where it follows its original closely in the content order. A copy is the
    same character (a known one: two glyphs without Unicode may differ), of another text object
    (the letters pdfium splits a ligature glyph into share its box), its box on the earlier
    one's (OVERPRINT of their extent in each direction)."""
    kept: list[_Char] = []
    seen: dict[tuple[str, int, int], list[_Char]] = {}  # by the text and the cell of the centre
    for ch in chars:
        x1, y1, x2, y2 = ch.box
        cell = max(1.0, y2 - y1)
        cx, cy = int((x1 + x2) / 2 // cell), int((y1 + y2) / 2 // cell)
        if ch.text != "\ufffd" and _printed_before(ch, seen, cx, cy):  # unknown characters may differ
            if kept:  # a space or a line end after the copy follows what came before it
                kept[-1].space, kept[-1].line_end = kept[-1].space or ch.space, kept[-1].line_end or ch.line_end
            continue
        seen.setdefault((ch.text, cx, cy), []).append(ch)
        kept.append(ch)
    return kept


def _printed_before(ch: _Char, seen: dict[tuple[str, int, int], list[_Char]], cx: int, cy: int) -> bool:
    for i in (-1, 0, 1):
        for j in (-1, 0, 1):
            for other in seen.get((ch.text, cx + i, cy + j), ()):
                if other.obj != ch.obj and _overprints(other.box, ch.box):
                    return True
    return False


def _overprints(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    across = min(a[2], b[2]) - max(a[0], b[0])
    down = min(a[3], b[3]) - max(a[1], b[1])
    return across >= OVERPRINT * max(a[2] - a[0], b[2] - b[0]) and down >= OVERPRINT * max(a[3] - a[1], b[3] - b[1])


def _logical_rtl(chars: list[_Char]) -> list[_Char]:
    """Right-to-left words in reading order. pdfium gives most of them so (their letters run
    leftwards), but some of a Chromium-printed Arabic line come as drawn, left to right ("نص"
    read as "صن"), and a word with marks (Arabic's short vowels) as such runs between its marks
    ("كتبتُ" read as its letters left to right, then the damma; "درسًا" as "سرد", the tanwin,
    "ا"): a word of right-to-left letters whose runs between marks run rightwards is read from
    right to left, each mark after its letter (_marked). A space or a line end after the word
    stays after it."""
    out = list(chars)
    start = 0
    while start < len(out):
        end = start
        if _is_rtl(out[start].text):
            end += 1
            while end < len(out) and _in_rtl_word(out[end]) and not _ends_word(out[end - 1]):
                end += 1
        if end - start >= 2:
            out[start:end] = _turned_round(out[start:end])
        start = max(end, start + 1)
    return _rtl_words_in_order(out)


def _rtl_words_in_order(chars: list[_Char]) -> list[_Char]:
    """Runs of right-to-left words in reading order. Inside a left-to-right line (an Arabic or
    Hebrew phrase quoted in English prose, printed by Chromium) pdfium gives such a run's words
    as drawn, the leftmost first, though each word reads leftwards: "Hebrew: שלום עולם" was read
    "Hebrew: עולם שלום". A run whose words step rightwards along one band is read from its
    rightmost word, the punctuation after its last word (a comma, a full stop) staying at its
    end; a run in reading order steps leftwards and is kept."""
    words = _word_spans(chars)
    out = list(chars)
    start = 0
    while start < len(words):
        end = start + 1
        while end < len(words) and _rtl_word_after(chars, words[end - 1], words[end]):
            end += 1
        if end - start >= 2:
            at = words[start][0]
            out[at : words[end - 1][1]] = _reversed_words([chars[a:b] for a, b in words[start:end]])
        start = end
    return out


def _word_spans(chars: list[_Char]) -> list[tuple[int, int]]:
    """(start, end) of each word of `chars`: a run of characters up to a space or a line end."""
    spans, start = [], 0
    for i, ch in enumerate(chars):
        if _ends_word(ch):
            spans.append((start, i + 1))
            start = i + 1
    if start < len(chars):
        spans.append((start, len(chars)))
    return spans


def _rtl_core(word: list[_Char]) -> int:
    """The length of `word` without the punctuation after its right-to-left letters: 0 unless
    it is such letters (and their marks) and such punctuation."""
    core = _unpunctuated(word)
    return core if core and _is_rtl(word[0].text) and all(map(_in_rtl_word, word[:core])) else 0


def _number_core(word: list[_Char]) -> int:
    """The length of `word` without the punctuation after it: 0 unless it is a number (digits,
    with a point or comma between them)."""
    core = _unpunctuated(word)
    body = "".join(ch.text for ch in word[:core])
    return core if core and body[0].isdigit() and all(c.isdigit() or c in ".,:" for c in body) else 0


def _run_core(word: list[_Char]) -> int:
    """The length of a word of a right-to-left run without its punctuation: the bidi algorithm
    sets a number that stands next to right-to-left words inside their run ("מספר 42 בדף 7"
    drawn as "7 בדף 42 מספר"), so it is read in its place in the run."""
    return _rtl_core(word) or _number_core(word)


def _unpunctuated(word: list[_Char]) -> int:
    core = len(word)
    while core and unicodedata.category(word[core - 1].text[0]).startswith("P"):
        core -= 1
    return core


def _rtl_word_after(chars: list[_Char], prev: tuple[int, int], word: tuple[int, int]) -> bool:
    """Whether `word` goes on a run of right-to-left words as drawn: `prev` all right-to-left
    letters, `word` such letters (punctuation after them ends the run), on one band, `word`
    right of `prev`, no line end between."""
    a, b = chars[prev[0] : prev[1]], chars[word[0] : word[1]]
    if a[-1].line_end or _run_core(a) < len(a) or not _run_core(b) or not (_rtl_core(a) or _rtl_core(b)):
        return False
    b = b[: _run_core(b)]
    top, bottom = min(ch.box[1] for ch in a), max(ch.box[3] for ch in a)
    middle = (min(ch.box[1] for ch in b) + max(ch.box[3] for ch in b)) / 2  # (letters' boxes hug their ink)
    rightwards = min(ch.box[0] for ch in b) >= max(ch.box[2] for ch in a) - 0.1 * (bottom - top)
    return top <= middle <= bottom and rightwards


def _reversed_words(words: list[list[_Char]]) -> list[_Char]:
    """`words` (a run's, as drawn) last first, each ending as the word in its place did (a
    space), the punctuation after the last one kept at the run's end."""
    last = words[-1]
    cores, tail = [*words[:-1], last[: _run_core(last)]], last[_run_core(last) :]
    out: list[_Char] = []
    for word, ended in zip(reversed(cores), [core[-1] for core in cores]):
        out += word[:-1] + [replace(word[-1], space=ended.space, line_end=ended.line_end)]
    return out + tail


def _turned_round(word: list[_Char]) -> list[_Char]:
    """`word` (a right-to-left letter first) read from right to left where it comes as drawn
    (_drawn_order), unless its letters do not stand on one line (a word pdfium runs across a
    line end)."""
    letters = [ch for ch in word if _is_rtl(ch.text)]
    if not _drawn_order(word):
        return word
    middles = [(ch.box[1] + ch.box[3]) / 2 for ch in letters]
    if max(middles) - min(middles) > max(ch.box[3] - ch.box[1] for ch in letters):
        return word
    marks = _marked(word, letters)
    ordered = sorted(letters, key=_centre_x, reverse=True)  # (stable: a ligature's letters share a box)
    turned = [ch for letter in ordered for ch in [letter, *marks[id(letter)]]]
    return [replace(ch, space=at.space, line_end=at.line_end) for ch, at in zip(turned, word)]


def _drawn_order(word: list[_Char]) -> bool:
    """Whether `word` comes as drawn: its runs of letters between marks run rightwards, each
    (a ligature's letters, which pdfium gives parts of the glyph's box left to right, are a
    step rightwards in a word that runs leftwards)."""
    runs: list[list[float]] = [[]]
    for ch in word:
        if _is_rtl(ch.text):
            runs[-1].append(_centre_x(ch))
        elif runs[-1]:
            runs.append([])
    runs = [run for run in runs if len(run) >= 2]
    return bool(runs) and all(run[-1] > run[0] and all(b >= a for a, b in zip(run, run[1:])) for run in runs)


def _marked(word: list[_Char], letters: list[_Char]) -> dict[int, list[_Char]]:
    """The marks of `word` by the letter (its id) each is set on: the letter whose box holds
    the mark's middle, or else the nearest letter right of it (Chromium boxes a mark just left of
    its letter), or else the nearest letter."""
    marks: dict[int, list[_Char]] = {id(letter): [] for letter in letters}
    for ch in word:
        if id(ch) in marks:
            continue
        x = _centre_x(ch)
        holders = [letter for letter in letters if letter.box[0] <= x <= letter.box[2]]
        right = [letter for letter in letters if letter.box[0] > x]
        if holders:
            on = min(holders, key=lambda letter: abs(_centre_x(letter) - x))
        elif right:
            on = min(right, key=lambda letter: letter.box[0])
        else:
            on = min(letters, key=lambda letter: abs(_centre_x(letter) - x))
        marks[id(on)].append(ch)
    return marks


def _centre_x(ch: _Char) -> float:
    return (ch.box[0] + ch.box[2]) / 2


def _in_rtl_word(ch: _Char) -> bool:
    """A right-to-left letter, or a mark set on one (Arabic's short vowels)."""
    return _is_rtl(ch.text) or unicodedata.category(ch.text[0]) == "Mn"


def _ends_word(ch: _Char) -> bool:
    return ch.space or ch.line_end


def _is_letter(text: str) -> bool:
    """A letter an accent may sit on; not a spacing accent Unicode counts as a modifier letter
    (ˆ, ˇ, ˉ), which is itself set over a letter."""
    return text.isalpha() and text not in _ACCENTS


def _outwards(accent: _Char) -> float:
    """A sort key that puts, of the accents stacked on one letter, the one nearest it first: the
    lowest of those over it, the highest of those under it."""
    assert accent.glyph is not None
    return -accent.glyph[3] if accent.text in _ABOVE else accent.glyph[1]


def _reach_over(reach: np.ndarray, accent: _Char) -> None:
    """Grow a letter's reach (x1 y1 x2 y2) by the ink of the accent just joined to it."""
    assert accent.glyph is not None
    if accent.text in _ABOVE:
        reach[1] = min(reach[1], accent.glyph[1])
    else:
        reach[3] = max(reach[3], accent.glyph[3])


def _under(accent: _Char, boxes: np.ndarray, reach: np.ndarray) -> int | None:
    """The row of `boxes` (letters' ink, x1 y1 x2 y2) that `accent` is set on: its ink's centre
    within the letter's width, and its ink over the letter's upper half (under the lower half,
    for a cedilla or an ogonek) at most ACCENT_GAP of the letter's height away from its `reach`
    (its ink with the accents joined to it); the nearest."""
    assert accent.glyph is not None
    ax1, ay1, ax2, ay2 = accent.glyph
    centre = (ax1 + ax2) / 2
    x1, y1, x2, y2 = boxes.T
    height, middle = y2 - y1, (y1 + y2) / 2
    if accent.text in _ABOVE:  # pixel rows grow downwards
        gap = reach[:, 1] - ay2
        near = (ay2 <= middle) & (gap <= ACCENT_GAP * height)
    else:
        gap = ay1 - reach[:, 3]
        near = (ay1 >= middle) & (gap <= ACCENT_GAP * height)
    candidates = np.flatnonzero((x1 <= centre) & (centre <= x2) & near)
    if not len(candidates):
        return None
    return int(candidates[np.argmin(np.abs(gap[candidates]))])


def _accented(letter: str, accent: str) -> str:
    if accent in _ABOVE:
        letter = _DOTLESS.get(letter, letter)
    return unicodedata.normalize("NFC", letter + (_ABOVE.get(accent) or _BELOW[accent]))


def _within(box: tuple[int, int, int, int], width: int, height: int) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = box
    return max(0, x1), max(0, y1), min(width, x2), min(height, y2)


def _downwards(chars: list[_Char]) -> int:
    """Characters that follow the one before them straight down: vertical writing (CJK set in
    columns) has upright glyphs, but lines of one character each read across its columns."""
    return sum(_follows_down(a, b) for a, b in zip(chars, chars[1:]))


def _in_columns(chars: list[_Char]) -> int:
    """Wide (CJK) characters in vertical columns: chains of at least VERTICAL_CHAIN of them, each
    straight under the one before it in the content order. A column of vertical writing among
    horizontal text (a heading, a side column) reads as lines of one character each, which the
    page's reading order scatters; a column of single digits in a table is no such chain."""
    n, chain = 0, 0
    for k, ch in enumerate(chars):
        wide = unicodedata.east_asian_width(ch.text[0]) in ("W", "F")
        chain = chain + 1 if wide and k and chain and _follows_down(chars[k - 1], ch) else int(wide)
        if chain == VERTICAL_CHAIN:
            n += chain
        elif chain > VERTICAL_CHAIN:
            n += 1
    return n


def _follows_down(a: _Char, b: _Char) -> bool:
    h = a.box[3] - a.box[1]
    overlap = min(a.box[2], b.box[2]) - max(a.box[0], b.box[0])
    below = -0.3 * h <= b.box[1] - a.box[3] <= h
    return below and overlap >= 0.5 * min(a.box[2] - a.box[0], b.box[2] - b.box[0])


class _Run:
    """The line being built: its characters and their extent, kept as characters join."""

    def __init__(self, ch: _Char):
        self.chars = [ch]
        self.x1, self.y1, self.x2, self.y2 = ch.box

    @classmethod
    def of(cls, chars: Sequence[_Char]) -> _Run:
        run = cls(chars[0])
        for ch in chars[1:]:
            run.add(ch)
        return run

    @property
    def height(self) -> float:
        return max(1.0, self.y2 - self.y1)

    def add(self, ch: _Char) -> None:
        self.chars.append(ch)
        self.x1, self.y1 = min(self.x1, ch.box[0]), min(self.y1, ch.box[1])
        self.x2, self.y2 = max(self.x2, ch.box[2]), max(self.y2, ch.box[3])


def _lines(chars: list[_Char]) -> list[TextLine]:
    """Characters -> lines: the content order cut where the text leaves its band (a line
    end), then each piece cut at its wide horizontal gaps (columns and cells on one baseline).
    The gaps are found on the characters sorted left to right, not in content order:
    right-to-left text comes in reading order, leftwards, a line mixing it with digits or
    Latin jumps both ways, and the letters of a ligature glyph (pdfium splits "ffi" into
    three) share the glyph's box. Each line keeps the content order of its characters."""
    lines: list[TextLine] = []
    run: _Run | None = None
    for ch in chars:
        if run is not None and _leaves_band(run, ch):
            lines += _split_at_gaps(run)
            run = None
        if run is None:
            run = _Run(ch)
        else:
            run.add(ch)
    if run is not None:
        lines += _split_at_gaps(run)
    return [ln for ln in lines if ln.text]


def _leaves_band(run: _Run, ch: _Char) -> bool:
    """Whether `ch` is on another text line than `run` (its centre outside the run's band)."""
    h = run.height
    centre = (ch.box[1] + ch.box[3]) / 2
    if not run.y1 - 0.2 * h <= centre <= run.y2 + 0.2 * h:
        return True
    # a line end pdfium reports, or a jump back left (lines set so tight that their boxes
    # overlap, which pdfium joins with a space), ends the line unless the text goes on along
    # the line's own band: pdfium also ends a line where a superscript lifts the baseline
    prev = run.chars[-1]
    # a mark goes the way of the letter it is set on (a right-to-left word ends in its vowel)
    base = next((c for c in reversed(run.chars) if unicodedata.category(c.text[0]) != "Mn"), prev)
    if prev.line_end or _jumps_back(base, ch, h):
        return not _same_band(run.chars[0], ch, h)
    return False


def _jumps_back(prev: _Char, ch: _Char, h: float) -> bool:
    """Left-to-right text going back left, past the previous character's start (the letters
    of a ligature glyph, which pdfium splits, share the glyph's box: no jump)."""
    return ch.box[0] < prev.box[0] - 0.5 * h and not (_is_rtl(prev.text) or _is_rtl(ch.text))


def _split_at_gaps(run: _Run) -> list[TextLine]:
    """The run cut at its gaps wider than GAP_SPLIT line heights."""
    groups = _cut_at_gaps(run.chars, run.height, GAP_SPLIT)
    return [_line(run.chars, run)] if len(groups) == 1 else [_line(group) for group in groups]


def _sentence_space(before: list[_Char], after: list[_Char]) -> bool:
    """Whether the gap between two pieces is the space after a sentence: a justified line (a
    caption inside a table's region) stretches it past CELL_GAP. A sentence's words stand on
    one side of it at least: two single words are cells, an abbreviation ("No.", "Qty.", "pcs.")
    beside a capitalised word, as a table's head sets them."""
    last = next((ch.text for ch in reversed(before) if not ch.text.isspace()), "")
    first = next((ch.text for ch in after if not ch.text.isspace()), "")
    if last not in (".", "!", "?") or not first.isupper():
        return False
    return " " in _line(before).text or " " in _line(after).text


def _code_space(before: list[_Char], after: list[_Char]) -> bool:
    """Whether the gap between two pieces is a space of code, between monospaced characters and
    no wider than CODE_SPACE of their width: such a space is as wide as a letter, past CELL_GAP
    ("\\special{headertext= #1}" in a sentence). Two letters' width apart, they stand in two
    cells (a command's name in the margin beside its syntax)."""
    last = next((ch for ch in reversed(before) if not ch.text.isspace()), None)
    first = next((ch for ch in after if not ch.text.isspace()), None)
    if last is None or first is None or not (last.mono and first.mono):
        return False
    width = max(last.box[2] - last.box[0], first.box[2] - first.box[0])
    return first.box[0] - last.box[2] <= CODE_SPACE * width


def _cut_at_gaps(chars: list[_Char], h: float, gap: float) -> list[list[_Char]]:
    """The characters in groups, left to right, cut at the gaps wider than `gap` x h between
    them sorted left to right; each group keeps their content order."""
    order = sorted(range(len(chars)), key=lambda k: chars[k].box[0])
    piece = [0] * len(chars)
    right, n = chars[order[0]].box[2], 0
    for k in order[1:]:
        box = chars[k].box
        if box[0] - right > gap * h:
            n += 1
        piece[k], right = n, max(right, box[2])
    groups: list[list[_Char]] = [[] for _ in range(n + 1)]
    for k, ch in enumerate(chars):
        groups[piece[k]].append(ch)
    return groups


def _same_band(a: _Char, b: _Char, h: float) -> bool:
    return abs(a.box[1] - b.box[1]) <= 0.15 * h and abs(a.box[3] - b.box[3]) <= 0.15 * h


def _is_rtl(text: str) -> bool:
    return unicodedata.bidirectional(text[0]) in ("R", "AL")


def _gap(prev: _Char, ch: _Char) -> float:
    """The blank between two characters in the direction the text runs."""
    leftwards = ch.box[0] + ch.box[2] < prev.box[0] + prev.box[2]
    if leftwards and (_is_rtl(prev.text) or _is_rtl(ch.text)):
        return prev.box[0] - ch.box[2]
    return ch.box[0] - prev.box[2]


def _gap_after(chars: list[_Char], k: int) -> float:
    """The blank after `chars[k]` in the line `chars`. Text right of a right-to-left run (the
    comma after an Arabic phrase in an English line) follows the run's right edge: the run's
    last letter in reading order is its leftmost, and the gap from it spans the whole run."""
    prev, ch = chars[k], chars[k + 1]
    if not _in_rtl_word(prev) or _in_rtl_word(ch) or _centre_x(ch) <= _centre_x(prev):
        return _gap(prev, ch)
    start = k
    while start > 0 and _in_rtl_word(chars[start - 1]) and not chars[start - 1].line_end:
        start -= 1
    return ch.box[0] - max(c.box[2] for c in chars[start : k + 1])


def _monospaced_line(chars: list[_Char]) -> bool:
    """Whether a line is set in a monospaced font: all its letters and digits, but for a line
    number before them in the text font (a listing numbered on the left: minted's and listings'
    `numbers=left` set the number close enough to join the line). A symbol may come from
    another font: LaTeX sets a typewriter line's backslash in its math symbol font (CMSY10's,
    Doxygen's manual) where the font encoding lacks one."""
    first = next((k for k, ch in enumerate(chars) if ch.mono), None)
    if first is None:
        return False
    lead = chars[:first]
    numbered = all(ch.text.isdigit() for ch in lead) or not any(ch.text.isalnum() for ch in lead)
    return numbered and all(ch.mono or not ch.text.isalnum() for ch in chars[first:])


def _line(chars: list[_Char], run: _Run | None = None) -> TextLine:
    run = run or _Run.of(chars)
    h = run.height
    gaps = [_gap_after(chars, k) for k in range(len(chars) - 1)]
    # letter spacing (tracking) widens every gap of the line alike; a word break is a gap
    # wider than the line's usual one
    usual = [g for g, a in zip(gaps, chars) if not a.space]
    tracking = max(0.0, statistics.median(usual)) if usual else 0.0
    mono = _monospaced_line(chars)
    pitch = statistics.median(ch.box[2] - ch.box[0] for ch in chars if ch.mono) if mono else 0.0
    wide_tracking = _wide_tracking(chars, gaps)
    text = chars[0].text
    for prev, ch, gap in zip(chars, chars[1:], gaps):
        spaced = prev.space or gap - tracking > SPACE_GAP * h
        if spaced and _wide(prev) and _wide(ch):
            spaced = _wide_space(prev, ch, gap - wide_tracking, h)
        # monospaced text keeps its runs of spaces (a listing's alignment): one a character's width
        text += " " * max(int(spaced), round(gap / pitch) if pitch > 0 else 0) if mono else " " * spaced
        text += ch.text
    box = (int(math.floor(run.x1)), int(math.floor(run.y1)), int(math.ceil(run.x2)), int(math.ceil(run.y2)))
    return TextLine(box, text.strip() if mono else " ".join(text.split()), mono=mono, chars=tuple(chars))


def _wide(ch: _Char) -> bool:
    """A CJK character: an ideograph, a kana, a full-width punctuation mark or form."""
    return unicodedata.east_asian_width(ch.text[0]) in ("W", "F")


def _wide_tracking(chars: list[_Char], gaps: list[float]) -> float:
    """The usual gap between two wide characters of a line: a justified CJK line stretches every
    such gap alike (jlreq's lines by a third of an em), and pdfium puts a space in each. Under
    WIDE_PAIRS such pairs give no usual gap."""
    wide = [g for a, b, g in zip(chars, chars[1:], gaps) if _wide(a) and _wide(b)]
    return max(0.0, statistics.median(wide)) if len(wide) >= WIDE_PAIRS else 0.0


def _wide_space(prev: _Char, ch: _Char, gap: float, h: float) -> bool:
    """Whether a space stands between two wide characters: CJK text has none but where the
    writer set one (a heading's number and title, words of a list), a gap past the line's usual
    wide gap by WIDE_SPACE line heights. A full-width punctuation mark holds its own blank (its
    glyph fills half its em, and a justified line stretches beside it): none beside it."""
    if _is_punctuation(prev.text) or _is_punctuation(ch.text):
        return False
    return gap > WIDE_SPACE * h


def _is_punctuation(text: str) -> bool:
    return unicodedata.category(text[0]).startswith("P")
