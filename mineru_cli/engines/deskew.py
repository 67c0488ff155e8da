"""A page scanned askew, seen level by the layout model and the assembly.

On a sheet fed 2.5 degrees askew into a scanner a column drifts sideways by 4 % of the page's
height (96 px at 200 DPI), more than the gutter between columns: the columns' boxes overlap, the
reading order cannot cut between them and their blocks come out interleaved (a real three-column
page: CER 0.547 against 0.015 for its straight scan). The text detector's lines say how far the page
slopes; where that is at least LEVEL_FROM, the page is turned level for the layout model, the lines'
boxes are put where the turn takes them, the blocks are assembled there, and their boxes are taken
back into the page's own pixels. The text recogniser reads slanted lines well, so nothing is read
again.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from mineru_cli.core.geometry import Box

# The median slope of a page's long lines (dy / dx) from which the page is levelled: 0.02 is 1.15
# degrees. Below it the columns drift less than a gutter and a block's rows are levelled on their
# own (lines.level_boxes).
LEVEL_FROM = 0.02
# A line at least this many times wider than high gives the page's slope (a short one's is noise),
# and a page needs this many of them, most of them (_AGREE) within _NEAR of their median: a straight
# page with a stamp or a turned table on it is not levelled to their angle.
_LONG = 4
_ENOUGH = 5
_AGREE = 0.6
_NEAR = 0.01


def long_line_slopes(boxes_and_slopes: list[tuple[Box, float]]) -> list[float]:
    """The slopes of the long lines (a short one's is noise), sorted."""
    return sorted(slope for (x1, y1, x2, y2), slope in boxes_and_slopes if x2 - x1 > _LONG * max(1, y2 - y1))


def page_slope(boxes_and_slopes: list[tuple[Box, float]]) -> float:
    """The page's slope: the median of its long lines' slopes, 0 where it has too few or they do
    not agree on it."""
    slopes = long_line_slopes(boxes_and_slopes)
    if len(slopes) < _ENOUGH:
        return 0.0
    median = slopes[len(slopes) // 2]
    near = sum(abs(slope - median) <= _NEAR for slope in slopes)
    return median if near >= _AGREE * len(slopes) else 0.0


class Level:
    """The turn about the page's centre that makes lines of this slope level, and back."""

    def __init__(self, slope: float, size: tuple[int, int]):
        self.slope, self.size = slope, size
        # cv2 turns counter-clockwise for a positive angle, which lifts a line that runs down
        self.matrix = cv2.getRotationMatrix2D((size[0] / 2, size[1] / 2), math.degrees(math.atan(slope)), 1.0)
        self.inverse = cv2.invertAffineTransform(self.matrix)

    def image(self, bgr: np.ndarray) -> np.ndarray:
        return cv2.warpAffine(bgr, self.matrix, self.size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)

    def line_box(self, box: Box) -> tuple[int, int, int, int]:
        """A slanted line's box on the level page: its centre where the turn takes it, as wide and
        as high as its text (its box is larger by its height and width times the slope)."""
        x1, y1, x2, y2 = box
        s = abs(self.slope)
        height = max(1.0, (y2 - y1) - s * (x2 - x1))
        width = max(1.0, (x2 - x1) - s * height)
        cx, cy = self.matrix @ np.array([(x1 + x2) / 2, (y1 + y2) / 2, 1.0])
        return round(cx - width / 2), round(cy - height / 2), round(cx + width / 2), round(cy + height / 2)

    def box_back(self, box: Box) -> tuple[int, int, int, int]:
        """A box on the level page in the page's own pixels: around its corners turned back."""
        x1, y1, x2, y2 = box
        corners = np.array([[x1, y1, 1.0], [x2, y1, 1.0], [x2, y2, 1.0], [x1, y2, 1.0]]) @ self.inverse.T
        w, h = self.size
        left, top = corners.min(axis=0)
        right, bottom = corners.max(axis=0)
        return (max(0, math.floor(left)), max(0, math.floor(top)), min(w, math.ceil(right)), min(h, math.ceil(bottom)))
