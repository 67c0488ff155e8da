"""The text that a PDF page's annotations draw and no text layer holds, as text lines in the
rendered page's pixels.

pdfium renders a page's annotations into its pixels (and, through the form layer inputs.py
initialises, its form fields), but its text page holds the page's content only. A trusted text
layer (text_layer.py) would read the labels of a filled form and lose what was filled in, so
its lines get one line per line of each such annotation's text, read through pdfium's public
annotation and form API, where the rendered page shows its ink:

* FreeText annotations (what a viewer's typewriter / "Fill & Sign" tool writes onto a form that
  has no fields, a reviewer's text box): their /Contents, the plain text of what they show;
  pdfium draws one without an appearance stream from /Contents and /DA itself;
* form fields: text fields, and combo boxes (the chosen option's label, which the box shows)
  only: a check box's or radio button's value is a state name ("Yes", "Off"), a push button
  has none, and a list box shows all its options, its value only highlighted among them;
  never a password field (it renders as bullets);
* never an empty value, or an annotation that is hidden (annotation flags Hidden or NoView)
  or off the page, and no other kind: a sticky note (Text) draws only its icon (its text shows
  in a viewer's popup, which pdfium does not draw, open or not), and a stamp's words are glyphs
  in its appearance stream, which the API gives no text for (its /Contents is a description,
  not necessarily what it draws);
* only where the annotation's interior (inside its border) has ink in the pixels: text whose
  appearance does not render is not invented.

A line's box is the extent of that ink, so it lies on the text's glyphs like a text-layer
line; a multi-line value's lines take the ink's rows, top to bottom (in the page's own up
direction, so a page with /Rotate stacks them the way it shows them).
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any, Callable, Protocol

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

BORDER_PT = 2.5  # an annotation's interior starts this far inside its rectangle: the 1 pt border, twice when bevelled
_HIDDEN = pdfium_c.FPDF_ANNOT_FLAG_HIDDEN | pdfium_c.FPDF_ANNOT_FLAG_NOVIEW

Box = tuple[int, int, int, int]


class PageToPixels(Protocol):
    """text_layer's page -> pixel mapping (its _DeviceMap)."""

    dy: tuple[float, float]  # the pixel step for one point up the page

    def box(self, left: float, bottom: float, right: float, top: float) -> tuple[float, float, float, float]: ...


def annotation_lines(
    page: pdfium.PdfPage, pixels: np.ndarray, mapper: PageToPixels, contrast: int
) -> list[tuple[Box, str]]:
    """(box, text) for each line of each FreeText annotation and filled text-like field of
    `page` rendered as `pixels` (H x W x 3 or H x W, uint8) that shows ink at least `contrast`
    levels off its paper, in the page's annotation order; no field lines where the document's
    forms were not initialised (no form handle on the page)."""
    form = page.formenv
    lines: list[tuple[Box, str]] = []
    for index in range(pdfium_c.FPDFPage_GetAnnotCount(page)):
        annot = pdfium_c.FPDFPage_GetAnnot(page, index)
        if not annot:
            continue
        try:
            value = _value(form, annot)
            if value:
                lines += _place(value, annot, pixels, mapper, contrast)
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annot)
    return lines


def _value(form, annot) -> str:
    """The text a visible FreeText annotation, text field or combo box shows; "" for anything else."""
    if pdfium_c.FPDFAnnot_GetFlags(annot) & _HIDDEN:
        return ""
    subtype = pdfium_c.FPDFAnnot_GetSubtype(annot)
    if subtype == pdfium_c.FPDF_ANNOT_FREETEXT:
        return _text(functools.partial(pdfium_c.FPDFAnnot_GetStringValue, annot, b"Contents"))
    if subtype != pdfium_c.FPDF_ANNOT_WIDGET or not form:
        return ""
    kind = pdfium_c.FPDFAnnot_GetFormFieldType(form, annot)
    if kind == pdfium_c.FPDF_FORMFIELD_TEXTFIELD:
        if pdfium_c.FPDFAnnot_GetFormFieldFlags(form, annot) & pdfium_c.FPDF_FORMFLAG_TEXT_PASSWORD:
            return ""
    elif kind == pdfium_c.FPDF_FORMFIELD_COMBOBOX:
        for option in range(max(0, pdfium_c.FPDFAnnot_GetOptionCount(form, annot))):
            if pdfium_c.FPDFAnnot_IsOptionSelected(form, annot, option):
                # the option's label, which the box shows: its value may be an export code ("AU")
                return _text(functools.partial(pdfium_c.FPDFAnnot_GetOptionLabel, form, annot, option))
    else:
        return ""
    return _text(functools.partial(pdfium_c.FPDFAnnot_GetFormFieldValue, form, annot))


