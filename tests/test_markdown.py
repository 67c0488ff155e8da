import re

import pytest

from mineru_cli.core.blocks import Block
from mineru_cli.markdown import block_to_markdown, blocks_to_markdown, cells_to_markdown

BOX = (0, 0, 10, 10)


def test_page_with_title_paragraphs_and_furniture():
    blocks = [
        Block("header", BOX, "Running head"),
        Block("title", BOX, "Why Parsing\nIs Hard"),
        Block("text", BOX, "First paragraph."),
        Block("image", BOX, ""),
        Block("image_caption", BOX, "Figure 1. A boat."),
        Block("text", BOX, "   "),
        Block("page_number", BOX, "3"),
        Block("footer", BOX, "Company confidential"),
    ]
    assert blocks_to_markdown(blocks) == ("# Why Parsing Is Hard\n\nFirst paragraph.\n\nFigure 1. A boat.\n")


def test_empty_page_gives_empty_markdown():
    assert blocks_to_markdown([]) == ""
    assert blocks_to_markdown([Block("footer", BOX, "x")]) == ""


def test_title_level_from_extra():
    assert block_to_markdown(Block("title", BOX, "Methods", extra={"level": 2})) == "## Methods"


def test_table_from_cells_escapes_pipes_and_pads_rows():
    block = Block("table", BOX, "ignored", extra={"cells": [["Month", "A|B"], ["Jan"]]})
    assert block_to_markdown(block) == "| Month | A\\|B |\n|---|---|\n| Jan |  |"
    assert cells_to_markdown([]) == ""


def test_table_prefers_html_then_falls_back_to_lines():
    html = "<table><tr><td>1</td></tr></table>"
    assert block_to_markdown(Block("table", BOX, "1", extra={"html": html})) == html
    assert block_to_markdown(Block("table", BOX, "a b\n\nc d")) == "a b  \nc d"


def test_equation_code_and_unknown_types():
    assert block_to_markdown(Block("equation", BOX, "E=mc2", extra={"latex": "E=mc^2"})) == "$$\nE=mc^2\n$$"
    assert block_to_markdown(Block("equation", BOX, "E=mc2")) == "E=mc2"
    assert block_to_markdown(Block("code", BOX, "x = 1\n  y = 2\n")) == "```\nx = 1\n  y = 2\n```"
    assert block_to_markdown(Block("list", BOX, "- one\n- two")) == "- one\n- two"
    assert block_to_markdown(Block("image", BOX, "")) == ""  # a picture without text: nothing to show


def test_analysed_figures_fold_their_content_as_mineru_4_does():
    """docvortex's Markdown (MinerU 4): the content in <details>, summary the sub_type or
    "image content" / "chart content" (the image link before it only where a crop was written:
    test_writers)."""
    photo = Block("image", BOX, "A cat on a mat", extra={"sub_type": "natural_image"})
    assert block_to_markdown(photo) == "<details>\n<summary>natural_image</summary>\n\nA cat on a mat\n</details>"
    table = "| a | b |\n| --- | --- |\n| 1 | 2 |"
    chart = block_to_markdown(Block("chart", BOX, table, extra={"sub_type": "bar_chart"}))
    assert chart == f"<details>\n<summary>bar_chart</summary>\n\n{table}\n</details>"
    analysed_unnamed = {"sub_type": ""}  # an answer without a class still marks the analysis
    unnamed_image = block_to_markdown(Block("image", BOX, "x", extra=analysed_unnamed))
    assert unnamed_image.startswith("<details>\n<summary>image content</summary>")
    unnamed_chart = block_to_markdown(Block("chart", BOX, "x", extra=analysed_unnamed))
    assert unnamed_chart.startswith("<details>\n<summary>chart content</summary>")
    # Labels the embedded engine read inside a figure (no analysis) stay out, as in MinerU's pipeline.
    assert block_to_markdown(Block("image", BOX, "Q1 Q2 Q3")) == ""
    assert "<summary>a&lt;b</summary>" in block_to_markdown(Block("image", BOX, "x", extra={"sub_type": "a<b"}))
    assert block_to_markdown(Block("chart", BOX, "")) == ""


