"""Real PDFs for the tests, written with reportlab (a test dependency): prose, two columns, and
the helpers the text-layer tests draw their own pages with; annotations added with pdfium."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.pdfgen import canvas
from reportlab.platypus import BaseDocTemplate, Frame, PageTemplate, Paragraph

PROSE = [
    "Born-digital documents carry their text already.",
    "Reading it is exact and much faster than OCR.",
    "A text layer can lie, so every page is checked first.",
    "Only what a reader can see becomes page content.",
]
TITLE = "Reading What the Page Already Says"
COLUMN_PARAGRAPHS = [
    f"Paragraph {n} explains one idea about parsing documents. "
    + "The text layer gives each character with its box, so the words come out exactly as written. " * 2
    for n in range(1, 17)
]


def first_page(path: Path, dpi: int = 200):
    """Page 0 of a PDF as `mineru parse` loads it (rendered at `dpi`, with its text layer)."""
    from mineru_cli.config import LoadOptions
    from mineru_cli.inputs import SourceFile, open_document

    doc = open_document(SourceFile(path, path.name, "pdf"), LoadOptions(dpi=dpi))
    try:
        return doc.page(0)
    finally:
        doc.close()


def write_pdf(path: Path, draw: Callable, pagesize=A4, compress: bool = True) -> Path:
    """One page drawn by `draw(canvas)`; compress=False keeps the streams readable bytes."""
    c = canvas.Canvas(str(path), pagesize=pagesize, pageCompression=1 if compress else 0)
    draw(c)
    c.showPage()
    c.save()
    return path


def prose(c, lines=PROSE, x=72, top=780, font="Helvetica", size=12) -> None:
    c.setFont(font, size)
    for i, line in enumerate(lines):
        c.drawString(x, top - 18 * i, line)


def two_column_pdf(path: Path) -> Path:
    """A title over two columns of paragraphs that flow from the left column into the right."""
    styles = getSampleStyleSheet()
    width, height = A4
    column = (width - 120) / 2
    doc = BaseDocTemplate(str(path), pagesize=A4)
    frames = [Frame(50, 50, column, height - 100, id="left"), Frame(70 + column, 50, column, height - 100, id="right")]
    doc.addPageTemplates([PageTemplate(id="two", frames=frames)])
    story = [Paragraph(TITLE, styles["Title"])]
    story += [Paragraph(p, styles["BodyText"]) for p in COLUMN_PARAGRAPHS]
    doc.build(story)
    return path


TABLE_ROWS = [["Engine", "Pages", "Seconds"], ["ocr", "120", "95"], ["standard", "120", "410"], ["vlm", "120", "3100"]]


def table_pdf(path: Path) -> Path:
    """A title, prose, and a ruled table: the embedded layout model finds a table region."""
    from reportlab.lib import colors
    from reportlab.platypus import SimpleDocTemplate, Spacer, Table, TableStyle

    styles = getSampleStyleSheet()
    table = Table(TABLE_ROWS, colWidths=[150, 100, 100], rowHeights=28)
    table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 1, colors.black), ("FONTSIZE", (0, 0), (-1, -1), 12)]))
    story = [Paragraph(TITLE, styles["Title"])]
    story += [Paragraph(p, styles["BodyText"]) for p in COLUMN_PARAGRAPHS[:3]]
    story += [Spacer(1, 24), table, Spacer(1, 24), Paragraph(COLUMN_PARAGRAPHS[3], styles["BodyText"])]
    SimpleDocTemplate(str(path), pagesize=A4).build(story)
    return path


FORM_TITLE = "Application form for the annual research grant, please fill in all fields below."
FORM_VALUES = {"name": "Margaret Hamilton Smith", "address": "42 Wallaby Way, Sydney NSW 2000"}
FORM_FIELDS = {"name": (160, 592, 300, 22), "address": (160, 552, 300, 22)}  # x, y, width, height in points


def form_pdf(path: Path, values=FORM_VALUES, more: Callable | None = None) -> Path:
    """A filled-in AcroForm: a title and two labels (a trusted text layer), a text field right of
    each label holding its value ("" leaves it empty), then whatever `more(canvas)` adds."""

    def draw(c) -> None:
        form_labels(c)
        for name, (x, y, width, height) in FORM_FIELDS.items():
            value = values.get(name, "")
            c.acroForm.textfield(
                name=name, value=value, x=x, y=y, width=width, height=height, fontSize=12, borderWidth=0, fillColor=None
            )
        if more is not None:
            more(c)

    return write_pdf(path, draw)


def form_labels(c) -> None:
    """The form's printed part: its title and the labels left of its fields (FORM_FIELDS)."""
    c.setFont("Helvetica", 12)
    c.drawString(72, 760, FORM_TITLE)
    c.drawString(72, 600, "Full name:")
    c.drawString(72, 560, "Address:")


