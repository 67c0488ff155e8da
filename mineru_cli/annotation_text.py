"""The text that a PDF page's annotations draw and no text layer holds, as text lines in the
rendered page's pixels.

pdfium renders a page's annotations into its pixels (and, through the form layer inputs.py
initialises, its form fields), but its text page holds the page's content only. A trusted text
layer (text_layer.py) would read the labels of a filled form and lose what was filled in, so
its lines get the text those annotations' appearances show, where the rendered page shows its
ink. Which annotations:

* FreeText annotations (what a viewer's typewriter / "Fill & Sign" tool writes onto a form that
  has no fields, a reviewer's text box) with text (/Contents); pdfium draws one without an
  appearance stream from /Contents and /DA itself;
* form fields: text fields, and combo boxes (which show the chosen option's label) with a value
  only: a check box's or radio button's value is a state name ("Yes", "Off"), a push button
  has none, and a list box shows all its options, its value only highlighted among them;
  never a password field (it renders as bullets);
* never an annotation that is hidden (annotation flags Hidden or NoView) or off the page, and
  no other kind: a sticky note (Text) draws only its icon (its text shows in a viewer's popup,
  which pdfium does not draw, open or not), and a stamp's /Contents is a description, not
  necessarily what it draws (its drawn words are left to the pixels).

What they show is read from their appearance streams, not from their values: a one-page copy
of the page in a document of its own (the caller's document is never changed), with the other
annotations removed, is flattened by pdfium (FPDFPage_Flatten: each appearance becomes page
content) and its text page read. So a formatted field gives what its appearance shows ("$1,234.50",
not its value "1234.5"), a value too long for its field only the part inside the field, and a
FreeText what pdfium drew of it. A character counts only where its glyph lies inside its
annotation's rectangle, the rendered page has ink under it (inside the annotation's border),
and the page's own content does not already hold it there (a value printed into the page as
well); its characters become lines with text_layer's own line builder, in their own direction
(a field turned with /MK /R on a turned page stacks its lines as the page shows them), a
line's box the characters' line boxes, inside the annotation. Lines come in the page's
annotation order.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable, Protocol

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

BORDER_PT = 2.5  # an annotation's interior starts this far inside its rectangle: the 1 pt border, twice when bevelled
INSIDE_PT = 0.5  # how far a glyph may reach past its annotation's rectangle and still count as inside
_HIDDEN = pdfium_c.FPDF_ANNOT_FLAG_HIDDEN | pdfium_c.FPDF_ANNOT_FLAG_NOVIEW
_INVISIBLE_MODES = (3, 7)  # text render modes that paint nothing

Box = tuple[int, int, int, int]
_Rect = tuple[float, float, float, float]  # left, bottom, right, top in page points


class PageToPixels(Protocol):
    """text_layer's page -> pixel mapping (its _DeviceMap)."""

    def box(self, left: float, bottom: float, right: float, top: float) -> tuple[float, float, float, float]: ...

    def quarter_turns(self, m: Any) -> int | None: ...


def annotation_lines(
    page: pdfium.PdfPage, pixels: np.ndarray, mapper: PageToPixels, contrast: int, index: int | None = None
) -> list[tuple[Box, str]]:
    """(box, text) for each line of what each FreeText annotation and filled text-like field
    of `page` (page `index` of its document; None: its document's only page, and nothing for
    a page of a longer one) shows in its appearance, where `pixels`, the page rendered
    (H x W x 3 or H x W, uint8), show it as ink at least `contrast` levels off the
    annotation's paper; in the page's annotation order. No field lines where the document's
    forms were not initialised (no form handle on the page)."""
    shown = _shown(page)  # the cheap check: most pages have none, and are not copied
    if not shown:
        return []
    if index is None:
        if len(page.pdf) != 1:
            return []
        index = 0
    chars = _appearance_chars(page.pdf, index, {k for k, _ in shown})
    lines: list[tuple[Box, str]] = []
    for _, rect in shown:
        lines += _place(rect, chars, pixels, mapper, contrast)
    return lines


