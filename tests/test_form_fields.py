"""Filled-in PDF forms: field values are rendered into the page's pixels and join a trusted
text layer where they show, in their field's place; nothing else of a form becomes text. Real
AcroForms written here with reportlab."""

from __future__ import annotations

import dataclasses

import numpy as np
import pypdfium2 as pdfium
import pytest

pytest.importorskip("reportlab")
from pdfs import FORM_FIELDS, FORM_TITLE, FORM_VALUES, field_pixels, first_page, form_pdf, write_pdf
from reportlab.lib.colors import black, lightblue

from mineru_cli.config import PDF_RENDERER, LoadOptions
from mineru_cli.core.record import fingerprint
from mineru_cli.form_fields import field_lines
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

    class Map:  # page points -> pixels at 200 DPI, as text_layer's _DeviceMap gives them
        k = 200 / 72
        dy = (0.0, -k)

        def box(self, left, bottom, right, top):
            return left * self.k, (842 - top) * self.k, right * self.k, (842 - bottom) * self.k

    pdf = pdfium.PdfDocument(str(path))
    try:
        pdf.init_forms()
        page = pdf[0]
        blank = np.full((2339, 1654, 3), 255, np.uint8)
        assert field_lines(page, blank, Map(), 24) == []
        rendered = page.render(scale=200 / 72).to_numpy()[:, :, :3]
        assert [t for _, t in field_lines(page, rendered, Map(), 24)] == list(FORM_VALUES.values())
        page.close()
    finally:
        pdf.close()
    pdf = pdfium.PdfDocument(str(path))  # no init_forms: no form handle on its pages
    try:
        assert field_lines(pdf[0], rendered, Map(), 24) == []
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
    """Pages rendered before forms were drawn are parsed again, not served from a journal or cache."""
    engine = {"name": "ocr", "version": "x"}
    load = dataclasses.asdict(LoadOptions())
    assert load["pdf_renderer"] == PDF_RENDERER >= 2
    before = {k: v for k, v in load.items() if k != "pdf_renderer"}  # what earlier versions hashed
    older = dataclasses.asdict(LoadOptions(pdf_renderer=PDF_RENDERER - 1))
    assert len({fingerprint(engine, load), fingerprint(engine, before), fingerprint(engine, older)}) == 3