@dataclass
class Annot:
    """An annotation to add with pdfium's public API (reportlab writes no FreeText): its subtype
    (pypdfium2.raw.FPDF_ANNOT_*), rect (x, y, width, height in points), /Contents, flags, and
    its normal appearance stream, in page coordinates (FPDFAnnot_SetAP gives the stream the
    annotation's rect as its /BBox, no /Matrix); None leaves pdfium to make one if it does."""

    subtype: int
    rect: tuple[float, float, float, float]
    contents: str | None = None
    flags: int = 0
    appearance: str | None = None


def typewriter(rect, text: str, size: float = 12) -> Annot:
    """A FreeText annotation as a viewer's typewriter tool writes it: no border, its text set in
    its appearance stream from the rectangle's top left, a line per line of `text` (/Helv as no
    resource: pdfium's standard Helvetica)."""
    x, y, _, height = rect
    lines = " ".join(f"({line}) Tj T*" for line in text.split("\n"))
    stream = f"BT /Helv {size} Tf {size * 1.2} TL {x + 2} {y + height - size} Td {lines} ET"
    return Annot(pdfium_c.FPDF_ANNOT_FREETEXT, rect, text, appearance=stream)


def annotate(path: Path, annots: list[Annot]) -> Path:
    """Add `annots` to page 0 of the PDF at `path`, saved in place."""
    pdf = pdfium.PdfDocument(path.read_bytes())
    page = pdf[0]
    keep = []  # the UTF-16 buffers pdfium reads from, alive until it has

    def wide(text: str):
        buffer = ctypes.create_string_buffer((text + "\0").encode("utf-16-le"))
        keep.append(buffer)
        return ctypes.cast(buffer, pdfium_c.FPDF_WIDESTRING)

    for spec in annots:
        annot = pdfium_c.FPDFPage_CreateAnnot(page, spec.subtype)
        x, y, width, height = spec.rect
        assert annot and pdfium_c.FPDFAnnot_SetRect(annot, pdfium_c.FS_RECTF(x, y + height, x + width, y))
        if spec.contents is not None:
            assert pdfium_c.FPDFAnnot_SetStringValue(annot, b"Contents", wide(spec.contents))
        if spec.flags:
            assert pdfium_c.FPDFAnnot_SetFlags(annot, spec.flags)
        if spec.appearance is not None:
            mode = pdfium_c.FPDF_ANNOT_APPEARANCEMODE_NORMAL
            assert pdfium_c.FPDFAnnot_SetAP(annot, mode, wide(spec.appearance))
        pdfium_c.FPDFPage_CloseAnnot(annot)
    page.close()
    pdf.save(str(path))
    pdf.close()
    return path


def field_pixels(rect, dpi: int = 200, page_height: float = A4[1]) -> tuple[float, float, float, float]:
    """A field's (x, y, width, height) in points -> its box in the page's pixels at `dpi`."""
    x, y, width, height = rect
    k = dpi / 72
    return x * k, (page_height - y - height) * k, (x + width) * k, (page_height - y) * k


def raw_pdf(path: Path, content: str, resources: str = "", objects: dict[int, bytes | str] | None = None) -> Path:
    """A one-page US Letter PDF written object by object, for what reportlab does not write
    (text filled with a shading pattern, a clip set before a form's Do, a translucent form).
    Fonts /F1 Helvetica and /F2 Helvetica-Bold; `objects` numbered from 10 (see `pdf_stream`)."""
    objs: dict[int, bytes | str] = {
        1: "<< /Type /Catalog /Pages 2 0 R >>",
        2: "<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        3: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        4: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
        5: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R "
        f"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> {resources} >> >>",
        6: pdf_stream("", content),
        **(objects or {}),
    }
    return write_objects(path, objs)


def write_objects(path: Path, objects: dict[int, bytes | str]) -> Path:
    """A PDF of `objects` (number -> body; 1 the catalog), with its cross-reference table."""
    out, offsets = bytearray(b"%PDF-1.7\n"), {}
    for number in sorted(objects):
        body = objects[number]
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + (body.encode("latin-1") if isinstance(body, str) else body) + b"\nendobj\n"
    xref, size = len(out), max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for number in range(1, size):
        out += (b"%010d 00000 n \n" % offsets[number]) if number in offsets else b"0000000000 65535 f \n"
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    path.write_bytes(bytes(out))
    return path


def pdf_stream(entries: str, data: bytes | str) -> bytes:
    data = data.encode("latin-1") if isinstance(data, str) else data
    return b"<< " + entries.encode() + b" /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def text_lines(texts, x: float = 72, top: float = 720, size: float = 12, lead: float = 16, font: str = "F1") -> str:
    """Content-stream text: one BT ... ET per line, `lead` points apart."""
    return "".join(f"BT /{font} {size} Tf {x} {top - lead * i} Td ({t}) Tj ET\n" for i, t in enumerate(texts))
