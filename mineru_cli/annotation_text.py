"""The text that a PDF page's annotations draw and no text layer holds, as text lines in the
rendered page's pixels.

pdfium renders a page's annotations into its pixels (and, through the form layer inputs.py
initialises, its form fields), but its text page holds the page's content only. A trusted text
layer (text_layer.py) would read the labels of a filled form and lose what was filled in, so
its lines get the text those annotations' appearances show, where the rendered page shows its
ink. Which annotations:

* FreeText annotations (what a viewer's typewriter / "Fill & Sign" tool writes onto a form that
  has no fields, a reviewer's text box) with an appearance, /Contents or /RC; pdfium draws one
  without an appearance stream from /Contents and /DA itself;
* form fields, chosen by kind, not by value (a numeric value, which pdfium gives no string for,
  is formatted by its appearance): text fields, combo boxes (which show the chosen option's
  label) and signed signature fields ("Digitally signed by ..."), with an appearance or a
  value; a check box's or radio button's value is a state name ("Yes", "Off"), a push button
  has none, and a list box shows all its options, its value only highlighted among them;
  never a password field (it renders as bullets);
* never an annotation that is hidden (annotation flags Hidden or NoView) or off the page, and
  no other kind: a sticky note (Text) draws only its icon (its text shows in a viewer's popup,
  which pdfium does not draw, open or not), and a stamp's /Contents is a description, not
  necessarily what it draws (its drawn words are left to the pixels).

What they show is read from their appearance streams, not from their values: a one-page copy
of the page in a document of its own (the caller's document is never changed), with the other
annotations removed (the kept ones matched by subtype and rectangle: pdfium's copy drops an
/Annots entry it cannot resolve; where one is missing, Unreadable makes the caller leave the
page to OCR), is flattened by pdfium (FPDFPage_Flatten: each appearance becomes page
content) and its text page read. So a formatted field gives what its appearance shows ("$1,234.50",
not its value "1234.5"), a value too long for its field only the part inside the field, and a
FreeText what pdfium drew of it. A character counts only where its glyph lies inside its
annotation's rectangle (along its line; across it, its centre: descenders dip below a tight
field), the rendered page has ink under it (inside the annotation's border), its own: where
another annotation lies over it, the copy is rendered there and its ink must stand off what
surrounds it in the page's render (a black box drawn over a field hides it), and the page's
own content does not already hold its whole line there (a value printed into the page as well;
a date typed over a printed __/__/____ is kept). A glyph drawn twice in the same place (a
widget listed twice) counts once; a field whose characters are half or more without Unicode
raises Unreadable (its text to OCR, not dropped, never garbage); its characters become lines
with text_layer's own line builder, in their own direction
(a field turned with /MK /R on a turned page stacks its lines as the page shows them), a
line's box the characters' line boxes, inside the annotation. Lines come in the page's
annotation order.
"""

from __future__ import annotations

import collections
import ctypes
import functools
from typing import Any, Callable, Protocol

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from .core.geometry import int_box

INSIDE_PT = 0.5  # how far a glyph may reach past its annotation's rectangle along its line and still count as inside
BORDER_PT = 2.5  # an annotation's interior starts this far inside its rectangle: the 1 pt border, twice when bevelled
_HIDDEN = pdfium_c.FPDF_ANNOT_FLAG_HIDDEN | pdfium_c.FPDF_ANNOT_FLAG_NOVIEW
_INVISIBLE_MODES = (3, 7)  # text render modes that paint nothing

Box = tuple[int, int, int, int]
_Rect = tuple[float, float, float, float]  # left, bottom, right, top in page points


class PageToPixels(Protocol):
    """text_layer's page -> pixel mapping (its _DeviceMap)."""

    def box(self, left: float, bottom: float, right: float, top: float) -> tuple[float, float, float, float]: ...

    def quarter_turns(self, m: Any) -> int | None: ...


