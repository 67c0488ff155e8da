"""What a drawn box shows of a block: its colour (by type), and where its text came from.

One table for the layout PDF (layout_pdf.py) and the review page (review.py), so a block looks
the same in both. Types of one family share a colour (every title kind is red, every caption
teal); a type not listed is grey.
"""

from __future__ import annotations

from typing import Any

from .core.blocks import BlockType as T

RGB = tuple[int, int, int]

_FAMILIES: list[tuple[RGB, tuple[T, ...]]] = [
    ((214, 39, 40), (T.TITLE, T.DOC_TITLE, T.PARAGRAPH_TITLE)),
    ((31, 119, 180), (T.TEXT, T.REF_TEXT, T.PHONETIC)),
    ((148, 103, 189), (T.LIST, T.LIST_ITEM, T.INDEX)),
    ((44, 160, 44), (T.TABLE,)),
    ((227, 119, 194), (T.IMAGE, T.CHART, T.IMAGE_BLOCK)),
    ((255, 127, 14), (T.EQUATION, T.EQUATION_BLOCK, T.FORMULA_NUMBER)),
    ((140, 86, 75), (T.CODE, T.ALGORITHM)),
    (
        (23, 190, 207),
        (T.CAPTION, T.IMAGE_CAPTION, T.TABLE_CAPTION, T.CODE_CAPTION, T.FOOTNOTE, T.IMAGE_FOOTNOTE, T.TABLE_FOOTNOTE),
    ),
    ((188, 189, 34), (T.HEADER, T.FOOTER, T.PAGE_NUMBER, T.PAGE_FOOTNOTE, T.ASIDE_TEXT)),
]
COLOURS: dict[str, RGB] = {str(t): rgb for rgb, types in _FAMILIES for t in types}
OTHER: RGB = (127, 127, 127)

# Where a block's text came from, as records name it -> how the legend names it and the one
# letter drawn beside its number.
SOURCES = {"vlm": ("VLM", "V"), "ocr": ("OCR", "O"), "text_layer": ("text layer", "T")}


def colour(block_type: str) -> RGB:
    return COLOURS.get(block_type, OTHER)


def hex_colour(block_type: str) -> str:
    return "#%02x%02x%02x" % colour(block_type)


def block_source(block: dict[str, Any], record: dict[str, Any]) -> str:
    """vlm | ocr | text_layer (or what else a block names): the block's own `source` (the VLM
    engine's blocks and PDF text-layer blocks carry one), else the engine that made the record
    (the embedded engine's blocks are all OCR)."""
    source = block.get("source")
    if isinstance(source, str) and source:
        name = source.lower().replace("-", "_")
        return "text_layer" if name in ("text_layer", "pdf_text", "pdf", "textlayer") else name
    engine = (record.get("engine") or {}).get("name")
    return "vlm" if engine == "vlm" else "ocr"


def source_label(source: str) -> str:
    return SOURCES.get(source, (source, ""))[0]


def source_letter(source: str) -> str:
    return SOURCES.get(source, ("", source[:1].upper()))[1]
