"""Blocks (already in reading order) -> Markdown, shared by all engines.

Rules by block type:
  title, doc_title,  "# text", "#" repeated for its level (core.blocks.heading_level: a doc_title
  paragraph_title    1, a paragraph_title 2..6, a title 1..6; extra["level"] when given), as
                     MinerU writes them
  table              extra["html"] as-is but for its <eq> formulas, as $...$ (embedded_formulas),
                     else extra["cells"] (rows of cell strings) as a Markdown table, else its
                     text line by line
  equation           "$$ latex $$" when extra["latex"] (a formula_number beside it as its \\tag:
                     numbered_equations), else its text
  code               fenced block (a fence longer than any backtick run inside), no language
                     named: MinerU names the one Magika guesses ("txt" where it cannot), a model
                     mineru-cli does not ship
  index              the VLM's table of contents: "- entry" a line, page numbers after a tab
                     left out, as MinerU 4 writes it (index_entries)
  image, chart       the link to its crop, `![](images/<name>.jpg)`, where one was written
                     (--format content-list), as MinerU links it; then, analysed (Pro image
                     analysis, extra["sub_type"] present) with text (a description, a Mermaid
                     flowchart, a chart's table), its text in a <details> block whose summary
                     is the sub_type (else "image content" / "chart content"), as MinerU 4
                     writes it; the embedded engine's labels read inside a figure stay in the
                     block, as in MinerU's pipeline; no crop and no analysis: omitted
  header / footer /  omitted: page furniture stays in the blocks only, as does a 2509 `unknown`
  page_number /      block (MinerU drops it: core.blocks.NOT_WRITTEN)
  aside_text,
  unknown
  page_footnote      its text in small grey type, <small><span ...>, its lines joined by <br>,
                     as MinerU 4 writes it (_page_footnote)
  text               its text as a paragraph; a line starting with a block marker (`# `, `- `,
                     `+ `, `* `, or the marker alone on its line) has it escaped (`\\# `), as MinerU
                     escapes a text block's, so prose never becomes a heading or a list item
  anything else      its text as a paragraph (list, captions, ...)
Text read off the page (extra["source"] `text_layer` or `ocr`: literal characters, not Markdown)
has the characters escaped that Markdown would otherwise take for markup and hide (escape_inline):
in prose, headings and table cells alike. The VLM's prose (every type but the ones in NOT_PROSE)
has its inline formulas `\\(...\\)` written `$...$` and the text between them escaped (`\\$`,
`\\*`, `\\_`, a tag's look as entities), as MinerU writes them (prose_text, escape_prose).
(core.blocks.NOT_IN_MARKDOWN lists the omitted types.)
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from mineru_cli.core.blocks import FIGURES, HEADINGS, NOT_IN_MARKDOWN, Block, heading_level
from mineru_cli.core.blocks import BlockType as T


def blocks_to_markdown(blocks: Iterable[Block], images: Mapping[int, str] = MappingProxyType({})) -> str:
    """The blocks' Markdown; images: the path of the crop written for a figure, by its position
    in `blocks` (writers.py writes crops for content-list). An equation's number (Pro's
    formula_number) is its \\tag (equation_tags)."""
    blocks = list(blocks)
    numbers, tags = equation_tags(blocks)
    for _, e, latex in tags:
        blocks[e] = replace(blocks[e], extra={**blocks[e].extra, "latex": latex})
    mds = (block_to_markdown(b, images.get(i, "")) for i, b in enumerate(blocks) if i not in numbers)
    parts = [md for md in mds if md]
    return "\n\n".join(parts) + "\n" if parts else ""


# MinerU2.5-Pro reads an equation's number as a block of its own (formula_number). MinerU 4 makes
# it the LaTeX \tag of the equation beside it in reading order (window.py runs
# optimize_hybrid_formula_number_blocks, mineru/backend/analysis/pdf/formulas.py): the equation
# just before it, else the one just after it unless another number follows that one; the tag is
# the number without its brackets, full-width characters made ASCII (docvortex's
# build_tagged_formula_content, foundation/_text.py). A number beside no equation is text.
_TAG_BRACKETS = ("(", "\ufe59"), (")", "\ufe5a")


def numbered_equations(kinds: Sequence[str]) -> dict[int, int]:
    """Each formula_number's position -> the position of the equation it numbers."""
    numbers = {}
    for i, kind in enumerate(kinds):
        if kind != T.FORMULA_NUMBER:
            continue
        if i > 0 and kinds[i - 1] == T.EQUATION:
            numbers[i] = i - 1
        elif i + 1 < len(kinds) and kinds[i + 1] == T.EQUATION and (i + 2 == len(kinds) or kinds[i + 2] != kind):
            numbers[i] = i + 1
    return numbers


