"""`--format layout`: `<stem>_layout.pdf`, each page with its blocks' boxes drawn on it.

Boxes are coloured by block type (overlay.COLOURS), numbered in reading order (the record's
block order) with a letter for where the block's text came from (V: the VLM, O: OCR, T: the
PDF's text layer); a legend strip under each page lists that page's types and sources with
their counts, so nothing is drawn over the page's content but the boxes themselves.

Pages are drawn with Pillow on the page image the engine saw (the record's boxes are in its
pixels) and written one at a time as JPEG images into a PDF made with pypdfium2, so a long
document never holds more than one page image. Each layout page has the source page's size:
the image at --dpi pixels per inch (a PDF page's own size in points; an image at that DPI).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, Iterable

import pypdfium2 as pdfium
from PIL import Image, ImageDraw, ImageFont

from .overlay import block_source, colour, source_label, source_letter

EDGE_BYTES = 2048  # the start of a saved PDF holds its document information, the end its trailer
_TRAILER_ID = re.compile(rb"/ID\s*\[\s*<([0-9A-Fa-f]{32})>\s*<([0-9A-Fa-f]{32})>\s*\]")
_CREATION_DATE = re.compile(rb"/CreationDate\s*\((D:\d{14}[+-]\d\d'\d\d'?)\)")
JPEG_QUALITY = 85  # boxes and numbers stay crisp; a 1655x2339 page is ~0.4 MB
FILL_ALPHA = 40  # the box's tint: enough to see the region, the text under it stays legible
LEGEND_BG = (245, 245, 245)


def draw_page(image: Image.Image, record: dict[str, Any]) -> Image.Image:
    """The page image with the record's boxes, numbers and a legend strip under it (RGB).

    Boxes are scaled when the image is not the size the record's boxes are in (a page rendered
    at another DPI); the legend strip is the only part that is not the page."""
    page = image.convert("RGB")
    w, h = page.size
    info = record.get("image") or {}
    sx = w / info["width"] if info.get("width") else 1.0
    sy = h / info["height"] if info.get("height") else 1.0
    line = max(3, round(min(w, h) / 400))
    font = ImageFont.load_default(size=max(12, round(max(w, h) / 90)))

    tint = Image.new("RGBA", page.size, (0, 0, 0, 0))
    pen = ImageDraw.Draw(tint)
    boxes = []
    for b in record.get("blocks") or []:
        x1, y1, x2, y2 = b["bbox"]
        box = (round(x1 * sx), round(y1 * sy), max(round(x2 * sx), round(x1 * sx)), max(round(y2 * sy), round(y1 * sy)))
        boxes.append((box, b))
        pen.rectangle(box, fill=(*colour(b["type"]), FILL_ALPHA))
    page = Image.alpha_composite(page.convert("RGBA"), tint).convert("RGB")
    pen = ImageDraw.Draw(page)
    for box, b in boxes:  # outlines first, then every label over them: a label is never hidden
        pen.rectangle(box, outline=colour(b["type"]), width=line)
    for number, (box, b) in enumerate(boxes, 1):
        label = f"{number}{source_letter(block_source(b, record))}"
        left, top, right, bottom = pen.textbbox((0, 0), label, font=font)
        pad = line
        tag = (box[0], box[1], box[0] + right - left + 2 * pad, box[1] + bottom - top + 2 * pad)
        pen.rectangle(tag, fill=colour(b["type"]))
        pen.text((tag[0] + pad - left, tag[1] + pad - top), label, fill=(255, 255, 255), font=font)
    return _with_legend(page, record, font, line)


def _with_legend(page: Image.Image, record: dict[str, Any], font, line: int) -> Image.Image:
    blocks = record.get("blocks") or []
    types = Counter(str(b["type"]) for b in blocks)
    sources = Counter(block_source(b, record) for b in blocks)
    entries: list[tuple[tuple[int, int, int] | None, str]] = [(colour(t), f"{t} {n}") for t, n in types.items()]
    named = ", ".join(f"{source_letter(s)} {source_label(s)} {n}" for s, n in sources.items())
    entries.append((None, "source: " + (named or "no blocks")))
    entries.append((None, "numbers: reading order"))
    size = font.size
    gap, swatch = size, size
    row_h = round(size * 1.6)
    # Lay the entries out in rows that fit the page's width.
    rows: list[list[tuple[int, tuple[int, int, int] | None, str]]] = [[]]
    x = gap
    measure = ImageDraw.Draw(page)
    for rgb, text in entries:
        width = (swatch + size // 2 if rgb else 0) + round(measure.textlength(text, font=font))
        if rows[-1] and x + width > page.width - gap:
            rows.append([])
            x = gap
        rows[-1].append((x, rgb, text))
        x += width + gap
    strip = row_h * len(rows) + size // 2
    out = Image.new("RGB", (page.width, page.height + strip), LEGEND_BG)
    out.paste(page, (0, 0))
    pen = ImageDraw.Draw(out)
    pen.line([(0, page.height), (page.width, page.height)], fill=(160, 160, 160), width=line)
    for r, row in enumerate(rows):
        y = page.height + size // 2 + r * row_h
        for x, rgb, text in row:
            if rgb:
                pen.rectangle((x, y, x + swatch, y + swatch), fill=rgb)
                x += swatch + size // 2
            pen.text((x, y), text, fill=(30, 30, 30), font=font)
    return out


def page_points(record: dict[str, Any], dpi: float) -> tuple[float, float]:
    """The source page's size in PDF points: its original pixels (the record's) at `dpi`."""
    info = record["image"]
    return info["original_width"] * 72 / dpi, info["original_height"] * 72 / dpi


def write_layout_pdf(
    path: Path, pages: Iterable[dict[str, Any]], load_page: Callable[[dict[str, Any]], Image.Image], dpi: float
) -> Path:
    """Write one layout page per record (in the order given) into `path`, atomically.

    load_page(record) -> the page image the record's boxes are in."""
    pdf = pdfium.PdfDocument.new()
    buffers = []  # pdfium reads each JPEG when the document is saved: keep them until then
    drawn_pages = hashlib.md5(usedforsecurity=False)  # what the file holds, for its /ID
    records: list[dict[str, Any]] = []
    try:
        for record in pages:
            records.append(record)
            drawn = draw_page(load_page(record), record)
            width_pt, height_pt = page_points(record, dpi)
            scale = width_pt / drawn.width  # the page's points per pixel; the legend strip keeps it
            buf = io.BytesIO()
            # 4:4:4 (no chroma subsampling): a thin coloured outline keeps its colour
            drawn.save(buf, "JPEG", quality=JPEG_QUALITY, subsampling=0)
            drawn_pages.update(f"{width_pt:.3f}x{drawn.height * scale:.3f}:".encode() + buf.getbuffer())
            buf.seek(0)
            buffers.append(buf)
            page = pdf.new_page(width_pt, drawn.height * scale)
            image = pdfium.PdfImage.new(pdf)
            image.load_jpeg(buf, autoclose=False)
            image.set_matrix(pdfium.PdfMatrix().scale(width_pt, drawn.height * scale))
            page.insert_obj(image)
            page.gen_content()
            page.close()
        from .writers import open_temporary_beside  # writers imports this module when asked

        fh, tmp = open_temporary_beside(path)
        try:
            with fh:
                out = _Checked(fh)
                pdf.save(out)
                if out.error is not None:
                    raise out.error
                _stable(out, drawn_pages.hexdigest(), records)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    finally:
        pdf.close()
    return path


