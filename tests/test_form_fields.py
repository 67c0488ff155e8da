"""Filled-in PDF forms: field values, and text typed onto a page as FreeText annotations (a
viewer's typewriter tool), are rendered into the page's pixels and join a trusted text layer
where they show, in their place; nothing else of a form, or of a page's annotations, becomes
text. Real AcroForms written here with reportlab, annotations added with pdfium's API."""

from __future__ import annotations

import dataclasses

import numpy as np
import pypdfium2 as pdfium
import pytest

pytest.importorskip("reportlab")
import pypdfium2.raw as pdfium_c
from pdfs import (
    FORM_FIELDS,
    FORM_TITLE,
    FORM_VALUES,
    Annot,
    annotate,
    field_pixels,
    first_page,
    form_labels,
    form_pdf,
    typewriter,
    write_objects,
    write_pdf,
)
from reportlab.lib.colors import black, lightblue

from mineru_cli.annotation_text import annotation_lines
from mineru_cli.config import PDF_RENDERER, LoadOptions
from mineru_cli.core.record import fingerprint
from mineru_cli.inputs import SourceFile, open_document
from mineru_cli.text_layer import _DeviceMap

LABELS = [FORM_TITLE, "Full name:", "Address:"]


def _texts(page) -> list[str]:
    return [ln.text for ln in page.text_layer.lines]


def _inside(box, rect, dpi: int = 200) -> bool:
    x1, y1, x2, y2 = field_pixels(rect, dpi)
    return x1 - 1 <= box[0] < box[2] <= x2 + 1 and y1 - 1 <= box[1] < box[3] <= y2 + 1


def _ink(page, rect, dpi: int = 200) -> int:
    x1, y1, x2, y2 = (int(v) for v in field_pixels(rect, dpi))
    return int((np.asarray(page.image.convert("L"))[y1:y2, x1:x2] < 128).sum())


def test_filled_values_join_a_trusted_text_layer_inside_their_fields(tmp_path):
    page = first_page(form_pdf(tmp_path / "form.pdf"))
    assert page.text_layer.trusted
    assert _texts(page) == LABELS + list(FORM_VALUES.values())  # the labels, then a line per value
    for name, value in FORM_VALUES.items():
        (line,) = [ln for ln in page.text_layer.lines if ln.text == value]
        assert _inside(line.box, FORM_FIELDS[name])
        assert line.box[3] - line.box[1] >= 20  # on the value's glyphs (12 pt at 200 DPI), not a sliver
    # the field's labels stay where they are: left of the values, on their rows
    (label,) = [ln for ln in page.text_layer.lines if ln.text == "Full name:"]
    (name,) = [ln for ln in page.text_layer.lines if ln.text == FORM_VALUES["name"]]
    assert label.box[2] < name.box[0] and label.box[1] < (name.box[1] + name.box[3]) / 2 < label.box[3]


def test_boxes_follow_the_dpi_and_the_area_cap(tmp_path):
    path = form_pdf(tmp_path / "form.pdf")
    low = first_page(path, dpi=100)
    (line,) = [ln for ln in low.text_layer.lines if ln.text == FORM_VALUES["address"]]
    assert _inside(line.box, FORM_FIELDS["address"], dpi=100)
    doc = open_document(SourceFile(path, "f.pdf", "pdf"), LoadOptions(dpi=200, max_page_pixels=800 * 1000))
    try:
        capped = doc.page(0)
    finally:
        doc.close()
    factor = capped.image.width / 1654
    (line,) = [ln for ln in capped.text_layer.lines if ln.text == FORM_VALUES["address"]]
    x1, y1, x2, y2 = (v * factor for v in field_pixels(FORM_FIELDS["address"]))
    assert x1 - 2 <= line.box[0] < line.box[2] <= x2 + 2 and y1 - 2 <= line.box[1] < line.box[3] <= y2 + 2


def _pixels_only(path):
    """The first page of `path` as `--text-layer off` loads it."""
    doc = open_document(SourceFile(path, path.name, "pdf"), LoadOptions(text_layer="off"))
    try:
        return doc.page(0)
    finally:
        doc.close()


