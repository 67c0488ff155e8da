"""An image or chart block's Image Analysis answer made into the block MinerU's Pro client makes of
it (mineru-vl-utils 2.x, post_process.simple_process), before the rest of post-processing:

  pure_table   -> a table holding the answer's table as HTML ("" when it is no table)
  pure_formula -> an equation holding the LaTeX (the equation repairs then run on it)
  chart        -> a chart, sub_type the answer's sub-class, content its table
  anything else-> an image, sub_type the class; content the answer's content, or its caption
                  for a natural image or when the content is empty

An answer that cannot be read at all leaves the block without content, as the client does.
The parsing of the answer itself is protocol.image_analysis.
"""

from __future__ import annotations

from dataclasses import replace

from .image_analysis import analyse, pure_table_html
from .layout import LayoutBlock
from .pro import tag_table_formulas


def analysed_block(block: LayoutBlock, tag_formulas: bool) -> LayoutBlock:
    """The block an answered image/chart becomes (a new block). tag_formulas: a pure table's
    \\( \\) and \\[ \\] become <eq> (the profile's table_formula_tags)."""
    try:
        result = analyse(block.content or "")
    except Exception:  # noqa: BLE001 - the client keeps the block with no content
        return replace(block, content=None)
    kind = result.kind
    if kind == "pure_table":
        try:  # (the client has made it a table before the conversion can fail)
            table = pure_table_html(result.content)
            content = (tag_table_formulas(table) if tag_formulas else table) if table else ""
        except Exception:  # noqa: BLE001 - as above
            content = None
        return replace(block, type="table", content=content)
    if kind == "pure_formula":
        return replace(block, type="equation", content=result.content)
    if kind == "chart":
        return replace(block, type="chart", content=result.content, sub_type=result.sub_kind)
    content = result.caption if kind == "natural_image" or not result.content else result.content
    return replace(block, type="image", content=content, sub_type=kind)