class _Checked:
    """The file pypdfium2 saves into, keeping the first write error: pypdfium2 writes through a
    ctypes callback, where an exception (a full disk) is only printed and the save goes on, which
    would leave a torn PDF. It keeps the file's first and last bytes for _stable()."""

    def __init__(self, fh: IO[bytes]):
        self.fh = fh
        self.error: OSError | None = None
        self.size = 0
        self.head = b""  # the first bytes written: the document information (/CreationDate)
        self.tail = b""  # the last bytes written: the trailer (/ID)

    def write(self, data: bytes) -> int:
        if self.error is None:
            try:
                self.fh.write(data)
            except OSError as exc:
                self.error = exc
        if len(self.head) < EDGE_BYTES:
            self.head = (self.head + bytes(data))[:EDGE_BYTES]
        self.tail = (self.tail + bytes(data))[-EDGE_BYTES:]
        self.size += len(data)
        return len(data)

    def overwrite(self, pattern: re.Pattern[bytes], value: bytes, at_end: bool) -> None:
        """Write `value` over every group of `pattern`'s match in the file's first (or last)
        bytes, where the group is as long as `value`: no offset in the file moves."""
        edge = self.tail if at_end else self.head
        found = pattern.search(edge)
        if found is None:
            return  # not written as pdfium writes it: the file stays as saved
        start = self.size - len(edge) if at_end else 0
        for group in range(1, len(found.groups()) + 1):
            if found.end(group) - found.start(group) == len(value):
                self.fh.seek(start + found.start(group))
                self.fh.write(value)
        self.fh.seek(self.size)


def _stable(out: _Checked, drawn: str, records: list[dict[str, Any]]) -> None:
    """Make the saved file a function of what it shows. pdfium stamps a new document with the
    clock (/CreationDate) and draws its trailer /ID at random on every save, so the same pages
    gave another file each run: the date becomes the newest of the records' `created` (when the
    pages' content was made; left as saved without one) and the /ID `drawn`, a hash of the pages."""
    out.overwrite(_TRAILER_ID, drawn.upper().encode("ascii"), at_end=True)
    created = [r.get("created") for r in records]
    if created and all(isinstance(c, str) for c in created):
        try:
            newest = max(datetime.fromisoformat(str(c)).astimezone(timezone.utc) for c in created)
        except ValueError:
            return
        out.overwrite(_CREATION_DATE, newest.strftime("D:%Y%m%d%H%M%S+00'00'").encode("ascii"), at_end=False)