def _shown(page: pdfium.PdfPage) -> list[tuple[int, _Rect]]:
    """(index, rectangle) of each annotation of `page` whose appearance is read."""
    form = page.formenv
    shown = []
    rect = pdfium_c.FS_RECTF()
    for index in range(pdfium_c.FPDFPage_GetAnnotCount(page)):
        annot = pdfium_c.FPDFPage_GetAnnot(page, index)
        if not annot:
            continue
        try:
            if _value(form, annot) and pdfium_c.FPDFAnnot_GetRect(annot, rect):
                left, right = sorted((rect.left, rect.right))
                bottom, top = sorted((rect.bottom, rect.top))
                shown.append((index, (left, bottom, right, top)))
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annot)
    return shown


def _value(form, annot) -> str:
    """The value of a visible FreeText annotation, text field or combo box; "" for anything else."""
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
    elif kind != pdfium_c.FPDF_FORMFIELD_COMBOBOX:
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


class _Glyph:
    """A character an annotation's appearance draws, in page points."""

    __slots__ = ("text", "loose", "glyph", "turns_matrix", "line_end", "space", "covered", "taken")

    def __init__(self, text: str, loose: _Rect, glyph: _Rect, matrix: tuple[float, ...], covered: bool):
        self.text, self.loose, self.glyph, self.turns_matrix = text, loose, glyph, matrix
        self.line_end = self.space = False
        self.covered = covered  # the page's content draws the same character there
        self.taken = False  # an annotation has it


def _appearance_chars(pdf: pdfium.PdfDocument, index: int, keep: set[int]) -> list[_Glyph]:
    """The characters the appearances of annotations `keep` of page `index` of `pdf` draw, in
    the flattened copy's text order."""
    copy = pdfium_c.FPDF_CreateNewDocument()
    if not copy:
        return []
    try:
        if not pdfium_c.FPDF_ImportPagesByIndex(copy, pdf, (ctypes.c_int * 1)(index), 1, 0):
            return []
        page = pdfium_c.FPDF_LoadPage(copy, 0)
        if not page:
            return []
        try:
            for k in reversed(range(pdfium_c.FPDFPage_GetAnnotCount(page))):
                if k not in keep:  # a stamp's or check box's glyphs, a popup: not flattened
                    pdfium_c.FPDFPage_RemoveAnnot(page, k)
            content = pdfium_c.FPDFPage_CountObjects(page)  # the page's own objects come first
            if pdfium_c.FPDFPage_Flatten(page, pdfium_c.FLAT_NORMALDISPLAY) != pdfium_c.FLATTEN_SUCCESS:
                return []
        finally:
            pdfium_c.FPDF_ClosePage(page)
        page = pdfium_c.FPDF_LoadPage(copy, 0)  # the flattened page, parsed again
        if not page:
            return []
        try:
            drawn: set[int] = set()  # the text objects the appearances draw
            for k in range(content, pdfium_c.FPDFPage_CountObjects(page)):
                _text_objects(pdfium_c.FPDFPage_GetObject(page, k), drawn)
            if not drawn:
                return []
            textpage = pdfium_c.FPDFText_LoadPage(page)
            if not textpage:
                return []
            try:
                return _read(textpage, drawn)
            finally:
                pdfium_c.FPDFText_ClosePage(textpage)
        finally:
            pdfium_c.FPDF_ClosePage(page)
    finally:
        pdfium_c.FPDF_CloseDocument(copy)


def _text_objects(obj, into: set[int]) -> None:
    from . import text_layer  # (which imports this module)

    kind = pdfium_c.FPDFPageObj_GetType(obj)
    if kind == pdfium_c.FPDF_PAGEOBJ_TEXT:
        into.add(text_layer._address(obj))
    elif kind == pdfium_c.FPDF_PAGEOBJ_FORM:
        for k in range(pdfium_c.FPDFFormObj_CountObjects(obj)):
            _text_objects(pdfium_c.FPDFFormObj_GetObject(obj, k), into)