def _text(get: Callable[[Any, int], int]) -> str:
    """A string from a pdfium call that fills a buffer with UTF-16LE and its NUL and returns
    the bytes it needs (calling it with no buffer first)."""
    size = get(None, 0)
    if size <= 2:
        return ""
    buffer = ctypes.create_string_buffer(size)
    get(ctypes.cast(buffer, ctypes.POINTER(pdfium_c.FPDF_WCHAR)), size)
    return buffer.raw[: size - 2].decode("utf-16-le", errors="replace")


def _place(value: str, annot, pixels: np.ndarray, mapper: PageToPixels, contrast: int) -> list[tuple[Box, str]]:
    rect = pdfium_c.FS_RECTF()
    if not pdfium_c.FPDFAnnot_GetRect(annot, rect):
        return []
    left, right = sorted((rect.left, rect.right))
    bottom, top = sorted((rect.bottom, rect.top))
    inset_x = min(BORDER_PT, (right - left) / 4)
    inset_y = min(BORDER_PT, (top - bottom) / 4)
    x1, y1, x2, y2 = mapper.box(left + inset_x, bottom + inset_y, right - inset_x, top - inset_y)
    height, width = pixels.shape[:2]
    cols = slice(max(0, math.floor(x1)), min(width, math.ceil(x2)))
    rows = slice(max(0, math.floor(y1)), min(height, math.ceil(y2)))
    if cols.start >= cols.stop or rows.start >= rows.stop:
        return []  # off the page
    ink = _ink(pixels[rows, cols], contrast)
    if not ink.any():
        return []
    across = abs(mapper.dy[1]) < abs(mapper.dy[0])  # the page is turned a quarter: its lines stack across
    profile: np.ndarray = np.asarray(ink.any(axis=0 if across else 1))
    texts = [" ".join(text.split()) for text in value.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    if (mapper.dy[0] if across else mapper.dy[1]) > 0:  # the page's up runs right or down the pixels
        bands = _bands(profile, texts[::-1])[::-1]  # its first line is the last in pixel order
    else:
        bands = _bands(profile, texts)
    lines = []
    for text, (a, b) in zip(texts, bands):
        if not text:
            continue
        band = ink[:, a:b] if across else ink[a:b, :]
        other = np.flatnonzero(band.any(axis=1 if across else 0))
        if other.size == 0:
            continue
        c, d = int(other[0]), int(other[-1]) + 1
        x_lo, x_hi, y_lo, y_hi = (a, b, c, d) if across else (c, d, a, b)
        lines.append(((cols.start + x_lo, rows.start + y_lo, cols.start + x_hi, rows.start + y_hi), text))
    return lines


def _ink(region: np.ndarray, contrast: int) -> np.ndarray:
    """The pixels of `region` at least `contrast` levels (in any channel) off its paper, which
    most of an annotation's interior is: its median."""
    values = region.reshape(region.shape[0], region.shape[1], -1).astype(np.int16)
    paper = np.median(values.reshape(-1, values.shape[2]), axis=0)
    result: np.ndarray = (np.abs(values - paper) >= contrast).any(axis=2)
    return result


def _bands(profile: np.ndarray, texts: list[str]) -> list[tuple[int, int]]:
    """A slice along `profile` (whether each pixel row, or column, has ink) for each of the
    value's lines, in order: the runs of ink where there are as many as lines with text (a
    blank line takes none), else equal shares of the ink's extent from the first line with
    text to the last (a value wrapped or clipped in its rectangle)."""
    inked = np.flatnonzero(profile)
    lo, hi = int(inked[0]), int(inked[-1]) + 1
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for k in range(lo, hi + 1):
        on = k < hi and bool(profile[k])
        if on and start is None:
            start = k
        elif not on and start is not None:
            runs.append((start, k))
            start = None
    filled = [i for i, text in enumerate(texts) if text]
    if not filled:
        return []
    if len(runs) == len(filled):
        band = dict(zip(filled, runs))
        return [band.get(i, (0, 0)) for i in range(len(texts))]
    first, step = filled[0], (hi - lo) / (filled[-1] - filled[0] + 1)
    return [(lo + round((i - first) * step), lo + round((i - first + 1) * step)) for i in range(len(texts))]