class Unreadable(Exception):
    """What the page's annotations show cannot be read as text (their characters have no
    Unicode, or pdfium's copy of the page lost them): the page's text layer is not trusted,
    so that OCR reads them. `reason` and `detail` as text_layer's."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def annotation_lines(
    page: pdfium.PdfPage, pixels: np.ndarray, mapper: PageToPixels, contrast: int, index: int | None = None
) -> list[tuple[Box, str]]:
    """(box, text) for each line of what each FreeText annotation, text-like field and signed
    signature field of `page` (page `index` of its document; None: its document's only page,
    and nothing for a page of a longer one) shows in its appearance, where `pixels`, the page
    rendered (H x W x 3 or H x W, uint8), show its own ink at least `contrast` levels off the
    annotation's paper; in the page's annotation order. No field lines where the document's
    forms were not initialised (no form handle on the page). Raises Unreadable where what they
    show cannot be read as text."""
    shown, covers = _shown(page)  # the cheap check: most pages have none, and are not copied
    if not shown:
        return []
    if index is None:
        if len(page.pdf) != 1:
            return []
        index = 0
    # where another annotation is drawn over a kept one, the copy (which has only the kept
    # ones) is rendered there too: a character counts there only where its own ink shows
    height, width = pixels.shape[:2]
    risky = [rect for _, rect in shown if any(_overlap(rect, c) for c in covers)]
    region = _pixel_region(risky, mapper, width, height) if risky else None
    chars, copy = _appearance_chars(page.pdf, index, [key for key, _ in shown], (width, height), region)
    lines: list[tuple[Box, str]] = []
    for _, rect in shown:
        lines += _place(rect, chars, pixels, mapper, contrast, covers, copy)
    return lines


def _overlap(a: _Rect, b: _Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _pixel_region(rects: list[_Rect], mapper: PageToPixels, width: int, height: int) -> Box | None:
    """The pixels (x1, y1, x2, y2) of the page that hold `rects`, clipped to the page."""
    boxes = [mapper.box(*r) for r in rects]
    x1, y1 = max(0, int(min(b[0] for b in boxes)) - 2), max(0, int(min(b[1] for b in boxes)) - 2)
    x2 = min(width, int(np.ceil(max(b[2] for b in boxes))) + 2)
    y2 = min(height, int(np.ceil(max(b[3] for b in boxes))) + 2)
    return (x1, y1, x2, y2) if x1 < x2 and y1 < y2 else None


_Key = tuple[int, tuple[float, ...]]  # an annotation's subtype and rectangle: how the copy's are matched to the page's


def _shown(page: pdfium.PdfPage) -> tuple[list[tuple[_Key, _Rect]], list[_Rect]]:
    """(key, rectangle) of each annotation of `page` whose appearance is read, and the
    rectangles of the other annotations pdfium draws (what may cover them)."""
    form = page.formenv
    shown, covers = [], []
    rect = pdfium_c.FS_RECTF()
    for index in range(pdfium_c.FPDFPage_GetAnnotCount(page)):
        annot = pdfium_c.FPDFPage_GetAnnot(page, index)
        if not annot:
            continue
        try:
            if pdfium_c.FPDFAnnot_GetFlags(annot) & _HIDDEN or not pdfium_c.FPDFAnnot_GetRect(annot, rect):
                continue
            left, right = sorted((rect.left, rect.right))
            bottom, top = sorted((rect.bottom, rect.top))
            box = (left, bottom, right, top)
            subtype = pdfium_c.FPDFAnnot_GetSubtype(annot)
            if _read_it(form, annot, subtype):
                shown.append(((subtype, _rounded(box)), box))
            elif subtype != pdfium_c.FPDF_ANNOT_POPUP:
                covers.append(box)
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annot)
    return shown, covers


def _rounded(rect: _Rect) -> tuple[float, ...]:
    return tuple(round(v, 1) for v in rect)


def _read_it(form, annot, subtype: int) -> bool:
    """Whether a (visible) annotation's appearance is read: a FreeText annotation, a text
    field (not a password), a combo box, a signature field; by its kind, not its value (a
    numeric value is formatted by its appearance), where it has an appearance or a value to
    draw one from."""
    if subtype == pdfium_c.FPDF_ANNOT_FREETEXT:
        return any(pdfium_c.FPDFAnnot_HasKey(annot, k) for k in (b"AP", b"Contents", b"RC"))
    if subtype != pdfium_c.FPDF_ANNOT_WIDGET or not form:
        return False
    kind = pdfium_c.FPDFAnnot_GetFormFieldType(form, annot)
    if kind == pdfium_c.FPDF_FORMFIELD_TEXTFIELD:
        if pdfium_c.FPDFAnnot_GetFormFieldFlags(form, annot) & pdfium_c.FPDF_FORMFLAG_TEXT_PASSWORD:
            return False
    elif kind == pdfium_c.FPDF_FORMFIELD_SIGNATURE:
        return bool(pdfium_c.FPDFAnnot_HasKey(annot, b"AP"))
    elif kind != pdfium_c.FPDF_FORMFIELD_COMBOBOX:
        return False  # check boxes and radio buttons (a state name), push buttons, list boxes
    if pdfium_c.FPDFAnnot_HasKey(annot, b"AP"):
        return True
    return bool(_text(functools.partial(pdfium_c.FPDFAnnot_GetFormFieldValue, form, annot)))


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

    __slots__ = ("text", "loose", "glyph", "turns_matrix", "line_end", "space", "covered", "taken", "unmapped")

    def __init__(self, text: str, loose: _Rect, glyph: _Rect, matrix: tuple[float, ...], covered: bool):
        self.text, self.loose, self.glyph, self.turns_matrix = text, loose, glyph, matrix
        self.line_end = self.space = False
        self.covered = covered  # the page's content draws the same character there
        self.taken = False  # an annotation has it
        self.unmapped = False  # drawn, but without text (no Unicode, or not a character)


_Copy = tuple[int, int, np.ndarray]  # the flattened copy rendered: its left and top pixel, its grey pixels


def _appearance_chars(
    pdf: pdfium.PdfDocument, index: int, keep: list[_Key], size: tuple[int, int], region: Box | None
) -> tuple[list[_Glyph], _Copy | None]:
    """The characters the appearances of the annotations `keep` (subtypes and rectangles) of
    page `index` of `pdf` draw, in the flattened copy's text order; and the copy rendered at
    `size` in pixels `region` (None: not rendered)."""
    copy = pdfium_c.FPDF_CreateNewDocument()
    if not copy:
        return [], None
    try:
        if not pdfium_c.FPDF_ImportPagesByIndex(copy, pdf, (ctypes.c_int * 1)(index), 1, 0):
            return [], None
        page = pdfium_c.FPDF_LoadPage(copy, 0)
        if not page:
            return [], None
        try:
            _keep_only(page, keep)
            content = pdfium_c.FPDFPage_CountObjects(page)  # the page's own objects come first
            if pdfium_c.FPDFPage_Flatten(page, pdfium_c.FLAT_NORMALDISPLAY) != pdfium_c.FLATTEN_SUCCESS:
                return [], None
        finally:
            pdfium_c.FPDF_ClosePage(page)
        page = pdfium_c.FPDF_LoadPage(copy, 0)  # the flattened page, parsed again
        if not page:
            return [], None
        try:
            drawn: set[int] = set()  # the text objects the appearances draw
            for k in range(content, pdfium_c.FPDFPage_CountObjects(page)):
                _text_objects(pdfium_c.FPDFPage_GetObject(page, k), drawn)
            if not drawn:
                return [], None
            textpage = pdfium_c.FPDFText_LoadPage(page)
            if not textpage:
                return [], None
            try:
                glyphs = _read(textpage, drawn)
            finally:
                pdfium_c.FPDFText_ClosePage(textpage)
            return glyphs, (_render(page, size, region) if region is not None else None)
        finally:
            pdfium_c.FPDF_ClosePage(page)
    finally:
        pdfium_c.FPDF_CloseDocument(copy)


def _keep_only(page, keep: list[_Key]) -> None:
    """Remove from the copy's `page` every annotation but those `keep` names, matched by subtype
    and rectangle (the copy's annotations need not be the page's, index for index: pdfium drops
    an entry of /Annots it cannot resolve). Raises Unreadable where one of them is missing."""
    wanted = collections.Counter(keep)
    rect = pdfium_c.FS_RECTF()
    for k in reversed(range(pdfium_c.FPDFPage_GetAnnotCount(page))):
        annot = pdfium_c.FPDFPage_GetAnnot(page, k)
        key = None
        if annot:
            try:
                if pdfium_c.FPDFAnnot_GetRect(annot, rect):
                    left, right = sorted((rect.left, rect.right))
                    bottom, top = sorted((rect.bottom, rect.top))
                    key = (pdfium_c.FPDFAnnot_GetSubtype(annot), _rounded((left, bottom, right, top)))
            finally:
                pdfium_c.FPDFPage_CloseAnnot(annot)
        if key is not None and wanted[key] > 0:
            wanted[key] -= 1
        else:  # a stamp's or check box's glyphs, a popup: not flattened
            pdfium_c.FPDFPage_RemoveAnnot(page, k)
    missing = sum(wanted.values())
    if missing:
        raise Unreadable("annotations", f"{missing} of {len(keep)} filled fields or typed-on texts not read")


def _render(page, size: tuple[int, int], region: Box) -> _Copy:
    """Pixels `region` of `page` rendered whole at `size`, grey (white paper, no annotations)."""
    x1, y1, x2, y2 = region
    w, h = x2 - x1, y2 - y1
    bitmap = pdfium_c.FPDFBitmap_Create(w, h, 0)
    try:
        pdfium_c.FPDFBitmap_FillRect(bitmap, 0, 0, w, h, 0xFFFFFFFF)
        pdfium_c.FPDF_RenderPageBitmap(bitmap, page, -x1, -y1, size[0], size[1], 0, 0)
        stride = pdfium_c.FPDFBitmap_GetStride(bitmap)
        data = ctypes.string_at(pdfium_c.FPDFBitmap_GetBuffer(bitmap), stride * h)
        bgrx = np.frombuffer(data, np.uint8).reshape(h, stride // 4, 4)[:, :w, :3]
        return x1, y1, bgrx.mean(axis=2)
    finally:
        pdfium_c.FPDFBitmap_Destroy(bitmap)


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
    seen: set[tuple[str, tuple[float, ...]]] = set()  # an annotation listed twice draws its glyphs twice
    count = pdfium_c.FPDFText_CountChars(textpage)
    for i in range(count):
        key = text_layer._address(pdfium_c.FPDFText_GetTextObject(textpage, i))
        generated = pdfium_c.FPDFText_IsGenerated(textpage, i) == 1
        if key not in drawn and not generated:
            continue  # the page's own content (a generated space or line end is the appearance's)
        code = text_layer._code_point(textpage, i, count)
        if code is None:
            continue  # the second half of a character beyond the BMP, read with its first
        ch = chr(code) if 0 < code < 0x110000 else "\ufffd"
        if ch in "\r\n" or ch.isspace():
            if last is not None:
                last.line_end |= ch in "\r\n"
                last.space |= ch not in "\r\n"
            continue
        if generated:
            continue
        if not pdfium_c.FPDFText_GetCharBox(textpage, i, left, right, bottom, top):
            continue
        glyph = (left.value, bottom.value, right.value, top.value)
        if (ch, _rounded(glyph)) in seen:
            continue  # the same glyph drawn again in the same place
        seen.add((ch, _rounded(glyph)))
        pdfium_c.FPDFText_GetLooseCharBox(textpage, i, loose)
        if key not in matrices:
            pdfium_c.FPDFText_GetMatrix(textpage, i, m)
            matrices[key] = (m.a, m.b, m.c, m.d)
        loose_box = (loose.left, loose.bottom, loose.right, loose.top)
        last = _Glyph(ch, loose_box, glyph, matrices[key], _covered(textpage, i, ch, glyph, drawn))
        if ch == "\ufffd" or pdfium_c.FPDFText_HasUnicodeMapError(textpage, i) or text_layer._is_garbage(ch):
            last.unmapped = True  # a glyph without text: drawn, not read (counted)
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


def _printed(glyphs: list[_Glyph]) -> set[int]:
    """The glyphs (ids) of the runs (lines as drawn) of `glyphs` that the page's content prints
    there already, every character of them: a value printed into the page as well. A run only
    partly printed (a date typed over a printed __/__/____) is the field's own."""
    printed: set[int] = set()
    run: list[_Glyph] = []
    for k, g in enumerate(glyphs):
        run.append(g)
        if g.line_end or k == len(glyphs) - 1:
            if all(r.covered for r in run):
                printed.update(id(r) for r in run)
            run = []
    return printed