def equation_tags(blocks: Sequence[Block]) -> tuple[dict[int, int], list[tuple[int, int, str]]]:
    """(numbers, tags): numbered_equations of `blocks` (no number among them is written on its
    own) and (number, equation, its LaTeX tagged with the number) for each number that tags its
    equation (tag_equation). The Markdown and the content list tag equations with it."""
    numbers = numbered_equations([b.type for b in blocks])
    tags = []
    for n, e in numbers.items():
        if latex := tag_equation(str(blocks[e].extra.get("latex") or ""), blocks[n].text):
            tags.append((n, e, latex))
    return numbers, tags


def tag_equation(latex: str, number: str) -> str:
    """`latex` tagged with `number` as MinerU 4 tags it, or "" where either is empty (the number
    is then dropped, the equation left as it was)."""
    tag = "".join(chr(ord(c) - 0xFEE0) if 0xFF01 <= ord(c) <= 0xFF5E else c for c in number.strip())
    opening, closing = _TAG_BRACKETS
    tag = tag[1:].strip() if tag.startswith(opening) else tag
    tag = tag[:-1].strip() if tag.endswith(closing) else tag
    latex = latex.strip()
    return f"{latex}\\tag{{{tag}}}" if latex and tag else ""


def block_to_markdown(block: Block, image: str = "") -> str:
    """One block's Markdown, or "" when the block does not belong in it. image: a figure's
    crop's path, which the Markdown links."""
    kind, extra = block.type, block.extra or {}
    text = prose_text(kind, block.text or "", extra.get("source")).strip()
    literal = extra.get("source") in LITERAL_SOURCES
    if kind in NOT_IN_MARKDOWN:
        return ""
    if kind in FIGURES:  # its crop's link, then only an analysed figure's text (not OCR'd labels)
        parts = [f"![]({image})"] if image else []
        if text and "sub_type" in extra:
            parts.append(_details(embedded_formulas(text), str(extra["sub_type"] or f"{kind} content")))
        return "\n\n".join(parts)
    if kind in HEADINGS:
        level = heading_level(kind, extra.get("level"))
        heading = " ".join(text.split())
        return f"{'#' * level} {_literal_heading(heading) if literal else heading}" if text else ""
    if kind == T.TABLE:
        if extra.get("html"):
            return embedded_formulas(str(extra["html"]).strip())
        if extra.get("cells"):
            return cells_to_markdown(extra["cells"], literal)
        lines = (line.strip() for line in text.splitlines() if line.strip())
        return "  \n".join(escape_block_marker(escape_inline(line)) if literal else line for line in lines)
    if kind == T.EQUATION and extra.get("latex"):
        return f"$$\n{str(extra['latex']).strip()}\n$$"
    if kind == T.INDEX and not literal:
        return "\n".join(index_entries(text))
    if kind == T.CODE and text:
        # a fence longer than any run of backticks in the code, which would otherwise close it
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
        return f"{fence}\n{block.text.strip(chr(10))}\n{fence}"
    if kind == T.PAGE_FOOTNOTE:
        return _page_footnote(text, literal)
    if literal:  # any paragraph read off the page: a caption, a reference, a footnote too
        # its lines (a list's items) with a hard break between them, as MinerU breaks before
        # a list item: a newline alone would re-flow them in a viewer
        return "  \n".join(escape_block_marker(escape_inline(line)) for line in text.split("\n"))
    if kind == T.TEXT:
        return escape_block_marker(text)
    return text


# MinerU 4 writes a page footnote in small, grey type, its lines joined by <br> (docvortex
# 0.6.4's _render_page_footnote, render/_internal/markdown/blocks.py); MinerU 2.5 and 3 left it
# out of the Markdown. Inline HTML: the Markdown inside (an inline formula) still renders.
_PAGE_FOOTNOTE = '<small><span class="docvortex-page-footnote" data-block-type="page_footnote" style="color:#6b7280">'


def _page_footnote(text: str, literal: bool) -> str:
    lines = [escape_block_marker(escape_inline(line) if literal else line) for line in text.split("\n")]
    body = "<br>".join(lines).strip()
    return f"{_PAGE_FOOTNOTE}{body}</span></small>" if body else ""


