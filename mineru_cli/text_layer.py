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
* ``rotated_text``: most characters do not run left to right on the rendered page (sideways,
  upside down, or set in vertical columns).

Characters a reader cannot see are never page content, trusted layer or not: invisible
render modes and fully transparent text, characters an opaque picture is painted over, boxes
outside the page, text under MIN_HEIGHT_PX tall, and characters with no ink under them in the
rendered page (white on white, clipped away). Text turned a quarter or half turn is read in
its own direction; text at other slants is left out.
The MinerU 4 standard tier's classifier uses the same signals (its thresholds: 50 characters
per page, 4 % mapping errors, 3 % garbage).

Lines: characters in the page's content order, broken where the text leaves its band (the
next line) and at horizontal gaps wider than GAP_SPLIT line heights (table cells, columns on
one baseline), so that each line lies inside one layout region; right-to-left text, ligatures
split into letters and superscripts stay in their line. Boxes are pixels of the page as
rendered (pdfium's own page-to-device mapping, so the page's /Rotate is applied).
"""

from __future__ import annotations

import bisect
import ctypes
import hashlib
import json
import math
import statistics
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from .form_fields import field_lines

MIN_CHARS = 50
UNICODE_ERROR_SHARE = 0.04
GARBAGE_SHARE = 0.03
INVISIBLE_SHARE = 0.5  # of the characters invisible, over a picture: an OCR layer
ROTATED_SHARE = 0.5
MIN_HEIGHT_PX = 4.0  # a line box (ascent to descent) this small has glyphs about 2 px tall
INK_CONTRAST = 24  # grey levels between the lightest and darkest pixel of a visible glyph
FAINT_INK = 8  # ... or this many, where the text's own colour is INK_CONTRAST from the paper
GAP_SPLIT = 1.2  # a horizontal gap wider than this many line heights starts a new line
SPACE_GAP = 0.25  # a gap wider than this many line heights without a space is a word break
UPRIGHT_DEGREES = 10.0

_INVISIBLE_MODES = (3, 7)  # PDF text render modes that paint nothing
_PDFIUM_HYPHEN = 0x02  # what pdfium reports for a hyphen at the end of a line
SETTINGS = {
    "min_chars": MIN_CHARS,
    "unicode_error_share": UNICODE_ERROR_SHARE,
    "garbage_share": GARBAGE_SHARE,
    "invisible_share": INVISIBLE_SHARE,
    "rotated_share": ROTATED_SHARE,
    "min_height_px": MIN_HEIGHT_PX,
    "ink_contrast": INK_CONTRAST,
    "faint_ink": FAINT_INK,
    "gap_split": GAP_SPLIT,
    "space_gap": SPACE_GAP,
}


@dataclass(frozen=True)
class TextLine:
    box: tuple[int, int, int, int]  # page pixels (x1, y1, x2, y2)
    text: str


@dataclass(frozen=True)
class TextLayer:
    """A page's text layer as read, and the trust decision. `lines` hold visible text only."""

    lines: tuple[TextLine, ...]
    trusted: bool
    reason: str | None  # why not trusted (None when trusted)
    chars: int  # visible characters (spaces and line ends not counted)
    hidden: int  # characters never emitted: invisible, outside the page, too small, no ink
    detail: str = ""  # the figure behind the reason, for the record

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
        blob = json.dumps([[list(ln.box), ln.text] for ln in self.lines], ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def scaled(self, factor: float) -> TextLayer:
        """The same layer for the page downscaled by `factor` (inputs' area cap)."""
        if factor == 1.0:
            return self

        def scale(box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
            x1, y1, x2, y2 = (int(round(v * factor)) for v in box)
            return x1, y1, x2, y2

        lines = tuple(TextLine(scale(ln.box), ln.text) for ln in self.lines)
        return TextLayer(lines, self.trusted, self.reason, self.chars, self.hidden, self.detail)


@dataclass
class _Char:
    text: str
    box: tuple[float, float, float, float]  # device pixels
    line_end: bool = False  # pdfium reports a line break after it
    space: bool = False


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


def read_text_layer(page: pdfium.PdfPage, pixels: np.ndarray) -> TextLayer:
    """The text layer of `page` rendered as `pixels` (H x W x 3 RGB or H x W grey, uint8)."""
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
    layer = _decide(counts, paint.has_picture)
    if layer.trusted:  # the values filled into its form fields are in no text layer (form_fields.py)
        filled = tuple(TextLine(box, text) for box, text in field_lines(page, pixels, mapper, INK_CONTRAST))
        layer = replace(layer, lines=layer.lines + filled)
    return layer


def _read_chars(textpage, grey: np.ndarray, rgb: np.ndarray | None, mapper: _DeviceMap, paint: _PaintOrder) -> _Counts:
    counts = _Counts()
    rect = pdfium_c.FS_RECTF()
    matrix = pdfium_c.FS_MATRIX()
    last: _Char | None = None  # the last character kept: line ends and spaces mark it
    painted: dict[int, bool] = {}  # text object address -> whether it paints nothing
    turned: dict[int, int | None] = {}  # text object address -> its quarter turns
    for i in range(textpage.count_chars()):
        code = pdfium_c.FPDFText_GetUnicode(textpage, i)
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
        if visible and not _seen(box, grey, rgb, obj):
            visible = False
        if not visible:
            counts.hidden += 1
            continue
        last = _Char(ch, _turn(box, turns)) if turns else _Char(ch, box)
        (counts.turned[turns] if turns else counts.visible).append(last)
    return counts


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


def _seen(box, grey: np.ndarray, rgb: np.ndarray | None, text_obj) -> bool:
    """A reader sees the character (of pdfium text object `text_obj`): on the page, tall
    enough, with ink under it (in grey, or in colour where `rgb` is given)."""
    height, width = grey.shape[:2]
    x1, y1, x2, y2 = box
    if x2 <= 0 or y2 <= 0 or x1 >= width or y1 >= height:
        return False
    if y2 - y1 < MIN_HEIGHT_PX:
        return False
    rows = slice(max(0, int(y1)), min(height, int(math.ceil(y2)) + 1))
    columns = slice(max(0, int(x1)), min(width, int(math.ceil(x2)) + 1))
    region = grey[rows, columns]
    if region.size == 0:
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
    paint = _paint(text_obj)
    return paint is not None and max(abs(lightest - paint), abs(darkest - paint)) >= INK_CONTRAST


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


def _paint(obj) -> int | None:
    """A text object's fill colour as the grey level Pillow's convert("L") would give it."""
    colour = _colour(obj, pdfium_c.FPDFPageObj_GetFillColor) if obj else None
    return None if colour is None else (colour[0] * 299 + colour[1] * 587 + colour[2] * 114) // 1000


def _colour(obj, get_colour) -> tuple[int, int, int, int] | None:
    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    return (r.value, g.value, b.value, a.value) if get_colour(obj, r, g, b, a) else None


def _is_garbage(ch: str) -> bool:
    """A code point no real text holds: private use, unassigned, surrogates, controls."""
    category = unicodedata.category(ch)
    return category in ("Co", "Cn", "Cs") or (category == "Cc" and ch != "\t")


class _PaintOrder:
    """The page's pictures in paint order: a character a picture is painted over (an opaque
    one, not clipped away there) is hidden however much ink the picture has. Its text is
    what the page's pixels do not show: the text under a scan in an "image over text" PDF,
    or a passage pasted over."""

    MAX_DEPTH = 8  # form XObjects inside form XObjects

    def __init__(self, page, mapper: _DeviceMap):
        self.has_picture = False
        self.pictures: list[tuple[tuple[int, ...], tuple[float, float, float, float]]] = []
        self.text_at: dict[int, tuple[int, ...]] = {}  # text object address -> its place in the order
        self._mapper = mapper
        self._ats: list[tuple[int, ...]] = []
        self._later: list[tuple[float, float, float, float]] | None = None
        self._walk(page, pdfium_c.FPDFPage_GetObject, pdfium_c.FPDFPage_CountObjects(page), ())

    def _walk(self, parent, get, count: int, where: tuple[int, ...]) -> None:
        for k in range(count):
            obj = get(parent, k)
            kind = pdfium_c.FPDFPageObj_GetType(obj)
            at = (*where, k)
            if kind == pdfium_c.FPDF_PAGEOBJ_TEXT:
                self.text_at[_address(obj)] = at
            elif kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
                self.has_picture = True
                box = None if pdfium_c.FPDFPageObj_HasTransparency(obj) else self._painted_box(obj)
                if box is not None:
                    self.pictures.append((at, box))
            elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and len(at) < self.MAX_DEPTH:
                self._walk(obj, pdfium_c.FPDFFormObj_GetObject, pdfium_c.FPDFFormObj_CountObjects(obj), at)

    def _painted_box(self, obj) -> tuple[float, float, float, float] | None:
        """Where an image paints, in device pixels: its bounds within its clip paths' bounds."""
        left, bottom, right, top = (ctypes.c_float() for _ in range(4))
        if not pdfium_c.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
            return None
        box = [left.value, bottom.value, right.value, top.value]
        clip = pdfium_c.FPDFPageObj_GetClipPath(obj)
        for path in range(pdfium_c.FPDFClipPath_CountPaths(clip) if clip else 0):
            xs, ys = [], []
            x, y = ctypes.c_float(), ctypes.c_float()
            for seg in range(pdfium_c.FPDFClipPath_CountPathSegments(clip, path)):
                segment = pdfium_c.FPDFClipPath_GetPathSegment(clip, path, seg)
                if segment and pdfium_c.FPDFPathSegment_GetPoint(segment, x, y):
                    xs.append(x.value)
                    ys.append(y.value)
            if xs:
                box = [max(box[0], min(xs)), max(box[1], min(ys)), min(box[2], max(xs)), min(box[3], max(ys))]
        if box[0] >= box[2] or box[1] >= box[3]:
            return None
        return self._mapper.box(*box)

    def covers(self, text_key: int, box: tuple[float, float, float, float]) -> bool:
        """Whether a picture painted after the text object at address `text_key` covers the
        character box's centre."""
        if not self.pictures:
            return False
        at = self.text_at.get(text_key)
        if at is None:
            return False
        if self._later is None:  # the pictures are in paint order: for each, the extent of it and all later ones
            self._ats = [p_at for p_at, _ in self.pictures]
            self._later = []
            extent = (math.inf, math.inf, -math.inf, -math.inf)
            for _, p in reversed(self.pictures):
                extent = (min(extent[0], p[0]), min(extent[1], p[1]), max(extent[2], p[2]), max(extent[3], p[3]))
                self._later.append(extent)
            self._later.reverse()
        first = bisect.bisect_right(self._ats, at)  # the first picture painted after the text
        if first == len(self.pictures):
            return False
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        e = self._later[first]
        if not (e[0] <= cx <= e[2] and e[1] <= cy <= e[3]):
            return False
        return any(p[0] <= cx <= p[2] and p[1] <= cy <= p[3] for _, p in self.pictures[first:])


def _address(obj) -> int:
    return ctypes.cast(obj, ctypes.c_void_p).value or 0


def _decide(counts: _Counts, picture: bool) -> TextLayer:
    visible = len(counts.visible) + sum(map(len, counts.turned.values()))
    total = max(1, counts.total)

    def untrusted(reason: str, detail: str) -> TextLayer:
        return TextLayer((), False, reason, visible, counts.hidden, detail)

    if counts.total == 0:
        return untrusted("no_text", "the page has no text layer")
    if picture and counts.invisible / total >= INVISIBLE_SHARE:
        return untrusted("ocr_layer", f"{counts.invisible} of {counts.total} characters invisible or under a picture")
    if counts.unicode_errors / total >= UNICODE_ERROR_SHARE:
        return untrusted("unicode_errors", f"{counts.unicode_errors} of {counts.total} characters without Unicode")
    if counts.garbage / total >= GARBAGE_SHARE:
        return untrusted("garbage", f"{counts.garbage} of {counts.total} characters are not text")
    if counts.rotated / total >= ROTATED_SHARE:
        return untrusted("rotated_text", f"{counts.rotated} of {counts.total} characters not upright")
    downwards = _downwards(counts.visible)
    if downwards / total >= ROTATED_SHARE:
        return untrusted("rotated_text", f"{downwards} of {counts.total} characters run top to bottom")
    if visible < MIN_CHARS:
        return untrusted("too_few_chars", f"{visible} visible characters (fewer than {MIN_CHARS})")
    lines = _lines(counts.visible)
    for turns, chars in counts.turned.items():  # labels turned on an upright page, each read in its direction
        lines += [TextLine(_int_box(_turn(ln.box, 4 - turns)), ln.text) for ln in _lines(chars)]
    return TextLayer(tuple(lines), True, None, visible, counts.hidden)


def _int_box(box: tuple[float, float, float, float]) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = box
    return int(x1), int(y1), int(x2), int(y2)


def _downwards(chars: list[_Char]) -> int:
    """Characters that follow the one before them straight down: vertical writing (CJK set in
    columns) has upright glyphs, but lines of one character each read across its columns."""
    n = 0
    for a, b in zip(chars, chars[1:]):
        h = a.box[3] - a.box[1]
        overlap = min(a.box[2], b.box[2]) - max(a.box[0], b.box[0])
        below = -0.3 * h <= b.box[1] - a.box[3] <= h
        if below and overlap >= 0.5 * min(a.box[2] - a.box[0], b.box[2] - b.box[0]):
            n += 1
    return n


class _Run:
    """The line being built: its characters and their extent, kept as characters join."""

    def __init__(self, ch: _Char):
        self.chars = [ch]
        self.x1, self.y1, self.x2, self.y2 = ch.box

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
    if prev.line_end or _jumps_back(prev, ch, h):
        return not _same_band(run.chars[0], ch, h)
    return False


def _jumps_back(prev: _Char, ch: _Char, h: float) -> bool:
    """Left-to-right text going back left, past the previous character's start (the letters
    of a ligature glyph, which pdfium splits, share the glyph's box: no jump)."""
    return ch.box[0] < prev.box[0] - 0.5 * h and not (_is_rtl(prev.text) or _is_rtl(ch.text))


def _split_at_gaps(run: _Run) -> list[TextLine]:
    h = run.height
    order = sorted(range(len(run.chars)), key=lambda k: run.chars[k].box[0])
    piece = [0] * len(run.chars)
    right, n = run.chars[order[0]].box[2], 0
    for k in order[1:]:
        box = run.chars[k].box
        if box[0] - right > GAP_SPLIT * h:
            n += 1
        piece[k], right = n, max(right, box[2])
    if n == 0:
        return [_line(run.chars, run)]
    groups: list[list[_Char]] = [[] for _ in range(n + 1)]
    for k, ch in enumerate(run.chars):
        groups[piece[k]].append(ch)
    return [_line(group) for group in groups]


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


def _line(chars: list[_Char], run: _Run | None = None) -> TextLine:
    if run is None:
        run = _Run(chars[0])
        for ch in chars[1:]:
            run.add(ch)
    h = run.height
    gaps = [_gap(a, b) for a, b in zip(chars, chars[1:])]
    # letter spacing (tracking) widens every gap of the line alike; a word break is a gap
    # wider than the line's usual one
    usual = [g for g, a in zip(gaps, chars) if not a.space]
    tracking = max(0.0, statistics.median(usual)) if usual else 0.0
    text = chars[0].text
    for prev, ch, gap in zip(chars, chars[1:], gaps):
        if prev.space or gap - tracking > SPACE_GAP * h:
            text += " "
        text += ch.text
    box = (int(math.floor(run.x1)), int(math.floor(run.y1)), int(math.ceil(run.x2)), int(math.ceil(run.y2)))
    return TextLine(box, " ".join(text.split()))