def test_code_containing_a_fence_keeps_its_own():
    md = block_to_markdown(Block("code", BOX, "print('''\n```\n''')"))
    assert md == "````\nprint('''\n```\n''')\n````"


def test_prose_that_starts_like_a_heading_or_a_bullet_stays_prose():
    """A PDF's text layer or OCR reads a paragraph "# of pages ..." or a line "- 5 degrees":
    Markdown would make a heading or a list item of it; MinerU escapes the marker of a text block
    (escape_text_block_markdown_prefix) and so do we, on each of the block's lines."""
    blocks = [
        Block("text", BOX, "# of pages read: 12"),
        Block("text", BOX, "Temperatures were\n- 5 degrees at night\n+ 3 by day\n* roughly"),
        Block("text", BOX, "#hashtag and -1 and ####### seven stay as they are"),
        Block("list", BOX, "- one\n- two"),  # a list is Markdown's list
    ]
    assert blocks_to_markdown(blocks) == (
        "\\# of pages read: 12\n\n"
        "Temperatures were\n\\- 5 degrees at night\n\\+ 3 by day\n\\* roughly\n\n"
        "#hashtag and -1 and ####### seven stay as they are\n\n"
        "- one\n- two\n"
    )


def test_pro_titles_are_headings_at_minerus_levels():
    """MinerU2.5-Pro reads a document's title as doc_title and a section heading as
    paragraph_title; MinerU 4 writes them as headings, `#` and `##` (docvortex's _render_title,
    the levels from _normalize_raw_blocks: a doc_title is 1, a paragraph_title 2 to 6)."""
    blocks = [
        Block("doc_title", BOX, "Parsing\nDocuments"),
        Block("paragraph_title", BOX, "1 Introduction"),
        Block("paragraph_title", BOX, "1.1 Scope", extra={"level": 3}),
        Block("paragraph_title", BOX, "2 Methods", extra={"level": 1}),  # never above a doc_title
        Block("doc_title", BOX, "Parsing", extra={"level": 4}),
        Block("title", BOX, "Results", extra={"level": 9}),
    ]
    assert blocks_to_markdown(blocks) == (
        "# Parsing Documents\n\n## 1 Introduction\n\n### 1.1 Scope\n\n## 2 Methods\n\n# Parsing\n\n###### Results\n"
    )


def test_aside_text_stays_out_as_minerus_markdown_leaves_it():
    """A margin note (arXiv's stamp down a paper's first page) is page furniture: MinerU leaves
    aside_text out of the Markdown as it leaves headers and page numbers (MinerU 4: docvortex's
    PAGE_AUXILIARY_BLOCK_TYPES; MinerU 3: a discarded block); a page footnote stays, in small
    type (test_a_page_footnote_is_in_small_grey_type_as_mineru_4_writes_it)."""
    blocks = [
        Block("aside_text", BOX, "arXiv:2301.00001v1 [cs.CL] 1 Jan 2023"),
        Block("text", BOX, "Body."),
        Block("page_footnote", BOX, "1 A footnote."),
    ]
    assert blocks_to_markdown(blocks).startswith("Body.\n\n<small>")
    assert "arXiv" not in blocks_to_markdown(blocks)


def _shown(markdown: str) -> str:
    """The text a CommonMark viewer shows for `markdown`, whitespace squeezed."""
    from html.parser import HTMLParser

    from markdown_it import MarkdownIt

    parts: list[str] = []
    parser = HTMLParser()
    parser.handle_data = parts.append  # type: ignore[method-assign]
    parser.feed(MarkdownIt("commonmark").render(markdown))
    parser.close()
    return " ".join("".join(parts).split())


PAGE_TEXTS = [
    "The package is called using \\usepackage[<options>]{ekaia}.",  # ekaia.pdf p2
    "<Opening text>",  # DEMO-BFHLetter.pdf: a letter template's placeholder
    "\\renewcommand\\LTcaptype{figure} \\caption{An example}\\\\ A & B \\\\ \\{x\\}",
    "Cameron Gray <c.gray@bangor.ac.uk>, see <https://example.org>",
    "a*b*c, __init__, `ls`, ~~old~~ and $5 or $6; AT&amp;T &copy; &#169;",
    "see [the manual](man.pdf) and\n[1]: a reference",
    "+",
    "Sum\n===\nline\n---\n> quoted\\\nend",
]