def test_the_value_is_in_the_pixels_with_the_text_layer_off(tmp_path):
    path = form_pdf(tmp_path / "form.pdf")
    page = _pixels_only(path)
    assert page.text_layer is None
    # the field drawn as filled in (a render without the form layer leaves the field blank)
    assert all(_ink(page, rect) > 500 for rect in FORM_FIELDS.values())
    blank = first_page(form_pdf(tmp_path / "blank.pdf", values={}))
    assert all(_ink(blank, rect) == 0 for rect in FORM_FIELDS.values())
    assert _texts(blank) == LABELS  # an empty field adds no line


def test_a_multi_line_value_gives_a_line_per_line_in_order(tmp_path):
    rect = (160, 300, 300, 100)
    value = "Line one of the note\nLine two of the note\n\nLine four, after a blank"

    def more(c):
        c.acroForm.textfield(
            name="note", value=value, x=rect[0], y=rect[1], width=rect[2], height=rect[3], fontSize=12,
            fieldFlags="multiline", borderWidth=0, fillColor=None,
        )  # fmt: skip

    page = first_page(form_pdf(tmp_path / "note.pdf", more=more))
    lines = [ln for ln in page.text_layer.lines if ln.text.startswith("Line ")]
    assert [ln.text for ln in lines] == [t for t in value.split("\n") if t]
    assert all(_inside(ln.box, rect) for ln in lines)
    tops = [ln.box[1] for ln in lines]
    assert tops == sorted(tops) and all(b.box[1] >= a.box[3] for a, b in zip(lines, lines[1:]))
    assert tops[2] - tops[1] > 1.5 * (tops[1] - tops[0])  # the blank line's gap stays a gap


def test_only_shown_text_and_combo_values_become_text(tmp_path):
    """A checked box, a chosen radio button, a list box, and password, hidden and off-page text
    fields add nothing; a bordered, shaded field's value is read inside its border, and a combo
    box's choice as it shows it."""
    bordered, combo = (160, 480, 300, 22), (160, 300, 200, 22)

    def more(c):
        f = c.acroForm
        f.textfield(name="shaded", value="Shaded Value", x=bordered[0], y=bordered[1], width=bordered[2],
                    height=bordered[3], fontSize=12, borderWidth=1, borderColor=black, fillColor=lightblue)  # fmt: skip
        f.textfield(name="secret", value="hunter2", x=160, y=440, width=300, height=22, fieldFlags="password")
        f.textfield(name="hidden", value="Hidden Value", x=160, y=400, width=300, height=22, annotationFlags="hidden")
        f.textfield(name="away", value="Off The Page", x=700, y=700, width=100, height=22)
        f.checkbox(name="agree", checked=True, x=160, y=360, size=20)
        f.radio(name="tier", value="gold", selected=True, x=200, y=360, size=20)
        f.radio(name="tier", value="silver", selected=False, x=240, y=360, size=20)
        f.choice(name="combo", value="AU", options=[("United States", "US"), ("Australia", "AU")], x=combo[0],
                 y=combo[1], width=combo[2], height=combo[3], fontSize=12)  # fmt: skip
        f.listbox(name="list", value="Item Two", options=["Item One", "Item Two"], x=160, y=200, width=200, height=60)

    page = first_page(form_pdf(tmp_path / "mixed.pdf", values={"name": FORM_VALUES["name"]}, more=more))
    assert page.text_layer.trusted
    # the combo box's value is the code "AU": it shows the option's label
    assert _texts(page) == LABELS + [FORM_VALUES["name"], "Shaded Value", "Australia"]
    shaded, choice = page.text_layer.lines[-2:]
    x1, y1, x2, y2 = field_pixels(bordered)
    assert x1 + 5 <= shaded.box[0] and y1 + 5 <= shaded.box[1] < shaded.box[3] <= y2 - 5  # the border is no text
    assert _inside(choice.box, combo)


def test_a_value_that_does_not_show_is_not_invented(tmp_path):
    """Read against pixels without the value's ink (here: a blank page), a field gives nothing;
    a page of a document opened without its forms gives nothing either."""
    path = form_pdf(tmp_path / "form.pdf")

    pdf = pdfium.PdfDocument(str(path))
    try:
        pdf.init_forms()
        page = pdf[0]
        blank = np.full((2339, 1654, 3), 255, np.uint8)
        assert annotation_lines(page, blank, _map(page), 24) == []
        rendered = page.render(scale=200 / 72).to_numpy()[:, :, :3]
        assert [t for _, t in annotation_lines(page, rendered, _map(page), 24)] == list(FORM_VALUES.values())
        page.close()
    finally:
        pdf.close()
    pdf = pdfium.PdfDocument(str(path))  # no init_forms: no form handle on its pages
    try:
        assert annotation_lines(pdf[0], rendered, _map(pdf[0]), 24) == []
    finally:
        pdf.close()