def _grey(region: np.ndarray) -> np.ndarray:
    return region.mean(axis=2) if region.ndim == 3 else region.astype(float)


def _shows(orig: np.ndarray, copy: np.ndarray, paper: float, contrast: int) -> bool:
    """Whether a glyph's own ink shows in `orig` (grey pixels round it in the page's render):
    its ink is where `copy` (the same pixels of the flattened copy, which has only the kept
    annotations) is off its `paper`; it shows where an eighth of that ink stands off the rest
    of the pixels round it in `orig` (not where something drawn over it is all one can see)."""
    mine = np.abs(copy - paper) >= contrast
    if not mine.any():
        return False
    rest = orig[~mine]
    around = float(np.median(rest)) if rest.size else paper
    return int((np.abs(orig[mine] - around) >= contrast).sum()) * 8 >= max(2, int(mine.sum()))


def _inside(g: _Glyph, rect: _Rect) -> bool:
    """Whether glyph `g` lies inside annotation rectangle `rect`: along its line all of it (a
    letter cut at a field's edge is not read), across its line its centre (a descender dips
    below a tight field)."""
    along_x = abs(g.turns_matrix[0]) >= abs(g.turns_matrix[1])  # its line runs across the page
    (x1, y1, x2, y2), (left, bottom, right, top) = g.glyph, rect
    if along_x:
        return left - INSIDE_PT <= x1 and x2 <= right + INSIDE_PT and bottom <= (y1 + y2) / 2 <= top
    return bottom - INSIDE_PT <= y1 and y2 <= top + INSIDE_PT and left <= (x1 + x2) / 2 <= right