@pytest.mark.parametrize("kind", ["text", "title", "image_caption", "ref_text", "table"])
@pytest.mark.parametrize("text", PAGE_TEXTS)
def test_text_read_off_the_page_shows_as_read(kind, text):
    """Text from a PDF's text layer or OCR is literal: a Markdown viewer shows its characters,
    none taken for a tag, an entity, emphasis, a link, a heading's closing hashes or a line
    break. The VLM's prose is escaped as MinerU escapes it (test_vlm_prose_is_escaped_as_minerus_text);
    a VLM table's text is no prose and stays as it is."""
    md = block_to_markdown(Block(kind, BOX, text, extra={"source": "text_layer"}))
    assert _shown(md) == " ".join(text.split())
    vlm = "a *b* c" if kind == "table" else "a \\*b\\* c"
    assert block_to_markdown(Block(kind, BOX, "a *b* c", extra={"source": "vlm"})).endswith(vlm)


def test_table_cells_read_off_the_page_show_as_read():
    rows = [["Name", "Value"], ["<key>", "a_b_c | *x*"]]
    md = cells_to_markdown(rows, literal=True)
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "&lt;key&gt;" in html and "a_b_c | *x*" in html


VLM_PROSE = "Energy \\( E = mc^{2} \\) and \\(\\alpha\\)\\(  \\) hold."


@pytest.mark.parametrize(
    "kind", ["text", "title", "paragraph_title", "image_caption", "ref_text", "page_footnote", "list", "algorithm"]
)
def test_vlm_inline_formulas_are_written_as_minerus_dollars(kind):
    """The VLM writes an inline formula as \\(...\\), which a Markdown viewer shows as a bare
    "(...)". MinerU writes it $...$, its LaTeX stripped and an empty one dropped: MinerU 4.0.12's
    _natural_language_spans (mineru/backend/analysis/pdf/normalization.py) makes it an inline
    equation (docvortex's append_equation_span) rendered between the `$` inline delimiters
    (docvortex/options.py); MinerU 2.5.4 alike (vlm_magic_model.py's INLINE_EQUATION spans,
    vlm_middle_json_mkcontent.py's merge_para_with_text)."""
    md = block_to_markdown(Block(kind, BOX, VLM_PROSE, extra={"source": "vlm"}))
    assert "Energy $E = mc^{2}$ and $\\alpha$ hold." in md
    assert "\\(" not in md


def test_inline_formula_marks_stay_where_they_are_no_vlm_prose():
    """Text read off the page is literal (a LaTeX manual's `\\(` shows as read); a table's HTML,
    an equation's LaTeX and code are no prose."""
    assert _shown(block_to_markdown(Block("text", BOX, "Type \\(x\\) here.", extra={"source": "ocr"}))) == (
        "Type \\(x\\) here."
    )
    code = block_to_markdown(Block("code", BOX, "print('\\(x\\)')", extra={"source": "vlm"}))
    assert code == "```\nprint('\\(x\\)')\n```"
    html = "<table><tr><td>\\(x\\)</td></tr></table>"
    assert block_to_markdown(Block("table", BOX, "x", extra={"html": html, "source": "vlm"})) == html


def test_a_vlm_index_is_minerus_list_of_entries():
    """MinerU 4 lists a table of contents one entry a line (docvortex's fix_pdf_index_blocks),
    "- " and the entry, the page number after its last tab dropped where it is one (digits, a
    roman numeral or one letter, at most 12 characters: strip_index_page_tail) and other tabs
    made spaces (render/_internal/markdown/blocks.py, _render_index). It was one paragraph, its
    page numbers run into the titles."""
    text = "1 Introduction\t1\n1.1 Scope of \\(L^2\\)\t12\n\nPreface\txiv\nAppendix\tA\n2\tResults\tsee below"
    md = block_to_markdown(Block("index", BOX, text, extra={"source": "vlm"}))
    assert md == "- 1 Introduction\n- 1.1 Scope of $L^2$\n- Preface\n- Appendix\n- 2 Results see below"