def test_an_untrusted_layer_gets_no_field_lines(tmp_path):
    def label_only(c):
        c.setFont("Helvetica", 12)
        c.drawString(72, 600, "Full name:")
        c.acroForm.textfield(name="n", value="Margaret", x=160, y=592, width=300, height=22, borderWidth=0)

    page = first_page(write_pdf(tmp_path / "few.pdf", label_only))
    assert page.text_layer.reason == "too_few_chars" and page.text_layer.lines == ()
    assert _ink(page, (160, 592, 300, 22)) > 100  # its pixels are read, the value with them


def test_a_form_layer_pdfium_cannot_make_costs_only_the_fields(tmp_path, monkeypatch):
    def fail(self, config=None):
        raise pdfium.PdfiumError("Initializing form env failed")

    monkeypatch.setattr(pdfium.PdfDocument, "init_forms", fail)
    page = first_page(form_pdf(tmp_path / "form.pdf"))
    assert page.warnings == ["PDF form fields not drawn (Initializing form env failed)"]
    assert page.text_layer.trusted and _texts(page) == LABELS  # the page as its blank form


def test_the_renderer_revision_is_in_the_fingerprint():
    """Pages rendered before forms were drawn, or read before typed-on text joined the text
    layer, are parsed again, not served from a journal or cache."""
    engine = {"name": "ocr", "version": "x"}
    load = dataclasses.asdict(LoadOptions())
    assert load["pdf_renderer"] == PDF_RENDERER >= 4
    before = {k: v for k, v in load.items() if k != "pdf_renderer"}  # what earlier versions hashed
    older = dataclasses.asdict(LoadOptions(pdf_renderer=PDF_RENDERER - 1))
    assert len({fingerprint(engine, load), fingerprint(engine, before), fingerprint(engine, older)}) == 3


def _map(page) -> _DeviceMap:  # page points -> pixels at 200 DPI on an A4 page
    return _DeviceMap(page, 1654, 2339)


TYPED = [typewriter(FORM_FIELDS["name"], FORM_VALUES["name"])]  # a value typed onto a form with no fields


def _paper_form(path, annots):
    return annotate(write_pdf(path, form_labels), annots)


def test_text_typed_onto_a_page_joins_a_trusted_text_layer_in_its_place(tmp_path):
    """A typewriter annotation (its own appearance, no border), one that pdfium draws itself (no
    appearance stream: pdfium makes one from /Contents, with a border), and a multi-line one."""
    note_rect, note = (160, 380, 300, 100), "Line one of the note\nLine two of the note"
    drawn = Annot(pdfium_c.FPDF_ANNOT_FREETEXT, FORM_FIELDS["address"], FORM_VALUES["address"])
    page = first_page(_paper_form(tmp_path / "typed.pdf", [*TYPED, drawn, typewriter(note_rect, note)]))
    assert page.text_layer.trusted
    assert _texts(page) == LABELS + list(FORM_VALUES.values()) + note.split("\n")
    for name, value in FORM_VALUES.items():
        (line,) = [ln for ln in page.text_layer.lines if ln.text == value]
        assert _inside(line.box, FORM_FIELDS[name])
        assert line.box[3] - line.box[1] >= 20  # on the glyphs (12 pt at 200 DPI)
    x1, y1, _, y2 = field_pixels(FORM_FIELDS["address"])
    (line,) = [ln for ln in page.text_layer.lines if ln.text == FORM_VALUES["address"]]
    assert y1 + 5 <= line.box[1] < line.box[3] <= y2 - 5  # the border pdfium draws round it is no text
    (label,) = [ln for ln in page.text_layer.lines if ln.text == "Full name:"]
    (name,) = [ln for ln in page.text_layer.lines if ln.text == FORM_VALUES["name"]]
    assert label.box[2] < name.box[0] and label.box[1] < (name.box[1] + name.box[3]) / 2 < label.box[3]
    one, two = page.text_layer.lines[-2:]
    assert _inside(one.box, note_rect) and _inside(two.box, note_rect) and two.box[1] >= one.box[3]


