"""A PDF page's own text (its text layer): lines in page pixels, and whether to trust them.

Born-digital PDFs carry their text; reading it is exact and far cheaper than OCR. But a text
layer can lie, so every page gets a trust decision first, with the reason when the answer is
no (then the engines read pixels, as for an image):

* ``no_text`` / ``too_few_chars``: fewer than MIN_CHARS visible characters (a scan, a cover);
* ``unicode_errors``: at least UNICODE_ERROR_SHARE of the characters have no Unicode mapping
  (pdfium reports U+FFFD or a mapping error: a font whose codes are glyph numbers, not text);
* ``garbage``: at least GARBAGE_SHARE are code points no text holds (private use, control
  characters, unassigned): a broken ToUnicode map;
* ``ocr_layer``: most characters are invisible (render mode 3 or 7) over a picture, i.e. an
  old OCR layer over a scan, whose text is only as good as that OCR was;
* ``rotated_text``: most characters do not run left to right on the rendered page.

Characters a reader cannot see are never page content, trusted layer or not: invisible
render modes, boxes outside the page, text under MIN_HEIGHT_PX tall, and characters with no
ink under them in the rendered page (white on white, clipped away, covered by a picture).
The MinerU 4 standard tier's classifier uses the same signals (its thresholds: 50 characters
per page, 4 % mapping errors, 3 % garbage).

Lines: characters in the page's content order, broken at line ends, at jumps back or down,
and at horizontal gaps wider than GAP_SPLIT line heights (table cells, columns on one
baseline), so that each line lies inside one layout region. Boxes are pixels of the page as
rendered (pdfium's own page-to-device mapping, so the page's /Rotate is applied).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

MIN_CHARS = 50
UNICODE_ERROR_SHARE = 0.04
GARBAGE_SHARE = 0.03
INVISIBLE_SHARE = 0.5  # of the characters invisible, over a picture: an OCR layer
ROTATED_SHARE = 0.5
MIN_HEIGHT_PX = 4.0  # a line box (ascent to descent) this small has glyphs about 2 px tall
INK_CONTRAST = 24  # grey levels between the lightest and darkest pixel of a visible glyph
GAP_SPLIT = 1.2  # a horizontal gap wider than this many line heights starts a new line
SPACE_GAP = 0.25  # a gap wider than this many line heights without a space is a word break
UPRIGHT_DEGREES = 10.0

_INVISIBLE_MODES = (3, 7)  # PDF text render modes that paint nothing
SETTINGS = {
    "min_chars": MIN_CHARS,
    "unicode_error_share": UNICODE_ERROR_SHARE,
    "garbage_share": GARBAGE_SHARE,
    "invisible_share": INVISIBLE_SHARE,
    "rotated_share": ROTATED_SHARE,
    "min_height_px": MIN_HEIGHT_PX,
    "ink_contrast": INK_CONTRAST,
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
    line_end: bool = False  # a line break pdfium reports after it
    space: bool = False


@dataclass
class _Counts:
    total: int = 0  # real (not generated), non-space characters
    unicode_errors: int = 0
    garbage: int = 0
    invisible: int = 0
    rotated: int = 0
    hidden: int = 0  # invisible + outside + tiny + no ink
    visible: list[_Char] = field(default_factory=list)


def read_text_layer(page: pdfium.PdfPage, grey: np.ndarray) -> TextLayer:
    """The text layer of `page` rendered as `grey` (H x W uint8, the page's rendered pixels)."""
    height, width = grey.shape[:2]
    textpage = page.get_textpage()
    try:
        counts = _read_chars(page, textpage, grey, width, height)
    finally:
        textpage.close()
    return _decide(counts, _has_picture(page))


def _read_chars(page, textpage, grey: np.ndarray, width: int, height: int) -> _Counts:
    counts = _Counts()
    mapper = _DeviceMap(page, width, height)
    for i in range(textpage.count_chars()):
        code = pdfium_c.FPDFText_GetUnicode(textpage, i)
        ch = chr(code) if 0 < code < 0x110000 else "\ufffd"
        if ch in "\r\n":
            if counts.visible:
                counts.visible[-1].line_end = True
            continue
        generated = bool(pdfium_c.FPDFText_IsGenerated(textpage, i))
        if ch.isspace():
            if counts.visible:
                counts.visible[-1].space = True
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
        if obj and pdfium_c.FPDFTextObj_GetTextRenderMode(obj) in _INVISIBLE_MODES:
            counts.invisible += 1
            visible = False
        box = mapper.box(textpage.get_charbox(i, loose=True))
        if visible and not _upright(textpage, i, mapper):
            counts.rotated += 1
            visible = False
        if visible and not _seen(box, grey, width, height):
            visible = False
        if not visible:
            counts.hidden += 1
            continue
        counts.visible.append(_Char(ch, box))
    return counts


class _DeviceMap:
    """pdfium's page -> bitmap pixel mapping for a render of the whole page at this size."""

    def __init__(self, page, width: int, height: int):
        self.page, self.width, self.height = page, width, height
        self._x, self._y = ctypes.c_int(), ctypes.c_int()

    def point(self, x: float, y: float) -> tuple[int, int]:
        pdfium_c.FPDF_PageToDevice(self.page, 0, 0, self.width, self.height, 0, x, y, self._x, self._y)
        return self._x.value, self._y.value

    def box(self, pdf_box: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
        left, bottom, right, top = pdf_box
        corners = [self.point(x, y) for x in (left, right) for y in (bottom, top)]
        xs, ys = [c[0] for c in corners], [c[1] for c in corners]
        return float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys))