def test_an_equations_number_is_its_tag_as_minerus():
    """Pro reads an equation's number as a formula_number block. MinerU 4 makes it the \\tag of
    the equation before it in reading order, else of the one after it unless another number
    follows that one, the brackets (and full-width forms) taken off; a number beside no
    equation is text (optimize_hybrid_formula_number_blocks, mineru/backend/analysis/pdf/
    formulas.py; docvortex's build_tagged_formula_content)."""

    def eq(latex):
        return Block("equation", BOX, f"\\[{latex}\\]", extra={"latex": latex, "source": "vlm"})

    def number(text):
        return Block("formula_number", BOX, text, extra={"source": "vlm"})

    blocks = [eq("a=b"), number("(1)"), number("（２）"), eq("c=d"), Block("text", BOX, "So."), number("(3)")]
    assert blocks_to_markdown(blocks) == "$$\na=b\\tag{1}\n$$\n\n$$\nc=d\\tag{2}\n$$\n\nSo.\n\n(3)\n"


def test_formulas_in_a_tables_cells_are_minerus_inline_math():
    """MinerU2.5-Pro writes a formula in a table's cell as <eq>...</eq>; MinerU writes it between
    the inline delimiters with a space either side, its entities unescaped (MinerU 4.0.12:
    docvortex's format_embedded_html, render/_internal/markdown/table.py; MinerU 3:
    _replace_eq_tags_in_table_html). A viewer shows no <eq>: the formula stood as bare text."""
    html = "<table><tr><td><eq> a &lt; b </eq></td><td>x<EQ>\\alpha</EQ></td></tr></table>"
    md = block_to_markdown(Block("table", BOX, "a<b", extra={"html": html, "source": "vlm"}))
    assert md == "<table><tr><td> $a < b$ </td><td>x $\\alpha$ </td></tr></table>"


def test_a_page_footnote_is_in_small_grey_type_as_mineru_4_writes_it():
    """MinerU 4 writes a page footnote (kept in its Markdown, unlike headers and page numbers) as
    `<small><span class="docvortex-page-footnote" data-block-type="page_footnote"
    style="color:#6b7280">...</span></small>`, its lines joined by <br> (docvortex 0.6.4's
    _render_page_footnote, render/_internal/markdown/blocks.py); ours wrote a plain paragraph,
    which read as body text. The Markdown inside (an inline formula) still renders."""
    opening = '<small><span class="docvortex-page-footnote" data-block-type="page_footnote" style="color:#6b7280">'
    vlm = Block("page_footnote", BOX, "1 See \\(x\\).\n2 Ibid.", extra={"source": "vlm"})
    assert block_to_markdown(vlm) == f"{opening}1 See $x$.<br>2 Ibid.</span></small>"
    ocr = Block("page_footnote", BOX, "* Corresponding author\n<a@b.org>", extra={"source": "ocr"})
    md = block_to_markdown(ocr)
    assert md.startswith("<small><span") and md.endswith("</span></small>") and "\n" not in md
    assert "author<br>" in md and _shown(md) == "* Corresponding author<a@b.org>"  # shown as read
    assert block_to_markdown(Block("page_footnote", BOX, "  ", extra={"source": "vlm"})) == ""


def test_vlm_prose_is_escaped_as_minerus_text():
    """The text between the VLM's inline formulas is escaped as MinerU escapes a text span, in
    the Markdown and content_list.json alike (MinerU 4.0.12: docvortex 0.6.4's
    _escape_plain_markdown_text, render/_internal/markdown/inline.py; MinerU 3.4.4's
    merge_para_with_text escapes the same `*`, `_`, backtick, `~`, `$`). Ours left it as it was:
    a price's `$` paired with the `$` of the formula after it, and a viewer showed the words
    between them as a formula."""
    text = "Fees rose from $5 to \\(x\\) dollars (a_b, \\$3, <b>, AT&amp;T & co)."
    md = block_to_markdown(Block("text", BOX, text, extra={"source": "vlm"}))
    assert md == "Fees rose from \\$5 to $x$ dollars (a\\_b, \\$3, &lt;b&gt;, AT&amp;amp;T & co)."
    assert re.findall(r"(?<!\\)\$[^$]*(?<!\\)\$", md) == ["$x$"]  # the one formula a viewer finds
