"""The layout model's region classes in MinerU's block vocabulary, and the grouping settings that
the embedded engine's block assembly (engines.assembly), its line cuts (engines.cuts), table text
(engines.table_text) and page roles (engines.page_roles) share; every setting is in the record's
engine options (engines.ocr.options)."""

from __future__ import annotations

from mineru_cli.core.blocks import BlockType as T

# The layout model's CDLA classes -> MinerU's block types (captions keep what they caption).
LAYOUT_TYPES = {
    "text": T.TEXT,
    "title": T.TITLE,
    "figure": T.IMAGE,
    "figure_caption": T.IMAGE_CAPTION,
    "table": T.TABLE,
    "table_caption": T.TABLE_CAPTION,
    "header": T.HEADER,
    "footer": T.FOOTER,
    "reference": T.REF_TEXT,
    "equation": T.EQUATION,
}
GROUPING = {
    "line_in_region": 0.5,  # share of a line's area inside a region to belong to it
    "para_gap": 0.8,  # max vertical gap between paragraph lines, x line height
    "row_gap": 1.5,  # max horizontal gap between pieces of one line, x height
    "row_end_heights": 3.0,  # a loose line at most this x its height wide may end a region's row
    "row_end_clear": 3.0,  # unless a longer line lies over it within this x its height (its column)
    "title_height": 1.35,  # line height vs page median that makes a text block a title
    "header_title_height": 1.1,  # same for a "header": running headers are small, titles big
    "nested_region": 0.8,  # share of a text region's area inside another that makes it nested
    "column_share": 0.2,  # a column of a text block is at least this share of the block's width
    "column_heights": 6.0,  # and at least this x its median line height wide (a small table's columns are not)
    "page_gutter_share": 0.5,  # a region splits at the page's gutter where its gap is this share of it or more
    "table_rows": 0.5,  # a piece whose rows hold side-by-side lines in over this share is a table's
    "list_rows": 0.25,  # a table region whose rows hold side-by-side lines in under this share is a list
    "duplicate_region": 0.7,  # IoU at which two regions of any classes are one found twice
    "background_figure": 0.6,  # share of the page a "figure" covers to be the page's background
    "text_figure": 0.3,  # share of a figure's area its body-size lines cover to make it text
    "text_figure_chars": 120,  # or the characters of its body-size lines (a paragraph's worth)
    "body_line": 0.8,  # a line at least this x the page's median line height is body text
}
# Block types whose lines flow as text (split at column gutters).
FLOWING = frozenset({T.TEXT, T.TITLE, T.REF_TEXT, T.IMAGE_CAPTION, T.TABLE_CAPTION, T.HEADER, T.FOOTER})
# The class of a table region's notes, which table_edges takes out of it (the layout model has
# none), and the block types of all region classes, the model's and these.
TABLE_NOTES = "table_footnote"
REGION_TYPES = {**LAYOUT_TYPES, TABLE_NOTES: T.TABLE_FOOTNOTE}