def test_only_annotation_text_a_reader_sees_becomes_text(tmp_path):
    """Hidden and NoView FreeTexts, one off the page, one whose appearance draws nothing, a
    sticky note (its icon is drawn, its text only in a viewer's popup) and a stamp (its words
    are glyphs in its appearance, its /Contents a description) add nothing."""
    freetext, sticky, stamp = pdfium_c.FPDF_ANNOT_FREETEXT, pdfium_c.FPDF_ANNOT_TEXT, pdfium_c.FPDF_ANNOT_STAMP
    note = (160, 300, 24, 24)
    annots = [
        *TYPED,
        Annot(freetext, (160, 440, 300, 22), "Hidden words", flags=pdfium_c.FPDF_ANNOT_FLAG_HIDDEN),
        Annot(freetext, (160, 400, 300, 22), "Unseen words", flags=pdfium_c.FPDF_ANNOT_FLAG_NOVIEW),
        Annot(freetext, (700, 700, 100, 22), "Off the page"),
        Annot(freetext, (160, 360, 300, 22), "Drawn as nothing", appearance="q Q"),
        Annot(sticky, note, "A reviewer's note, in a popup"),
        Annot(stamp, (160, 200, 200, 40), "Approval stamp", appearance="BT /Helv 24 Tf 170 210 Td (APPROVED) Tj ET"),
    ]
    page = first_page(_paper_form(tmp_path / "notes.pdf", annots))
    assert page.text_layer.trusted
    assert _texts(page) == LABELS + [FORM_VALUES["name"]]
    assert _ink(page, note) > 100 and _ink(page, (160, 200, 200, 40)) > 100  # the icon and the stamp are drawn
    assert _ink(page, (160, 360, 300, 86)) == 0  # nothing drawn for the hidden ones and the empty appearance


def test_hidden_annotations_are_left_out_by_their_flags_not_only_their_ink(tmp_path):
    """Read against the pixels of the page with the annotation shown, a Hidden or NoView one
    still gives nothing; a shown one is read without the document's form layer too."""
    rect, value = FORM_FIELDS["name"], FORM_VALUES["name"]
    shown = _paper_form(tmp_path / "shown.pdf", TYPED)
    pdf = pdfium.PdfDocument(str(shown))  # no init_forms: FreeText needs no form handle
    try:
        page = pdf[0]
        pixels = page.render(scale=200 / 72).to_numpy()[:, :, :3]
        assert [t for _, t in annotation_lines(page, pixels, _map(page), 24)] == [value]
        page.close()
    finally:
        pdf.close()
    for flag in (pdfium_c.FPDF_ANNOT_FLAG_HIDDEN, pdfium_c.FPDF_ANNOT_FLAG_NOVIEW):
        hidden = typewriter(rect, value)
        hidden.flags = flag
        pdf = pdfium.PdfDocument(str(_paper_form(tmp_path / f"hidden{flag}.pdf", [hidden])))
        try:
            assert annotation_lines(pdf[0], pixels, _map(pdf[0]), 24) == []
        finally:
            pdf.close()


def test_typed_on_text_is_in_the_pixels_with_the_text_layer_off(tmp_path):
    path = _paper_form(tmp_path / "typed.pdf", TYPED)
    page = _pixels_only(path)
    assert page.text_layer is None
    assert _ink(page, FORM_FIELDS["name"]) > 500  # pdfium draws the annotation: OCR reads it


def _raw_pdf(path, content: str, fields: dict[int, str], acroform: str, extra=None, rotate: int = 0):
    """A one-page Letter PDF written object by object: `content` in Helvetica (/F1), the
    widgets `fields` (object number -> dictionary) as its annotations and AcroForm fields,
    `acroform` the rest of the AcroForm's dictionary, `extra` more objects (appearance streams)."""

    def stream(data: str) -> str:
        return f"<< /Length {len(data)} >>\nstream\n{data}\nendstream"

    refs = " ".join(f"{n} 0 R" for n in fields)
    objects = {
        1: f"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [{refs}] {acroform} >> >>",
        2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        3: f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Rotate {rotate} /Contents 4 0 R"
        f" /Resources << /Font << /F1 5 0 R >> >> /Annots [{refs}] >>",
        4: stream(content),
        5: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        **fields,
        **{n: stream(data) if not data.startswith("<<") else data for n, data in (extra or {}).items()},
    }
    return write_objects(path, objects)


