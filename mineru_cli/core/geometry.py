"""Box geometry, in one place: boxes are (x1, y1, x2, y2), x1 <= x2 and y1 <= y2 for a
proper box, in whatever unit the caller's page uses (pixels, or the model's 0-1 scale)."""

from __future__ import annotations

import math
from typing import Sequence

Box = Sequence[float]


def area(b: Box) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def intersection(a: Box, b: Box) -> float:
    """The area the two boxes share (0 when they only touch or are apart)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def shares_rows(a: Box, b: Box) -> bool:
    """Whether the two boxes overlap in y (touching is not sharing)."""
    return min(a[3], b[3]) > max(a[1], b[1])


def shares_columns(a: Box, b: Box) -> bool:
    """Whether the two boxes overlap in x (touching is not sharing)."""
    return min(a[2], b[2]) > max(a[0], b[0])


def iou(a: Box, b: Box) -> float:
    """Intersection over union (0 for two empty boxes)."""
    inter = intersection(a, b)
    union = math.fsum((area(a), area(b), -inter))
    return inter / union if union > 0 else 0.0


def covered(inner: Box, outer: Box) -> float:
    """The share of `inner`'s area that lies inside `outer` (0 for an empty `inner`)."""
    a = area(inner)
    return intersection(inner, outer) / a if a else 0.0


def enclosing(boxes: Sequence[Box]) -> tuple[float, float, float, float]:
    """The least box that holds all of `boxes` (at least one)."""
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def clip(b: Box, size: tuple[int, int]) -> tuple[float, float, float, float]:
    """The box cut to a page of `size` (width, height)."""
    w, h = size
    x1, y1, x2, y2 = (float(v) for v in b)
    return max(0.0, x1), max(0.0, y1), min(float(w), x2), min(float(h), y2)


def best_holder(b: Box, holders: Sequence[Box], min_share: float) -> int | None:
    """The index of the holder that covers the biggest share (at least `min_share`) of `b`;
    ties go to the smaller holder; None when none covers enough."""
    best, best_key = None, None
    for i, holder in enumerate(holders):
        share = covered(b, holder)
        if share >= min_share:
            key = (share, -area(holder))
            if best_key is None or key > best_key:
                best, best_key = i, key
    return best
