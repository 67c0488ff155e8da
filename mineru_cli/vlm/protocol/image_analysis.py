"""The Pro model's "Image Analysis" answers: what a picture (image or chart block) is, its caption
and its content, read and repaired as the Pro client does (mineru-vl-utils 2.x,
image_analysis_postprocess.process_image_or_chart and post_process._convert_pure_table_content_to_html).

The answer is tagged:
`<|class_start|>chart<|class_end|><|sub_class_start|>bar<|sub_class_end|>`
`<|caption_start|>...<|caption_end|><|content_start|>...<|content_end|>`.
By class, the content is a markdown table (chart, pure_table), Mermaid (flowchart), LaTeX
(pure_formula) or nothing useful (chemical: dropped). Structured content the model got wrong is
emptied rather than passed on; the caller then falls back to the caption.

Neither function raises on any string (every repair step that could fail is guarded the way the
client guards it); a caller that wants the client's belt-and-braces can still catch Exception
and set the block's content to None, as the client's simple_process does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .chart_repair import repair_chart_repetition
from .markdown_table import has_malformed_table, markdown_table_to_html
from .mermaid_repair import drop_single_pipe_edges, fix_subgraph_ids, legalize_node_ids, strict_mermaid
from .mermaid_repetition import has_mermaid_repetition
from .otsl import OTSL_TOKENS, otsl_to_html

_TAGS = {
    "class": ("<|class_start|>", "<|class_end|>"),
    "sub_class": ("<|sub_class_start|>", "<|sub_class_end|>"),
    "caption": ("<|caption_start|>", "<|caption_end|>"),
    "content": ("<|content_start|>", "<|content_end|>"),
}


@dataclass(frozen=True)
class ImageAnalysis:
    """One picture as the model classified it.

    kind: the class, lower-cased ("natural_image", "chart", "flowchart", "pure_table",
    "pure_formula", "chemical", ... or "" when missing); sub_kind: the sub-class, lower-cased;
    caption: the model's description; content: the repaired structured content ("" when none or
    when it was dropped).
    """

    kind: str
    sub_kind: str
    caption: str
    content: str


def _tagged(text: str, start: str, end: str) -> str:
    """The text between the first start tag and the next end tag, stripped; "" when either is missing."""
    begin = text.find(start)
    if begin < 0:
        return ""
    begin += len(start)
    finish = text.find(end, begin)
    return text[begin:finish].strip() if finish >= 0 else ""


def _guarded(content: str, steps: list[Callable[[str], str]]) -> str:
    """Apply the steps in turn; when one fails, keep what the steps before it made (the client
    logs and carries on with the content as it was)."""
    for step in steps:
        try:
            content = step(content)
        except Exception:  # noqa: BLE001 - a repair never costs the picture its content
            break
    return content


def _flowchart(content: str) -> str:
    def drop_if_looping(code: str) -> str:
        return "" if has_mermaid_repetition(code) else code

    # a looping flowchart is dropped (the repairs leave "" as it is); the strict extraction runs
    # on whatever is left
    content = _guarded(content, [drop_if_looping, legalize_node_ids, drop_single_pipe_edges, fix_subgraph_ids])
    return strict_mermaid(content)


def _chart(content: str) -> str:
    content = _guarded(content, [repair_chart_repetition])
    return "" if content and has_malformed_table(content) else content


def analyse(text: str) -> ImageAnalysis:
    """Read one Image Analysis answer: its tagged fields, with the content checked and repaired
    for its class (see the module docstring)."""
    fields = {name: _tagged(text, start, end) for name, (start, end) in _TAGS.items()}
    kind, sub_kind = fields["class"].lower(), fields["sub_class"].lower()
    content = fields["content"]
    # an answer cut off inside its content (one start tag, no end tag) keeps the unfinished content
    if not content and text.count(_TAGS["content"][0]) == 1 and text.count(_TAGS["content"][1]) == 0:
        content = text.split(_TAGS["content"][0])[-1]
    if kind == "chemical":
        content = ""  # the model's chemical structures are not usable
    elif kind == "flowchart":
        content = _flowchart(content)
    elif kind == "chart":
        content = _chart(content)
    return ImageAnalysis(kind=kind, sub_kind=sub_kind, caption=fields["caption"], content=content)


def pure_table_html(content: str) -> str:
    """A "pure_table" picture's content as an HTML table: kept when it already is one, else read
    as a markdown table, else as OTSL; "" when it is none of these or does not convert."""
    if not content or not content.strip():
        return ""
    stripped = content.strip()
    if stripped.lower().startswith("<table") and stripped.lower().endswith("</table>"):
        return stripped
    markdown = markdown_table_to_html(content)
    if markdown is not None:
        return markdown
    if not any(token in content for token in OTSL_TOKENS):
        return ""
    try:
        html = otsl_to_html(content)
    except Exception:  # noqa: BLE001 - an unreadable table is an empty one, as in the client
        return ""
    return html if html.strip() else ""
