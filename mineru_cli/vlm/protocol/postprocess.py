"""Step 3, a page's read blocks made final: OTSL tables to HTML, equation repairs, multi-equation
blocks merged, display equations wrapped, and the optional dropping of lists and paratext. The
Pro profile adds: image/chart Image Analysis answers classified first (protocol.figures: a
picture may become a table, an equation, a chart or an image with a sub_type and a description),
a table's images put back and its formulas tagged <eq>, list_item->text,
[Non-Text] cleanup, a text block's Markdown fixes, images held by tables dropped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from ...core.blocks import PARATEXT
from ...core.geometry import covered
from .figures import analysed_block
from .latex import combine_equations, fix_equation, wrap_display_equation
from .layout import LayoutBlock
from .otsl import otsl_to_html
from .pro import fix_text, tag_table_formulas
from .profiles import FIGURE_TYPES, PROFILE_2509, Profile
from .table_images import put_back_images


def merge_equation_blocks(blocks: list[LayoutBlock]) -> list[LayoutBlock]:
    """An equation_block covering (>90% of each) two or more equations becomes one equation
    holding them as an array, in place of the block; equation_blocks are dropped otherwise."""
    equations = [i for i, b in enumerate(blocks) if b.type == "equation"]
    merged: dict[int, list[int]] = {}
    for i, block in enumerate(blocks):
        if block.type != "equation_block":
            continue
        inside = [j for j in equations if covered(blocks[j].bbox, block.bbox) > 0.9]
        if len(inside) > 1:
            merged[i] = inside
    used = {j for inside in merged.values() for j in inside}
    out = []
    for i, block in enumerate(blocks):
        if i in used:
            continue
        if i in merged:
            content = combine_equations([blocks[j].content or "" for j in merged[i]])
            out.append(replace(block, type="equation", content=content))
        elif block.type != "equation_block":
            out.append(block)
    return out


NON_TEXT = "[Non-Text]"


def _drop_non_text(blocks: list[LayoutBlock]) -> list[LayoutBlock]:
    keep_empty = {"header", "footer"}
    protected = {"image", "chart", "table", "equation", "list", "image_block", "equation_block"}
    out = []
    for block in blocks:
        if block.content is None or block.content.strip() != NON_TEXT:
            out.append(block)
        elif block.type in keep_empty:
            out.append(replace(block, content=""))
        elif block.type in protected:
            out.append(block)
    return out


def post_process(
    blocks: Sequence[LayoutBlock],
    profile: Profile = PROFILE_2509,
    drop_list: bool = False,
    drop_paratext: bool = False,
    on_error: Callable[[str, str, Exception], None] | None = None,
) -> list[LayoutBlock]:
    """Tables to HTML, equation repairs, equation_block merging and \\[ \\] wrapping (and the
    Pro steps), in MinerU's order.

    Returns new blocks; the input is not modified. A step that fails on one block leaves that
    block's content as it was and is reported to on_error(step, content, error).
    """

    def failed(step: str, content: str, error: Exception) -> None:
        if on_error is not None:
            on_error(step, content, error)

    out = []
    for block in blocks:
        block = replace(block)
        if block.type == "table" and block.content:
            try:
                block.content = otsl_to_html(block.content)
            except Exception as error:  # noqa: BLE001 - never lose a page to a malformed table
                failed("otsl_to_html", block.content, error)
            if block.image_tokens:
                block.content = put_back_images(block.content, block.image_tokens)
            if profile.table_formula_tags:
                block.content = tag_table_formulas(block.content)
        if profile.image_analysis and block.type in FIGURE_TYPES and block.content:
            block = analysed_block(block, profile.table_formula_tags)
        block.type = profile.content_rename.get(block.type, block.type)
        out.append(block)
    if profile.non_text_cleanup:
        out = _drop_non_text(out)
    for block in out:
        if block.type == "equation" and block.content:
            try:
                block.content = fix_equation(block.content, profile)
            except Exception as error:  # noqa: BLE001 - never lose a page to a malformed equation
                failed("fix_equation", block.content, error)
        elif block.type == "text" and block.content and profile.text_fixes:
            try:
                block.content = fix_text(block.content)
            except Exception as error:  # noqa: BLE001 - never lose a page to one block's text
                failed("fix_text", block.content, error)
    out = merge_equation_blocks(out)
    for block in out:
        if block.type == "equation" and block.content:
            block.content = wrap_display_equation(block.content)
    return [
        b
        for b in out
        if not (b.type == "image" and b.absorbed)  # read as part of its table
        and not (drop_list and b.type == "list")
        and not (drop_paratext and b.type in PARATEXT)
    ]
