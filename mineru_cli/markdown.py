"""Blocks (already in reading order) -> Markdown, shared by all engines.

Rules by block type:
  title, doc_title,  "# text", "#" repeated for its level (core.blocks.heading_level: a doc_title
  paragraph_title    1, a paragraph_title 2..6, a title 1..6; extra["level"] when given), as
                     MinerU writes them
  table              extra["html"] as-is, else extra["cells"] (rows of cell
                     strings) as a Markdown table, else its text line by line
  equation           "$$ latex $$" when extra["latex"], else its text
  code               fenced block (a fence longer than any backtick run inside)
  image, chart       analysed (Pro image analysis, extra["sub_type"] present) with text (a
                     description, a Mermaid flowchart, a chart's table): its text in a
                     <details> block whose summary is the sub_type (else "image content" /
                     "chart content"), as MinerU 4 writes it, less the image link (there is
                     no cropped image to link to); otherwise omitted (the embedded engine's
                     labels read inside a figure stay in the block, as in MinerU's pipeline)
  header / footer /  omitted: page furniture stays in the blocks only (a page_footnote is
  page_number /      written as a paragraph)
  aside_text
  text               its text as a paragraph; a line starting with a block marker (`# `, `- `,
                     `+ `, `* `) has it escaped (`\\# `), as MinerU escapes a text block's, so prose
                     never becomes a heading or a list item
  anything else      its text as a paragraph (list, captions, ...)
(core.blocks.NOT_IN_MARKDOWN lists the omitted types.)
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from mineru_cli.core.blocks import FIGURES, HEADINGS, NOT_IN_MARKDOWN, Block, heading_level
from mineru_cli.core.blocks import BlockType as T


def blocks_to_markdown(blocks: Iterable[Block]) -> str:
    parts = [md for md in (block_to_markdown(b) for b in blocks) if md]
    return "\n\n".join(parts) + "\n" if parts else ""


def block_to_markdown(block: Block) -> str:
    """One block's Markdown, or "" when the block does not belong in it."""
    kind, text, extra = block.type, (block.text or "").strip(), block.extra or {}
    if kind in NOT_IN_MARKDOWN:
        return ""
    if kind in FIGURES:  # only an analysed figure's text: an OCR'd figure's labels stay out
        analysed = "sub_type" in extra
        return _details(text, str(extra["sub_type"] or f"{kind} content")) if text and analysed else ""
    if kind in HEADINGS:
        level = heading_level(kind, extra.get("level"))
        return f"{'#' * level} {' '.join(text.split())}" if text else ""
    if kind == T.TABLE:
        if extra.get("html"):
            return str(extra["html"]).strip()
        if extra.get("cells"):
            return cells_to_markdown(extra["cells"])
        return "  \n".join(line.strip() for line in text.splitlines() if line.strip())
    if kind == T.EQUATION and extra.get("latex"):
        return f"$$\n{str(extra['latex']).strip()}\n$$"
    if kind == T.CODE and text:
        # a fence longer than any run of backticks in the code, which would otherwise close it
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
        return f"{fence}\n{block.text.strip(chr(10))}\n{fence}"
    if kind == T.TEXT:
        return escape_block_marker(text)
    return text


# MinerU's TEXT_BLOCK_MARKDOWN_PREFIX_RE (mineru/backend/utils/markdown_utils.py), on every line:
# its text blocks are one line, ours may hold several, and CommonMark lets a heading or a list
# item interrupt a paragraph. `*` too: MinerU escapes every `*` in text, so its `* ` is no bullet.
_BLOCK_MARKER = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<marker>#{1,6}|[+*-])(?=[ \t])", re.MULTILINE)


def escape_block_marker(text: str) -> str:
    """`text` with a backslash before each line's leading heading or bullet marker."""
    return _BLOCK_MARKER.sub(lambda m: f"{m['indent']}\\{m['marker']}", text)


def _details(content: str, summary: str) -> str:
    """A folded HTML block, as MinerU 4 (docvortex) writes an analysed figure's content."""
    return f"<details>\n<summary>{html.escape(summary, quote=False)}</summary>\n\n{content}\n</details>"


def cells_to_markdown(rows: list[list[str]]) -> str:
    """Rows of cell strings -> Markdown table; the first row is the header."""
    width = max((len(r) for r in rows), default=0)
    if width == 0:
        return ""
    lines = []
    for n, row in enumerate(rows):
        cells = [_cell(c) for c in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("|" + "---|" * width)
    return "\n".join(lines)


def _cell(text) -> str:
    # A pipe would end the cell and a newline the row.
    text = "" if text is None else str(text)
    return " ".join(text.split()).replace("|", "\\|")
