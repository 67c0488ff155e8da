"""The block: one region of a page. One vocabulary of block types for every engine and writer.

The names are MinerU's (MinerU2.5-2509 and -Pro layout types), so a record reads the same
whichever engine made it; the embedded engine maps its layout model's classes onto them.
The sets below are the one place that says which types behave how.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from .words import Word


class BlockType(Word):
    TEXT = "text"
    TITLE = "title"
    DOC_TITLE = "doc_title"  # Pro
    PARAGRAPH_TITLE = "paragraph_title"  # Pro
    LIST = "list"
    LIST_ITEM = "list_item"  # Pro
    TABLE = "table"
    IMAGE = "image"
    CHART = "chart"  # Pro
    IMAGE_BLOCK = "image_block"  # Pro
    CODE = "code"
    ALGORITHM = "algorithm"
    EQUATION = "equation"
    EQUATION_BLOCK = "equation_block"
    FORMULA_NUMBER = "formula_number"  # Pro
    CAPTION = "caption"  # Pro
    IMAGE_CAPTION = "image_caption"
    TABLE_CAPTION = "table_caption"
    CODE_CAPTION = "code_caption"
    FOOTNOTE = "footnote"  # Pro
    IMAGE_FOOTNOTE = "image_footnote"
    TABLE_FOOTNOTE = "table_footnote"
    PAGE_FOOTNOTE = "page_footnote"
    HEADER = "header"
    FOOTER = "footer"
    PAGE_NUMBER = "page_number"
    ASIDE_TEXT = "aside_text"
    REF_TEXT = "ref_text"
    INDEX = "index"  # Pro
    PHONETIC = "phonetic"
    UNKNOWN = "unknown"


T = BlockType

# Around the content rather than part of it: MinerU drops these on request (drop_paratext).
PARATEXT = frozenset({T.HEADER, T.FOOTER, T.PAGE_NUMBER, T.ASIDE_TEXT, T.PAGE_FOOTNOTE, T.UNKNOWN})
# Read first / last whatever their position (reading_order).
PAGE_TOP = frozenset({T.HEADER})
PAGE_BOTTOM = frozenset({T.FOOTER, T.PAGE_NUMBER})
# Read after the page's head, before the body: a slide's sidebar, furniture as its headline is
# (beamer draws it before the frame, and a PDF's text layer gives it first).
PAGE_SIDE = frozenset({T.ASIDE_TEXT})
# In neither the Markdown nor content_list.json: a box MinerU2.5-2509 could not class (`unknown`),
# which MinerU drops (2.5.4's and 3.4.4's vlm_magic_model.py sort it into no kind of block; MinerU
# 4's client reads Pro's as images). The record keeps it.
NOT_WRITTEN = frozenset({T.UNKNOWN})
# Not in a page's Markdown: running heads and margin notes (MinerU leaves them out), and pictures
# without text (an analysed picture or chart shows its description or table: markdown.py).
NOT_IN_MARKDOWN = frozenset({T.HEADER, T.FOOTER, T.PAGE_NUMBER, T.ASIDE_TEXT}) | NOT_WRITTEN
FIGURES = frozenset({T.IMAGE, T.CHART})
# Plain prose that OCR lines reflowed into a paragraph reproduce (hybrid takes the OCR text for
# these). Left to the VLM: table, equation(_block), code and algorithm (structure, indentation and
# symbols that line OCR flattens), image/chart/image_block (no text read), list (a container the
# profiles skip), index (entry/page-number columns), phonetic (small ruby text the OCR detector
# splits or misses), unknown.
LINE_TEXT = frozenset(
    {
        T.TEXT,
        T.TITLE,
        T.DOC_TITLE,
        T.PARAGRAPH_TITLE,
        T.HEADER,
        T.FOOTER,
        T.PAGE_NUMBER,
        T.PAGE_FOOTNOTE,
        T.FOOTNOTE,
        T.ASIDE_TEXT,
        T.REF_TEXT,
        T.LIST_ITEM,
        T.FORMULA_NUMBER,
        T.CAPTION,
        T.TABLE_CAPTION,
        T.IMAGE_CAPTION,
        T.CODE_CAPTION,
        T.TABLE_FOOTNOTE,
        T.IMAGE_FOOTNOTE,
    }
)
# Regions whose content is not lines of text (the embedded engine reads no OCR lines into them).
NOT_LINES = frozenset({T.TABLE, T.EQUATION, T.IMAGE})

# What each type becomes in MinerU's content_list.json (writers.py): a picture item (with its
# crop), a code item, an equation item ($$-wrapped LaTeX), a text item; a title-like text item
# also gets text_level. A table is a table item, a chart a chart item (MinerU 4); any other type
# keeps its own name there.
CONTENT_LIST_IMAGE = frozenset({T.IMAGE})
CONTENT_LIST_CODE = frozenset({T.CODE, T.ALGORITHM})
CONTENT_LIST_EQUATION = frozenset({T.EQUATION, T.EQUATION_BLOCK})
# A formula_number beside no equation is text, as in MinerU 4 (markdown.numbered_equations).
CONTENT_LIST_TEXT = frozenset(
    {T.TEXT, T.TITLE, T.LIST, T.REF_TEXT, T.PHONETIC, T.PARAGRAPH_TITLE, T.DOC_TITLE, T.FORMULA_NUMBER}
)
# A heading's level (Markdown's `#` count, content_list's text_level) as MinerU gives it, as
# (default, lowest, highest): a doc_title 1, a paragraph_title 2 to 6 (MinerU 4: docvortex's
# _normalize_raw_blocks), a title 1 (MinerU 3's get_title_level) up to Markdown's deepest, 6;
# the default unless its block gives a level.
HEADING_LEVELS: Mapping[str, tuple[int, int, int]] = MappingProxyType(
    {T.DOC_TITLE: (1, 1, 1), T.PARAGRAPH_TITLE: (2, 2, 6), T.TITLE: (1, 1, 6)}
)
HEADINGS = frozenset(HEADING_LEVELS)


def heading_level(kind: str, level: object = None) -> int:
    """The level of a heading of type `kind` whose block gives `level` (None: none given)."""
    default, lowest, highest = HEADING_LEVELS[kind]
    given = int(level) if isinstance(level, (int, float)) and not isinstance(level, bool) else default
    return min(max(given, lowest), highest)


# Captions and footnotes -> the types of block they may belong to. content_list.json lists them on
# the nearest block of those types on the page, in the field of the owner's type and the caption's
# kind (image_caption, table_footnote, chart_caption, code_caption, ...). Pro's generic caption and
# footnote belong to any figure, table or code block, as MinerU 4 groups them (docvortex's
# regroup_visual_blocks: VISUAL_MAIN_TYPES); an image's to the nearest chart too (Pro image
# analysis reads some images as charts).
_VISUALS = (T.IMAGE, T.CHART, T.TABLE, T.CODE)
ATTACHED_TO: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        T.IMAGE_CAPTION: (T.IMAGE, T.CHART),
        T.IMAGE_FOOTNOTE: (T.IMAGE, T.CHART),
        T.TABLE_CAPTION: (T.TABLE,),
        T.TABLE_FOOTNOTE: (T.TABLE,),
        T.CODE_CAPTION: (T.CODE,),
        T.CAPTION: _VISUALS,
        T.FOOTNOTE: _VISUALS,
    }
)


@dataclass
class Block:
    """One region of a page, in reading order.

    bbox is (x1, y1, x2, y2) in pixels of the normalised page image the engine saw. type is a
    BlockType value. extra holds engine-specific fields written as-is into the record
    (e.g. "lines" for OCR, "angle"/"html"/"latex" for the VLM).
    """

    type: str
    bbox: tuple[int, int, int, int]
    text: str
    score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "type": str(self.type),
            "bbox": [int(v) for v in self.bbox],
            "text": self.text,
            "score": None if self.score is None else round(float(self.score), 4),
        }
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Block:
        """A record's block back as a Block (the inverse of as_dict)."""
        extra = {k: v for k, v in d.items() if k not in ("type", "bbox", "text", "score")}
        x1, y1, x2, y2 = (int(v) for v in d["bbox"])
        return cls(d["type"], (x1, y1, x2, y2), d.get("text", ""), d.get("score"), extra)