def _body(texts, top: float, x: float = 72, lead: float = 16) -> str:
    return "".join(f"BT /F1 12 Tf {x} {top - lead * i} Td ({t}) Tj ET\n" for i, t in enumerate(texts))


BODY = [
    "The quick brown fox jumps over the lazy dog again.",
    "Pack my box with five dozen liquor jugs today now.",
    "Sphinx of black quartz, judge my vow, said the man.",
]
HELV = "/DR << /Font << /Helv 5 0 R >> >> /DA (/Helv 0 Tf 0 g)"


def test_a_field_gives_what_its_appearance_shows_not_its_value(tmp_path):
    """A number field formatted by its JavaScript action ($1,234.50 for 1234.5), a date field
    (03/05/2024 for 20240305), both as their appearance streams show them (pdfium runs no
    JavaScript), and a value too long for its one-line field: only what shows inside it."""

    def widget(name: str, value: str, y: int, more: str = "") -> str:
        return (
            f"<< /Type /Annot /Subtype /Widget /FT /Tx /T ({name}) /V ({value}) /DA (/Helv 12 Tf 0 g)"
            f" /Rect [130 {y} 330 {y + 20}] /P 3 0 R /F 4 {more} >>"
        )

    def shows(text: str) -> str:
        ap = f"/Tx BMC BT 0 g /Helv 12 Tf 2 5 Td ({text}) Tj ET EMC"
        form = "/Type /XObject /Subtype /Form /BBox [0 0 200 20] /Resources << /Font << /Helv 5 0 R >> >>"
        return f"<< {form} /Length {len(ap)} >>\nstream\n{ap}\nendstream"

    action = '/AA << /F << /S /JavaScript /JS (AFNumber_Format\\(2,0,0,0,"$",true\\);) >> >>'
    long = "This note is far too long to fit in the small field so most of it is cut off at the edge"
    fields = {
        20: widget("amount", "1234.5", 595, f"{action} /AP << /N 30 0 R >>"),
        21: widget("date", "20240305", 555, "/AP << /N 31 0 R >>"),
        22: widget("notes", long, 515),  # no appearance: pdfium makes one, clipped to the field
    }
    content = _body(BODY, 740) + _body(["Amount:", "Date:", "Notes:"], 600, lead=40)
    path = _raw_pdf(
        tmp_path / "formatted.pdf", content, fields, HELV, {30: shows("$1,234.50"), 31: shows("03/05/2024")}
    )
    page = first_page(path)
    assert page.text_layer.trusted
    amount, date, note = page.text_layer.lines[-3:]
    assert (amount.text, date.text) == ("$1,234.50", "03/05/2024")
    assert long.startswith(note.text) and len(note.text) >= len("This note is far too long to fit in the")
    assert len(note.text) < len("This note is far too long to fit in the sm")  # what shows, not the value
    k, height = 200 / 72, 792
    for line, y in ((amount, 595), (date, 555), (note, 515)):
        x1, y1, x2, y2 = 130 * k, (height - y - 20) * k, 330 * k, (height - y) * k
        assert x1 - 1 <= line.box[0] < line.box[2] <= x2 + 1 and y1 - 1 <= line.box[1] < line.box[3] <= y2 + 1


