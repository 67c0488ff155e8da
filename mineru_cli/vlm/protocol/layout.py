"""Step 1, the layout answer: the model's grammar parsed into blocks, in reading order.

The page (see crops.layout_image) is sent with the layout prompt; the 2509 model answers one
element per line::

    <|box_start|>x1 y1 x2 y2<|box_end|><|ref_start|>type<|ref_end|><|rotate_up|>

with corners in 0..1000. The Pro model may put several elements on one line, writes the rotate
token right after <|ref_end|>, and its duplicate and nested boxes are dropped here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from ...core.geometry import covered
from ...core.geometry import iou as box_iou
from .profiles import PROFILE_2509, Profile

ANGLES = {"<|rotate_up|>": 0, "<|rotate_right|>": 90, "<|rotate_down|>": 180, "<|rotate_left|>": 270}


@dataclass
class LayoutBlock:
    """One layout element: bbox is (x1, y1, x2, y2) as fractions 0..1 of the page."""

    type: str
    bbox: tuple[float, float, float, float]
    angle: int | None = None  # 0/90/180/270, None when the model gave no rotate token
    content: str | None = None
    merge_prev: bool = False  # Pro: text continues the previous block (<|txt_contd_tgt|>)
    absorbed: bool = False  # Pro: an image inside a table, read as part of it (protocol.pro)
    image_tokens: dict[str, str] | None = None  # Pro: a table's image tokens -> data URIs
    sub_type: str | None = None  # Pro image analysis: a chart's or image's kind (protocol.figures)

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "bbox": list(self.bbox), "angle": self.angle, "content": self.content}


@dataclass
class LayoutParse:
    blocks: list[LayoutBlock]
    malformed: int = 0  # lines that are not a layout element
    bad_boxes: int = 0  # coordinates outside 0..1000 or zero width/height
    unknown_types: int = 0

    @property
    def skipped(self) -> int:
        return self.malformed + self.bad_boxes + self.unknown_types


_LINE_2509 = re.compile(
    r"^<\|box_start\|>(\d+)\s+(\d+)\s+(\d+)\s+(\d+)<\|box_end\|>"
    r"<\|ref_start\|>(\w+?)<\|ref_end\|>(.*)$"
)
_ELEMENT_PRO = re.compile(
    r"<\|box_start\|>(\d+)\s+(\d+)\s+(\d+)\s+(\d+)<\|box_end\|><\|ref_start\|>(\w+?)<\|ref_end\|>"
    r"(<\|rotate_(?:up|right|down|left)\|>)?(.*?)(?=<\|box_start\|>|$)",
    re.DOTALL,
)


def normalize_box(x1: int, y1: int, x2: int, y2: int) -> tuple[float, float, float, float] | None:
    """0..1000 corners -> 0..1 box with x1<x2, y1<y2; None when outside the range or empty."""
    if any(v < 0 or v > 1000 for v in (x1, y1, x2, y2)):
        return None
    x1, x2 = min(x1, x2), max(x1, x2)
    y1, y2 = min(y1, y2), max(y1, y2)
    if x1 == x2 or y1 == y2:
        return None
    return (x1 / 1000.0, y1 / 1000.0, x2 / 1000.0, y2 / 1000.0)


def _angle_in(tail: str) -> int | None:
    # MinerU looks for the tokens in this fixed order, not in the order they appear
    for token, angle in ANGLES.items():
        if token in tail:
            return angle
    return None


def _box(m: re.Match[str]) -> tuple[float, float, float, float] | None:
    """The normalised box of a layout match (groups 1-4), None if it is not a box; a number of
    thousands of digits (past Python's int conversion limit) is not one either."""
    try:
        return normalize_box(*(int(v) for v in m.group(1, 2, 3, 4)))
    except ValueError:
        return None


def parse_layout(output: str, profile: Profile = PROFILE_2509) -> LayoutParse:
    """Blocks from the layout answer, in the model's (reading) order. Never raises."""
    if profile.layout_dedup_iou is not None:
        return _parse_layout_pro(output, profile, profile.layout_dedup_iou)
    result = LayoutParse(blocks=[])
    for line in output.split("\n"):
        m = _LINE_2509.match(line)
        if m is None:
            if line.strip():
                result.malformed += 1
            continue
        box = _box(m)
        if box is None:
            result.bad_boxes += 1
            continue
        block_type = m.group(5).lower()
        if block_type not in profile.block_types:
            result.unknown_types += 1
            continue
        result.blocks.append(LayoutBlock(block_type, box, angle=_angle_in(m.group(6))))
    return result


def _parse_layout_pro(output: str, profile: Profile, dedup_iou: float) -> LayoutParse:
    """The Pro grammar; dedup_iou is the profile's layout_dedup_iou (set for Pro)."""
    result = LayoutParse(blocks=[])
    for line in output.split("\n"):
        if line.strip() and "<|box_start|>" not in line:
            result.malformed += 1
    elements = list(_ELEMENT_PRO.finditer(output))
    # an element cut short or with a broken box matches no element: counted, as 2509 counts it
    result.malformed += max(0, output.count("<|box_start|>") - len(elements))
    for m in elements:
        box = _box(m)
        if box is None:
            result.bad_boxes += 1
            continue
        block_type = m.group(5).lower()
        block_type = profile.layout_rename.get(block_type, block_type)
        if block_type in profile.layout_ignore:
            continue
        if block_type not in profile.block_types:
            result.unknown_types += 1
            continue
        rotate, tail = m.group(6), m.group(7)
        angle = ANGLES[rotate] if rotate else None
        merge_prev = block_type == "text" and "txt_contd_tgt" in tail
        result.blocks.append(LayoutBlock(block_type, box, angle=angle, merge_prev=merge_prev))
    blocks = _drop_duplicates(result.blocks, dedup_iou)
    result.blocks = _drop_inside(blocks, profile.drop_inside_tables, {"table"})
    return result


def _drop_duplicates(blocks: list[LayoutBlock], iou: float) -> list[LayoutBlock]:
    kept: list[LayoutBlock] = []
    for block in blocks:
        for other in kept:
            if other.type != block.type or other.angle != block.angle:
                continue
            if box_iou(block.bbox, other.bbox) > iou:
                break
        else:
            kept.append(block)
    return kept


def _drop_inside(
    blocks: list[LayoutBlock], types: Iterable[str], containers: set[str], threshold: float = 0.9
) -> list[LayoutBlock]:
    types = set(types)
    holders = [b for b in blocks if b.type in containers]
    return [
        b
        for b in blocks
        if b.type not in types or not any(h is not b and covered(b.bbox, h.bbox) >= threshold for h in holders)
    ]