# MinerU's TEXT_BLOCK_MARKDOWN_PREFIX_RE (mineru/backend/utils/markdown_utils.py), on every line:
# its text blocks are one line, ours may hold several, and CommonMark lets a heading or a list
# item interrupt a paragraph. `*` too: MinerU escapes every `*` in text, so its `* ` is no bullet.
# A marker alone on its line is one too (an empty heading or list item, its character lost), and
# so are a blockquote's `>` and a line of only `=` or `-` (a heading's underline, a rule).
_BLOCK_MARKER = re.compile(
    r"^(?P<indent>[ \t]{0,3})(?P<marker>(?:#{1,6}|[+*-])(?=[ \t]|$)|>|(?:=+|-+)(?=[ \t]*$))", re.MULTILINE
)


def escape_block_marker(text: str) -> str:
    """`text` with a backslash before each line's leading heading or bullet marker."""
    return _BLOCK_MARKER.sub(lambda m: f"{m['indent']}\\{m['marker']}", text)


# Where a block's text was read off the page as it stands (the text layer or OCR): its characters
# are literal. The VLM's prose is escaped as MinerU escapes it, its inline formulas made $...$ (prose_text).
LITERAL_SOURCES = frozenset({"text_layer", "ocr"})
# Types whose VLM text is no prose: a table's HTML, an equation's LaTeX, code as it is set, and a
# figure's analysis (MinerU 4 reads inline formulas only in its natural-language blocks).
NOT_PROSE = frozenset({T.TABLE, T.EQUATION, T.EQUATION_BLOCK, T.CODE, T.IMAGE, T.CHART, T.IMAGE_BLOCK})
# The VLM writes an inline formula as \(...\); MinerU writes it as $...$, in the Markdown and in
# content_list alike. MinerU 4.0.12: _natural_language_spans (mineru/backend/analysis/pdf/
# normalization.py) cuts the text at each \(...\) into an inline equation, docvortex's
# append_equation_span strips its LaTeX and drops an empty one, and both writers put it between
# the inline delimiters, `$` and `$` (docvortex/options.py). MinerU 2.5 alike (vlm_magic_model.py's
# INLINE_EQUATION spans, vlm_middle_json_mkcontent.py's merge_para_with_text).
_INLINE_FORMULA = re.compile(r"\\\((.*?)\\\)", re.DOTALL)


def prose_text(kind: str, text: str, source: object = None) -> str:
    """A block's text as MinerU writes it: the VLM's prose with its inline formulas as $...$ and
    the text between them escaped (escape_prose); text read off the page (literal) and the types
    in NOT_PROSE as they are."""
    if source in LITERAL_SOURCES or kind in NOT_PROSE:
        return text
    parts, end = [], 0
    for m in _INLINE_FORMULA.finditer(text):
        parts += [escape_prose(text[end : m.start()]), f"${m[1].strip()}$" if m[1].strip() else ""]
        end = m.end()
    return "".join(parts) + escape_prose(text[end:])


# The text between the VLM's inline formulas, as MinerU 4.0.12 writes it in the Markdown and
# content_list alike (docvortex 0.6.4's _escape_plain_markdown_text, render/_internal/markdown/
# inline.py): a backslash before each of `*`, `_`, backtick, `~` and `$` not escaped already (an
# odd run of backslashes before it), so a literal `$` never pairs with a formula's and "a_b_c"
# is no emphasis (escape_conservative_markdown_text; MinerU 3.4.4 escapes the same set, 2.5.4
# none); a tag's look (`<b>`, `<!-- -->`) as its entities, shown, not taken for HTML; and an
# `&` that would start an entity as `&amp;`.
_CONSERVATIVE = re.compile(r"(\\*)([*_`~$])")
_TAG_LIKE = re.compile(r"</?[A-Za-z][^<>\n]*>|<!--.*?-->|<![A-Za-z][^<>\n]*>|<\?[^<>\n]*\?>")
_ENTITY_LIKE = re.compile(r"&(?:#[xX][0-9A-Fa-f]+|#[0-9]+|[A-Za-z][A-Za-z0-9]+);?")


def escape_prose(text: str) -> str:
    """The VLM's text (no formula in it) escaped as MinerU 4 escapes a text span."""
    parts, end = [], 0
    for m in _TAG_LIKE.finditer(text):
        parts += [_escape_plain(text[end : m.start()]), html.escape(m[0], quote=False)]
        end = m.end()
    return "".join(parts) + _escape_plain(text[end:])