def test_an_upright_field_on_a_turned_page_stacks_its_lines_in_reading_order(tmp_path):
    """A /Rotate 90 page whose text is set turned so that it reads upright, and a multi-line
    field turned with it (/MK /R 90, as Acrobat writes one): its lines read across the shown
    page, top to bottom, as the page's own lines do."""
    value = "12 Harbour Road\\rFlat 3\\rPortsmouth PO1 2AB"
    field = (
        f"<< /Type /Annot /Subtype /Widget /FT /Tx /T (addr) /Ff 4096 /V ({value}) /DA (/Helv 12 Tf 0 g)"
        " /Rect [177 130 252 400] /P 3 0 R /F 4 /MK << /BC [0 0 0] /R 90 >> >>"
    )
    turned = "q 0 1 -1 0 612 0 cm\n" + _body(BODY + ["How vexingly quick daft zebras jump in the meadow."], 560)
    turned += _body(["Address:"], 430) + "Q\n"
    page = first_page(
        _raw_pdf(tmp_path / "turned.pdf", turned, {20: field}, "/NeedAppearances true " + HELV, rotate=90)
    )
    assert page.text_layer.trusted and page.image.width > page.image.height  # shown landscape
    lines = page.text_layer.lines[-3:]
    assert [ln.text for ln in lines] == ["12 Harbour Road", "Flat 3", "Portsmouth PO1 2AB"]
    for ln in lines:
        assert ln.box[2] - ln.box[0] > ln.box[3] - ln.box[1]  # across the shown page, not strips down it
        assert 25 <= ln.box[3] - ln.box[1] <= 45  # a 12 pt line
    assert all(b.box[1] >= a.box[3] - 2 for a, b in zip(lines, lines[1:]))  # top to bottom
    assert len({ln.box[0] for ln in lines}) == 1  # set flush left, as the field shows them
    (label,) = [ln for ln in page.text_layer.lines if ln.text == "Address:"]
    assert label.box[2] < lines[0].box[0] and label.box[1] - 5 <= lines[0].box[1]  # right of its label


# A review's cases, as pages of printed lines with one field or annotation each (objects from 10).
_LINES = "".join(
    f"BT /F1 11 Tf 72 {740 - 16 * i} Td (The quick brown fox jumps over the lazy dog while reading labels) Tj ET\n"
    for i in range(8)
)


def _stream(d: str, data: str) -> str:
    return f"<< {d} /Length {len(data)} >>\nstream\n{data}\nendstream"


def _review_pdf(path, annots: dict[int, str], content: str = "", refs=None, fields=None):
    refs = list(annots) if refs is None else refs
    fields = [k for k in annots if "/Subtype /Widget" in annots[k]] if fields is None else fields
    objects = {
        1: f"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [{' '.join(f'{k} 0 R' for k in fields)}]"
        " /DR << /Font << /Helv 3 0 R >> >> >> >>",
        2: "<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        3: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        4: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /Font << /F1 3 0 R >> >>"
        f" /Annots [{' '.join(f'{k} 0 R' for k in refs)}] >>",
        5: _stream("", _LINES + content),
        **annots,
    }
    out, offsets = bytearray(b"%PDF-1.7\n"), {}
    for n in sorted(objects):
        offsets[n] = len(out)
        out += f"{n} 0 obj\n{objects[n]}\nendobj\n".encode("latin-1")
    xref, size = len(out), max(objects) + 2  # one free number past the last object
    out += f"xref\n0 {size}\n0000000000 65535 f \n".encode()
    for n in range(1, size):
        out += (f"{offsets[n]:010d} 00000 n \n" if n in offsets else "0000000000 65535 f \n").encode()
    out += f"trailer\n<< /Size {size} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def _shows(text: str, w: int = 200, h: int = 20) -> str:
    form = f"/Type /XObject /Subtype /Form /BBox [0 0 {w} {h}] /Resources << /Font << /Helv 3 0 R >> >>"
    return _stream(form, f"/Tx BMC BT /Helv 12 Tf 0 g 2 6 Td ({text}) Tj ET EMC")


def _field(value: str = "(X)", ap: int = 11, rect: str = "100 500 300 520") -> str:
    return (
        f"<< /Type /Annot /Subtype /Widget /FT /Tx /T (f) /V {value} /Rect [{rect}] /P 4 0 R /F 4"
        f" /DA (/Helv 12 Tf 0 g) /AP << /N {ap} 0 R >> >>"
    )


def _added(path) -> tuple[list[str], bool]:
    layer = first_page(path, dpi=144).text_layer
    return [ln.text for ln in layer.lines[8:]], layer.trusted