def _read(textpage, drawn: set[int]) -> list[_Glyph]:
    from . import text_layer  # (which imports this module)

    glyphs: list[_Glyph] = []
    last: _Glyph | None = None
    loose = pdfium_c.FS_RECTF()
    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    m = pdfium_c.FS_MATRIX()
    matrices: dict[
        int, tuple[float, float, float, float]
    ] = {}  # text object -> its matrix (pdfium gives each character its object's)
    for i in range(pdfium_c.FPDFText_CountChars(textpage)):
        key = text_layer._address(pdfium_c.FPDFText_GetTextObject(textpage, i))
        generated = pdfium_c.FPDFText_IsGenerated(textpage, i) == 1
        if key not in drawn and not generated:
            continue  # the page's own content (a generated space or line end is the appearance's)
        code = pdfium_c.FPDFText_GetUnicode(textpage, i)
        ch = chr(code) if 0 < code < 0x110000 else "\ufffd"
        if ch in "\r\n" or ch.isspace():
            if last is not None:
                last.line_end |= ch in "\r\n"
                last.space |= ch not in "\r\n"
            continue
        if generated:
            continue
        if ch == "\ufffd" or pdfium_c.FPDFText_HasUnicodeMapError(textpage, i) or text_layer._is_garbage(ch):
            continue  # a glyph without text: drawn, not read
        if not pdfium_c.FPDFText_GetCharBox(textpage, i, left, right, bottom, top):
            continue
        pdfium_c.FPDFText_GetLooseCharBox(textpage, i, loose)
        if key not in matrices:
            pdfium_c.FPDFText_GetMatrix(textpage, i, m)
            matrices[key] = (m.a, m.b, m.c, m.d)
        glyph = (left.value, bottom.value, right.value, top.value)
        loose_box = (loose.left, loose.bottom, loose.right, loose.top)
        last = _Glyph(ch, loose_box, glyph, matrices[key], _covered(textpage, i, ch, glyph, drawn))
        glyphs.append(last)
    return glyphs


def _covered(textpage, i: int, ch: str, glyph: _Rect, drawn: set[int]) -> bool:
    """Whether the page's own content draws the same character where appearance character `i`
    is (a value printed into the page and kept in a field too): its first character there."""
    from . import text_layer  # (which imports this module)

    x, y = (glyph[0] + glyph[2]) / 2, (glyph[1] + glyph[3]) / 2
    at = pdfium_c.FPDFText_GetCharIndexAtPos(textpage, x, y, 0.0, 0.0)
    if at < 0 or at == i or pdfium_c.FPDFText_GetUnicode(textpage, at) != ord(ch):
        return False
    obj = pdfium_c.FPDFText_GetTextObject(textpage, at)
    if not obj or text_layer._address(obj) in drawn:
        return False
    return pdfium_c.FPDFTextObj_GetTextRenderMode(obj) not in _INVISIBLE_MODES