def _place(
    rect: _Rect,
    glyphs: list[_Glyph],
    pixels: np.ndarray,
    mapper: PageToPixels,
    contrast: int,
    covers: list[_Rect] = (),  # type: ignore[assignment]
    copy: _Copy | None = None,
) -> list[tuple[Box, str]]:
    """The lines of the characters of `glyphs` inside annotation rectangle `rect` (their
    centres) that show ink in `pixels` (each character taken by the first annotation that has
    it), built into lines by text_layer's line builder. Where another annotation (`covers`)
    lies over a character, its own ink must show: read against `copy`, the flattened copy's
    render."""
    from . import text_layer  # (which imports this module)

    left, bottom, right, top = rect
    inside = [g for g in glyphs if not g.taken and _inside(g, rect)]
    if not inside:
        return []
    for g in inside:
        g.taken = True
    unmapped = sum(g.unmapped for g in inside)
    if unmapped * 2 >= len(inside):
        raise Unreadable("unicode_errors", f"{unmapped} of {len(inside)} characters of a field without Unicode")
    printed = _printed(inside)
    inside = [g for g in inside if not g.unmapped]
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
        if id(g) not in printed:
            gx1, gy1, gx2, gy2 = mapper.box(*g.glyph)
            a, b = max(0, int(gy1) - 1 - rows.start), max(0, int(np.ceil(gy2)) + 1 - rows.start)
            c, d = max(0, int(gx1) - 1 - cols.start), max(0, int(np.ceil(gx2)) + 1 - cols.start)
            b, d = min(b, interior.shape[0]), min(d, interior.shape[1])  # clipped to the interior
            if a < b and c < d:
                glyph_px[id(g)] = (a, b, c, d)
    if not glyph_px:
        return []
    # ink: the pixels off the interior's paper, read where the characters are
    top_px, left_px = min(v[0] for v in glyph_px.values()), min(v[2] for v in glyph_px.values())
    bottom_px, right_px = max(v[1] for v in glyph_px.values()), max(v[3] for v in glyph_px.values())
    ink = _ink(interior[top_px:bottom_px, left_px:right_px], _paper(interior), contrast)
    under = [cover for cover in covers if _overlap(rect, cover)]
    copy_paper = None
    if under and copy is not None:
        ox, oy, grey = copy
        copy_interior = grey[max(0, rows.start - oy) : rows.stop - oy, max(0, cols.start - ox) : cols.stop - ox]
        copy_paper = float(_paper(copy_interior)[0]) if copy_interior.size else 255.0
    frame = mapper.box(left, bottom, right, top)  # line boxes stay inside the annotation
    turned: dict[int, list] = {}
    for g in inside:
        if id(g) not in glyph_px:
            continue  # the page's content holds it, or it lies in the border
        a, b, c, d = glyph_px[id(g)]
        if not ink[a - top_px : b - top_px, c - left_px : d - left_px].any():
            continue  # not drawn where the page shows it (clipped away, under something)
        if copy_paper is not None and any(_overlap(g.glyph, cover) for cover in under):
            ya, yb, xa, xb = a + rows.start - oy, b + rows.start - oy, c + cols.start - ox, d + cols.start - ox
            mine = grey[ya:yb, xa:xb]  # the region holds every annotation's pixels that a cover overlaps
            orig = _grey(interior[a:b, c:d])
            if mine.shape != orig.shape or not _shows(orig, mine, copy_paper, contrast):
                continue  # another annotation drawn over it: its ink does not show
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
            lines.append((int_box(text_layer._turn(line.box, 4 - turns)), line.text))
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
