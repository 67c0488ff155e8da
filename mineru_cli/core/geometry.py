"""Box geometry, in one place: boxes are (x1, y1, x2, y2), x1 <= x2 and y1 <= y2 for a
proper box, in whatever unit the caller's page uses (pixels, or the model's 0-1 scale)."""

from __future__ import annotations

import math
import statistics
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


def int_box(b: Box) -> tuple[int, int, int, int]:
    """The box in whole pixels, each side cut to its integer part (as a block's bbox is kept)."""
    x1, y1, x2, y2 = b
    return int(x1), int(y1), int(x2), int(y2)


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


def best_holders(boxes: Sequence[Box], holders: Sequence[Box], min_share: float) -> list[int | None]:
    """best_holder for each of `boxes` (min_share > 0), each tested only against the holders that
    share a cell of a BoxGrid with it: a holder covers a share of a box only where they overlap, so
    a page of hundreds of regions costs its lines times the few regions near each."""
    grid = BoxGrid(holders)
    found = []
    for b in boxes:
        near = grid.near(b)
        best = best_holder(b, [holders[i] for i in near], min_share)
        found.append(None if best is None else near[best])
    return found


# The largest side a box in a BoxGrid may have, either sign: far past any page (pixels, or the
# model's 0-1 scale), and small enough that a grid's extent in its least cells (1e-6) stays finite
# when _grow squares it (a finite side of 1e200 overflowed to infinity there: division by zero)
LARGEST_SIDE = 1e100


def _sized(b: Box) -> bool:
    """Whether each side is within LARGEST_SIDE (not NaN, infinite or huge)."""
    return all(abs(v) <= LARGEST_SIDE for v in b)


def _proper(b: Box) -> bool:
    """Whether x1 <= x2 and y1 <= y2, each side finite and within LARGEST_SIDE (a NaN, infinite
    or huge side has no cell)."""
    return b[0] <= b[2] and b[1] <= b[3] and _sized(b)


def held(boxes: Sequence[Box], grid: BoxGrid, holder: Box, min_share: float) -> list[int]:
    """The indices, ascending, of `boxes` (filed in `grid`) of which `holder` covers at least
    `min_share` (> 0): a box it covers any of overlaps it, so only those near it are tested."""
    return [i for i in grid.near(holder) if covered(boxes[i], holder) >= min_share]


class BoxGrid:
    """Boxes filed under the cells of a grid that they touch, to find those near a box without a
    pass over all of them. A cell is the boxes' median width by their median height, made larger
    where that would make over CELLS_PER_BOX cells a box over the boxes' extent (so that a box
    over the whole page touches a bounded number of cells, however thin the median box: a row of
    boxes of no width beside a line across the page). A box with x2 < x1 or y2 < y1, or a NaN,
    infinite or huge side (beyond LARGEST_SIDE), touches none."""

    CELLS_PER_BOX = 4

    def __init__(self, boxes: Sequence[Box]):
        self.cell_w, self.cell_h = self._cell_size(boxes)
        self.cells: dict[tuple[int, int], list[int]] = {}
        for i, b in enumerate(boxes):
            if not _proper(b):  # outside the extent the cells were sized for
                continue
            for key in self._keys(b):
                self.cells.setdefault(key, []).append(i)
        self.span = (
            min((k[0] for k in self.cells), default=0),
            min((k[1] for k in self.cells), default=0),
            max((k[0] for k in self.cells), default=-1),
            max((k[1] for k in self.cells), default=-1),
        )

    def near(self, b: Box, reach_x: float = 0.0, reach_y: float = 0.0) -> list[int]:
        """The indices, ascending, of the boxes that share a cell with `b` grown by `reach_x` each
        side and `reach_y` above and below: every box that comes within that reach of `b` (touching
        included) is among them (a superset: callers test the geometry they need)."""
        if not _sized(b):  # a NaN or huge side (a whole number past a float's range, too): near nothing
            return []
        grown = (b[0] - reach_x, b[1] - reach_y, b[2] + reach_x, b[3] + reach_y)
        if not _proper(grown):  # overlaps nothing, as an inverted box or one with a NaN or huge side does
            return []
        found: set[int] = set()
        for key in self._keys(grown, self.span):
            found.update(self.cells.get(key, ()))
        return sorted(found)

    def _keys(self, b: Box, span: tuple[int, int, int, int] | None = None) -> list[tuple[int, int]]:
        x1, y1 = math.floor(b[0] / self.cell_w), math.floor(b[1] / self.cell_h)
        x2, y2 = math.floor(b[2] / self.cell_w), math.floor(b[3] / self.cell_h)
        if span is not None:  # cells outside those filled hold nothing
            x1, y1, x2, y2 = max(x1, span[0]), max(y1, span[1]), min(x2, span[2]), min(y2, span[3])
        return [(x, y) for x in range(x1, x2 + 1) for y in range(y1, y2 + 1)]

    @classmethod
    def _cell_size(cls, boxes: Sequence[Box]) -> tuple[float, float]:
        proper = [b for b in boxes if _proper(b)]
        if not proper:
            return 1.0, 1.0
        w = max(statistics.median(b[2] - b[0] for b in proper), 1e-6)
        h = max(statistics.median(b[3] - b[1] for b in proper), 1e-6)
        across = (max(b[2] for b in proper) - min(b[0] for b in proper)) / w
        down = (max(b[3] for b in proper) - min(b[1] for b in proper)) / h
        grow = cls._grow(across, down, cls.CELLS_PER_BOX * len(proper))
        return w * grow, h * grow

    @staticmethod
    def _grow(across: float, down: float, most: int) -> float:
        """The least factor g >= 1 for which cells g times the median box's size make at most
        `most` cells over an extent `across` x `down` median boxes: (across / g + 1) x (down / g + 1)
        <= most, a quadratic in 1 / g. Grown alike both ways, the cells over an extent wide and
        short (down near 0) would number about sqrt(most x across) along it, unbounded."""
        spread = across + down
        if spread <= 0:  # boxes all in one place: one cell
            return 1.0
        inverse = 2 * (most - 1) / (spread + math.sqrt(spread * spread + 4 * across * down * (most - 1)))
        return max(1.0, 1 / inverse)