def test_a_field_under_another_annotation_gives_only_what_shows(tmp_path):
    """A black Square annotation over "123-45-" of a filled SSN field (a viewer's redaction):
    only the digits whose own ink shows."""
    annots = {
        10: _field("(123-45-6789)"),
        11: _shows("123-45-6789"),
        12: _stream("/Type /XObject /Subtype /Form /BBox [100 500 148 520]", "0 g 100 500 48 20 re f"),
        13: "<< /Type /Annot /Subtype /Square /Rect [100 500 148 520] /F 4 /C [0 0 0] /IC [0 0 0] /P 4 0 R"
        " /AP << /N 12 0 R >> >>",
    }
    assert _added(_review_pdf(tmp_path / "redact.pdf", annots, refs=[10, 13])) == (["6789"], True)


def test_letters_with_descenders_in_a_tight_field_are_kept(tmp_path):
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(tmp_path / "tight.pdf"), pagesize=(612, 792))
    c.setFont("Helvetica", 11)
    for i in range(8):
        c.drawString(72, 740 - 16 * i, "The quick brown fox jumps over the lazy dog while reading labels")
    c.acroForm.textfield(name="m", value="Jiggly Puppy yoga", x=100, y=450, width=300, height=16, fontSize=12)
    c.save()
    assert _added(tmp_path / "tight.pdf") == (["Jiggly Puppy yoga"], True)


def test_a_value_typed_over_a_printed_template_keeps_its_characters(tmp_path):
    annots = {10: _field("(03/05/2024)"), 11: _shows("03/05/2024")}
    path = _review_pdf(tmp_path / "date.pdf", annots, "BT /F1 12 Tf 102 506 Td (__/__/____) Tj ET")
    assert _added(path) == (["__/__/____", "03/05/2024"], True)


def test_a_field_is_read_by_its_kind_not_its_value(tmp_path):
    """A numeric /V (pdfium gives no string for it) shown as "$1,234.50", and a FreeText with
    rich text (/RC) and no /Contents."""
    annots = {
        10: _field("1234.5"),
        11: _shows("$1,234.50"),
        12: _stream(
            "/Type /XObject /Subtype /Form /BBox [100 440 400 460] /Resources << /Font << /Helv 3 0 R >> >>",
            "BT /Helv 12 Tf 0 g 102 446 Td (Reviewer typed this) Tj ET",
        ),
        13: '<< /Type /Annot /Subtype /FreeText /Rect [100 440 400 460] /F 4 /RC (<body xmlns="http://www.w3.org/1999/xhtml">'
        "<p>Reviewer typed this</p></body>) /DA (/Helv 12 Tf 0 g) /P 4 0 R /AP << /N 12 0 R >> >>",
    }
    assert _added(_review_pdf(tmp_path / "gated.pdf", annots)) == (["$1,234.50", "Reviewer typed this"], True)


def test_a_field_listed_twice_gives_its_text_once(tmp_path):
    annots = {10: _field("(Visible Value)"), 11: _shows("Visible Value")}
    assert _added(_review_pdf(tmp_path / "dup.pdf", annots, refs=[10, 10])) == (["Visible Value"], True)


def test_fields_pdfium_cannot_copy_leave_the_page_to_ocr(tmp_path):
    """/Annots holds a reference to a free object: pdfium's copy of the page has none of its
    annotations, so the field's text cannot be read from it: the layer is not trusted (OCR)."""
    annots = {10: _field("(Visible Value)"), 11: _shows("Visible Value")}
    layer = first_page(_review_pdf(tmp_path / "dangling.pdf", annots, refs=[12, 10]), dpi=144).text_layer
    assert not layer.trusted and layer.reason == "annotations" and layer.lines == ()


def test_a_signed_signature_field_gives_its_visible_text(tmp_path):
    form = "/Type /XObject /Subtype /Form /BBox [0 0 250 40] /Resources << /Font << /Helv 3 0 R >> >>"
    annots = {
        10: "<< /Type /Annot /Subtype /Widget /FT /Sig /T (sig) /V 12 0 R /Rect [100 400 350 440] /P 4 0 R /F 4"
        " /AP << /N 11 0 R >> >>",
        11: _stream(form, "BT /Helv 10 Tf 0 g 4 26 Td (Digitally signed by Jane Q Signer) Tj ET"),
        12: "<< /Type /Sig /Filter /Adobe.PPKLite /SubFilter /adbe.pkcs7.detached /Contents <00>"
        " /ByteRange [0 0 0 0] >>",
    }
    assert _added(_review_pdf(tmp_path / "sig.pdf", annots)) == (["Digitally signed by Jane Q Signer"], True)
