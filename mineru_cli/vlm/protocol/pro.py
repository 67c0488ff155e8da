"""The Pro client's own steps (mineru-vl-utils 2.x, the client of MinerU2.5-Pro-2605 in MinerU 4),
besides the ones in the layout grammar (layout.py) and the table images (table_images.py).

select_blocks   before the crops: an image caption inside an image, chart or image_block is
                dropped (it is part of the figure); an image inside a table is marked `absorbed`
                (read as part of the table, dropped from the page's blocks)
figures_not_analysed
                image analysis reads an image or chart only when it stands alone (not inside an
                image_block: a part of a bigger figure) and is big enough on the page
fix_text        a text block's Markdown: display formulas \\[..\\] in running text become inline
                \\(..\\) (a bare number range stays display), a space after \\to, \\times, \\in,
                \\subset, \\cong before a single letter, and runs of 3+ underscores (blanks to
                fill in) moved out of the inline formula
tag_table_formulas
                a table's \\(..\\) and \\[..\\] become <eq>..</eq> (MinerU 4 turns this on)

Rules, regular expressions and thresholds are MinerU's; where it is odd, it is kept (said so).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterable, Sequence

from ...core.geometry import area, covered
from .layout import LayoutBlock
from .profiles import Profile

INSIDE = 0.9  # the share of a block's area inside its holder that makes it part of it
CAPTION_HOLDERS = frozenset({"image", "chart", "image_block"})
# image analysis: a figure is read when both sides exceed MIN_SIDE or its area exceeds MIN_AREA
# (fractions of the page's width, height and area)
FIGURE_MIN_SIDE = 0.1
FIGURE_MIN_AREA = 0.01


# --------------------------------------------------------------------------- blocks


def _inside_any(blocks: Sequence[LayoutBlock], candidates: Iterable[str], holders: Iterable[str]) -> set[int]:
    """Indices of the `candidates` blocks that have >= INSIDE of their area in a `holders` block."""
    candidates, holders = set(candidates), set(holders)
    holder_at = [i for i, b in enumerate(blocks) if b.type in holders]
    return {
        i
        for i, b in enumerate(blocks)
        if b.type in candidates and any(j != i and covered(b.bbox, blocks[j].bbox) >= INSIDE for j in holder_at)
    }


def table_images(blocks: Sequence[LayoutBlock], skip_types: Iterable[str] = ()) -> dict[int, list[int]]:
    """For each table that is read, the images inside it: an image goes to the table that covers
    the biggest share of it (at least INSIDE; a tie to the smaller table), listed top to bottom,
    then left to right."""
    skip = set(skip_types)
    tables = [i for i, b in enumerate(blocks) if b.type == "table" and "table" not in skip]
    held: dict[int, list[int]] = {i: [] for i in tables}
    for i, block in enumerate(blocks):
        if block.type != "image":
            continue
        best, best_share, best_area = None, INSIDE, 0.0
        for t in tables:
            share = covered(block.bbox, blocks[t].bbox)
            if share < INSIDE:
                continue
            size = area(blocks[t].bbox)
            if best is None or share > best_share or (share == best_share and size < best_area):
                best, best_share, best_area = t, share, size
        if best is not None:
            held[best].append(i)
    for images in held.values():
        images.sort(key=lambda i: (blocks[i].bbox[1], blocks[i].bbox[0]))
    return held


def select_blocks(blocks: Sequence[LayoutBlock], profile: Profile, skip_types: Iterable[str] = ()) -> list[LayoutBlock]:
    """The page's blocks as the content step sees them (Pro): captions inside figures dropped,
    images inside a table that is read marked absorbed. Returns new blocks; with a profile that
    has neither step (2509), copies of the same blocks."""
    captions = _inside_any(blocks, {"image_caption"}, CAPTION_HOLDERS) if profile.drop_figure_captions else set()
    kept = [replace(b) for i, b in enumerate(blocks) if i not in captions]
    if profile.table_images:
        for images in table_images(kept, set(profile.skip_types) | set(skip_types)).values():
            for i in images:
                kept[i].absorbed = True
    return kept


def _big_enough(bbox: tuple[float, float, float, float]) -> bool:
    width, height = bbox[2] - bbox[0], bbox[3] - bbox[1]
    return (width > FIGURE_MIN_SIDE and height > FIGURE_MIN_SIDE) or width * height > FIGURE_MIN_AREA


def figures_not_analysed(blocks: Sequence[LayoutBlock], figure_types: Iterable[str]) -> set[int]:
    """Indices of the image/chart blocks that image analysis leaves unread: those inside an
    image_block (>= INSIDE of their area) and those too small (FIGURE_MIN_SIDE/AREA)."""
    figure_types = set(figure_types)
    parts = _inside_any(blocks, figure_types, {"image_block"})
    return parts | {i for i, b in enumerate(blocks) if b.type in figure_types and not _big_enough(b.bbox)}


# --------------------------------------------------------------------------- text


_DISPLAY = re.compile(r"\\\[(.*?)\\\]", re.DOTALL)
_NUMBERS_ONLY = re.compile(r"[–\d\-,\s]+")
_INLINE_SPLIT = re.compile(r"(\\\(.*?\\\))", re.DOTALL)
_INLINE = re.compile(r"\\\((.+?)\\\)", re.DOTALL)
_UNDERSCORES = re.compile(r"(_{3,})")
_SPACED_MACROS = (r"\cong", r"\to", r"\times", r"\subset", r"\in")
_KNOWN_MACROS = frozenset({r"\top", r"\int", r"\inf"})
_MACRO_LETTER = [(m, re.compile(re.escape(m) + r"([a-zA-Z])(?![a-zA-Z])")) for m in _SPACED_MACROS]


def display_to_inline(text: str) -> str:
    """\\[x\\] in running text -> \\(x\\); one holding only digits, dashes, commas, spaces stays."""

    def inline(m: re.Match[str]) -> str:
        inner = m.group(1)
        return r"\[" + inner + r"\]" if _NUMBERS_ONLY.fullmatch(inner) else r"\(" + inner + r"\)"

    return _DISPLAY.sub(inline, text)


def _space_macros(formula: str) -> str:
    for macro, pattern in _MACRO_LETTER:

        def spaced(m: re.Match[str], macro: str = macro) -> str:
            return m.group(0) if macro + m.group(1) in _KNOWN_MACROS else macro + " " + m.group(1)

        formula = pattern.sub(spaced, formula)
    return formula


def space_macros(text: str) -> str:
    """Inside \\(..\\) only: `\\timesX` -> `\\times X` (the model drops the space), except the
    known macros \\top, \\int, \\inf."""
    parts = _INLINE_SPLIT.split(text)
    return "".join(
        r"\(" + _space_macros(p[2:-2]) + r"\)" if p.startswith(r"\(") and p.endswith(r"\)") else p for p in parts
    )


def underscores_outside(text: str) -> str:
    """`\\( a ___ b \\)` -> `\\( a \\) ___ \\( b \\)`: a blank to fill in is text, not formula."""

    def split(m: re.Match[str]) -> str:
        parts = _UNDERSCORES.split(m.group(1))
        if len(parts) == 1:
            return m.group(0)
        out = [
            p if _UNDERSCORES.fullmatch(p) else r"\(" + p + r"\)"
            for p in parts
            if _UNDERSCORES.fullmatch(p) or p.strip()
        ]
        return " ".join(out)

    return _INLINE.sub(split, text)


def fix_text(text: str) -> str:
    """A text block's Markdown fixes, in MinerU's order."""
    return underscores_outside(space_macros(display_to_inline(text)))


_EQ_TAG = re.compile(r"(<eq>.*?</eq>)", re.DOTALL)
_TABLE_INLINE = re.compile(r"\\\((.+?)\\\)", re.DOTALL)
_TABLE_DISPLAY = re.compile(r"\\\[(.+?)\\\]", re.DOTALL)


def tag_table_formulas(content: str) -> str:
    """A table's \\(x\\) and \\[x\\] as <eq>x</eq> (stripped); <eq> already there is left alone."""

    def tag(m: re.Match[str]) -> str:
        return f"<eq>{m.group(1).strip()}</eq>"

    parts = _EQ_TAG.split(content)
    for i, part in enumerate(parts):
        if part and not _EQ_TAG.fullmatch(part):
            parts[i] = _TABLE_DISPLAY.sub(tag, _TABLE_INLINE.sub(tag, part))
    return "".join(parts)