def _place(
    rect: _Rect, glyphs: list[_Glyph], pixels: np.ndarray, mapper: PageToPixels, contrast: int
) -> list[tuple[Box, str]]:
    """The lines of the characters of `glyphs` inside annotation rectangle `rect` that show
    ink in `pixels` (each character taken by the first annotation that has it), built into
    lines by text_layer's line builder."""
    from . import text_layer  # (which imports this module)

    left, bottom, right, top = rect
    inside = [
        g for g in glyphs
        if not g.taken and left - INSIDE_PT <= g.glyph[0] and g.glyph[2] <= right + INSIDE_PT
        and bottom - INSIDE_PT <= g.glyph[1] and g.glyph[3] <= top + INSIDE_PT
    ]  # fmt: skip
    if not inside:
        return []
    for g in inside:
        g.taken = True
    inset_x = min(BORDER_PT, (right - left) / 4)
    inset_y = min(BORDER_PT, (top - bottom) / 4)
    x1, y1, x2, y2 = mapper.box(left + inset_x, bottom + inset_y, right - inset_x, top - inset_y)
    height, width = pixels.shape[:2]
    cols = slice(max(0, int(x1)), min(width, int(np.ceil(x2))))
    rows = slice(max(0, int(y1)), min(height, int(np.ceil(y2))))
    if cols.start >= cols.stop or rows.start >= rows.stop:
        return []  # off the page
    interior = pixels[rows, cols]
    glyph_px = {}  # each shown character's glyph box (and a pixel round it) in the interior's pixels
    for g in inside:
        if not g.covered:
            gx1, gy1, gx2, gy2 = mapper.box(*g.glyph)
            a, b = max(0, int(gy1) - 1 - rows.start), max(0, int(np.ceil(gy2)) + 1 - rows.start)
            c, d = max(0, int(gx1) - 1 - cols.start), max(0, int(np.ceil(gx2)) + 1 - cols.start)
            if a < min(b, interior.shape[0]) and c < min(d, interior.shape[1]):
                glyph_px[id(g)] = (a, b, c, d)
    if not glyph_px:
        return []
    # ink: the pixels off the interior's paper, read where the characters are
    top_px, left_px = min(v[0] for v in glyph_px.values()), min(v[2] for v in glyph_px.values())
    bottom_px, right_px = max(v[1] for v in glyph_px.values()), max(v[3] for v in glyph_px.values())
    ink = _ink(interior[top_px:bottom_px, left_px:right_px], _paper(interior), contrast)
    frame = mapper.box(left, bottom, right, top)  # line boxes stay inside the annotation
    turned: dict[int, list] = {}
    for g in inside:
        if id(g) not in glyph_px:
            continue  # the page's content holds it, or it lies in the border
        a, b, c, d = glyph_px[id(g)]
        if not ink[a - top_px : b - top_px, c - left_px : d - left_px].any():
            continue  # not drawn where the page shows it (clipped away, under something)
        turns = mapper.quarter_turns(pdfium_c.FS_MATRIX(*g.turns_matrix, 0.0, 0.0))
        if turns is None:
            continue  # at a slant
        lx1, ly1, lx2, ly2 = mapper.box(*g.loose)
        box = (max(lx1, frame[0]), max(ly1, frame[1]), min(lx2, frame[2]), min(ly2, frame[3]))
        char = text_layer._Char(g.text, text_layer._turn(box, turns), g.line_end, g.space)
        turned.setdefault(turns, []).append(char)
    lines = []
    for turns, chars in turned.items():
        for line in text_layer._lines(chars):
            lines.append((text_layer._int_box(text_layer._turn(line.box, 4 - turns)), line.text))
    return lines


def _paper(interior: np.ndarray) -> np.ndarray:
    """The colour most of an annotation's interior is: its median (on a grid of about 4,000
    of its pixels), per channel."""
    step = max(1, int((interior.shape[0] * interior.shape[1] / 4000) ** 0.5))
    sample = interior[::step, ::step]
    paper: np.ndarray = np.median(sample.reshape(-1, 1 if sample.ndim == 2 else sample.shape[2]), axis=0)
    return paper


def _ink(region: np.ndarray, paper: np.ndarray, contrast: int) -> np.ndarray:
    """The pixels of `region` at least `contrast` levels (in any channel) off `paper`."""
    values = region.reshape(region.shape[0], region.shape[1], -1)
    ink = np.zeros(values.shape[:2], bool)
    for channel, level in enumerate(paper[: values.shape[2]]):
        plane = values[:, :, channel]
        if level - contrast >= 0:  # compared as uint8: no copy of the region in a wider type
            ink |= plane <= int(level - contrast)
        if level + contrast <= 255:
            ink |= plane >= int(np.ceil(level + contrast))
    return ink