def _escape_plain(text: str) -> str:
    text = _CONSERVATIVE.sub(lambda m: m[1] + ("" if len(m[1]) % 2 else "\\") + m[2], text)
    return _ENTITY_LIKE.sub(lambda m: "&amp;" + m[0][1:] if html.unescape(m[0]) != m[0] else m[0], text)


# A formula in a table's cell or an analysed figure's content (MinerU2.5-Pro writes it
# <eq>...</eq>, which MinerU 4 turns on) is written between the inline delimiters with a space
# either side, its HTML entities unescaped, in the Markdown and content_list alike: MinerU 4.0.12's
# format_embedded_html (docvortex render/_internal/markdown/table.py, the LaTeX stripped), MinerU
# 3's _replace_eq_tags_in_table_html (mineru/backend/vlm/vlm_middle_json_mkcontent.py). A viewer
# shows no <eq> tag: the formula stood there as bare text.
_EQ_TAG = re.compile(r"<eq>(.*?)</eq>", re.IGNORECASE | re.DOTALL)


def embedded_formulas(markup: str) -> str:
    """`markup` (a table's HTML, a figure's content) with its <eq> formulas as $...$."""
    return _EQ_TAG.sub(lambda m: f" ${html.unescape(m[1]).strip()}$ ", markup)


# A table of contents (Pro's `index` block) as MinerU 4 writes it: one entry a line of the VLM's
# text (docvortex's fix_pdf_index_blocks), the page number after an entry's last tab dropped where
# it is one (digits, a roman numeral or one letter, at most 12 characters: strip_index_page_tail,
# render/_internal/common/index.py) and its other tabs made spaces, each entry "- " and its label,
# blank ones left out (content_list v1's _render_index_items, the Markdown's _render_index).
_PAGE_TOKEN = re.compile(r"\d+|[ivxlcdm]+|[A-Za-z]", re.IGNORECASE)
PAGE_TOKEN_MAX = 12


def index_entries(text: str) -> list[str]:
    """An index block's entries, "- <label>" each, as MinerU 4 lists them."""
    entries = []
    for line in text.split("\n"):
        head, tab, tail = line.rpartition("\t")
        if tab and len(tail.strip()) <= PAGE_TOKEN_MAX and _PAGE_TOKEN.fullmatch(tail.strip()):
            line = head
        if label := line.replace("\t", " ").strip():
            entries.append(f"- {label}")
    return entries


# Characters Markdown takes for inline markup: MinerU's conservative set (emphasis, code spans,
# strike-through, inline math: escape_conservative_markdown_text), plus what CommonMark would
# hide or change outright: a `<` opening a tag (`\usepackage[<options>]` would show without
# "<options>"), comment or autolink, an `&` starting an entity (`&amp;` would show as "&"), a `[`
# opening a link or a link definition (its target, or all of it, would be hidden), and a
# backslash before punctuation (`\{` would show as "{") or a line break (a hard break).
_INLINE = re.compile(r"""\\(?=[!-/:-@\[-`{-~]|\n)|[*_`~$]|<(?=[A-Za-z/!?])|&(?=#?\w+;)|\[(?=[^\]]*\][(:])""")


def escape_inline(text: str) -> str:
    """`text` with a backslash before each character Markdown would read as inline markup, so a
    Markdown viewer shows the characters that were read."""
    return _INLINE.sub(lambda m: "\\" + m[0], text)


def _literal_heading(text: str) -> str:
    # a heading's closing run of `#` (after a space, or all of it) is markup and would be dropped
    return re.sub(r"(^|(?<=[ \t]))#+$", lambda m: "\\" + m[0], escape_inline(text))


def _details(content: str, summary: str) -> str:
    """A folded HTML block, as MinerU 4 (docvortex) writes an analysed figure's content."""
    return f"<details>\n<summary>{html.escape(summary, quote=False)}</summary>\n\n{content}\n</details>"


def cells_to_markdown(rows: list[list[str]], literal: bool = False) -> str:
    """Rows of cell strings -> Markdown table; the first row is the header. literal: the cells
    were read off the page (their inline markup characters are escaped)."""
    width = max((len(r) for r in rows), default=0)
    if width == 0:
        return ""
    lines = []
    for n, row in enumerate(rows):
        cells = [_cell(c, literal) for c in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("|" + "---|" * width)
    return "\n".join(lines)


def _cell(text, literal: bool = False) -> str:
    # A pipe would end the cell and a newline the row.
    text = " ".join(("" if text is None else str(text)).split())
    return (escape_inline(text) if literal else text).replace("|", "\\|")
