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
    write_pdf,
)
from reportlab.lib.colors import black, lightblue

from mineru_cli.annotation_text import annotation_lines
from mineru_cli.config import PDF_RENDERER, LoadOptions
from mineru_cli.core.record import fingerprint
from mineru_cli.inputs import SourceFile, open_document

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


def test_the_value_is_in_the_pixels_with_the_text_layer_off(tmp_path):
    path = form_pdf(tmp_path / "form.pdf")
    doc = open_document(SourceFile(path, path.name, "pdf"), LoadOptions(text_layer="off"))
    try:
        page = doc.page(0)
    finally:
        doc.close()
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
        assert annotation_lines(page, blank, _Map(), 24) == []
        rendered = page.render(scale=200 / 72).to_numpy()[:, :, :3]
        assert [t for _, t in annotation_lines(page, rendered, _Map(), 24)] == list(FORM_VALUES.values())
        page.close()
    finally:
        pdf.close()
    pdf = pdfium.PdfDocument(str(path))  # no init_forms: no form handle on its pages
    try:
        assert annotation_lines(pdf[0], rendered, _Map(), 24) == []
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
    assert load["pdf_renderer"] == PDF_RENDERER >= 3
    before = {k: v for k, v in load.items() if k != "pdf_renderer"}  # what earlier versions hashed
    older = dataclasses.asdict(LoadOptions(pdf_renderer=PDF_RENDERER - 1))
    assert len({fingerprint(engine, load), fingerprint(engine, before), fingerprint(engine, older)}) == 3


class _Map:  # page points -> pixels at 200 DPI on an A4 page, as text_layer's _DeviceMap gives them
    k = 200 / 72
    dy = (0.0, -k)

    def box(self, left, bottom, right, top):
        return left * self.k, (842 - top) * self.k, right * self.k, (842 - bottom) * self.k


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
        assert [t for _, t in annotation_lines(page, pixels, _Map(), 24)] == [value]
        page.close()
    finally:
        pdf.close()
    for flag in (pdfium_c.FPDF_ANNOT_FLAG_HIDDEN, pdfium_c.FPDF_ANNOT_FLAG_NOVIEW):
        hidden = typewriter(rect, value)
        hidden.flags = flag
        pdf = pdfium.PdfDocument(str(_paper_form(tmp_path / f"hidden{flag}.pdf", [hidden])))
        try:
            assert annotation_lines(pdf[0], pixels, _Map(), 24) == []
        finally:
            pdf.close()


def test_typed_on_text_is_in_the_pixels_with_the_text_layer_off(tmp_path):
    path = _paper_form(tmp_path / "typed.pdf", TYPED)
    doc = open_document(SourceFile(path, path.name, "pdf"), LoadOptions(text_layer="off"))
    try:
        page = doc.page(0)
    finally:
        doc.close()
    assert page.text_layer is None
    assert _ink(page, FORM_FIELDS["name"]) > 500  # pdfium draws the annotation: OCR reads it