def _upright(textpage, i: int, mapper: _DeviceMap) -> bool:
    """Whether the character runs left to right on the rendered page (its text matrix's x
    axis, through the page's rotation, is within UPRIGHT_DEGREES of the page's x axis)."""
    m = pdfium_c.FS_MATRIX()
    if not pdfium_c.FPDFText_GetMatrix(textpage, i, m):
        return True
    norm = math.hypot(m.a, m.b)
    if norm == 0:
        return True
    x0, y0 = mapper.point(m.e, m.f)
    x1, y1 = mapper.point(m.e + 100 * m.a / norm, m.f + 100 * m.b / norm)
    angle = math.degrees(math.atan2(y1 - y0, x1 - x0))
    return abs(angle) <= UPRIGHT_DEGREES


def _seen(box, grey: np.ndarray, width: int, height: int) -> bool:
    """A reader sees the character: on the page, tall enough, with ink under it."""
    x1, y1, x2, y2 = box
    if x2 <= 0 or y2 <= 0 or x1 >= width or y1 >= height:
        return False
    if y2 - y1 < MIN_HEIGHT_PX:
        return False
    region = grey[
        max(0, int(y1)) : min(height, int(math.ceil(y2)) + 1), max(0, int(x1)) : min(width, int(math.ceil(x2)) + 1)
    ]
    if region.size == 0:
        return False
    return int(region.max()) - int(region.min()) >= INK_CONTRAST


def _is_garbage(ch: str) -> bool:
    """A code point no real text holds: private use, unassigned, surrogates, controls."""
    category = unicodedata.category(ch)
    return category in ("Co", "Cn", "Cs") or (category == "Cc" and ch != "\t")


def _has_picture(page) -> bool:
    return any(obj.type == pdfium_c.FPDF_PAGEOBJ_IMAGE for obj in page.get_objects(max_depth=2))


def _decide(counts: _Counts, picture: bool) -> TextLayer:
    visible = len(counts.visible)
    total = max(1, counts.total)

    def untrusted(reason: str, detail: str) -> TextLayer:
        return TextLayer((), False, reason, visible, counts.hidden, detail)

    if counts.total == 0:
        return untrusted("no_text", "the page has no text layer")
    if picture and counts.invisible / total >= INVISIBLE_SHARE:
        return untrusted("ocr_layer", f"{counts.invisible} of {counts.total} characters invisible over a picture")
    if counts.unicode_errors / total >= UNICODE_ERROR_SHARE:
        return untrusted("unicode_errors", f"{counts.unicode_errors} of {counts.total} characters without Unicode")
    if counts.garbage / total >= GARBAGE_SHARE:
        return untrusted("garbage", f"{counts.garbage} of {counts.total} characters are not text")
    if counts.rotated / total >= ROTATED_SHARE:
        return untrusted("rotated_text", f"{counts.rotated} of {counts.total} characters not upright")
    if visible < MIN_CHARS:
        return untrusted("too_few_chars", f"{visible} visible characters (fewer than {MIN_CHARS})")
    return TextLayer(tuple(_lines(counts.visible)), True, None, visible, counts.hidden)


def _lines(chars: list[_Char]) -> list[TextLine]:
    lines: list[TextLine] = []
    current: list[_Char] = []
    for ch in chars:
        if current and _breaks(current, ch):
            lines.append(_line(current))
            current = []
        current.append(ch)
        if ch.line_end:
            lines.append(_line(current))
            current = []
    if current:
        lines.append(_line(current))
    return [ln for ln in lines if ln.text]


def _breaks(current: list[_Char], ch: _Char) -> bool:
    """Whether `ch` starts a new line after `current` (same line: same band, moving right)."""
    y1 = min(c.box[1] for c in current)
    y2 = max(c.box[3] for c in current)
    h = max(1.0, y2 - y1)
    prev = current[-1]
    centre = (ch.box[1] + ch.box[3]) / 2
    if not y1 - 0.2 * h <= centre <= y2 + 0.2 * h:
        return True
    gap = ch.box[0] - prev.box[2]
    return gap < -0.5 * h or gap > GAP_SPLIT * h


def _line(chars: list[_Char]) -> TextLine:
    y1 = min(c.box[1] for c in chars)
    y2 = max(c.box[3] for c in chars)
    h = max(1.0, y2 - y1)
    text = ""
    for i, ch in enumerate(chars):
        if i:
            prev = chars[i - 1]
            if prev.space or ch.box[0] - prev.box[2] > SPACE_GAP * h:
                text += " "
        text += ch.text
    box = (
        int(math.floor(min(c.box[0] for c in chars))),
        int(math.floor(y1)),
        int(math.ceil(max(c.box[2] for c in chars))),
        int(math.ceil(y2)),
    )
    return TextLine(box, " ".join(text.split()))
